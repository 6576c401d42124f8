"""Faults of the manager's own: a database that refuses writes for a while, and a pause of the
manager process (SIGSTOP). Neither loses or re-runs a job, and pilots are not declared lost
for what the manager itself could not do."""

from __future__ import annotations

import os
import shutil
import signal
import sqlite3
import time
from pathlib import Path

import httpx
import pytest
from livekit import LiveServer, wait_for, wait_state, write_env

from isthmus.live.client import ApiError


def _ledger_job(ledger: Path, seconds: float) -> dict[str, object]:
    """A job that appends its id to `ledger` when it starts, then sleeps (each run leaves a line)."""
    return {"command": "sh", "args": ["-c", f'echo "$ISTHMUS_JOB_ID" >> {ledger}; sleep {seconds}']}


def _history(live: LiveServer, job_id: int) -> list[str]:
    return [f"{h['state']} {h['detail']}" for h in live.client().job(job_id)["history"]]


def test_database_refusing_writes_makes_the_manager_unhealthy_and_loses_nothing(
    live: LiveServer, tmp_path: Path
) -> None:
    if not live.db_url.startswith("sqlite"):
        pytest.skip("the write refusal is made with an SQLite lock held by the test")
    c = live.client()
    ledger = tmp_path / "ledger"
    job = c.submit(**_ledger_job(ledger, 1.5))
    wait_state(c, job, ("running",))
    db_file = live.db_url.removeprefix("sqlite:///")
    lock = sqlite3.connect(db_file, timeout=10, isolation_level=None)
    lock.execute("BEGIN EXCLUSIVE")  # every write of the manager now fails (after its 2 s busy wait)
    try:
        # the job ends while the database refuses writes: the manager says it is unhealthy
        def unhealthy() -> httpx.Response | None:
            r = httpx.get(live.url + "/health")
            return r if r.status_code == 503 else None

        health = wait_for(unhealthy, timeout=20, what="/health 503")
        assert "cannot write the database" in health.json()["reason"]
        with pytest.raises(ApiError) as refused:
            c.submit(command="true")
        assert refused.value.status == 503  # refused before anything changed: nothing to store later
        time.sleep(4.0)  # longer than the heartbeat timeout (3 s): pilots must not be judged lost
    finally:
        lock.execute("ROLLBACK")
        lock.close()
    wait_for(lambda: httpx.get(live.url + "/health").status_code == 200, timeout=20, what="/health 200")
    assert wait_state(c, job, ("completed",))["exit_code"] == 0
    assert ledger.read_text().split() == [str(job)]  # ran once
    assert not any("lost" in h for h in _history(live, job)), _history(live, job)
    later = c.submit(command="true")  # submissions work again
    assert wait_state(c, later, ("completed",))["state"] == "completed"
    assert len(c.jobs(all_=True)) == 2  # the refused submission was never stored


def test_a_paused_manager_does_not_declare_its_pilots_lost(live: LiveServer, tmp_path: Path) -> None:
    c = live.client()
    ledger = tmp_path / "ledger"
    job = c.submit(**_ledger_job(ledger, 2.0))
    wait_state(c, job, ("running",))
    assert live.proc is not None
    live.proc.send_signal(signal.SIGSTOP)
    time.sleep(6.0)  # twice the heartbeat timeout; the job ends during the pause
    live.proc.send_signal(signal.SIGCONT)
    assert wait_state(c, job, ("completed",))["exit_code"] == 0
    assert ledger.read_text().split() == [str(job)]  # its report was accepted: not run again
    assert not any("lost" in h for h in _history(live, job)), _history(live, job)
    log = (live.state_dir.parent / f"server-{live.starts}.log").read_text()
    assert "did not run for" in log  # the pause was seen ...
    assert "lost:" not in log, log  # ... and no pilot was judged on it


def _ppid(pid: int) -> int:
    return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])


def _job_pids(tag: str, job: int) -> list[int]:
    """Live processes (not zombies) whose environment names job `job` and carries `tag`."""
    out = []
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            environ = (d / "environ").read_bytes().split(b"\0")
            state = (d / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if f"ISTHMUS_TAG={tag}".encode() in environ and f"ISTHMUS_JOB_ID={job}".encode() in environ and state != "Z":
            out.append(int(d.name))
    return out


def _lines(ledger: Path) -> int:
    """Lines written to `ledger` so far (0 before the first run wrote it)."""
    return len(ledger.read_text().split()) if ledger.exists() else 0


def test_a_run_dies_with_its_pilot_before_it_is_run_again(live: LiveServer, tmp_path: Path) -> None:
    c = live.client()
    ledger = tmp_path / "ledger"
    job = c.submit(**_ledger_job(ledger, 60))
    wait_state(c, job, ("running",))
    # the run has written its line: killed any earlier, it would leave none and the rerun's would be the only one
    wait_for(lambda: _lines(ledger) == 1, what="the first run's line")
    first = wait_for(lambda: _job_pids(live.tag, job), what="the job's processes")
    leader = min(first)
    pilot = _ppid(leader)
    os.kill(pilot, signal.SIGKILL)  # the pilot dies; its run's process group is its own
    wait_for(lambda: _lines(ledger) == 2, timeout=30, what="the rerun")
    assert not any(Path(f"/proc/{p}").exists() and p in _job_pids(live.tag, job) for p in first), (
        "a process of the lost run outlived its pilot"
    )
    history = _history(live, job)
    assert any("killed (lost)" in h for h in history), history
    c.cancel(job)
    wait_for(lambda: not _job_pids(live.tag, job), what="no process of the job left")


def test_removing_the_output_spool_under_a_running_job_is_said(live: LiveServer) -> None:
    c = live.client()
    job = c.submit(command="sh", args=["-c", "echo before; sleep 1.5; echo after"])
    j = wait_state(c, job, ("running",))
    time.sleep(0.3)
    shutil.rmtree(live.state_dir / "spool" / str(job))  # an operator cleaning up too early
    j = wait_state(c, job, ("completed",))
    ended = j["history"][-1]["detail"]
    assert "output lost" in ended and "removed while the run ran" in ended, j["history"]
    with pytest.raises(ApiError) as gone:
        c.output(job)
    assert gone.value.status == 410 and "was removed" in str(gone.value)


def test_a_run_that_finished_while_the_manager_was_down_is_completed_not_rerun(
    tmp_path: Path, db_url: str, tag: str
) -> None:
    # pilots wait 15 s for a manager, which waits 10 s for them after its restart: a restart slowed
    # by a loaded machine must not turn this test into one of a pilot lost (tested elsewhere)
    live = LiveServer(
        write_env(tmp_path / "env.toml"),
        tmp_path / "state",
        db_url,
        tag,
        pilot_timeout=15.0,
        reattach_timeout=10.0,
    ).start()
    try:
        _finished_while_down(live, tmp_path)
    finally:
        live.stop()


def _finished_while_down(live: LiveServer, tmp_path: Path) -> None:
    c = live.client()
    ledger = tmp_path / "ledger"
    job = c.submit(**_ledger_job(ledger, 1.0))
    wait_state(c, job, ("running",))
    live.kill(signal.SIGKILL)
    time.sleep(2.0)  # the run ends while no manager is there to hear it
    live.start()
    c = live.client()
    j = wait_state(c, job, ("completed",), timeout=30)
    assert j["exit_code"] == 0 and j["run"] == 1 and j["restarts"] == 0, _history(live, job)
    assert ledger.read_text().split() == [str(job)]  # the reconnecting pilot's report won: not run again
    assert not any("killed" in h for h in _history(live, job)), _history(live, job)
