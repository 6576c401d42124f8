"""A Slurm site behind a login host: a real sshd in a network namespace, an unprivileged account,
and the private test Slurm reachable only from that side (its SLURM_CONF is in the site's
``remote_env``, not in the manager's environment). A job runs, the SSH master is killed while it
runs, and the job still completes, seen by polls over a new master.
"""

from __future__ import annotations

import os
import signal
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from isthmus.backends.api import RunRequest
from isthmus.backends.errors import AuthenticationError, TransientError
from isthmus.backends.slurm import SlurmBatch, SlurmOptions
from isthmus.backends.ssh import SshRunner
from isthmus.model.states import JobState

SCRIPTS = Path(__file__).resolve().parents[2] / "scripts"
SLURM_CONF = os.environ.get("ISTHMUS_TEST_SLURM", "")

pytestmark = [
    pytest.mark.skipif(os.geteuid() != 0, reason="needs root: a network namespace, sshd and a test account"),
    pytest.mark.skipif(
        not SLURM_CONF,
        reason="no test Slurm: run scripts/start_slurm.sh and export ISTHMUS_TEST_SLURM=<its slurm.conf>",
    ),
]


@pytest.fixture(scope="module")
def login_host() -> Iterator[dict[str, str]]:
    """The login host of scripts/start_sshd.sh (its env file as a dict), torn down afterwards."""
    run = tempfile.mkdtemp(prefix="isthmus-sshd.")  # known here, so a setup failing halfway is undone too
    try:
        out = subprocess.run(
            ["bash", str(SCRIPTS / "start_sshd.sh")],
            env={**os.environ, "FORWARD_SLURM": SLURM_CONF, "SSHD_RUNDIR": run},
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        assert out.returncode == 0, out.stderr
        env = dict(line.split("=", 1) for line in Path(run, "env").read_text().splitlines() if "=" in line)
        env["RUN"] = run
        yield env
    finally:
        subprocess.run(["bash", str(SCRIPTS / "stop_sshd.sh"), run], timeout=60, check=False)


def accepted(host: dict[str, str]) -> int:
    """How many SSH logins the test sshd has accepted."""
    return Path(host["RUN"], "sshd.log").read_text().count("Accepted publickey")


def remote_idlers(host: dict[str, str]) -> int:
    """How many master connections' idle commands run as the test account on the login host."""
    argv = ["pgrep", "-c", "-u", host["SSH_USER"], "-x", "cat"]
    out = subprocess.run(argv, capture_output=True, text=True, check=False)
    return int(out.stdout.strip() or 0)


def test_slurm_job_behind_ssh_survives_a_killed_master(
    login_host: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("SLURM_CONF", raising=False)
    options = SlurmOptions.model_validate(
        {
            "ssh": login_host["SSH_DEST"],
            "ssh_key": login_host["SSH_KEY"],
            "known_hosts": login_host["KNOWN_HOSTS"],
            "remote_env": {"SLURM_CONF": SLURM_CONF},
            "command_timeout": 20.0,
        }
    )
    batch = SlurmBatch.open("behind-ssh", "mssh", options)
    runner = batch.runner
    assert isinstance(runner, SshRunner)
    home = Path(login_host["RUN"], "home")
    try:
        assert batch.capacity().total > 0
        [job_id] = batch.submit(
            [
                RunRequest(
                    "k1",
                    ("sh", "-c", "sleep 3; id -un > whoami"),
                    1,
                    cwd=str(home),
                    stdout=str(home / "k1.out"),
                )
            ]
        )
        assert isinstance(job_id, str), job_id
        deadline = time.monotonic() + 30
        while batch.status([job_id])[job_id].state is not JobState.RUNNING:
            assert time.monotonic() < deadline, "the job did not start"
            time.sleep(0.3)
        # sinfo, squeue, sbatch and the status polls so far: one login
        assert accepted(login_host) == 1 and runner.masters_started == 1
        first = runner.master_pid
        assert first is not None
        os.kill(first, signal.SIGKILL)  # the connection drops while the job runs

        deadline = time.monotonic() + 60
        states: list[JobState] = []
        while not states or states[-1] is not JobState.COMPLETED:
            assert time.monotonic() < deadline, f"the job did not complete: {states}"
            try:
                states.append(batch.status([job_id])[job_id].state)
            except TransientError as exc:  # a poll caught by the dying master fails; the next one reconnects
                states.append(JobState.UNKNOWN)
                assert "SSH connection dropped" in str(exc), exc
            time.sleep(0.3)
        assert (home / "whoami").read_text().strip() == login_host["SSH_USER"]  # ran as the unprivileged account
        assert runner.masters_started == 2 and runner.master_pid not in (None, first)
        # later polls work, and every one of them went over the second connection
        for _ in range(5):
            assert job_id in batch.find()
        assert accepted(login_host) == 2
        # the first master's idle remote command ended with its connection: one is left
        deadline = time.monotonic() + 10
        while remote_idlers(login_host) != 1:
            assert time.monotonic() < deadline, f"{remote_idlers(login_host)} idle master commands on the login host"
            time.sleep(0.2)
    finally:
        runner.close()


def test_a_wrong_host_key_is_refused(login_host: dict[str, str], tmp_path: Path) -> None:
    wrong = tmp_path / "known_hosts"
    # a key that is not the host's: the client key, listed for the host's address
    wrong.write_text(f"{login_host['SSH_ADDR']} {Path(login_host['SSH_KEY'] + '.pub').read_text()}")
    before = accepted(login_host)
    batch = SlurmBatch(
        "behind-ssh",
        "mssh",
        runner=SshRunner(login_host["SSH_DEST"], known_hosts=str(wrong), key=login_host["SSH_KEY"]),
    )
    with pytest.raises(AuthenticationError, match="host key"):
        batch.capacity()
    assert accepted(login_host) == before
