"""Fixtures for the workload tests (helpers live in workloads_helpers.py)."""

from __future__ import annotations

from pathlib import Path

import pytest
from workloads_helpers import require_traces

from isthmus.workloads import Workload, load_workload


@pytest.fixture(scope="session")
def traces_dir() -> Path:
    """The folder of real SWF traces (skips when absent)."""
    return require_traces()


@pytest.fixture(scope="session")
def loaded_traces(traces_dir: Path) -> dict[str, Workload]:
    """Every real trace loaded once per test session (per xdist worker), by file name."""
    return {path.name: load_workload(path) for path in sorted(traces_dir.glob("*.swf.gz"))}
