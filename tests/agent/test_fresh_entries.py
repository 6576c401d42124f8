"""The pilot's pool of ready-made spool entries: renamed into place, refilled, adopted, removed."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from isthmus.agent.fresh import FreshEntries, pool_dir, remove_pools


def _wait_full(pool: FreshEntries, files: int, dirs: int, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        names = os.listdir(pool.pool)
        if sum(n.startswith("f") for n in names) >= files and sum(n.startswith("d") for n in names) >= dirs:
            return
        time.sleep(0.01)
    raise AssertionError(f"pool not filled: {os.listdir(pool.pool)}")


def _inodes(path: str) -> set[int]:
    return {os.stat(os.path.join(path, n)).st_ino for n in os.listdir(path)}


def test_targets_are_pool_entries_renamed_into_place(tmp_path: Path) -> None:
    pool = FreshEntries(str(tmp_path), "0/n0", files=4, dirs=2)
    try:
        _wait_full(pool, 4, 2)
        ready = _inodes(pool.pool)
        job = tmp_path / "7"
        pool.dir(str(job))
        for name in ("run1.out", "run1.err", "run1.nodes"):
            pool.file(str(job / name))
        assert job.is_dir()
        taken = {os.stat(job).st_ino} | {os.stat(job / n).st_ino for n in ("run1.out", "run1.err", "run1.nodes")}
        assert taken <= ready  # nothing was created on the start path
        assert all((job / n).stat().st_size == 0 for n in ("run1.out", "run1.err", "run1.nodes"))
        _wait_full(pool, 4, 2)  # refilled once starts are quiet
    finally:
        pool.close()


def test_existing_directory_is_kept_and_existing_file_emptied(tmp_path: Path) -> None:
    pool = FreshEntries(str(tmp_path), "n", files=2, dirs=1)
    try:
        job = tmp_path / "3"
        job.mkdir()
        (job / "keep").write_text("x")
        out = job / "run1.out"
        out.write_text("old output")
        pool.dir(str(job))
        pool.file(str(out))
        assert (job / "keep").read_text() == "x"
        assert out.read_text() == ""
    finally:
        pool.close()


def test_empty_pool_falls_back_to_creating(tmp_path: Path) -> None:
    pool = FreshEntries(str(tmp_path), "n", files=0, dirs=0)
    try:
        pool.dir(str(tmp_path / "a" / "b"))
        pool.file(str(tmp_path / "a" / "b" / "out"))
        assert (tmp_path / "a" / "b" / "out").is_file()
    finally:
        pool.close()


def test_missing_target_directory_is_an_error_and_loses_no_entry(tmp_path: Path) -> None:
    pool = FreshEntries(str(tmp_path), "n", files=2, dirs=0)
    try:
        _wait_full(pool, 2, 0)
        before = sorted(os.listdir(pool.pool))
        with pytest.raises(FileNotFoundError):
            pool.file(str(tmp_path / "missing" / "out"))
        assert sorted(os.listdir(pool.pool)) == before
    finally:
        pool.close()


def test_leftovers_of_a_killed_pilot_are_adopted_and_close_removes_the_pool(tmp_path: Path) -> None:
    left = Path(pool_dir(tmp_path, "0/n1"))
    left.mkdir()
    (left / "f99-1").touch()
    (left / "d99-2").mkdir()
    inodes = _inodes(str(left))
    pool = FreshEntries(str(tmp_path), "0/n1", files=1, dirs=1)
    pool.dir(str(tmp_path / "j"))
    pool.file(str(tmp_path / "j" / "out"))
    assert {os.stat(tmp_path / "j").st_ino, os.stat(tmp_path / "j" / "out").st_ino} == inodes
    pool.close()
    assert not left.exists()
    assert (tmp_path / "j" / "out").exists()  # what was handed out stays


def test_remove_pools_keeps_live_nodes_and_spool_directories(tmp_path: Path) -> None:
    for node in ("0/n0", "1/vm3", "1/vm4"):
        p = Path(pool_dir(tmp_path, node))
        p.mkdir()
        (p / "f1").touch()
        (p / "d1").mkdir()
    (tmp_path / "12").mkdir()  # a job's spool directory
    assert remove_pools(tmp_path, {"0/n0", "1/vm4"}) == 1
    assert sorted(os.listdir(tmp_path)) == sorted(
        ["12", os.path.basename(pool_dir(tmp_path, "0/n0")), os.path.basename(pool_dir(tmp_path, "1/vm4"))]
    )
    assert remove_pools(tmp_path / "absent", set()) == 0
