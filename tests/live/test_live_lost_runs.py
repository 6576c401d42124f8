"""Recovery kills what it declares lost, and a job that keeps taking its pilot down fails.

* A pilot SIGKILLed 0-50 ms before (or after) its manager is SIGKILLed leaves its runs alive in
  their own sessions; after the restart they are recorded lost and requeued. Each job's body
  appends a line to a ledger when it starts and when it ends: every job's body ends exactly
  once (no run completes beside its rerun), and no run is left alive.
* A job that SIGKILLs its own pilot takes down every pilot it is given: after `max_lost_runs`
  (3) lost runs it fails with the reason, and its slots take other jobs again.
"""

from __future__ import annotations

import os
import random
import signal
import time
from pathlib import Path

import pytest
from faultkit import agents
from livekit import LiveServer, tagged_pids, wait_for, wait_state

ENV = """
name = "lost"
round_interval = "event"
[[sites]]
name = "c1"
nodes = 1
cores_per_node = 3
[policies]
allocation = "ff"
provisioning = "none"
"""


def _server(tmp_path: Path, tag: str) -> LiveServer:
    env = tmp_path / "env.toml"
    env.write_text(ENV)
    return LiveServer(
        env, tmp_path / "state", f"sqlite:///{tmp_path / 'db.sqlite'}", tag, heartbeat_timeout=3.0, reattach_timeout=2.0
    ).start()


def _body(ledger: Path) -> str:
    """A job body whose first run lasts 60 s (longer than a restart on a busy machine: an
    orphaned first run is still there when its rerun ends) and whose later runs last 1 s."""
    mark = f"{ledger}/$ISTHMUS_JOB_ID"
    wait = 'if [ "$ISTHMUS_RUN" = 1 ]; then sleep 60; else sleep 1; fi'
    return f'echo "start $ISTHMUS_RUN" >> {mark}; {wait}; echo "end $ISTHMUS_RUN" >> {mark}'


def _job_processes(tag: str) -> list[int]:
    """Live processes of isthmus jobs (not pilots) carrying `tag`."""
    out = []
    for pid in tagged_pids(tag):
        try:
            environ = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
        except OSError:
            continue
        if any(e.startswith(b"ISTHMUS_JOB_ID=") for e in environ):
            out.append(pid)
    return out


@pytest.mark.parametrize("order", ["pilot-then-manager", "manager-then-pilot"])
def test_runs_of_a_pilot_dead_with_its_manager_execute_once(order: str, tmp_path: Path, tag: str) -> None:
    rng = random.Random(order)
    ledger = tmp_path / "ledger"
    ledger.mkdir()
    server = _server(tmp_path, tag)
    try:
        with server.client() as c:
            ids = [c.submit(command="sh", args=["-c", _body(ledger)]) for _ in range(3)]
            for jid in ids:
                wait_state(c, jid, ("running",), timeout=30)
            wait_for(lambda: all((ledger / str(j)).exists() for j in ids), what="every body started")
        pilots = agents(tag)
        assert len(pilots) == 1
        gap = rng.uniform(0.0, 0.05)
        if order == "pilot-then-manager":
            os.kill(pilots[0], signal.SIGKILL)
            time.sleep(gap)
            server.kill(signal.SIGKILL)
        else:
            server.kill(signal.SIGKILL)
            time.sleep(gap)
            os.kill(pilots[0], signal.SIGKILL)
        server.start()
        with server.client() as c:
            jobs = [wait_state(c, jid, ("completed", "failed"), timeout=60) for jid in ids]
            jobs = [c.job(jid) for jid in ids]
        alive = _job_processes(tag)  # an orphaned first run would still be sleeping
        lines = {jid: (ledger / str(jid)).read_text().split("\n") for jid in ids}
        ends = {jid: [ln for ln in lines[jid] if ln.startswith("end")] for jid in ids}
        assert {jid: len(e) for jid, e in ends.items()} == dict.fromkeys(ids, 1), lines
        for job in jobs:
            assert job["state"] == "completed" and job["restarts"] == 1, job
            assert ends[job["id"]] == [f"end {job['run']}"]
            assert any(h["state"] == "killed" and "lost" in h["detail"] for h in job["history"]), job["history"]
        assert alive == []
    finally:
        server.stop()


def test_a_job_that_takes_its_pilot_down_fails_after_three_lost_runs(tmp_path: Path, tag: str) -> None:
    server = _server(tmp_path, tag)
    try:
        with server.client() as c:
            # its parent is the wrapper that records its exit status; the wrapper's parent, the pilot
            pilot = "$(cut -d' ' -f4 /proc/$PPID/stat)"
            pill = c.submit(command="sh", args=["-c", f"kill -9 {pilot}; sleep 30"])
            job = wait_state(c, pill, ("failed", "completed"), timeout=90)
            assert job["state"] == "failed", job
            lost = [h for h in job["history"] if h["state"] == "killed" and "lost" in h["detail"]]
            assert len(lost) == 2 and job["run"] == 3, job["history"]
            assert "lost 3 times" in job["history"][-1]["detail"], job["history"]
            # its slot is back: a job needing every slot of the site runs
            after = c.submit(command="true", size=3)
            assert wait_state(c, after, ("completed", "failed"), timeout=60)["state"] == "completed"
    finally:
        server.stop()
