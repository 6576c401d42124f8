"""`isthmus simulate` end to end through the CLI."""

from __future__ import annotations

import csv
import json

from typer.testing import CliRunner

from isthmus.cli.main import app

runner = CliRunner()


def invoke(*args: str):
    return runner.invoke(app, list(args))


def test_default_run_compares_the_four_koala_c_policies(tmp_path):
    out = tmp_path / "out"
    result = invoke("simulate", "--jobs", "300", "--out", str(out))
    assert result.exit_code == 0, result.output
    for policy in ("ff", "rr", "sjf", "hsdf"):
        assert f"│ {policy}" in result.output
        with open(out / f"{policy}.jobs.csv") as f:
            reader = csv.DictReader(f)
            assert reader.fieldnames[:5] == ["job_id", "submit", "start", "end", "site"]
            rows = list(reader)
        assert len(rows) == 300
        assert all(float(r["start"]) >= float(r["submit"]) for r in rows if r["start"])
        summary = json.loads((out / f"{policy}.summary.json").read_text())
        assert summary["jobs_total"] == 300
        assert (out / f"{policy}.jobs.parquet").exists()
    for plot in ("wait_cdf", "slowdown", "utilization", "processors", "cost"):
        assert any(p.name.startswith(plot) and p.suffix == ".png" for p in out.iterdir()), plot
    report = json.loads((out / "comparison.json").read_text())
    assert report["environment"] == "koala-c-multicloud"
    assert report["workload_spec"].startswith("lublin:procs=96")


def test_cluster_shorthand_with_json(tmp_path):
    result = invoke("simulate", "--cluster", "32", "-n", "200", "--no-plots", "--out", str(tmp_path), "--json")
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout[result.stdout.index("{") :])
    assert [p["policy"] for p in report["policies"]] == ["fcfs", "easy"]
    easy, fcfs = report["policies"][1], report["policies"][0]
    assert easy["wait_mean"] <= fcfs["wait_mean"]  # backfilling never hurts the mean here


def test_policy_with_parameters_and_budget(tmp_path):
    result = invoke(
        "simulate",
        "-e",
        "koala-c-multicloud",
        "-p",
        "tags-sets:limits=1200",
        "-n",
        "200",
        "--no-plots",
        "--budget",
        "1.5",
        "--out",
        str(tmp_path),
        "--json",
    )
    assert result.exit_code == 0, result.output
    row = json.loads(result.stdout[result.stdout.index("{") :])["policies"][0]
    assert row["policy"] == "tags-sets[limits=1200]"
    assert row["cost_charged"] <= 1.5


def test_errors_are_one_clear_line(tmp_path):
    bad_policy = invoke("simulate", "-p", "fifo", "--out", str(tmp_path))
    assert bad_policy.exit_code == 2
    assert "unknown allocation policy 'fifo'" in bad_policy.output and "easy" in bad_policy.output
    bad_param = invoke("simulate", "-p", "tags-sets:limit=5", "--out", str(tmp_path))
    assert bad_param.exit_code == 2 and "limit" in bad_param.output
    bad_env = invoke("simulate", "-e", "nowhere", "--out", str(tmp_path))
    assert bad_env.exit_code == 2 and "koala-c-multicloud" in bad_env.output
    both = invoke("simulate", "-e", "local", "--cluster", "4")
    assert both.exit_code == 2
    trace = tmp_path / "bad.swf"
    trace.write_text("1 0 -1 10 1 -1 -1 1 60 -1 1 1 1 1 1 1 -1 -1\n2 5 -1 ten 1 -1 -1 1 60 -1 1 1 1 1 1 1 -1 -1\n")
    bad_trace = invoke("simulate", "--cluster", "4", "-w", str(trace), "--out", str(tmp_path))
    assert bad_trace.exit_code == 2
    assert "bad.swf:2" in bad_trace.output and "run time" in bad_trace.output
    assert "Traceback" not in bad_trace.output
    skipped = invoke(
        "simulate", "--cluster", "4", "-w", str(trace), "--skip-invalid", "--no-plots", "--out", str(tmp_path)
    )
    assert skipped.exit_code == 0, skipped.output
