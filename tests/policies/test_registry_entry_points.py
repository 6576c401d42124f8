"""Policies of other packages join through the `isthmus.policies` entry points: the worked example of
docs/environments.md is built, installed into a temporary folder and run by `isthmus simulate`."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from isthmus.policies import registry

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "environments.md"
SECTION = "### Adding a policy from your own package"


def _example() -> tuple[str, str]:
    """The pyproject.toml and module of the docs' worked example."""
    text = DOC.read_text(encoding="utf-8")
    assert SECTION in text, f"{DOC.name} lost its section {SECTION!r}"
    section = text.split(SECTION, 1)[1].split("\n## ", 1)[0]
    toml = re.search(r"```toml\n(.*?)```", section, flags=re.S)
    module = re.search(r"```python\n(.*?)```", section, flags=re.S)
    assert toml and module, "the example's pyproject.toml and module"
    # the example depends on isthmus; installed here without dependencies, from the sources under test
    return toml.group(1), module.group(1)


def _install(tmp_path: Path, pyproject: str, module: str) -> Path:
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "pyproject.toml").write_text(pyproject)
    (pkg / "isthmus_lifo.py").write_text(module)
    target = tmp_path / "site"
    cmd = [sys.executable, "-m", "pip", "install", "--no-deps", "--no-build-isolation", "--no-index", "--quiet"]
    proc = subprocess.run(
        [*cmd, "--target", str(target), str(pkg)],
        capture_output=True,
        text=True,
        check=False,
        timeout=300,
        env={**os.environ, "PIP_DISABLE_PIP_VERSION_CHECK": "1"},
    )
    assert proc.returncode == 0, proc.stderr
    assert list(target.glob("isthmus_lifo-*.dist-info/entry_points.txt"))
    return target


def _isthmus(args: list[str], site: Path) -> subprocess.CompletedProcess[str]:
    path = os.pathsep.join([str(site), str(ROOT / "src"), os.environ.get("PYTHONPATH", "")])
    return subprocess.run(
        [sys.executable, "-c", "from isthmus.cli import run; run()", *args],
        capture_output=True,
        text=True,
        check=False,
        timeout=600,
        env={**os.environ, "PYTHONPATH": path, "COLUMNS": "200"},
    )


def test_a_policy_from_another_package_runs_in_isthmus_simulate(tmp_path: Path) -> None:
    site = _install(tmp_path, *_example())
    out = tmp_path / "out"
    jobs = 60
    args = ["simulate", "--cluster", "8", "-w", f"lublin:jobs={jobs}", "-p", "lifo", "-p", "fcfs", "-o", str(out)]
    run = _isthmus([*args, "--no-plots", "--json"], site)
    assert run.returncode == 0, run.stderr + run.stdout
    rows = {r["policy"]: r for r in json.loads(run.stdout)["policies"]}
    assert set(rows) == {"lifo", "fcfs"}
    lifo, fcfs = rows["lifo"], rows["fcfs"]
    # every job that fits the cluster completed under it (the others are larger than 8 processors)
    assert lifo["jobs_total"] == jobs and lifo["jobs_unfinished"] == 0
    assert lifo["jobs_completed"] == jobs - lifo["jobs_rejected"] == fcfs["jobs_completed"] > jobs // 2
    # its own schedule: not FCFS's on the same workload
    records = (out / "lifo.jobs.csv").read_text()
    assert len(records.splitlines()) == jobs + 1
    assert records != (out / "fcfs.jobs.csv").read_text()

    listed = _isthmus(["policies", "--family", "allocation", "--json"], site)
    assert listed.returncode == 0, listed.stderr
    lifo = [r for r in json.loads(listed.stdout) if r["name"] == "lifo"]
    assert lifo and lifo[0]["source"] == "isthmus-lifo" and lifo[0]["seed"]
    assert all(r["source"] == registry.BUILTIN for r in json.loads(listed.stdout) if r["name"] != "lifo")
    table = _isthmus(["policies", "--family", "allocation"], site)
    assert "lifo" in table.stdout and "(from isthmus-lifo)" in table.stdout


def test_without_the_package_the_policy_is_unknown(tmp_path: Path) -> None:
    run = _isthmus(["simulate", "--cluster", "8", "-w", "lublin:jobs=5", "-p", "lifo", "-o", str(tmp_path)], tmp_path)
    assert run.returncode == 2 and "unknown allocation policy 'lifo'" in run.stderr + run.stdout


# --------------------------------------------------------------------- the registry's reading


class _EntryPoint(SimpleNamespace):
    pass


@pytest.fixture
def entry_points(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[_EntryPoint]]:
    """Entry points the registry reads afresh (restored afterwards)."""
    import importlib.metadata

    found: list[_EntryPoint] = []
    real = importlib.metadata.entry_points

    def fake(group: str) -> Any:
        return found if group == registry.ENTRY_POINT_GROUP else real(group=group)

    monkeypatch.setattr("importlib.metadata.entry_points", fake)
    monkeypatch.setattr(registry, "_entry_points_read", False)
    monkeypatch.setattr(registry, "_REFUSED", {})
    monkeypatch.setattr(registry, "_SOURCES", {})
    saved = {f: dict(t) for f, t in registry._TABLE.items()}
    yield found
    for f, t in saved.items():
        registry._TABLE[f] = t


def _ep(name: str, value: str, dist: str = "other") -> _EntryPoint:
    return _EntryPoint(name=name, value=value, dist=SimpleNamespace(name=dist))


def test_an_entry_point_adds_a_policy_and_a_taken_name_is_refused(entry_points: list[_EntryPoint]) -> None:
    entry_points += [
        _ep("allocation.ff2", "isthmus.policies.allocation.first_fit:FirstFit", "pkg-a"),
        _ep("allocation.ff", "isthmus.policies.allocation.fcfs:StrictFcfs", "pkg-b"),  # isthmus's own name
        _ep("scheduling.x", "m:C", "pkg-c"),  # no such family
        _ep("allocation.Bad Name", "m:C", "pkg-d"),
    ]
    with pytest.warns(UserWarning) as caught:
        names = registry.names("allocation")
    warned = " ".join(str(w.message) for w in caught)
    assert "pkg-b" in warned and "already registered" in warned and "unknown policy family" in warned
    assert "ff2" in names and "Bad Name" not in names
    assert registry._TABLE["allocation"]["ff"] == "isthmus.policies.allocation.first_fit:FirstFit"  # kept
    # ff2's class is named "ff": an outside policy must carry its registered name
    with pytest.raises(registry.PolicyError, match="named 'ff'"):
        registry.info("allocation", "ff2")
    assert registry.info("allocation", "ff").source == registry.BUILTIN
    with pytest.raises(registry.PolicyError, match="unknown policy family"):
        registry.names("scheduling")


def test_a_refused_name_says_why_when_asked_for(entry_points: list[_EntryPoint]) -> None:
    entry_points.append(_ep("allocation.lifo", "not-a-target", "pkg-e"))
    with pytest.warns(UserWarning, match="not module:Class"):
        registry.names("allocation")
    with pytest.raises(registry.PolicyError, match=r"unknown allocation policy 'lifo' \(the entry point of pkg-e"):
        registry.info("allocation", "lifo")


def test_an_entry_point_policy_carries_its_source(entry_points: list[_EntryPoint]) -> None:
    entry_points.append(_ep("allocation.ff-copy", "tests_ff_copy:FfCopy", "pkg-f"))
    sys.modules["tests_ff_copy"] = module = type(sys)("tests_ff_copy")
    from isthmus.policies.allocation.first_fit import FirstFit

    module.FfCopy = type("FfCopy", (FirstFit,), {"name": "ff-copy", "__doc__": "A copy of FF."})  # type: ignore[attr-defined]
    try:
        got = registry.info("allocation", "ff-copy")
        assert (got.source, got.summary, got.cls.name) == ("pkg-f", "A copy of FF.", "ff-copy")
        assert "ff-copy" in registry.with_capability("allocation", "uses_size_index")
    finally:
        del sys.modules["tests_ff_copy"]


def test_a_policy_that_cannot_be_loaded_is_an_error_naming_it(entry_points: list[_EntryPoint]) -> None:
    from typer.testing import CliRunner

    from isthmus.cli.main import app

    entry_points.append(_ep("allocation.gone", "no_such_module_here:Gone", "pkg-g"))
    with pytest.raises(registry.PolicyError, match="allocation policy 'gone': cannot load no_such_module_here:Gone"):
        registry.info("allocation", "gone")
    listed = CliRunner().invoke(app, ["policies", "--family", "allocation"])
    assert listed.exit_code == 2 and "cannot load no_such_module_here:Gone" in listed.output
