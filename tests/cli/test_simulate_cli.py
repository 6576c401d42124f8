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


SWF_HEAD = "; Version: 2.2\n; MaxProcs: 64\n"


def _line(job_id, submit, run, alloc, req_procs=-1, status=1):
    fields = [job_id, submit, -1, run, alloc, -1, -1, req_procs, 3600, -1, status, 1, 1, 1, 1, -1, -1, -1]
    return " ".join(str(f) for f in fields)


def _trace(tmp_path):
    lines = [
        _line(1, 0, 100, 4),
        _line(2, 10, 100, 32),  # larger than a 16-processor cluster
        _line(3, 20, -1, -1, req_procs=8, status=5),  # cancelled before it started
        _line(4, 30, 100, 64),  # larger too
        _line(5, 40, 50, 2),
    ]
    path = tmp_path / "t.swf"
    path.write_text(SWF_HEAD + "\n".join(lines) + "\n")
    return path


def test_rejected_jobs_are_counted_with_their_reason(tmp_path):
    trace = _trace(tmp_path)
    out = tmp_path / "out"
    args = ["simulate", "-w", str(trace), "--cluster", "16", "-p", "fcfs", "--no-plots", "--out", str(out)]
    result = invoke(*args)
    assert result.exit_code == 0, result.output
    text = " ".join(result.output.split())
    assert "fcfs: 2 of 4 jobs rejected, never run" in text
    assert "larger than the largest site it may use (cluster, 16 processors)" in text
    report = json.loads((out / "comparison.json").read_text())
    (row,) = report["policies"]
    assert row["jobs_rejected"] == 2
    assert row["rejected"] == {
        "count": 2,
        "reasons": {"larger than the largest site it may use (cluster, 16 processors)": 2},
        "sizes": [32, 64],
    }
    summary = json.loads((out / "fcfs.summary.json").read_text())
    assert summary["rejected"]["count"] == 2
    assert summary["workload_preparation"]["cancelled_before_start"]["treatment"] == "drop"


def test_cancelled_treatment_is_an_option_and_shown(tmp_path):
    trace = _trace(tmp_path)
    base = ["simulate", "-w", str(trace), "--cluster", "64", "-p", "fcfs", "--no-plots", "--json"]
    outputs = {}
    for treatment in ("keep", "drop", "short"):
        result = invoke(*base, "--out", str(tmp_path / treatment), "--cancelled", treatment)
        assert result.exit_code == 0, result.output
        outputs[treatment] = json.loads(result.stdout[result.stdout.index("{") :])
    assert outputs["drop"]["jobs"] == 4
    assert outputs["keep"]["jobs"] == outputs["short"]["jobs"] == 5
    prep = outputs["drop"]["workload_preparation"]
    assert prep["cancelled_before_start"] == {
        "treatment": "drop",
        "meaning": "dropped (never run)",
        "jobs": 1,
        "dropped": 1,
        "run_as_1s": 0,
    }
    assert outputs["short"]["workload_preparation"]["cancelled_before_start"]["run_as_1s"] == 1
    # the default is drop, and the table's footer says so
    result = invoke(
        "simulate", "-w", str(trace), "--cluster", "64", "-p", "fcfs", "--no-plots", "-o", str(tmp_path / "d")
    )
    text = " ".join(result.output.split())
    assert "cancelled before start (status 5): 1 job in the trace, --cancelled drop: dropped (never run)" in text
    assert "4 jobs of" in text
    bad = invoke(*base, "--out", str(tmp_path / "bad"), "--cancelled", "maybe")
    assert bad.exit_code == 2
    assert "--cancelled" in bad.output


def test_max_size_drops_are_reported(tmp_path):
    trace = _trace(tmp_path)
    result = invoke(
        "simulate", "-w", str(trace), "--cluster", "64", "-p", "fcfs", "--max-size", "16", "--no-plots",
        "-o", str(tmp_path / "o"), "--json",
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout[result.stdout.index("{") :])
    assert report["workload_preparation"]["dropped_max_size"] == 2
    assert report["jobs"] == 2


def test_rounds_per_event_reproduces_a_per_event_simulator(tmp_path):
    """The hand-computed FF case of tests/sim/test_round_rules.py, through the CLI: two jobs end
    together at 10; batch starts the 4-processor job then, per-event the 2-processor one."""
    lines = [_line(1, 0, 10, 2), _line(2, 0, 10, 2), _line(3, 1, 10, 4), _line(4, 1, 100, 2)]
    trace = tmp_path / "tie.swf"
    trace.write_text("; Version: 2.2\n; MaxProcs: 4\n" + "\n".join(lines) + "\n")
    starts = {}
    for rule in ("batch", "per-event"):
        out = tmp_path / rule
        args = ["simulate", "-w", str(trace), "--cluster", "4", "-p", "ff", "--no-plots", "--rounds", rule]
        result = invoke(*args, "--out", str(out))
        assert result.exit_code == 0, result.output
        with open(out / "ff.jobs.csv") as f:
            starts[rule] = {int(r["job_id"]): float(r["start"]) for r in csv.DictReader(f)}
    assert starts["batch"] == {1: 0.0, 2: 0.0, 3: 10.0, 4: 20.0}
    assert starts["per-event"] == {1: 0.0, 2: 0.0, 3: 110.0, 4: 10.0}
    bad = invoke("simulate", "-w", str(trace), "--cluster", "4", "--rounds", "sometimes", "--out", str(tmp_path / "x"))
    assert bad.exit_code != 0 and "--rounds: expected batch or per-event" in bad.output


def test_the_run_summary_reports_each_budget_cap(tmp_path):
    env = tmp_path / "env.toml"
    env.write_text(
        'name = "capped"\n[[sites]]\nname = "c"\nnodes = 1\n'
        '[[sites]]\nname = "cloud"\nkind = "cloud"\nmax_vms = 4\nboot_time = 0\nprice_per_hour = 36\n'
        "billing_increment = 60\nidle_release_time = 0\n"
        '[[budgets]]\nname = "user1"\nlimit = 0.6\nusers = ["1"]\non_limit = "finish"\n'
    )
    # four jobs of user 1 and four of user 2 at once, 100 s each (requested 120 s)
    trace = tmp_path / "two-users.swf"
    trace.write_text("".join(f"{i} 0 -1 100 1 -1 -1 1 120 -1 1 {1 + i % 2} 1 1 1 1 -1 -1\n" for i in range(1, 9)))
    result = invoke("simulate", "-e", str(env), "-w", str(trace), "-p", "ff", "--no-plots", "--out", str(tmp_path))
    assert result.exit_code == 0, result.output
    # user 1's cap pays one $0.60 increment: its 100 s job would need two, so the finish cap
    # cannot commit them; the VM is released at its first boundary and the job requeued
    line = next(x for x in result.output.splitlines() if "budget user1" in x)
    assert "users 1 ($0.60, finish): spent $0.6000" in line, line
    report = json.loads((tmp_path / "comparison.json").read_text())
    (cap,) = report["policies"][0]["budgets"]
    assert cap["name"] == "user1" and cap["spent"] <= 0.6 and cap["refused_leases"] + cap["released_vms"] > 0


def test_the_traces_jobs_are_gone_when_the_plots_are_drawn(tmp_path, monkeypatch):
    """After the last run the command lets the trace's job table go (the engine's reference
    cycles held it to the end: 18 MB at 300k jobs, on top of matplotlib): no table and no
    `JobColumns` are alive while the plots are drawn."""
    import gc

    import isthmus.metrics.plots as plots
    from isthmus.metrics.records import JobColumns
    from isthmus.model.jobtable import JobColumnsData, JobTable

    alive: list[str] = []
    draw = plots.plot_all

    def plot_all(runs, out_dir, prefix="", **kw):
        kinds = (JobTable, JobColumnsData, JobColumns)
        alive.extend(type(o).__name__ for o in gc.get_objects() if isinstance(o, kinds))
        return draw(runs, out_dir, prefix, **kw)

    monkeypatch.setattr(plots, "plot_all", plot_all)
    trace = _trace(tmp_path)
    # no automatic collection (as for a large run's old objects, collected rarely): only what the
    # command itself collects is gone
    gc.disable()
    try:
        result = invoke(
            "simulate", "-w", str(trace), "--cluster", "16", "-p", "fcfs", "-p", "easy", "-o", str(tmp_path / "o")
        )
    finally:
        gc.enable()
    assert result.exit_code == 0, result.output
    assert (tmp_path / "o" / "processors.png").exists() and alive == []
