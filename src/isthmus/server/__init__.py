"""The manager daemon: REST API, persistence and authentication."""
