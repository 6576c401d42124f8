"""The KOALA-CS experiments (`koala-cs-launcher`, `koala-cs-unobtrusive`, `koala-cs-fairness`):
hand-computed rows, runs through the CLI that write every file, the grid load they build, and
the verdicts of their summaries computed from the rows (never written in)."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest
from typer.testing import CliRunner

from isthmus.cli.main import app
from isthmus.experiments import koala_cs
from isthmus.experiments.runner import Point, policy


def test_launcher_rows_are_the_hand_computed_makespans(tmp_path: Path) -> None:
    # 1,000 tasks of 30 s on 68 processors: 15 waves (68 x 14 = 952, then 48). A pull latency
    # of 1 s makes each wave 31 s: 465 s. Direct submission with rounds every 20 s: a wave ends
    # at 30, 70, ... and the next starts at the following round (40, 80, ...): 14 x 40 + 30 = 590.
    result = koala_cs.koala_cs_launcher([], tmp_path, workers=1, latencies=(0.0, 1.0), periods=(0.0, 20.0))
    got = {(r["method"], r.get("pull_latency", r.get("period"))): r["makespan"] for r in result.rows}
    assert got == {("launcher", 0.0): 450.0, ("launcher", 1.0): 465.0, ("direct", 0.0): 450.0, ("direct", 20.0): 590.0}
    assert (tmp_path / "table41_makespan.png").exists()
    summary = (tmp_path / "summary.md").read_text()
    assert "pull latency 1 s: 103.3%" in summary and "**holds**" in summary


def test_a_probe_waits_exactly_the_preemption_time_under_a_cs_load() -> None:
    # Delft's 68 processors all held by a bag; 4 chunks of 10 arrive: the bag gives back 40,
    # free after the 10 s preemption time; without the bag the chunks start at once
    row = koala_cs.evaluate_unobtrusive(
        Point(
            trace="",
            env="local",
            allocation=policy("sep"),
            labels=(("scope", "local"), ("job", "4x10")),
            extra=(
                ("kind", "probe"),
                ("scope", "local"),
                ("chunks", 4),
                ("size", 10),
                ("preemption", 10.0),
                ("allocation", "ff"),
            ),
        )
    )
    assert row["cs_fill"] == 1.0
    assert (row["makespan_without_cs"], row["makespan_with_cs"], row["difference"]) == (60.0, 70.0, 10.0)
    assert row["chunk_starts_with_cs"] == [10.0] * 4


def test_grid_load_block_and_spike_follow_the_thesis_periods() -> None:
    block = koala_cs.grid_jobs("block", 0, 1800.0)
    spike = koala_cs.grid_jobs("spike", 0, 1800.0)
    assert koala_cs.grid_jobs("free", 0, 1800.0) == []
    # three 20-minute periods, one 100-node job (four 25-node components) for 10 minutes in each
    assert len(block) == 12 and {j.size for j in block} == {25} and {j.runtime for j in block} == {600.0}
    for p in range(3):
        t = {j.submit for j in block[4 * p : 4 * p + 4]}
        assert len(t) == 1 and 1800.0 + 1200.0 * p <= t.pop() <= 1800.0 + 1200.0 * (p + 1) - 600.0
    # six 10-minute periods, one minute each
    assert len(spike) == 24 and {j.runtime for j in spike} == {60.0}
    jobs = koala_cs.Background(load=0.5).jobs(3, 20000.0, 272)
    offered = sum(j.size * j.runtime for j in jobs) / (20000.0 * 272)
    assert 0.4 < offered < 0.6 and koala_cs.Background(load=0.5).jobs(3, 20000.0, 272) == jobs


def _fair_row(label: str, workload: str, thr: tuple[float, float, float]) -> dict[str, object]:
    row: dict[str, object] = {"policy": label, "workload": workload, "seed": 0}
    for k, t in enumerate(thr):
        row[f"throughput_{k + 1}"] = t
    row["spread"] = (max(thr) - min(thr)) / min(thr)
    row["ratio"] = max(thr) / min(thr)
    return row


def test_fairness_checks_follow_the_rows() -> None:
    thesis = [
        _fair_row("sep", "spike", koala_cs.SEED_TABLE_44["spike"]),
        _fair_row("gep", "free", koala_cs.SEED_TABLE_45["free"]),
    ]
    lines = koala_cs.fairness_checks(thesis)
    assert "**holds**: the largest spread over 1 runs is 18.6%" in lines[0]
    assert "**holds** with rebalancing: the largest max/min throughput ratio over 1 runs is 3.33x" in lines[1]
    assert "**holds**: GEP's smallest spread 232.6%, SEP's largest 18.6%" in lines[2]
    equal = [_fair_row("sep", "free", (0.1, 0.1, 0.13)), _fair_row("gep", "free", (0.1, 0.1, 0.11))]
    lines = koala_cs.fairness_checks(equal)
    assert "**does not hold**: the largest spread over 1 runs is 30.0%" in lines[0]
    assert "**does not hold**" in lines[1] and "**does not hold**" in lines[2]


def test_the_koala_cs_experiments_run_through_the_cli(tmp_path: Path) -> None:
    out = tmp_path / "fair"
    res = CliRunner().invoke(app, ["experiment", "koala-cs-fairness", "--seeds", "1", "-j", "1", "-o", str(out)])
    assert res.exit_code == 0, res.output
    for name in ("koala-cs-fairness.csv", "series.csv", "summary.md", "fig42_load.png", "throughput.png"):
        assert (out / name).exists(), name
    rows = list(csv.DictReader((out / "koala-cs-fairness.csv").open()))
    assert len(rows) == len(koala_cs.FAIR_POLICIES) * len(koala_cs.WORKLOADS)
    for r in rows:
        thr = [float(r[f"throughput_{k}"]) for k in (1, 2, 3)]
        assert all(t > 0 for t in thr)
        assert float(r["spread"]) == pytest.approx((max(thr) - min(thr)) / min(thr))
    sep = max(float(r["spread"]) for r in rows if r["policy"] == "sep")
    summary = (out / "summary.md").read_text()
    assert f"the largest spread over 3 runs is {sep:.1%}" in summary
    series = list(csv.DictReader((out / "series.csv").open()))
    assert all(float(s["local"]) + float(s["grid"]) + float(s["bags"]) <= 1.0 + 1e-9 for s in series)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["koala-cs-launcher", "--seeds", "2"], "--seeds does not apply to koala-cs-launcher"),
        (["koala-cs-fairness", "--trace", "x.swf"], "takes no --trace"),
        (["koala-cs-unobtrusive", "--seeds", "0"], "--seeds must be at least 1"),
    ],
)
def test_the_koala_cs_experiments_refuse_options_that_do_not_apply(
    tmp_path: Path, args: list[str], message: str
) -> None:
    result = CliRunner().invoke(app, ["experiment", *args, "-o", str(tmp_path / "out")])
    assert result.exit_code == 2, result.output
    assert message in result.output
