"""`isthmus budget`'s table: leases a cap refused and VMs it released are separate columns."""

from __future__ import annotations

from typing import Any

import pytest
from typer.testing import CliRunner

from isthmus.cli import live_entry
from isthmus.cli.live import budgets

ROW = {
    "name": "daily",
    "sites": ["ec2"],
    "users": [],
    "current": "2026-12-07",
    "on_limit": "requeue",
    "limit": 2.0,
    "spent": 1.5,
    "committed": 0.0,
    "left": 0.5,
    "refused_leases": 3,
    "released_vms": 1,
}


def test_refused_leases_and_released_vms_are_not_added_up(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(budgets, "api_call", lambda url, token, request: [ROW])
    result = CliRunner().invoke(live_entry.app, ["budget"])
    assert result.exit_code == 0, result.output
    header, line = result.output.splitlines()[:2]
    cells: dict[str, Any] = dict(zip(header.split(), line.split(), strict=True))
    assert (cells["REFUSED"], cells["RELEASED"]) == ("3", "1")
