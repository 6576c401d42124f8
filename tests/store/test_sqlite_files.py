"""The SQLite store's files: the `-shm` guard (truncation repaired, an immutable file refused
until the flag goes) and the start check (who may write the files)."""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path

import pytest

from isthmus.store import sqlite_files
from isthmus.store.sqlite_files import FileState, StoreUnavailableError, file_state, sqlite_file, start_problems
from isthmus.store.tables import Store, sqlite_url, store_unsafe


def _store(tmp_path: Path) -> tuple[Store, Path]:
    store = Store(sqlite_url(tmp_path / "s.db"))
    store.create()
    with store.begin() as conn:
        store.set_meta(conn, "k", "1")
    return store, tmp_path / "s.db-shm"


def test_the_database_file_is_created_for_its_owner_only(tmp_path: Path) -> None:
    store, shm = _store(tmp_path)
    try:
        for path in (tmp_path / "s.db", shm):
            assert os.stat(path).st_mode & 0o777 == 0o600, path
        assert start_problems(tmp_path / "s.db") == []
    finally:
        store.close()


def test_a_truncated_shm_is_extended_back_before_sqlite_touches_it(tmp_path: Path) -> None:
    store, shm = _store(tmp_path)
    try:
        size = os.stat(shm).st_size
        assert size > 0
        os.truncate(shm, 0)
        # without the guard, this read dies of SIGBUS (the whole test process)
        assert store.get_meta("k") == "1"
        assert os.stat(shm).st_size == size
        with store.begin() as conn:
            store.set_meta(conn, "k", "2")
        assert store.get_meta("k") == "2"
    finally:
        store.close()


def test_an_immutable_shm_refuses_every_use_until_the_flag_goes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store, shm = _store(tmp_path)
    real = sqlite_files.file_state
    flagged = {"on": True}

    def immutable(path: Path) -> FileState | None:
        st = real(path)
        if st is not None and path == shm and flagged["on"]:
            return dataclasses.replace(st, immutable=True)
        return st

    monkeypatch.setattr(sqlite_files, "file_state", immutable)
    try:
        with pytest.raises(StoreUnavailableError, match="immutable"):
            store.get_meta("k")
        with pytest.raises(StoreUnavailableError), store.begin() as conn:
            store.set_meta(conn, "k", "2")
        assert "s.db-shm is immutable" in (store_unsafe(store) or "")
        flagged["on"] = False
        assert store_unsafe(store) is None
        with store.begin() as conn:
            store.set_meta(conn, "k", "3")
        assert store.get_meta("k") == "3"
    finally:
        flagged["on"] = False
        store.close()


def test_start_problems_name_files_others_can_write(tmp_path: Path) -> None:
    db = tmp_path / "s.db"
    db.write_bytes(b"")
    os.chmod(db, 0o664)
    Path(f"{db}-wal").write_bytes(b"")
    os.chmod(f"{db}-wal", 0o600)
    problems = start_problems(db)
    assert len(problems) == 1 and f"file {db} is writable by other users (mode 0664)" in problems[0]
    os.chmod(db, 0o600)
    assert start_problems(db) == []
    other = os.geteuid() + 1
    assert any(
        f"belongs to uid {os.geteuid()}, not to the manager's user (uid {other})" in p
        for p in start_problems(db, other)
    )


def test_a_sticky_shared_directory_is_accepted_a_group_writable_one_is_not(tmp_path: Path) -> None:
    d = tmp_path / "shared"
    d.mkdir()
    os.chmod(d, 0o1777)
    assert start_problems(d / "s.db") == []
    os.chmod(d, 0o775)
    assert [p for p in start_problems(d / "s.db") if "directory" in p and "mode 0775" in p]


def test_file_state_and_sqlite_file() -> None:
    assert file_state(Path("/nonexistent/x")) is None
    st = file_state(Path(__file__))
    assert st is not None and st.size == os.stat(__file__).st_size and not st.immutable
    assert sqlite_file("sqlite:////tmp/a.db") == Path("/tmp/a.db")
    assert sqlite_file("sqlite:///rel.db?timeout=3") == Path("rel.db")
    assert sqlite_file("postgresql+psycopg://h/db") is None
    assert sqlite_file("sqlite://") is None
