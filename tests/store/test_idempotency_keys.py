"""The table of submissions' Idempotency-Keys: a key is found by its user only while it is
younger than its time to live, expired keys are purged, and an older database gets the table."""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import func, select

from isthmus.store import tables as db
from isthmus.store.tables import Store, sqlite_url


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    """A fresh store on an SQLite file of its own."""
    s = Store(sqlite_url(tmp_path / "isthmus.db"))
    s.create()
    yield s
    s.close()


def _key(user: str, key: str, ids: list[int], created: float) -> dict[str, object]:
    return {"user": user, "key": key, "digest": "d-" + key, "ids": json.dumps(ids), "created": created}


def test_a_key_is_found_for_its_user_only_while_it_lives(store: Store) -> None:
    now = time.time()
    with store.begin() as conn:
        conn.execute(db.INSERT_IDEMPOTENCY, [_key("ann", "k1", [7, 8], now), _key("bob", "k2", [9], now - 10)])
    since = now - db.IDEMPOTENCY_TTL
    assert store.idempotency_key("ann", "k1", since) == ("d-k1", [7, 8])
    assert store.idempotency_key("bob", "k1", since) is None  # keys are per user
    assert store.idempotency_key("bob", "k2", since) == ("d-k2", [9])
    assert store.idempotency_key("bob", "k2", now - 5) is None  # older than the time to live


def test_expired_keys_are_purged_and_may_be_used_again(store: Store) -> None:
    now = time.time()
    with store.begin() as conn:
        conn.execute(db.INSERT_IDEMPOTENCY, [_key("ann", "old", [1], now - db.IDEMPOTENCY_TTL - 1)])
        conn.execute(db.INSERT_IDEMPOTENCY, [_key("ann", "new", [2], now)])
    with store.begin() as conn:
        conn.execute(db.PURGE_IDEMPOTENCY, {"b_before": now - db.IDEMPOTENCY_TTL})
        conn.execute(db.INSERT_IDEMPOTENCY, [_key("ann", "old", [3], now)])  # no clash with the expired row
    with store.engine.connect() as conn:
        assert conn.execute(select(func.count()).select_from(db.idempotency_keys)).scalar() == 2
    assert store.idempotency_key("ann", "old", now - 1) == ("d-old", [3])


def test_a_key_is_unique_per_user(store: Store) -> None:
    now = time.time()
    with store.begin() as conn:
        conn.execute(db.INSERT_IDEMPOTENCY, [_key("ann", "k", [1], now)])
    with pytest.raises(Exception, match="UNIQUE"), store.begin() as conn:
        conn.execute(db.INSERT_IDEMPOTENCY, [_key("ann", "k", [2], now)])
    assert store.idempotency_key("ann", "k", now - 1) == ("d-k", [1])


def test_an_older_database_gets_the_table(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    s = Store(sqlite_url(path))
    s.create()
    s.close()
    con = sqlite3.connect(path)
    con.execute("DROP TABLE idempotency_keys")
    con.commit()
    con.close()
    s = Store(sqlite_url(path))
    s.create()
    try:
        assert s.idempotency_key("ann", "k", 0.0) is None
        with s.begin() as conn:
            conn.execute(db.INSERT_IDEMPOTENCY, [_key("ann", "k", [4], time.time())])
        assert s.idempotency_key("ann", "k", 0.0) == ("d-k", [4])
    finally:
        s.close()
