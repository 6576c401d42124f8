"""Recovery kills what it declares lost, and a job that keeps taking its pilot down fails.

* A pilot SIGKILLed 0-50 ms before (or after) its manager is SIGKILLed leaves its runs alive in
  their own sessions; after the restart they are recorded lost, killed and requeued, on a local
  cluster, on an EC2 cloud (a local EC2-compatible server whose VMs boot pilots) and on Slurm
  pilots (with a test Slurm). Each job's
  body appends a line to a ledger when it starts and when it ends: every job's body ends exactly
  once (no run completes beside its rerun), and no run is left alive.
* Likewise for a bag's tasks: a task of a lane of a pilot SIGKILLed just before its manager is,
  or while its manager runs, is killed (with its process group) before it goes back to its bag's
  queue: every task's body ends exactly once and no task process is left.
* A run that ends while its pilot and its manager are dead recorded its exit status: after the
  restart that end counts, and its body does not run again.
* A job that SIGKILLs its own pilot takes down every pilot it is given: after `max_lost_runs`
  (3) lost runs it fails with the reason, and its slots take other jobs again.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from cloudkit import AMI, VmPlayer
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

BAGS = """
name = "lost-bags"
round_interval = "event"
[[sites]]
name = "c1"
nodes = 1
cores_per_node = 3
[policies]
allocation = "fcfs"
fairshare = "sep"
"""


EC2 = """
name = "lost-ec2"
round_interval = "event"
[[sites]]
name = "ec2"
kind = "cloud"
max_vms = 2
cores_per_node = 3
boot_time = 0.5
shutdown_time = 0
price_per_hour = 0.065
billing_increment = 60
idle_release_time = 60
[sites.provider]
driver = "ec2"
image = "{ami}"
instance_type = "t2.micro"
endpoint = "{endpoint}"
key_env = "ISTHMUS_TEST_EC2_KEY"
secret_env = "ISTHMUS_TEST_EC2_SECRET"
boot_timeout = 60
[policies]
allocation = "ff"
provisioning = "on-demand"
"""


SLURM_PILOTS = """
name = "lost-slurm"
round_interval = "event"
[[sites]]
name = "fs1"
nodes = 1
cores_per_node = 2
[sites.lrm]
driver = "slurm"
config = "{conf}"
poll_interval = 0.3
[policies]
allocation = "ff"
provisioning = "none"
"""


def _server(tmp_path: Path, tag: str, text: str = ENV, extra: tuple[str, ...] = ()) -> LiveServer:
    env = tmp_path / "env.toml"
    env.write_text(text)
    server = LiveServer(
        env, tmp_path / "state", f"sqlite:///{tmp_path / 'db.sqlite'}", tag, heartbeat_timeout=3.0, reattach_timeout=2.0
    )
    server.args += extra
    return server.start()


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


@pytest.mark.parametrize(
    ("site", "order"),
    [
        ("local", "pilot-then-manager"),
        ("local", "manager-then-pilot"),
        ("ec2", "pilot-then-manager"),
        ("slurm-pilots", "manager-then-pilot"),
    ],
)
def test_runs_of_a_pilot_dead_with_its_manager_execute_once(
    site: str, order: str, tmp_path: Path, tag: str, request: pytest.FixtureRequest
) -> None:
    rng = random.Random(order)
    ledger = tmp_path / "ledger"
    ledger.mkdir()
    player = None
    if site == "ec2":
        endpoint = request.getfixturevalue("endpoint")
        player = VmPlayer(endpoint, tmp_path / "vms", tag).__enter__()
        request.addfinalizer(lambda: player.__exit__(None, None, None))
        server = _server(tmp_path, tag, EC2.format(ami=AMI, endpoint=endpoint))
    elif site == "slurm-pilots":
        server = _server(tmp_path, tag, SLURM_PILOTS.format(conf=request.getfixturevalue("slurm_conf")))
    else:
        server = _server(tmp_path, tag)
    try:
        with server.client() as c:
            ids = [c.submit(command="sh", args=["-c", _body(ledger)]) for _ in range(2)]
            for jid in ids:
                wait_state(c, jid, ("running",), timeout=60)
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
            jobs = [wait_state(c, jid, ("completed", "failed"), timeout=90) for jid in ids]
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


def _task_body(ledger: Path) -> str:
    """A task that lasts 60 s while the file ``hold`` exists in `ledger` (an orphan outlives its
    rerun), else 1 s."""
    mark = f"{ledger}/$ISTHMUS_JOB_ID.$ISTHMUS_TASK"
    wait = f"if [ -e {ledger}/hold ]; then sleep 60; else sleep 1; fi"
    return f"echo start >> {mark}; {wait}; echo end >> {mark}"


def _ends(ledger: Path, bag: int, n: int) -> list[int]:
    return [(ledger / f"{bag}.{t}").read_text().split("\n").count("end") for t in range(n)]


def test_tasks_of_a_lost_pilot_are_killed_before_they_run_again(tmp_path: Path, tag: str) -> None:
    ledger = tmp_path / "ledger"
    ledger.mkdir()
    server = _server(tmp_path, tag, BAGS)
    try:
        # the pilot dies 0-50 ms before its manager: the restarted manager kills its tasks
        hold = ledger / "hold"
        hold.touch()
        with server.client() as c:
            first = c.submit_bag(tasks=[_task_body(ledger)] * 4)
            wait_for(lambda: len(list(ledger.glob(f"{first}.*"))) >= 2, timeout=30, what="2 tasks started")
        pilots = agents(tag)
        assert len(pilots) == 1
        os.kill(pilots[0], signal.SIGKILL)
        time.sleep(random.Random(tag).uniform(0.0, 0.05))
        server.kill(signal.SIGKILL)
        hold.unlink()
        server.start()
        with server.client() as c:
            assert wait_state(c, first, ("completed", "failed"), timeout=90)["state"] == "completed"
            assert _job_processes(tag) == []  # an orphaned first run would still be sleeping
            assert _ends(ledger, first, 4) == [1] * 4
            # the pilot dies while its manager runs: its tasks are killed too
            hold.touch()
            second = c.submit_bag(tasks=[_task_body(ledger)] * 4)
            wait_for(lambda: len(list(ledger.glob(f"{second}.*"))) >= 2, timeout=30, what="2 tasks started")
            os.kill(agents(tag)[0], signal.SIGKILL)
            hold.unlink()
            assert wait_state(c, second, ("completed", "failed"), timeout=90)["state"] == "completed"
            assert _job_processes(tag) == []
            assert _ends(ledger, second, 4) == [1] * 4
    finally:
        server.stop()


def test_a_run_that_ended_while_nobody_heard_counts_and_is_not_run_again(tmp_path: Path, tag: str) -> None:
    ledger = tmp_path / "ledger"
    ledger.mkdir()
    server = _server(tmp_path, tag)
    mark = f"{ledger}/$ISTHMUS_JOB_ID"
    body = f'echo "start $ISTHMUS_RUN" >> {mark}; sleep 2; echo "end $ISTHMUS_RUN" >> {mark}'
    try:
        with server.client() as c:
            ids = [c.submit(command="sh", args=["-c", body]) for _ in range(2)]
            for jid in ids:
                wait_state(c, jid, ("running",), timeout=30)
        os.kill(agents(tag)[0], signal.SIGKILL)
        time.sleep(0.02)
        server.kill(signal.SIGKILL)
        wait_for(lambda: all("end" in (ledger / str(j)).read_text() for j in ids), what="the bodies ended unheard")
        server.start()
        with server.client() as c:
            jobs = [wait_state(c, jid, ("completed", "failed"), timeout=60) for jid in ids]
        for job in jobs:
            assert job["state"] == "completed" and job["restarts"] == 0 and job["run"] == 1, job
            assert (ledger / str(job["id"])).read_text() == "start 1\nend 1\n"
    finally:
        server.stop()


@pytest.mark.parametrize("limit", [None, 2])
def test_a_job_that_takes_its_pilot_down_fails_after_its_lost_runs(tmp_path: Path, tag: str, limit: int | None) -> None:
    """Three lost runs by default; `--max-lost-runs N` sets the bound."""
    server = _server(tmp_path, tag, extra=() if limit is None else ("--max-lost-runs", str(limit)))
    n = limit or 3
    try:
        with server.client() as c:
            # its parent is the wrapper that records its exit status; the wrapper's parent, the pilot
            pilot = "$(cut -d' ' -f4 /proc/$PPID/stat)"
            pill = c.submit(command="sh", args=["-c", f"kill -9 {pilot}; sleep 30"])
            job = wait_state(c, pill, ("failed", "completed"), timeout=90)
            assert job["state"] == "failed", job
            lost = [h for h in job["history"] if h["state"] == "killed" and "lost" in h["detail"]]
            assert len(lost) == n - 1 and job["run"] == n, job["history"]
            assert f"lost {n} times" in job["history"][-1]["detail"], job["history"]
            # its slot is back: a job needing every slot of the site runs
            after = c.submit(command="true", size=3)
            assert wait_state(c, after, ("completed", "failed"), timeout=60)["state"] == "completed"
    finally:
        server.stop()


def test_max_lost_runs_below_one_is_refused_naming_the_option(tmp_path: Path) -> None:
    env = tmp_path / "env.toml"
    env.write_text(ENV)
    r = subprocess.run(  # noqa: PLW1510
        [
            sys.executable,
            "-m",
            "isthmus.cli.live_entry",
            "server",
            "--env",
            str(env),
            "--state-dir",
            str(tmp_path / "state"),
            "--max-lost-runs",
            "0",
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert r.returncode == 2 and "'--max-lost-runs'" in r.stderr and "greater than or equal" in r.stderr, r.stderr
    assert not (tmp_path / "state").exists()
