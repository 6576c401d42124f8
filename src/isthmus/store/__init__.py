"""The live manager's state in a database (SQLAlchemy Core: SQLite by default, PostgreSQL by URL).

`tables` holds the schema and the `Store` (queries and short transactions); `projector` turns the
engine's event log into job, history, VM and event rows; `tokens` makes and hashes API tokens.
Nothing here imports the live manager or the REST API.
"""
