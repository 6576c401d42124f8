"""What environment sbatch gives a job: the documented defaults, then the request's (and Slurm's
SLURM_* variables), never sbatch's own, which is the manager's with its secrets."""

from __future__ import annotations

import pytest

from isthmus.agent.jobenv import default_environment
from isthmus.backends.api import RunRequest
from isthmus.backends.slurm import SlurmBatch


def _export(env: dict[str, str]) -> dict[str, str]:
    args = SlurmBatch("s", "m").sbatch_args(RunRequest(key="j1r1", command=("true",), size=1, env=env))
    (export,) = [a for a in args if a.startswith("--export")]
    value = export.removeprefix("--export=")
    assert not value.startswith(("ALL", "NONE")), value
    return dict(item.split("=", 1) for item in value.split(","))


@pytest.fixture(autouse=True)
def _manager_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", "/usr/local/bin:/usr/bin:/bin")
    monkeypatch.setenv("ISTHMUS_PEER_SECRET_AB", "s3cret")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "k3y")


def test_the_job_gets_the_defaults_and_the_requested_environment_over_them() -> None:
    got = _export({"PATH": "/opt/bin", "ISTHMUS_JOB_ID": "1"})
    assert got == {**default_environment(), "PATH": "/opt/bin", "ISTHMUS_JOB_ID": "1"}


def test_an_empty_request_exports_the_defaults_only_never_the_managers_secrets() -> None:
    # never NONE: a job's steps (srun) would start without PATH
    got = _export({})
    assert got == default_environment() and got["PATH"] == "/usr/local/bin:/usr/bin:/bin"
    assert "s3cret" not in got.values() and "k3y" not in got.values()
