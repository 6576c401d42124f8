"""The mypyc-compiled build (ISTHMUS_MYPYC=1, setup.py; docs/simulation.md "Compiled with mypyc")
builds and gives the pure build's schedules.

The suite runs on the pure install; this test builds the compiled wheel from a copy of the
sources (its own directory: two runs at once do not share a build tree), unpacks it, and runs the
engine's and policies' tests and the event-log fingerprints against it in a child pytest whose
PYTHONPATH puts the compiled package first. Without it, an edit that breaks the compiled build
(a construct mypyc refuses, a type only checked at run time in compiled code) would go unseen.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
#: what the child pytest runs against the compiled package: the per-job path's own tests, the
#: policies on hand-computed schedules, and the event logs of whole runs (fingerprints)
SUBSET = ["tests/engine", "tests/policies", "tests/sim/test_log_fingerprints.py"]


@pytest.mark.slow
def test_the_compiled_build_builds_and_passes_the_engine_and_policy_tests(tmp_path: Path) -> None:
    if shutil.which("gcc") is None and shutil.which("cc") is None:
        pytest.fail("the compiled build needs a C compiler (gcc); scripts/test's machine has one")
    src = tmp_path / "tree"
    src.mkdir()
    shutil.copytree(ROOT / "src", src / "src", ignore=shutil.ignore_patterns("__pycache__", "*.so"))
    for name in ("setup.py", "pyproject.toml", "README.md", "LICENSE"):
        if (ROOT / name).exists():
            shutil.copy2(ROOT / name, src / name)
    wheels = tmp_path / "wheels"
    env = {**os.environ, "ISTHMUS_MYPYC": "1"}
    build = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-build-isolation", "--no-deps", "-q", "-w", str(wheels), str(src)],
        cwd=src,
        env=env,
        check=False,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert build.returncode == 0, build.stdout[-3000:] + build.stderr[-3000:]
    (wheel,) = wheels.glob("isthmus-*.whl")
    site = tmp_path / "site"
    with zipfile.ZipFile(wheel) as zf:
        zf.extractall(site)
    compiled = sorted(p.relative_to(site).as_posix() for p in site.glob("isthmus/**/*.so"))
    assert "isthmus/engine/engine" in " ".join(compiled), compiled

    child_env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_XDIST")}
    child_env.pop("ISTHMUS_MYPYC", None)
    child_env["PYTHONPATH"] = str(site)
    probe = subprocess.run(
        [sys.executable, "-c", "import isthmus.engine.engine as e; print(e.__file__)"],
        env=child_env,
        check=False,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert probe.returncode == 0 and probe.stdout.strip().endswith(".so"), probe.stdout + probe.stderr
    tests = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-x", "-n", "0", "-p", "no:cacheprovider", *SUBSET],
        cwd=ROOT,
        env=child_env,
        check=False,
        capture_output=True,
        text=True,
        timeout=1200,
    )
    assert tests.returncode == 0, tests.stdout[-5000:] + tests.stderr[-2000:]
    assert " passed" in tests.stdout
