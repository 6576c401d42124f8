"""Grid Engine as a BatchSystem, against the machine's real Grid Engine (scripts/start_gridengine.sh:
one exec host, queue all.q, parallel environment smp; started by scripts/test, which exports
ISTHMUS_TEST_SGE, SGE_ROOT and SGE_CELL)."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from isthmus.backends.api import RemoteState, RunRequest, WaitingJob
from isthmus.backends.errors import InvalidRequestError
from isthmus.backends.gridengine import GRID_ENGINE_STATES, GridEngineBatch
from isthmus.model.states import JobState, translate


def test_every_documented_state_translates_and_unknown_ones_warn(caplog: pytest.LogCaptureFixture) -> None:
    assert translate(GRID_ENGINE_STATES, "qw", system="Grid Engine") is JobState.QUEUED
    assert translate(GRID_ENGINE_STATES, "hqw", system="Grid Engine") is JobState.QUEUED
    assert translate(GRID_ENGINE_STATES, "t", system="Grid Engine") is JobState.STARTING
    assert translate(GRID_ENGINE_STATES, "r", system="Grid Engine") is JobState.RUNNING
    assert translate(GRID_ENGINE_STATES, "dr", system="Grid Engine") is JobState.CANCELLED
    assert translate(GRID_ENGINE_STATES, "Eqw", system="Grid Engine") is JobState.FAILED
    assert translate(GRID_ENGINE_STATES, "zz", system="Grid Engine") is JobState.UNKNOWN
    assert "unknown job state 'zz'" in caplog.text


def test_job_names_carry_the_key_both_ways() -> None:
    ge = GridEngineBatch("ge", "m1")
    assert ge.job_name("0/p3-abc") == "isthmus.m1.0_p3-abc"
    assert ge._key_of("isthmus.m1.0_p3-abc") == "0/p3-abc"
    assert ge._key_of("isthmus.m2.j1r1") == ""  # another manager's
    args = ge.qsub_args(RunRequest("j1r2", ("true",), 4, walltime=90.5, stdout="/o", stderr="/e", env={"A": "1"}))
    assert args[:6] == ["qsub", "-terse", "-N", "isthmus.m1.j1r2", "-S", "/bin/sh"]
    for pair in (["-pe", "smp", "4"], ["-l", "h_rt=91"], ["-o", "/o"], ["-e", "/e"], ["-v", "A=1"]):
        assert any(args[i : i + len(pair)] == pair for i in range(len(args))), (pair, args)


@pytest.fixture
def ge(gridengine: None) -> Iterator[GridEngineBatch]:
    batch = GridEngineBatch("ge-test", uuid.uuid4().hex[:8])
    yield batch
    batch.cancel(list(batch.find()))  # this test's jobs only


def _wait(
    batch: GridEngineBatch, ids: list[str], done: Callable[[dict[str, RemoteState]], bool], timeout: float = 40
) -> dict[str, RemoteState]:
    deadline = time.time() + timeout
    while time.time() < deadline:
        st = batch.status(ids)
        if done(st):
            return st
        time.sleep(0.3)
    raise AssertionError(f"timed out: {batch.status(ids)}")


def test_submit_status_slots_exit_codes_and_find(ge: GridEngineBatch, tmp_path: Path) -> None:
    out = tmp_path / "wide.out"
    ids = ge.submit(
        [
            RunRequest("wide", ("sh", "-c", "echo $NSLOTS; cat $PE_HOSTFILE"), 2, stdout=str(out), cwd=str(tmp_path)),
            RunRequest("fails", ("sh", "-c", "exit 3"), 1, cwd=str(tmp_path)),
            RunRequest(
                "env",
                ("sh", "-c", 'echo "$GREETING" > ' + str(tmp_path / "env.out")),
                1,
                env={"GREETING": "hi there"},
                cwd=str(tmp_path),
            ),
        ]
    )
    assert all(isinstance(i, str) and i.isdigit() for i in ids), ids
    held = ge.find()
    assert {held[i].key for i in ids if i in held} <= {"wide", "fails", "env"}
    st = _wait(ge, ids, lambda s: len(s) == 3 and all(x.state.terminal for x in s.values()))  # type: ignore[arg-type]
    wide, fails, env = (st[i] for i in ids)  # type: ignore[index]
    assert (wide.state, wide.exit_code, wide.key) == (JobState.COMPLETED, 0, "wide")
    assert out.read_text().split()[:2] == ["2", "localhost"]  # 2 slots of the smp environment, one host
    assert (fails.state, fails.exit_code) == (JobState.FAILED, 3)
    assert env.state is JobState.COMPLETED and (tmp_path / "env.out").read_text() == "hi there\n"
    other = GridEngineBatch("ge-test", "someone-else")
    assert not set(other.find()) & set(ids)


def test_cancel_timeout_capacity_and_local_jobs(ge: GridEngineBatch, tmp_path: Path) -> None:
    before = ge.capacity()
    assert before.usable == before.total > 0, before
    (hold,) = ge.submit([RunRequest("hold", ("sleep", "60"), 2, cwd=str(tmp_path))])
    assert isinstance(hold, str)
    _wait(ge, [hold], lambda s: s[hold].state is JobState.RUNNING)
    assert ge.find()[hold].key == "hold"
    cap = ge.capacity()
    assert cap.free == before.free - 2, (before, cap)
    local = GridEngineBatch("ge-test", "a-local-user")  # not this manager's
    (waiting,) = local.submit([RunRequest("local", ("true",), 1, cwd=str(tmp_path))])
    assert isinstance(waiting, str)
    local.cancel([waiting])
    assert ge.cancel([hold]) == {hold: None}
    st = _wait(ge, [hold], lambda s: s[hold].state.terminal)
    assert st[hold].state is JobState.CANCELLED
    (slow,) = ge.submit([RunRequest("slow", ("sleep", "30"), 1, walltime=2, cwd=str(tmp_path))])
    assert isinstance(slow, str)
    st = _wait(ge, [slow], lambda s: s[slow].state.terminal)
    assert st[slow].state is JobState.TIMEOUT, st[slow]
    unknown = ge.cancel(["999999"])["999999"]
    assert isinstance(unknown, InvalidRequestError)


def test_other_users_pending_jobs_count_against_the_free_slots(ge: GridEngineBatch, tmp_path: Path) -> None:
    assert ge.capacity().waiting_local == 0
    local = GridEngineBatch("ge-test", "a-local-user", extra_options=("-h",))  # held: it stays pending
    (pid,) = local.submit([RunRequest("local", ("true",), 2, cwd=str(tmp_path))])
    assert isinstance(pid, str)
    try:
        cap = ge.capacity()
        assert cap.waiting_local == 2 and cap.waiting_jobs == (WaitingJob(1, 2),)  # slots on one host at least
        assert local.status([pid])[pid].state is JobState.QUEUED  # hqw
    finally:
        local.cancel([pid])


def test_refused_submissions_carry_grid_engines_message(ge: GridEngineBatch, tmp_path: Path) -> None:
    bad_queue = GridEngineBatch("ge-test", ge.manager_id, queue="no-such.q")
    (err,) = bad_queue.submit([RunRequest("x", ("true",), 1, cwd=str(tmp_path))])
    assert isinstance(err, InvalidRequestError) and "no-such.q" in str(err), err
    bad_pe = GridEngineBatch("ge-test", ge.manager_id, parallel_environment="nope")
    (err,) = bad_pe.submit([RunRequest("x", ("true",), 2, cwd=str(tmp_path))])
    assert isinstance(err, InvalidRequestError) and "nope" in str(err), err
    (err,) = ge.submit([RunRequest("x", ("true",), 1, env={"A": "x,y"})])
    assert isinstance(err, InvalidRequestError)
