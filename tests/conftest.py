"""Shared by every test folder: `helpers` (jobs, environments and schedule readers for
simulation tests) is importable from tests/."""

import fcntl
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))


def pytest_sessionstart(session: pytest.Session) -> None:
    """Refuse to test a compiled build (ISTHMUS_MYPYC=1, setup.py) older than its sources: the
    extension modules next to the .py files would run instead of the edited code. Reinstall
    (`ISTHMUS_MYPYC=1 pip install --no-build-isolation -e .`, or `pip install -e .` for pure Python)."""
    src = Path(__file__).resolve().parents[1] / "src" / "isthmus"
    stale = [
        so.name
        for so in src.glob("**/*.so")
        if (py := so.with_name(so.name.split(".", 1)[0] + ".py")).exists() and py.stat().st_mtime > so.stat().st_mtime
    ]
    if stale:
        raise pytest.UsageError(f"compiled modules older than their sources (reinstall, setup.py): {', '.join(stale)}")


SLURM_CONF = os.environ.get("ISTHMUS_TEST_SLURM")


@pytest.fixture
def slurm_conf() -> Iterator[str]:
    """The slurm.conf of the test Slurm (scripts/start_slurm.sh), used by one test at a time:
    xdist workers take turns through a lock file beside it, and each test starts with no job left
    from another."""
    if not SLURM_CONF:
        pytest.skip("no test Slurm: run scripts/start_slurm.sh and export ISTHMUS_TEST_SLURM=<its slurm.conf>")
    lock = Path(SLURM_CONF).with_name("tests.lock")
    with lock.open("a") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            env = {**os.environ, "SLURM_CONF": SLURM_CONF}
            subprocess.run(["scancel", "--full", "--user", str(os.getuid())], env=env, check=False)
            deadline = time.time() + 20
            while time.time() < deadline:
                left = subprocess.run(
                    ["squeue", "-h", "-t", "PENDING,RUNNING,COMPLETING,CONFIGURING"],
                    env=env, capture_output=True, text=True, check=False,
                ).stdout.strip()  # fmt: skip
                if not left:
                    break
                time.sleep(0.2)
            yield SLURM_CONF
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


GRID_ENGINE = os.environ.get("ISTHMUS_TEST_SGE")
GRID_ENGINE_LOCK = Path("/tmp/isthmus-gridengine/tests.lock")


@pytest.fixture
def gridengine() -> Iterator[None]:
    """The machine's Grid Engine (scripts/start_gridengine.sh), used by one test at a time across
    xdist workers and test runs (its slots are shared): a lock file beside its state. Tests
    delete their own jobs; nobody else's are touched."""
    if not GRID_ENGINE:
        pytest.skip("no test Grid Engine: run scripts/start_gridengine.sh and export ISTHMUS_TEST_SGE=1")
    GRID_ENGINE_LOCK.parent.mkdir(parents=True, exist_ok=True)
    with GRID_ENGINE_LOCK.open("a") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)
