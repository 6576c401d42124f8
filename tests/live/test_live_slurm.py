"""A live site on a real Slurm in direct mode: each run is one Slurm job; states,
exit codes, output, multi-node placement, cancellation both ways, a refused submission, and a
manager killed and restarted while Slurm jobs run (re-attached, not submitted twice)."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

from livekit import LiveServer, wait_for, wait_state

from isthmus.live.manager import free_port

TERMINAL = ("completed", "failed", "cancelled", "timeout")

ENV = """
name = "slurm-live"
round_interval = "event"
[[sites]]
name = "fs1"
nodes = 4
cores_per_node = 2
[sites.lrm]
driver = "slurm"
mode = "direct"
config = "{conf}"
poll_interval = 0.3
{extra}
[policies]
allocation = "ff"
provisioning = "none"
"""


def _env(tmp_path: Path, conf: str, extra: str = "") -> Path:
    path = tmp_path / "env.toml"
    path.write_text(ENV.format(conf=conf, extra=extra))
    return path


def _slurm_id(job: dict) -> str:  # type: ignore[type-arg]
    """The Slurm job id of the job's latest run, from its history."""
    ids = [m.group(1) for h in job["history"] if (m := re.search(r"fs1 job (\d+)", h["detail"]))]
    return ids[-1] if ids else ""


def _squeue(conf: str) -> str:
    return subprocess.run(
        ["squeue", "-h", "-t", "all", "-o", "%i %T %k"],
        env={**os.environ, "SLURM_CONF": conf},
        capture_output=True,
        text=True,
        check=False,
    ).stdout


def test_direct_mode_runs_jobs_as_slurm_jobs(tmp_path: Path, tag: str, slurm_conf: str) -> None:
    live = LiveServer(_env(tmp_path, slurm_conf), tmp_path / "state", f"sqlite:///{tmp_path / 'db'}", tag).start()
    try:
        c = live.client()
        one = c.submit(command="sh", args=["-c", "sleep 1.5; echo $ISTHMUS_SITE $ISTHMUS_JOB_ID"])  # seen running
        wide = c.submit(command="srun", args=["sh", "-c", "echo $SLURMD_NODENAME"], size=8)
        fails = c.submit(command="sh", args=["-c", "echo oops >&2; exit 3"])
        j = wait_state(c, one, TERMINAL, timeout=60)
        assert j["state"] == "completed" and c.output(one)[0] == f"fs1 {one}\n"
        assert _slurm_id(j), j["history"]  # the run is a Slurm job, named in the history
        assert any(h["state"] == "running" and "on n" in h["detail"] for h in j["history"]), j["history"]
        j = wait_state(c, wide, TERMINAL, timeout=60)
        assert j["state"] == "completed", j["history"]
        assert sorted(set(c.output(wide)[0].split())) == ["n1", "n2", "n3", "n4"]  # 8 tasks on 4 nodes
        j = wait_state(c, fails, TERMINAL, timeout=60)
        assert (j["state"], j["exit_code"]) == ("failed", 3)
        assert c.output(fails, "stderr")[0] == "oops\n"
        assert "FAILED" in j["history"][-1]["detail"]

        # cancelled through isthmus: the Slurm job is cancelled too
        long = c.submit(command="sleep", args=["120"])
        j = wait_state(c, long, ("running",), timeout=60)
        sid = wait_for(lambda: _slurm_id(c.job(long)), what="the Slurm job id")
        c.cancel(long)
        wait_for(lambda: f"{sid} CANCELLED" in _squeue(slurm_conf), timeout=20, what="the Slurm job cancelled")
        assert c.job(long)["state"] == "cancelled"

        # cancelled outside isthmus (scancel by an operator): the run ends failed, saying so
        other = c.submit(command="sleep", args=["120"])
        wait_state(c, other, ("running",), timeout=60)
        sid = wait_for(lambda: _slurm_id(c.job(other)), what="the Slurm job id")
        subprocess.run(["scancel", sid], env={**os.environ, "SLURM_CONF": slurm_conf}, check=True)
        j = wait_state(c, other, TERMINAL, timeout=30)
        assert j["state"] == "failed" and "cancelled outside isthmus" in j["history"][-1]["detail"], j["history"]
    finally:
        live.stop()


def test_refused_submission_fails_the_job_with_slurms_message(tmp_path: Path, tag: str, slurm_conf: str) -> None:
    env = _env(tmp_path, slurm_conf, 'options = ["--constraint=no-such-feature"]')
    live = LiveServer(env, tmp_path / "state", f"sqlite:///{tmp_path / 'db'}", tag).start()
    try:
        c = live.client()
        job = c.submit(command="true")
        j = wait_state(c, job, TERMINAL, timeout=30)
        assert j["state"] == "failed", j["history"]
        detail = j["history"][-1]["detail"]
        assert "fs1 refused the job" in detail and "feature" in detail.lower(), detail
    finally:
        live.stop()


def test_a_partition_without_nodes_makes_the_site_unavailable(tmp_path: Path, tag: str, slurm_conf: str) -> None:
    env = _env(tmp_path, slurm_conf, 'partition = "no-such-partition"')
    live = LiveServer(env, tmp_path / "state", f"sqlite:///{tmp_path / 'db'}", tag).start()
    try:
        c = live.client()
        site = wait_for(
            lambda: (lambda s: s if s["unavailable"] else None)(c.request("GET", "/sites")[0]),  # noqa: PLC3002
            what="the site marked unavailable",
        )
        assert "no-such-partition" in site["unavailable"], site
        job = c.submit(command="true")
        assert c.job(job)["state"] == "queued"  # waits, nothing lost
    finally:
        live.stop()


def test_a_restarted_manager_reattaches_its_slurm_jobs(tmp_path: Path, tag: str, slurm_conf: str) -> None:
    live = LiveServer(_env(tmp_path, slurm_conf), tmp_path / "state", f"sqlite:///{tmp_path / 'db'}", tag).start()
    try:
        c = live.client()
        ledger = tmp_path / "ledger"
        job = c.submit(command="sh", args=["-c", f"echo $ISTHMUS_RUN >> {ledger}; sleep 3; echo done"])
        wait_state(c, job, ("running",), timeout=60)
        live.kill(signal.SIGKILL)
        live.start()
        c = live.client()
        j = wait_state(c, job, TERMINAL, timeout=60)
        assert j["state"] == "completed" and j["run"] == 1, j["history"]
        assert ledger.read_text().split() == ["1"]  # ran once: re-attached, not submitted again
        assert c.output(job)[0] == "done\n"
        lines = [line.split() for line in _squeue(slurm_conf).splitlines()]
        (comment,) = [c for sid, _, c in lines if sid == _slurm_id(j)]  # isthmus:<this manager>:j<job>r1
        assert [c for _, _, c in lines].count(comment) == 1, lines  # one Slurm job for the run, no duplicate
    finally:
        live.stop()


def test_a_missing_slurm_client_is_refused_before_anything_is_created(tmp_path: Path) -> None:
    """Without sbatch & co. on PATH the manager does not start half-working: it names the site,
    the commands and the Debian package, and creates no state."""
    env = _env(tmp_path, "/nonexistent/slurm.conf")
    state = tmp_path / "state"
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "isthmus.cli.live_entry",
            "server",
            "--env",
            str(env),
            "--state-dir",
            str(state),
            "--listen",
            f"127.0.0.1:{free_port()}",
        ],
        env={**os.environ, "PATH": str(tmp_path)},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert out.returncode != 0
    assert "site fs1 uses slurm, but sbatch, scontrol, scancel, sinfo, squeue are not on PATH" in out.stderr
    assert "apt-get install slurm-client" in out.stderr
    assert not (state / "isthmus.db").exists()


def test_a_controller_that_does_not_answer_makes_the_site_unavailable_and_nothing_is_lost(
    tmp_path: Path, tag: str, slurm_conf: str
) -> None:
    """slurmctld stopped (SIGSTOP): commands time out, the site is unavailable with the reason,
    jobs wait; once it answers again (SIGCONT), the waiting job runs."""
    env = _env(tmp_path, slurm_conf, "command_timeout = 2")
    pid = int(Path(slurm_conf).with_name("slurmctld.pid").read_text())
    live = LiveServer(env, tmp_path / "state", f"sqlite:///{tmp_path / 'db'}", tag).start()
    try:
        c = live.client()
        wait_for(lambda: c.request("GET", "/sites")[0]["online"] == 8, what="capacity discovered")
        os.kill(pid, signal.SIGSTOP)
        try:
            site = wait_for(
                lambda: (lambda s: s if s["unavailable"] else None)(c.request("GET", "/sites")[0]),  # noqa: PLC3002
                timeout=30,
                what="the site marked unavailable",
            )
            assert "does not answer" in site["unavailable"], site
            job = c.submit(command="sh", args=["-c", "echo after"])
            time.sleep(1)
            assert c.job(job)["state"] == "queued"  # not sent into a Slurm that does not answer
        finally:
            os.kill(pid, signal.SIGCONT)
        j = wait_state(c, job, TERMINAL, timeout=60)
        assert j["state"] == "completed" and c.output(job)[0] == "after\n", j["history"]
        assert not c.request("GET", "/sites")[0]["unavailable"]
    finally:
        live.stop()
