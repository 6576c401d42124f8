"""The live manager's database on a temporary SQLite file, in process: the schema and its
upgrade of an older database, tokens stored by hash and revoked by id, and the projection of the
engine's event log into job, history, event and VM rows (written once, only once committed)."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import select

from isthmus.config import load_environment
from isthmus.model.events import EventKind, EventLog, KillCause
from isthmus.store import tables as db
from isthmus.store.projector import Projector, RunRecord
from isthmus.store.tables import Store, sqlite_url
from isthmus.store.tokens import hash_token, new_token


@pytest.fixture
def store(tmp_path: Path) -> Any:
    """A fresh store on an SQLite file of its own."""
    s = Store(sqlite_url(tmp_path / "isthmus.db"))
    s.create()
    yield s
    s.close()


def _add_job(store: Store, job_id: int, *, user: str = "alice", size: int = 1) -> None:
    with store.begin() as conn:
        conn.execute(
            db.INSERT_JOB,
            [
                {
                    "id": job_id,
                    "user": user,
                    "name": f"job{job_id}",
                    "spec": json.dumps({"command": "sleep", "args": ["1"]}),
                    "size": size,
                    "priority": "high",
                    "requested_runtime": 60.0,
                    "state": "queued",
                    "submit_time": 0.0,
                    "spool": f"/tmp/spool/{job_id}",
                }
            ],
        )


def test_sqlite_runs_in_wal_mode_and_create_is_idempotent(store: Store, tmp_path: Path) -> None:
    store.create()  # a second start on the same database changes nothing
    with sqlite3.connect(tmp_path / "isthmus.db") as raw:
        assert raw.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        tables = {r[0] for r in raw.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    assert {"meta", "users", "tokens", "jobs", "job_history", "events", "vms", "pilots", "bag_tasks"} <= tables
    assert store.get_meta("manager_id") is None
    with store.begin() as conn:
        store.set_meta(conn, "manager_id", "m1")
    with store.begin() as conn:
        store.set_meta(conn, "manager_id", "m2")
    assert store.get_meta("manager_id") == "m2"


def test_an_older_database_gets_the_columns_added_since(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    with sqlite3.connect(path) as raw:
        raw.execute(
            "CREATE TABLE events (id INTEGER PRIMARY KEY, time FLOAT NOT NULL, kind INTEGER NOT NULL,"
            " job INTEGER NOT NULL, site INTEGER NOT NULL, vm INTEGER NOT NULL, value FLOAT NOT NULL)"
        )
        raw.execute("INSERT INTO events (time, kind, job, site, vm, value) VALUES (1.5, 1, 7, 0, -1, 0)")
    s = Store(sqlite_url(path))
    s.create()
    with sqlite3.connect(path) as raw:
        columns = {r[1] for r in raw.execute("PRAGMA table_info(events)")}
        vm_columns = {r[1] for r in raw.execute("PRAGMA table_info(vms)")}
    assert set(db.EVENT_COLUMNS_ADDED) <= columns
    assert set(db.VM_COLUMNS_ADDED) <= vm_columns
    # the old row is kept, with the added columns' defaults
    log = s.event_log()
    assert len(log) == 1 and log.event(0).job == 7 and log.event(0).run == -1
    s.close()


def test_tokens_are_stored_as_hashes_listed_by_id_and_revoked_only_when_unambiguous(store: Store) -> None:
    alice, bob, pilot = new_token(), new_token(), new_token()
    assert alice.startswith("ist_") and alice != bob
    with store.begin() as conn:
        store.ensure_user(conn, "alice", admin=True)
        store.ensure_user(conn, "bob")
        store.ensure_user(conn, "bob")  # idempotent
        store.add_token(conn, hash_token(alice), user="alice", kind="user")
        store.add_token(conn, hash_token(bob), user="bob", kind="user", expires=123.0)
        store.add_token(conn, hash_token(pilot), user=None, kind="pilot", node="0/n0")
    assert [u["name"] for u in store.list_users()] == ["alice", "bob"]
    assert store.lookup_token(hash_token(alice)) == ("alice", "user", None, True, None)
    assert store.lookup_token(hash_token(bob)) == ("bob", "user", None, False, 123.0)
    assert store.lookup_token(hash_token(pilot)) == (None, "pilot", "0/n0", False, None)
    assert store.lookup_token(hash_token("ist_unknown")) is None
    with store.engine.connect() as conn:
        stored = {r[0] for r in conn.execute(select(db.tokens.c.hash))}
    assert alice not in stored and hash_token(alice) in stored  # never the token itself

    listed = store.user_tokens()  # pilot tokens are not user tokens
    assert [t["user"] for t in listed] == ["alice", "bob"]
    assert all(len(t["id"]) == db.TOKEN_ID_LENGTH for t in listed)
    assert len(store.revoke_token("")) == 2  # ambiguous: both match, nothing deleted
    assert len(store.user_tokens()) == 2
    alice_id = next(t["id"] for t in listed if t["user"] == "alice")
    assert store.revoke_token(alice_id) == [hash_token(alice)]
    assert store.lookup_token(hash_token(alice)) is None
    assert store.lookup_token(hash_token(bob)) is not None
    assert store.revoke_token(alice_id) == []  # unknown now


class _Runs:
    """What the manager knows of runs beyond the log: slots, limits, measured runtimes."""

    def __init__(self) -> None:
        self.records: dict[tuple[int, int], RunRecord] = {}
        self.ends: dict[tuple[int, int], dict[str, Any]] = {}

    def run_record(self, job: int, run: int) -> RunRecord | None:
        return self.records.get((job, run))

    def run_end(self, job: int, run: int) -> dict[str, Any]:
        return self.ends.get((job, run), {})

    def lost_reason(self, job: int, run: int) -> str | None:
        return None


def test_the_projector_writes_each_event_once_and_only_once_committed(store: Store) -> None:
    env = load_environment("local")
    for job_id in (1, 2, 3):
        _add_job(store, job_id)
    log = EventLog()
    runs = _Runs()
    forgotten: list[int] = []
    projector = Projector(log, env, runs, forgotten.append)
    runs.records[(1, 0)] = RunRecord(slots=[("0/n0", 0)], limit=None)
    runs.ends[(1, 0)] = {"runtime": 9.5}
    runs.records[(2, 0)] = RunRecord(slots=[("0/n1", 0)], limit=60.0)
    log.append(1.0, EventKind.START, job=1, site=0, run=0)
    log.append(1.0, EventKind.START, job=2, site=0, run=0)
    log.append(10.5, EventKind.END, job=1, site=0, run=0)
    log.append(61.0, EventKind.KILL, job=2, site=0, value=float(KillCause.TIMEOUT), run=0)
    log.append(61.0, EventKind.FAIL, job=2, site=0, value=-9.0, run=0)
    log.reasons[3] = "larger than every site"
    log.append(2.0, EventKind.REJECT, job=3, site=-1)
    log.append(3.0, EventKind.VM_LEASE, job=-1, site=2, vm=0, value=0.0)
    log.append(5.0, EventKind.VM_READY, job=-1, site=2, vm=0)
    assert projector.pending()

    # a transaction that fails writes nothing and leaves the projection where it was
    n = len(log)
    with pytest.raises(RuntimeError), store.begin() as conn:
        projector.project(conn, n)
        raise RuntimeError("the database refused the commit")
    assert projector.persisted == 0 and forgotten == []
    assert store.event_rows() == []

    with store.begin() as conn:  # the next attempt writes the same events
        projector.project(conn, n)
    projector.committed(n)
    assert not projector.pending()
    assert sorted(forgotten) == [1, 2, 3]

    one, two, three = store.job(1), store.job(2), store.job(3)
    assert one is not None and two is not None and three is not None
    assert (one["state"], one["exit_code"], one["runtime"], one["end_time"]) == ("completed", 0, 9.5, 10.5)
    assert one["slots"] == [["0/n0", 0]] and one["site"] == 0
    assert (two["state"], two["limit_s"], two["exit_code"]) == ("timeout", 60.0, -9)  # killed at its walltime
    assert two["runtime"] == 60.0  # no runtime measured by its site: the time from its start
    assert (three["state"], three["reason"]) == ("rejected", "larger than every site")
    assert [h["state"] for h in store.history(2)] == ["starting", "killed", "timeout"]
    assert "local-a: 1 slots on 0/n1" in store.history(2)[0]["detail"]
    assert store.job_counts() == {"completed": 1, "timeout": 1, "rejected": 1}
    assert store.active_jobs() == []
    assert [(r["site"], r["vm"], r["state"], r["ready_at"]) for r in store.vm_rows()] == [(2, 0, "ready", 5.0)]

    # every event once, in order, read back as the same log
    assert len(store.event_rows()) == n
    back = store.event_log()
    assert [back.event(i) for i in range(n)] == [log.event(i) for i in range(n)]
    with store.begin() as conn:  # nothing new: a projection adds nothing
        projector.project(conn, len(log))
    assert len(store.event_rows()) == n
