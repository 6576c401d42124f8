"""`isthmus simulate --figure-format`: each figure in each format asked, an unknown format refused
before anything is simulated."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from isthmus.cli.main import app

runner = CliRunner()


def test_the_figures_are_written_in_the_formats_asked_and_an_unknown_one_is_refused(tmp_path: Path) -> None:
    out = tmp_path / "out"
    args = ["simulate", "--cluster", "8", "-w", "lublin:jobs=5", "-p", "fcfs", "-o", str(out)]
    bad = runner.invoke(app, [*args, "--figure-format", "png,jpeg"])
    assert bad.exit_code == 2 and "'jpeg'" in bad.output and not out.exists()
    result = runner.invoke(app, [*args, "--figure-format", "svg,png", "--json"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout[result.stdout.index("{") :])
    # one cluster: no cloud leases, no cost figure
    assert set(report["plots"]) == {"wait_cdf", "slowdown", "utilization", "processors"}
    assert not list(out.glob("cost.*"))
    for kind, path in report["plots"].items():
        assert path.endswith(f"{kind}.svg")  # the first format asked
        assert (out / f"{kind}.png").exists() and not (out / f"{kind}.pdf").exists()
