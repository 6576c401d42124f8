"""The KOALA-C experiments run end to end on a small trace and write their CSV, figures and summary."""

from __future__ import annotations

import csv
import json
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from typer.testing import CliRunner

from isthmus.cli.main import app
from isthmus.experiments import koala_c
from isthmus.experiments.runner import Point, evaluate, policy, run_points
from isthmus.workloads import resolve_workload
from isthmus.workloads.conversion import IdMapper, record_from_job
from isthmus.workloads.swf import write_swf


@pytest.fixture(scope="module")
def small_trace(tmp_path_factory) -> str:
    """A 300-job Lublin-Feitelson trace written as SWF, named like no paper trace."""
    path = tmp_path_factory.mktemp("trace") / "small.swf"
    ids = IdMapper()
    write_swf(path, [record_from_job(j, ids) for j in resolve_workload("lublin:jobs=300", seed=3).jobs])
    return str(path)


def test_runner_gives_rows_in_point_order_with_any_executor(small_trace):
    points = [
        Point(small_trace, "koala-c-multicluster:k=1", policy(p), policy("none"), labels=(("policy", p),))
        for p in ("ff", "sjf", "fcfs")
    ]
    local = run_points(points, workers=1)
    with ThreadPoolExecutor(2) as pool:
        pooled = run_points(points, executor=pool)
    assert [r["policy"] for r in local] == ["ff", "sjf", "fcfs"]
    assert local == [dict(p, simulation_seconds=q["simulation_seconds"]) for p, q in zip(pooled, local, strict=True)]
    assert all(r["jobs_completed"] + r["jobs_unfinished"] > 0 for r in local)


def test_short_long_split_uses_the_limit(small_trace):
    row = evaluate(
        Point(
            small_trace,
            "koala-c-multicluster:k=1",
            policy("tags-chain", limits=(600.0,)),
            policy("none"),
            short_threshold=600.0,
        )
    )
    jobs = resolve_workload(small_trace).jobs
    short = sum(j.runtime <= 600 for j in jobs) / len(jobs)
    assert row["short_fraction"] == pytest.approx(short)
    assert row["restarts"] == sum(j.runtime > 600 for j in jobs)  # every long job killed once


def test_limits_experiment_writes_table_iii(small_trace, tmp_path):
    res = koala_c.koala_c_limits(
        [small_trace],
        tmp_path,
        chains=(1, 2),
        limits_min=(5, 10, 20),
        dispatch=("rr", "rnd"),
        table_chains=2,
        workers=1,
    )
    assert len(res.rows) == 2 * 2 * 3
    assert (tmp_path / "koala-c-limits.csv").exists()
    assert (tmp_path / "fig3-small.png").stat().st_size > 1000
    md = (tmp_path / "summary.md").read_text()
    assert "Table III" in md and "| small |" in md
    with open(tmp_path / "koala-c-limits.csv") as f:
        rows = list(csv.DictReader(f))
    best = min(
        (r for r in rows if r["dispatch"] == "rr" and r["chains"] == "2"), key=lambda r: float(r["slowdown_mean"])
    )
    assert f"| small | {best['limit_min']} |" in md


def test_multicloud_experiment_checks_the_papers_claims(small_trace, tmp_path):
    res = koala_c.koala_c_multicloud([small_trace], tmp_path, workers=1)
    assert sorted(r["policy"] for r in res.rows) == sorted([*koala_c.BASELINES, "tags-sets"])
    md = res.markdown
    assert "RR worst" in md and "Total cost" in md
    assert (tmp_path / "fig6.png").exists()


def test_experiment_cli(small_trace, tmp_path):
    runner = CliRunner()
    out = tmp_path / "sets"
    result = runner.invoke(
        app, ["experiment", "koala-c-sets", "-t", small_trace, "-o", str(out), "-j", "1", "--limits", "10,20"]
    )
    assert result.exit_code == 0, result.output
    assert (out / "summary.md").exists() and (out / "fig4.png").exists()
    again = runner.invoke(app, ["experiment", "koala-c-sets", "-t", small_trace, "-o", str(out), "--limits", "10"])
    assert again.exit_code == 2 and "--resume" in again.output and "--force" in again.output
    as_json = runner.invoke(
        app,
        [
            "experiment",
            "koala-c-sets",
            "-t",
            small_trace,
            "-o",
            str(out),
            "-j",
            "1",
            "--limits",
            "10",
            "--json",
            "--force",
        ],
    )
    assert as_json.exit_code == 0, as_json.output
    report = json.loads(as_json.stdout[as_json.stdout.index("{") :])
    assert [r["limit_min"] for r in report["rows"]] == [10] and report["files"]["summary"].endswith("summary.md")
    bad = runner.invoke(app, ["experiment", "koala-c-nope", "-t", small_trace])
    assert bad.exit_code == 2 and "valid: koala-c-limits" in bad.output
    bad = runner.invoke(app, ["experiment", "koala-c-sets", "-t", small_trace, "--chains", "1-3"])
    assert bad.exit_code == 2 and "does not apply" in bad.output
    missing = runner.invoke(app, ["experiment", "koala-c-sets", "-t", str(Path(tmp_path) / "nope.swf")])
    assert missing.exit_code == 2 and "not found" in missing.output
