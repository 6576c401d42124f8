"""`isthmus simulate --repeat N`'s figures: each policy's mean as a bar with its 95% confidence
interval as an error bar, written beside the per-seed folders in each `--figure-format`."""

from __future__ import annotations

import json
import math
from pathlib import Path

from matplotlib.container import BarContainer, ErrorbarContainer
from matplotlib.figure import Figure
from typer.testing import CliRunner

from isthmus.cli.main import app
from isthmus.metrics.plots import REPEATED_FIGURES, draw_repeated

runner = CliRunner()
_SECONDS = {"s": 1.0, "min": 60.0, "h": 3600.0}


def _bars(fig: Figure) -> tuple[list[str], list[float], list[float]]:
    """(tick labels, bar heights, error-bar half-widths) of a figure of `draw_repeated`."""
    (ax,) = fig.axes
    (bars,) = [c for c in ax.containers if isinstance(c, BarContainer)]
    (errors,) = [c for c in ax.containers if isinstance(c, ErrorbarContainer)]
    (segments,) = errors.lines[2]
    # a bar without an interval has an empty segment
    halves = [(seg[1][1] - seg[0][1]) / 2 if len(seg) else math.nan for seg in segments.get_segments()]
    names = [t.get_text() for t in ax.get_xticklabels()]
    return names, [b.get_height() for b in bars], halves


def test_repeat_writes_error_bar_figures_whose_half_widths_are_the_intervals(tmp_path: Path) -> None:
    out = tmp_path / "rep"
    args = ["simulate", "-w", "lublin:jobs=30", "--cluster", "8", "--jobs", "12", "-p", "ff", "-p", "fcfs"]
    result = runner.invoke(app, [*args, "--repeat", "3", "--figure-format", "png,svg", "-o", str(out), "--json"])
    assert result.exit_code == 0, result.output
    report = json.loads((out / "comparison.json").read_text())
    # one cluster: no cloud, no cost figure
    assert set(report["plots"]) == {"wait", "slowdown", "utilization"}
    for kind in report["plots"]:
        assert (out / f"repeated_{kind}.png").stat().st_size > 0
        assert (out / f"repeated_{kind}.svg").stat().st_size > 0
        assert not (out / f"repeated_{kind}.pdf").exists()
    assert (out / "seed-1" / "wait_cdf.svg").exists()  # each repetition's figures, in the formats asked

    rows = report["policies"]
    figures = draw_repeated(rows, runs=3, workload="lublin:jobs=30")  # no environment: cost drawn too
    assert set(figures) == set(REPEATED_FIGURES)
    for kind, fig in figures.items():
        key = REPEATED_FIGURES[kind][0]
        names, heights, halves = _bars(fig)
        assert names == ["ff", "fcfs"]
        ylabel = fig.axes[0].get_ylabel()
        scale = _SECONDS[ylabel.rsplit("[", 1)[1].rstrip("]")] if kind == "wait" else 1.0
        for row, height, half in zip(rows, heights, halves, strict=True):
            assert row[key]["n"] == 3
            assert math.isclose(height * scale, row[key]["mean"], rel_tol=1e-9, abs_tol=1e-12)
            assert math.isclose(half * scale, row[key]["ci95"], rel_tol=1e-9, abs_tol=1e-12)
        title = fig.texts[0].get_text()
        assert "lublin:jobs=30" in title and "95% confidence interval over 3 runs" in title
        assert fig.axes[0].get_yscale() == "linear" and "[" in ylabel


def test_a_policy_without_an_interval_gets_a_bar_without_an_error_bar() -> None:
    rows = [
        {"policy": "a", "wait_mean": {"mean": 30.0, "ci95": 6.0, "n": 2}},
        {"policy": "b", "wait_mean": {"mean": 20.0, "ci95": None, "n": 1}},
    ]
    fig = draw_repeated(rows, runs=2)["wait"]
    _, heights, halves = _bars(fig)
    assert heights == [30.0, 20.0]
    assert halves[0] == 6.0 and math.isnan(halves[1])
    assert fig.axes[0].get_ylabel() == "mean wait [s]"
