"""Stopping the manager as a batch system's operator would: a normal stop
(SIGTERM, `isthmus stop`) leaves running jobs running and the next start re-attaches them;
`isthmus stop --drain` starts nothing new and stops once the running jobs have ended."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from livekit import LiveServer, bag_env, wait_for, wait_state, write_env

from isthmus.live.client import ApiError


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def _job_pid(tag: str, job: int) -> int:
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                env = (d / "environ").read_bytes().split(b"\0")
            except OSError:
                continue
            if f"ISTHMUS_TAG={tag}".encode() in env and f"ISTHMUS_JOB_ID={job}".encode() in env:
                return int(d.name)
    return 0


def test_sigterm_leaves_running_jobs_running_and_the_restart_reattaches_them(
    tmp_path: Path, db_url: str, tag: str
) -> None:
    live = LiveServer(write_env(tmp_path / "env.toml"), tmp_path / "state", db_url, tag, on_stop="detach").start()
    try:
        c = live.client()
        ledger = tmp_path / "ledger"
        job = c.submit(command="sh", args=["-c", f'echo "$ISTHMUS_JOB_ID" >> {ledger}; sleep 4; echo done'])
        wait_state(c, job, ("running",))
        pid = wait_for(lambda: _job_pid(live.tag, job), what="the job's process")
        live.stop()  # SIGTERM: detach (the server's default)
        assert live.proc is not None and live.proc.returncode is not None
        assert _alive(pid), "the job was killed by a normal stop"
        live.start()
        c = live.client()
        j = wait_state(c, job, ("completed",), timeout=30)
        assert ledger.read_text().split() == [str(job)]  # not run again
        assert not any(h["state"] == "killed" for h in j["history"]), j["history"]
        assert c.output(job)[0] == "done\n"
    finally:
        live.stop("kill")


def test_drain_finishes_running_jobs_starts_nothing_new_and_stops(tmp_path: Path, db_url: str, tag: str) -> None:
    env = write_env(tmp_path / "env.toml", prov="none")  # no VMs: c1's 4 processors only
    live = LiveServer(env, tmp_path / "state", db_url, tag).start()
    try:
        c = live.client()
        go = tmp_path / "go"  # the running job ends once the test has seen the drain begin
        running = c.submit(command="sh", args=["-c", f"while [ ! -e {go} ]; do sleep 0.1; done"], size=4)
        wait_state(c, running, ("running",))
        queued = c.submit(command="true", size=4)
        r = subprocess.run(  # noqa: PLW1510
            [sys.executable, "-m", "isthmus.cli.live_entry", "stop", "--drain"],
            env={**os.environ, "ISTHMUS_URL": live.url, "ISTHMUS_TOKEN": live.admin_token},
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert r.returncode == 0 and "draining: 1 running job(s)" in r.stdout, r.stderr
        with pytest.raises(ApiError) as refused:
            c.submit(command="true")
        assert refused.value.status == 503 and "stopping (drain)" in str(refused.value)
        assert live.proc is not None
        time.sleep(1)
        assert live.proc.poll() is None, "the drain stopped the manager while a job still ran"
        go.touch()
        live.proc.wait(timeout=20)  # stops by itself once the running job has ended
        live.start()
        c = live.client()
        assert c.job(running)["state"] == "completed"
        wait_state(c, queued, ("completed",))  # the queued job waited for the next start
        assert len(c.jobs(all_=True)) == 2
    finally:
        live.stop()
        time.sleep(0)


def test_drain_lets_bag_tasks_finish_starts_none_and_the_bag_goes_on_at_the_next_start(
    tmp_path: Path, db_url: str, tag: str
) -> None:
    ran = tmp_path / "ran"
    ran.mkdir()
    live = LiveServer(bag_env(tmp_path / "env.toml"), tmp_path / "state", db_url, tag).start()
    n = 24
    try:
        c = live.client()
        # each task appends to its file when it starts and when it ends: a task killed mid-way
        # leaves a start without an end
        bag = c.submit_bag(
            sweep={"template": f"echo s >> {ran}/{{x}}; sleep 1.5; echo e >> {ran}/{{x}}", "params": [f"x=0..{n - 1}"]}
        )
        wait_for(lambda: c.job(bag)["bag"]["running"] == 4, 30, what="four tasks running")
        r = subprocess.run(  # noqa: PLW1510
            [sys.executable, "-m", "isthmus.cli.live_entry", "stop", "--drain"],
            env={**os.environ, "ISTHMUS_URL": live.url, "ISTHMUS_TOKEN": live.admin_token},
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert r.returncode == 0 and "bag task(s) to finish" in r.stdout, (r.stdout, r.stderr)
        assert live.proc is not None
        live.proc.wait(timeout=30)  # stops by itself once the running tasks have ended
        marks = {p.name: p.read_text().split() for p in ran.iterdir()}
        assert marks and all(m == ["s", "e"] for m in marks.values()), marks  # none killed mid-way
        assert len(marks) < n  # the drain started no new task: the rest wait
        live.start()
        c = live.client()
        wait_state(c, bag, ("completed",), timeout=120)
        marks = {p.name: p.read_text().split() for p in ran.iterdir()}
        assert len(marks) == n and all(m == ["s", "e"] for m in marks.values()), marks  # each ran once
    finally:
        live.stop()
