"""What environment sbatch gives a job: exactly the request's (and Slurm's SLURM_* variables),
never sbatch's own, which is the manager's with its secrets."""

from __future__ import annotations

from isthmus.backends.api import RunRequest
from isthmus.backends.slurm import SlurmBatch


def _export(env: dict[str, str]) -> list[str]:
    args = SlurmBatch("s", "m").sbatch_args(RunRequest(key="j1r1", command=("true",), size=1, env=env))
    return [a for a in args if a.startswith("--export")]


def test_the_job_gets_exactly_the_requested_environment() -> None:
    assert _export({"PATH": "/usr/bin", "ISTHMUS_JOB_ID": "1"}) == ["--export=ISTHMUS_JOB_ID=1,PATH=/usr/bin"]


def test_an_empty_environment_exports_nothing_rather_than_everything() -> None:
    assert _export({}) == ["--export=NONE"]
