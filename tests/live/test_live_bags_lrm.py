"""Live bags of tasks on pilot-mode batch sites: a real Slurm (scripts/start_slurm.sh) beside a local site:
a local user's job waiting in Slurm makes the bag shrink there (KOALA-CS §3.2.1), an isthmus
rigid job makes it shrink on its site, and the manager killed once redoes no reported task;
and Grid Engine (scripts/start_gridengine.sh) under GEP."""

from __future__ import annotations

import os
import signal
import subprocess
from pathlib import Path

from livekit import LiveServer, wait_for, wait_state

ENV = """
name = "bags-slurm"
round_interval = "event"
[[sites]]
name = "fs1"
nodes = {nodes}
cores_per_node = 2
[sites.lrm]
driver = "slurm"
config = "{conf}"
poll_interval = 0.3
[[sites]]
name = "local"
nodes = 1
cores_per_node = 2
[policies]
allocation = "ff"
provisioning = "none"
fairshare = "sep"
"""


def _slurm(conf: str, *args: str) -> str:
    return subprocess.run(
        list(args), env={**os.environ, "SLURM_CONF": conf}, capture_output=True, text=True, check=False
    ).stdout.strip()


def test_a_bag_on_slurm_pilots_and_a_local_site_yields_to_local_and_rigid_jobs_and_survives_a_kill(
    tmp_path: Path, tag: str, slurm_conf: str
) -> None:
    ran = tmp_path / "ran"
    ran.mkdir()
    env = tmp_path / "env.toml"
    nodes = len(set(_slurm(slurm_conf, "sinfo", "-h", "-N", "-o", "%N").split()))  # the bag holds every node
    env.write_text(ENV.format(conf=slurm_conf, nodes=nodes))
    live = LiveServer(env, tmp_path / "state", f"sqlite:///{tmp_path / 'db'}", tag).start()
    local = ""
    n = 2000
    try:
        c = live.client()
        bag_id = c.submit_bag(
            sweep={"template": f"sleep 0.02; echo {{x}} >> {ran}/{{x}}.ran", "params": [f"x=0..{n - 1}"]}
        )
        held = {"fs1": 2 * nodes, "local": 2}
        wait_for(lambda: c.job(bag_id)["bag"]["held"] == held, 60, what="the bag on every processor")
        # a local user's job wants a whole Slurm node: the bag gives one back on fs1
        local = _slurm(slurm_conf, "sbatch", "--parsable", "-N1", "--ntasks-per-node=2", "--wrap=sleep 1").split(";")[0]
        wait_for(
            lambda: _slurm(slurm_conf, "squeue", "-h", "-j", local, "-o", "%T") in ("RUNNING", "COMPLETED", ""),
            30,
            what="the local job running",
        )
        # (it could run only because the bag gave a node back: it held every Slurm node)
        # an isthmus rigid job of 2 processors: the bag shrinks where the job is placed, the job
        # starts within the preemption time
        rigid = c.submit(command="true", size=2)
        j = wait_state(c, rigid, ("completed",), timeout=30)
        assert j["start_time"] - j["submit_time"] < 10.0
        wait_for(lambda: c.job(bag_id)["bag"]["done"] >= n // 4, 60, what="a quarter of the tasks done")
        live.kill(signal.SIGKILL)
        live.start()
        c = live.client()
        # what the database records as done after the restart: never run again from now on
        reported = {r["task"] for r in c.results(bag_id, ["done"])}
        at_restart = [len((ran / f"{i}.ran").read_text().splitlines()) if (ran / f"{i}.ran").exists() else 0
                      for i in range(n)]  # fmt: skip
        wait_state(c, bag_id, ("completed",), timeout=180)
        index = c.results(bag_id)
        events = c.events()
    finally:
        if local:
            _slurm(slurm_conf, "scancel", local)
        live.stop()
    assert len(index) == n and all(r["state"] == "done" for r in index)
    counts = [len((ran / f"{i}.ran").read_text().splitlines()) for i in range(n)]
    assert all(counts[t] == at_restart[t] >= 1 for t in reported), {t: counts[t] for t in reported}
    assert all(k >= 1 for k in counts)
    shrinks = {e[3] for e in events if e[1] == 22 and e[2] == bag_id}  # the sites of the SHRINK events
    assert 0 in shrinks  # on fs1, for the local user's job


GE_ENV = """
name = "bags-ge"
round_interval = "event"
[[sites]]
name = "ge1"
nodes = 2
cores_per_node = 2
[sites.lrm]
driver = "gridengine"
poll_interval = 0.3
[policies]
allocation = "ff"
provisioning = "none"
fairshare = "gep"
"""


def test_a_bag_on_grid_engine_pilots_runs_each_task_once_and_yields_to_a_rigid_job(
    tmp_path: Path, tag: str, gridengine: None
) -> None:
    ran = tmp_path / "ran"
    ran.mkdir()
    env = tmp_path / "env.toml"
    env.write_text(GE_ENV)
    live = LiveServer(env, tmp_path / "state", f"sqlite:///{tmp_path / 'db'}", tag).start()
    n = 200
    try:
        c = live.client()
        bag_id = c.submit_bag(
            sweep={"template": f"sleep 0.05; echo {{x}} >> {ran}/{{x}}.ran", "params": [f"x=0..{n - 1}"]}
        )
        wait_for(lambda: c.job(bag_id)["bag"]["held"] == {"ge1": 4}, 60, what="the bag on the 4 pilot processors")
        rigid = c.submit(command="true", size=2)
        j = wait_state(c, rigid, ("completed",), timeout=30)
        assert j["start_time"] - j["submit_time"] < 10.0
        wait_state(c, bag_id, ("completed",), timeout=180)
        index = c.results(bag_id)
    finally:
        live.stop()
    assert len(index) == n and all(r["state"] == "done" for r in index)
    counts = [len((ran / f"{i}.ran").read_text().splitlines()) for i in range(n)]
    assert all(k >= 1 for k in counts)
