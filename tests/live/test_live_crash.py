"""Crash safety: the manager is SIGKILLed at random moments and restarted on the same database."""

from __future__ import annotations

import itertools
import os
import random
import re
import signal
import threading
import time
from pathlib import Path

import pytest
from conftest import LiveServer, tagged_pids, wait_for, wait_state, write_env

from isthmus.live.client import ApiError, Client

TERMINAL = {"completed", "failed", "cancelled"}


def _agents(tag: str) -> list[int]:
    """Pilot processes carrying `tag`."""
    out = []
    for pid in tagged_pids(tag):
        try:
            if b"isthmus.agent" in Path(f"/proc/{pid}/cmdline").read_bytes():
                out.append(pid)
        except OSError:
            pass
    return out


@pytest.mark.parametrize("db_url", ["sqlite", "postgres"], indirect=True)
def test_pilots_of_a_dead_manager_exit(tmp_path: Path, db_url: str, tag: str) -> None:
    env = write_env(tmp_path / "env.toml")
    server = LiveServer(env, tmp_path / "state", db_url, tag, pilot_timeout=2.0).start()
    c = server.client()
    jid = c.submit(command="sleep", args=["60"])
    wait_state(c, jid, ("running",))
    assert len(_agents(tag)) == 2
    server.kill(signal.SIGKILL)
    # pilots notice the manager is gone, kill their runs and exit: nothing is left
    wait_for(lambda: not tagged_pids(tag), timeout=15, what="pilots and jobs of a dead manager gone")


@pytest.mark.slow
@pytest.mark.parametrize("db_url", ["sqlite", "postgres"], indirect=True)
def test_kill_and_restart_loop_during_workload(tmp_path: Path, db_url: str, tag: str) -> None:
    n_jobs = 200
    rng = random.Random(5)
    env = write_env(tmp_path / "env.toml", nodes=4, cores=2)
    marks = tmp_path / "marks"
    marks.mkdir()
    server = LiveServer(
        env,
        tmp_path / "state",
        db_url,
        tag,
        pilot_timeout=6.0,
        heartbeat_timeout=4.0,
        reattach_timeout=3.0,
        poll_wait=1.0,
    ).start()
    token = server.admin_token
    acknowledged: list[int] = []
    submitted = 0
    stop = threading.Event()

    def submitter() -> None:
        nonlocal submitted
        with Client(server.url, token, timeout=5) as c:
            while submitted < n_jobs and not stop.is_set():
                i = submitted
                size = 1 if i % 10 else 2
                sleep = 0.1 + (i % 5) * 0.1
                script = (
                    f'echo "$ISTHMUS_RUN" >> {marks}/$ISTHMUS_JOB_ID; echo start $ISTHMUS_JOB_ID; '
                    f"sleep {sleep}; echo end $ISTHMUS_JOB_ID"
                )
                try:
                    acknowledged.append(c.submit(command="sh", args=["-c", script], size=size))
                    submitted += 1
                except ApiError:
                    time.sleep(0.1)  # manager down: retry (a lost answer may leave an extra job: also checked)
                if i % 20 == 19:
                    time.sleep(0.3)

    t = threading.Thread(target=submitter)
    t.start()
    restarts = 0
    try:
        for k in range(6):
            time.sleep(rng.uniform(0.8, 3.0))
            if k in (1, 3):  # also lose a pilot now and then (its runs are lost and requeued)
                agents = _agents(tag)
                if agents:
                    os.kill(rng.choice(agents), signal.SIGKILL)
                time.sleep(rng.uniform(0.2, 1.0))
            server.kill(signal.SIGKILL)
            restarts += 1
            time.sleep(rng.uniform(0.0, 1.0))
            server.start()
        t.join(timeout=120)
        assert not t.is_alive()
        c = server.client()

        def all_done() -> bool:
            jobs = c.jobs(all_=True)
            return len(jobs) >= n_jobs and all(j["state"] in TERMINAL for j in jobs)

        wait_for(all_done, timeout=150, interval=0.5, what="every job terminal")
        jobs = {j["id"]: j for j in c.jobs(all_=True)}
        assert set(acknowledged) <= set(jobs)
        assert len(jobs) <= n_jobs + restarts  # at most one unacknowledged submission per crash
        lost_restarts = 0
        for jid in jobs:
            j = c.job(jid)
            hist = j["history"]
            terminal = [h for h in hist if h["state"] in TERMINAL]
            assert len(terminal) == 1 and hist[-1]["state"] in TERMINAL, (jid, hist)
            assert j["state"] == "completed", (jid, hist)
            # every run that really executed is a recorded run, none executed twice
            runs = [int(x) for x in (marks / str(jid)).read_text().split()]
            assert len(runs) == len(set(runs)), (jid, runs, hist)
            assert set(runs) <= set(range(1, j["run"] + 1)) and j["run"] in runs, (jid, runs, hist)
            assert j["restarts"] == j["run"] - 1, (jid, hist)
            assert sum(1 for h in hist if h["state"] == "killed") == j["restarts"], (jid, hist)
            # time never goes backwards: nothing of a job is stamped before its submission
            assert all(h["time"] >= j["submit_time"] for h in hist), (jid, j["submit_time"], hist)
            lost_restarts += j["restarts"]
            out, _ = c.output(jid)
            assert out == f"start {jid}\nend {jid}\n", (jid, out)
        times = [row[0] for row in c.request("GET", "/events")]
        assert all(b >= a for a, b in itertools.pairwise(times)), "an event stamped before the one logged ahead of it"
        # pilots of earlier incarnations are gone: at most one pilot per node and VM
        agents = wait_for(
            lambda: (lambda a: a if len(a) <= 6 else None)(_agents(tag)),  # noqa: PLC3002
            timeout=10,
            what="at most one pilot per node",
        )
        assert len(agents) <= 4 + 2
        print(f"{len(jobs)} jobs, {restarts} manager kills, {lost_restarts} recorded restarts")
    finally:
        stop.set()
        t.join(timeout=10)
        server.stop()
    wait_for(lambda: not tagged_pids(tag), timeout=15, what="no process left behind")
    assert re.match(r"^ist_", token)
