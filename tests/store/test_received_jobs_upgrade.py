"""The upgrade of an older database's `received_jobs`: its unique index on (origin, origin_id)
alone is replaced by one on (sender, origin, origin_id), keeping the rows; two senders may then
deliver the same origin id, one sender still only once."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
from sqlalchemy import inspect
from sqlalchemy.exc import IntegrityError

from isthmus.store import tables as db
from isthmus.store.tables import Store, sqlite_url


def _row(local: int, sender: str, origin: str, origin_id: int) -> dict[str, object]:
    return {
        "local_id": local,
        "origin": origin,
        "origin_id": origin_id,
        "sender": sender,
        "sender_id": local,
        "chain": "[]",
        "received_at": 1.0,
    }


def test_an_older_database_gets_the_index_keyed_on_the_sender(tmp_path: Path) -> None:
    path = tmp_path / "isthmus.db"
    old = Store(sqlite_url(path))
    old.create()
    old.close()
    with sqlite3.connect(path) as conn:  # the schema as an older version created it
        conn.execute("DROP INDEX ux_received_sender_origin")
        conn.execute("CREATE UNIQUE INDEX ux_received_origin ON received_jobs (origin, origin_id)")
        conn.execute(
            "INSERT INTO received_jobs (local_id, origin, origin_id, sender, sender_id, chain, received_at)"
            " VALUES (1, 'A', 5, 'A', 5, '[]', 1.0)"
        )
    store = Store(sqlite_url(path))
    store.create()
    store.create()  # idempotent
    try:
        indexes = {ix["name"]: ix for ix in inspect(store.engine).get_indexes("received_jobs")}
        assert "ux_received_origin" not in indexes
        new = indexes["ux_received_sender_origin"]
        assert new["column_names"] == ["sender", "origin", "origin_id"] and new["unique"]
        with store.begin() as conn:
            conn.execute(db.received_jobs.insert(), _row(2, "C", "A", 5))  # another sender: allowed
        with pytest.raises(IntegrityError), store.begin() as conn:
            conn.execute(db.received_jobs.insert(), _row(3, "C", "A", 5))  # the same sender again
        with store.engine.connect() as conn:
            kept = sorted(
                tuple(r)
                for r in conn.execute(
                    db.received_jobs.select().with_only_columns(db.received_jobs.c.local_id, db.received_jobs.c.sender)
                )
            )
        assert kept == [(1, "A"), (2, "C")]
    finally:
        store.close()
