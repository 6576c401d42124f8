"""Every policy's schedule is held to recorded event-log fingerprints.

The fingerprints (tests/data/log_fingerprints.json) are made by tests/sim/log_fingerprints.py.
A changed fingerprint means a changed schedule; re-record only for an intended, documented
change of a policy.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from log_fingerprints import cases, run_case

RECORDED = json.loads((Path(__file__).parents[1] / "data" / "log_fingerprints.json").read_text())


@pytest.mark.traces
@pytest.mark.parametrize(("case", "path", "env", "alloc", "params"), cases(), ids=[c[0] for c in cases()])
def test_event_log_is_unchanged(case, path, env, alloc, params):
    if not Path(path).exists():
        pytest.skip(f"{path} not found (../shared is beside the project in CI)")
    assert run_case(path, env, alloc, params) == RECORDED[case]
