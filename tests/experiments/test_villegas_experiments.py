"""The dissertation's experiments (Villegas ch. 6 and 7) run end to end on small settings and
write their CSV, figures and a summary with the seed's findings; confidence intervals are right."""

from __future__ import annotations

import csv
import math
from pathlib import Path

import pytest
from scipy import stats
from typer.testing import CliRunner

from isthmus.cli.main import app
from isthmus.experiments import villegas
from isthmus.experiments.runner import Point, evaluate, policy
from isthmus.metrics.stats import mean_ci95, t975

CTC = Path(__file__).resolve().parents[3] / "shared" / "traces" / "CTC-SP2-1996-3.1-cln.swf.gz"


@pytest.mark.parametrize("values", [[1.0, 2.0], [3.0, 5.0, 4.0, 10.0], list(map(float, range(40)))])
def test_confidence_interval_matches_student_t(values):
    mean, half = mean_ci95(values)
    n = len(values)
    sem = stats.sem(values)
    assert mean == pytest.approx(sum(values) / n)
    expected = stats.t.ppf(0.975, n - 1) * sem if n <= 31 else 1.96 * sem
    assert half == pytest.approx(expected, rel=1e-3)


def test_confidence_interval_edges():
    assert mean_ci95([]) == (None, None)
    assert mean_ci95([None, 4.0]) == (4.0, None)
    with pytest.raises(ValueError, match="degrees of freedom"):
        t975(0)


def test_aggregate_groups_rows_and_keeps_first_seen_order():
    rows = [
        {"a": "x", "seed": 0, "m": 1.0},
        {"a": "y", "seed": 0, "m": 10.0},
        {"a": "x", "seed": 1, "m": 3.0},
        {"a": "y", "seed": 1, "m": None},
    ]
    agg = villegas.aggregate(rows, ("a",), ("m",))
    assert [(r["a"], r["n"], r["m"]) for r in agg] == [("x", 2, 2.0), ("y", 2, 10.0)]
    assert agg[0]["m_ci"] == pytest.approx(12.706 * 1.0)  # sd sqrt(2), sem 1, t(1) = 12.706
    assert agg[1]["m_ci"] is None


def test_provisioning_experiment_writes_figures_and_checks_the_findings(tmp_path):
    r = villegas.villegas_provisioning(
        [],
        tmp_path,
        seeds=(0, 1),
        testbeds=("fiu",),
        workloads=("bursty",),
        provisioning=("startup", "od-s", "od-g", "od-2q"),
        workers=1,
    )
    assert len(r.rows) == 8
    # every policy saw the same two workloads
    by_seed = {}
    for row in r.rows:
        by_seed.setdefault(row["seed"], set()).add(row["jobs_completed"] + row["jobs_unfinished"])
    assert all(len(v) == 1 for v in by_seed.values())
    for key in ("fig6_2_speedup", "fig6_3_slowdown", "fig6_4_cost", "csv", "means", "summary"):
        assert r.files[key].exists() and r.files[key].stat().st_size > 0
    means = list(csv.DictReader(r.files["means"].open()))
    assert [(m["provisioning"], m["n"]) for m in means] == [
        ("startup", "2"),
        ("od-s", "2"),
        ("od-g", "2"),
        ("od-2q", "2"),
    ]
    startup = [row for row in r.rows if row["provisioning"] == "startup"]
    # Startup leases all 7 FIU VMs at 0 and keeps them: 7 VM-hours per started hour
    assert all(row["vm_leases"] == 7 for row in startup)
    assert all(math.isclose(row["cost_charged"] % (7 * 0.065), 0, abs_tol=1e-9) for row in startup)
    text = r.files["summary"].read_text()
    assert "Finding 2, OD-G is worse than single-VM on-demand" in text
    assert "Finding 4" in text and "Startup always achieves the best performance" in text
    assert "| fiu | bursty | OD-2Q |" in text


def test_od_2q_runs_on_the_pooled_testbed_with_fcfs_2q(tmp_path):
    r = villegas.villegas_provisioning(
        [], tmp_path, seeds=(0,), testbeds=("ec2",), workloads=("uniform",), provisioning=("od-2q",), workers=1
    )
    (row,) = r.rows
    assert row["allocation"] == "fcfs-2q" and row["jobs_completed"] > 0


def test_fcfs_nw_shares_vms_in_the_allocation_experiment(tmp_path):
    r = villegas.villegas_allocation([], tmp_path, seeds=(0,), testbeds=("fiu",), workloads=("uniform",), workers=1)
    rows = {row["allocation"]: row for row in r.rows}
    assert set(rows) == {"fcfs", "sjf-ideal", "fcfs-nw"}
    # nobody waits under FCFS-NW once the VMs are up; FCFS makes jobs queue on 7 VMs at 70% load
    assert rows["fcfs-nw"]["wait_mean"] < rows["fcfs"]["wait_mean"]
    assert "FCFS-NW has the highest JSD in" in r.files["summary"].read_text()


def test_short_long_records_per_class_slowdowns(tmp_path):
    r = villegas.villegas_short_long([], tmp_path, seeds=(0,), boot_times=(20.0,), mixes=("sr75",), workers=1)
    assert {row["pair"] for row in r.rows} == {"OD-S+FCFS", "OD-S+SJF", "OD-2Q+FCFS-2Q"}
    assert all(0.7 < row["short_fraction"] < 0.8 for row in r.rows)
    assert all(row["long_slowdown_mean"] >= 1 for row in r.rows)


def test_synthetic_experiments_refuse_a_trace(tmp_path):
    with pytest.raises(ValueError, match="takes no trace"):
        villegas.villegas_pairs(["x.swf"], tmp_path)
    with pytest.raises(ValueError, match="needs a trace"):
        villegas.villegas_fcbf([], tmp_path)


def test_a_window_keeps_one_week_of_a_trace():
    if not CTC.exists():
        pytest.skip(f"{CTC} not found")
    point = Point(
        str(CTC),
        "villegas-parallel:vms=450",
        policy("fcfs-reserve"),
        policy("od-s"),
        window=(villegas.WEEK, villegas.WEEK),
    )
    from isthmus.experiments.runner import prepare_trace

    jobs = prepare_trace(str(CTC), None, None, point.cancelled, point.window).jobs
    first = prepare_trace(str(CTC), None, 1, point.cancelled).jobs[0].submit
    assert jobs and all(first + villegas.WEEK <= j.submit < first + 2 * villegas.WEEK for j in jobs)
    row = evaluate(point)
    assert row["jobs_completed"] + row["jobs_rejected"] == len(jobs)


def test_cli_runs_a_villegas_experiment_and_refuses_what_does_not_apply(tmp_path):
    runner = CliRunner()
    out = tmp_path / "pairs"
    res = runner.invoke(app, ["experiment", "villegas-pairs", "--seeds", "1", "-j", "1", "-o", str(out)])
    assert res.exit_code == 0, res.output
    assert (out / "summary.md").exists() and (out / "fig6_7_cost.png").exists()
    rows = list(csv.DictReader((out / "villegas-pairs.csv").open()))
    assert len(rows) == 3 * 6
    for args, message in (
        (["villegas-pairs", "--trace", str(tmp_path / "x.swf")], "takes no --trace"),
        (["villegas-pairs", "--week", "2"], "--week does not apply to villegas-pairs"),
        (["villegas-pairs", "--cancelled", "keep"], "--cancelled does not apply to villegas-pairs"),
        (["villegas-pairs", "--seeds", "0"], "--seeds must be at least 1"),
        (["koala-c-sets", "--seeds", "2"], "--seeds does not apply to koala-c-sets"),
        (["villegas-fcbf", "--week", "-1"], "--week must be >= 0"),
    ):
        res = runner.invoke(app, ["experiment", *args, "-o", str(tmp_path / "bad")])
        assert res.exit_code != 0 and message in res.output, (args, res.output)
