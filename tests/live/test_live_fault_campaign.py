"""A bounded fault-injection campaign in the suite: the manager killed and paused, pilots killed
(alone, and 0-50 ms before or after the manager), the database refusing writes and output
spools removed while a workload runs; then every job is checked, its body executions counted
from its ledger (see faultkit). scripts/fault_campaign.py runs the
same campaign longer."""

from __future__ import annotations

from pathlib import Path

import pytest
from faultkit import FAULTS, run_campaign


@pytest.mark.slow
@pytest.mark.parametrize("db_url", ["sqlite", "postgres"], indirect=True)
def test_fault_campaign_loses_nothing(tmp_path: Path, db_url: str, tag: str) -> None:
    report = run_campaign(tmp_path, db_url, tag, jobs=120, cycles=10, seed=11, log=print)
    print(report.summary())
    assert not report.problems, "\n".join(report.problems[:20])
    assert report.cycles == 10 and report.jobs >= 120
    assert set(report.faults) == set(FAULTS), report.faults  # the seed draws every kind of fault
    assert report.double_executions == 0 and report.body_executions == report.jobs
