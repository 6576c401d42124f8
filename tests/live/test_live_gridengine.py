"""Grid Engine sites on the live manager, against the machine's Grid Engine (scripts/start_gridengine.sh):
direct mode (each run one Grid Engine job) and pilot mode (pilot jobs run isthmus jobs)."""

from __future__ import annotations

import re
import signal
import subprocess
from pathlib import Path

import pytest
from livekit import LiveServer, wait_for, wait_state

TERMINAL = ("completed", "failed", "cancelled", "timeout")

ENV = """
name = "ge-live"
round_interval = "event"
[[sites]]
name = "ge1"
nodes = {nodes}
cores_per_node = 2
[sites.lrm]
driver = "gridengine"
mode = "{mode}"
poll_interval = 0.3
{extra}
[policies]
allocation = "ff"
provisioning = "none"
"""


def _env(tmp_path: Path, mode: str, nodes: int = 2, extra: str = "") -> Path:
    path = tmp_path / "env.toml"
    path.write_text(ENV.format(mode=mode, nodes=nodes, extra=extra))
    return path


def _ge_id(job: dict) -> str:  # type: ignore[type-arg]
    ids = [m.group(1) for h in job["history"] if (m := re.search(r"ge1 job (\d+)", h["detail"]))]
    return ids[-1] if ids else ""


def test_direct_mode_runs_jobs_as_grid_engine_jobs(tmp_path: Path, tag: str, gridengine: None) -> None:
    live = LiveServer(_env(tmp_path, "direct"), tmp_path / "state", f"sqlite:///{tmp_path / 'db'}", tag).start()
    try:
        c = live.client()
        wait_for(lambda: c.request("GET", "/sites")[0]["online"] >= 4, timeout=30, what="capacity discovered")
        one = c.submit(command="sh", args=["-c", "echo $ISTHMUS_SITE $ISTHMUS_JOB_ID $NSLOTS"], size=2)
        fails = c.submit(command="sh", args=["-c", "echo oops >&2; exit 3"])
        j = wait_state(c, one, TERMINAL, timeout=60)
        assert j["state"] == "completed" and c.output(one)[0] == f"ge1 {one} 2\n", j["history"]
        assert _ge_id(j), j["history"]
        j = wait_state(c, fails, TERMINAL, timeout=60)
        assert (j["state"], j["exit_code"]) == ("failed", 3), j["history"]
        assert c.output(fails, "stderr")[0] == "oops\n"

        # deleted outside isthmus (qdel by an operator): the run ends failed, saying so
        other = c.submit(command="sleep", args=["120"])
        wait_state(c, other, ("running",), timeout=60)
        gid = wait_for(lambda: _ge_id(c.job(other)), what="the Grid Engine job id")
        subprocess.run(["qdel", gid], check=True, capture_output=True)
        j = wait_state(c, other, TERMINAL, timeout=60)
        assert j["state"] == "failed" and "cancelled outside isthmus" in j["history"][-1]["detail"], j["history"]

        # a restarted manager re-attaches its running Grid Engine job: it runs once
        ledger = tmp_path / "ledger"
        job = c.submit(command="sh", args=["-c", f"echo $ISTHMUS_RUN >> {ledger}; sleep 3; echo done"])
        wait_state(c, job, ("running",), timeout=60)
        live.kill(signal.SIGKILL)
        live.start()
        c = live.client()
        j = wait_state(c, job, TERMINAL, timeout=60)
        assert j["state"] == "completed" and j["run"] == 1, j["history"]
        assert ledger.read_text().split() == ["1"] and c.output(job)[0] == "done\n"
    finally:
        live.stop()


def test_a_refused_submission_fails_the_job_with_grid_engines_message(
    tmp_path: Path, tag: str, gridengine: None
) -> None:
    env = _env(tmp_path, "direct", extra='options = ["-l", "no_such_resource=1"]')
    live = LiveServer(env, tmp_path / "state", f"sqlite:///{tmp_path / 'db'}", tag).start()
    try:
        c = live.client()
        job = c.submit(command="true")
        j = wait_state(c, job, TERMINAL, timeout=30)
        assert j["state"] == "failed", j["history"]
        detail = j["history"][-1]["detail"]
        assert "ge1 refused the job" in detail and "no_such_resource" in detail, detail
    finally:
        live.stop()


def test_pilot_mode_on_grid_engine(tmp_path: Path, tag: str, gridengine: None) -> None:
    live = LiveServer(_env(tmp_path, "pilot"), tmp_path / "state", f"sqlite:///{tmp_path / 'db'}", tag)
    live.start()
    try:
        c = live.client()
        wait_for(lambda: c.request("GET", "/sites")[0]["online"] == 4, timeout=60, what="2 pilots registered")
        site = c.request("GET", "/sites")[0]
        assert site["pilots"] == {"registered": 2} and site["lrm"]["driver"] == "gridengine", site
        wide = c.submit(command="sh", args=["-c", "cat $ISTHMUS_NODEFILE"], size=4)  # spans both pilots
        jobs = [c.submit(command="true") for _ in range(10)]
        j = wait_state(c, wide, TERMINAL, timeout=60)
        assert j["state"] == "completed", j["history"]
        # one exec host: both pilots' slots are on it, listed once (host slots=4)
        assert sum(int(line.split("slots=")[1]) for line in c.output(wide)[0].splitlines()) == 4
        assert (
            len({k for h in j["history"] if h["state"] == "starting" for k in h["detail"].split(" on ")[1].split(", ")})
            == 2
        )
        for job in jobs:
            assert wait_state(c, job, TERMINAL, timeout=60)["state"] == "completed"
    finally:
        live.stop()


MIXED = """
name = "mixed"
round_interval = "event"
[[sites]]
name = "slurm"
nodes = 4
cores_per_node = 2
[sites.lrm]
driver = "slurm"
mode = "{mode}"
config = "{conf}"
poll_interval = 0.3
[[sites]]
name = "ge1"
nodes = 2
cores_per_node = 2
[sites.lrm]
driver = "gridengine"
mode = "{mode}"
poll_interval = 0.3
[[sites]]
name = "cloud"
kind = "cloud"
max_vms = 2
boot_time = 1
shutdown_time = 0
idle_release_time = 5
[policies]
allocation = "ff"
provisioning = "on-demand"
"""


@pytest.mark.parametrize("mode", ["pilot", "direct"])
def test_a_mixed_workload_on_slurm_grid_engine_and_a_cloud(
    tmp_path: Path, tag: str, slurm_conf: str, gridengine: None, mode: str
) -> None:
    """One manager, a Slurm site, a Grid Engine site and a local cloud (On-Demand), by FF: a job
    of 8 processors on the 4 Slurm nodes, and sleep jobs that overflow onto Grid Engine and the cloud."""
    env = tmp_path / "env.toml"
    env.write_text(MIXED.format(mode=mode, conf=slurm_conf))
    live = LiveServer(env, tmp_path / "state", f"sqlite:///{tmp_path / 'db'}", tag).start()
    try:
        c = live.client()
        wait_for(
            lambda: [s["online"] for s in c.request("GET", "/sites")][:2] == [8, 4], timeout=60, what="both LRM sites"
        )
        if mode == "pilot":
            wide = c.submit(command="sh", args=["-c", "cut -d' ' -f1 $ISTHMUS_NODEFILE"], size=8)
        else:
            wide = c.submit(command="srun", args=["sh", "-c", "echo $SLURMD_NODENAME"], size=8)
        sleepers = [c.submit(command="sleep", args=["3"]) for _ in range(8)]
        j = wait_state(c, wide, TERMINAL, timeout=60)
        assert j["state"] == "completed", j["history"]
        assert sorted(set(c.output(wide)[0].split())) == ["n1", "n2", "n3", "n4"]
        sites = set()
        for job in sleepers:
            j = wait_state(c, job, TERMINAL, timeout=90)
            assert j["state"] == "completed", j["history"]
            sites |= {
                h["detail"].split(":")[0] for h in j["history"] if h["state"] == "starting" and ": " in h["detail"]
            }
        assert {"slurm", "ge1"} <= sites, sites
    finally:
        live.stop()
