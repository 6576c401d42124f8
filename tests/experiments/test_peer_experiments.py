"""The peer-manager experiments (`ibm-cloud`, `villegas-forwarding`): tiny runs through the CLI
that write every file, the reduced traces they read, and the verdicts of their summaries
computed from the rows (never written in)."""

from __future__ import annotations

import csv
import json
import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from isthmus.cli.main import app
from isthmus.experiments import ibm_cloud, villegas_forwarding
from isthmus.experiments.reduced import Reduction, reduced_jobs


def write_swf(path: Path, jobs: list[tuple[float, float, int]]) -> Path:
    """An SWF file of (submit, runtime, processors) jobs, requested time twice the runtime."""
    lines = ["; MaxProcs: 512", "; UnixStartTime: 0"]
    for i, (submit, runtime, size) in enumerate(jobs, start=1):
        fields = [i, submit, 0, runtime, size, -1, -1, size, 2 * runtime, -1, 1, 1, 1, 1, 1, 1, -1, -1]
        lines.append(" ".join(str(f) for f in fields))
    path.write_text("\n".join(lines) + "\n")
    return path


def test_a_reduction_keeps_samples_and_scales_as_the_dissertation_says(tmp_path: Path) -> None:
    # jobs at days 0, 1, 2, ..., 9 (runtime 600 s, sizes 1..10 x 20); keep days 2-8, 2 of 3,
    # inter-arrival and runtimes / 60, sizes capped at 100
    day = 86400.0
    trace = write_swf(tmp_path / "t.swf", [(d * day, 600.0, 20 * (d + 1)) for d in range(10)])
    r = Reduction(start_day=2, days=6, keep=2, every=3, arrival_scale=1 / 60, runtime_scale=1 / 60, cap=100)
    jobs = reduced_jobs(str(trace), r, "keep")
    # days 2..7 are in [2, 8): blocks (2,3,4) (5,6,7) -> keep 2,3 and 5,6
    assert [j.id for j in jobs] == [3, 4, 6, 7]
    assert [j.submit for j in jobs] == pytest.approx([0.0, 1440.0, 4320.0, 5760.0])  # (d - 2) days / 60
    assert [j.runtime for j in jobs] == pytest.approx([10.0] * 4)
    assert [j.size for j in jobs] == [60, 80, 100, 100]  # 120 and 140 capped at 100
    assert "2 of every 3 jobs" in r.describe() and "capped at 100" in r.describe()
    with pytest.raises(ValueError, match=r"keeps 1\.\.every"):
        Reduction(start_day=0, keep=4, every=3)


def _ibm_trace(tmp_path: Path) -> Path:
    # a week of jobs every 2,000 s, wide and long enough to queue on 300 nodes: reduced (1 of 3,
    # arrivals / 60, runtimes / 18) 101 jobs over 10,080 s, each 333-3,333 s
    sizes = [1, 40, 120, 200, 64, 8, 150, 2, 100, 250, 16, 90]
    jobs = [(i * 2000.0, 6000.0 + 6000.0 * (i % 10), sizes[i % len(sizes)]) for i in range(302)]
    return write_swf(tmp_path / "ibm.swf", jobs)


def test_ibm_cloud_runs_through_the_cli_and_writes_every_file(tmp_path: Path) -> None:
    trace = _ibm_trace(tmp_path)
    out = tmp_path / "ibm"
    res = CliRunner().invoke(
        app, ["experiment", "ibm-cloud", "-t", str(trace), "--window-start", "0d", "-j", "1", "-o", str(out)]
    )
    assert res.exit_code == 0, res.output
    for name in ("ibm-cloud.csv", "series.csv", "summary.md", "table1_delay.png", "fig7_one_cluster.png"):
        assert (out / name).exists(), name
    assert (out / "fig8_with_cloud.png").exists()
    # what the run was: the command with every default, its options as run, the versions
    provenance = json.loads((out / "provenance.json").read_text())
    assert provenance["command"].startswith("isthmus experiment ibm-cloud --trace")
    assert "--cancelled" not in provenance["command"] and "--workers 1" in provenance["command_with_defaults"]
    assert provenance["options"]["traces"] == [str(trace)] and provenance["versions"]["isthmus"]
    assert CliRunner().invoke(app, ["report", str(out)]).exit_code == 0
    page = (out / "report.html").read_text()
    assert '<table id="provenance">' in page and '<table id="options">' in page
    rows = {r["config"]: r for r in csv.DictReader((out / "ibm-cloud.csv").open())}
    assert set(rows) == {"450", "300+200", "300+150", "300+75", "300"}
    for config, r in rows.items():
        assert int(r["jobs_completed"]) == int(r["jobs"]) == 101, config
        if "+" in config:
            assert int(r["forwarded"]) > 0 and 0 < float(r["cloud_utilization"]) <= 1
        else:
            assert int(r["forwarded"]) == 0 and r["cloud_utilization"] == ""
    # the summary's first check is computed from these rows
    summary = (out / "summary.md").read_text()
    base, small = float(rows["300"]["delay_p80"]), float(rows["300+75"]["delay_p80"])
    cut = 1 - small / base
    line = next(x for x in summary.splitlines() if "adding a 75-nodes cloud" in x)
    assert f"(cut {cut:.0%};" in line
    series = list(csv.DictReader((out / "series.csv").open()))
    assert {r["config"] for r in series} == set(rows)
    # a second run of the same command without --resume refuses to mix with the saved points
    res = CliRunner().invoke(
        app, ["experiment", "ibm-cloud", "-t", str(trace), "--window-start", "0d", "-j", "1", "-o", str(out)]
    )
    assert res.exit_code != 0 and "--resume" in res.output


def _ibm_row(config: str, p: tuple[float, float, float, float], util: float | None = None) -> dict[str, object]:
    row: dict[str, object] = {"trace": "T", "config": config, "cloud_utilization": util}
    row.update({f"delay_p{q}": v for q, v in zip(ibm_cloud.PERCENTILES, p, strict=True)})
    return row


def test_ibm_checks_follow_the_rows() -> None:
    seed_like = [
        _ibm_row("450", (7, 200, 690, 1000)),
        _ibm_row("300+150", (9, 220, 450, 700), 0.57),
        _ibm_row("300+75", (10, 220, 1200, 2900), 0.56),
        _ibm_row("300", (120, 1100, 3100, 4500)),
    ]
    lines = ibm_cloud.checks(seed_like, "T")
    assert "**holds**: 1,100 s -> 220 s (cut 80%" in lines[0]
    assert "**holds**" in lines[1]  # 150 nodes: 220 s, not lower than 75's
    assert "**holds**: 300+150 is lower at the 90th, 95th percentile(s)" in lines[2]
    assert "**holds**: 0.56 and 0.57" in lines[3]
    reversed_rows = [
        _ibm_row("450", (7, 200, 300, 400)),
        _ibm_row("300+150", (9, 100, 450, 700), 0.2),
        _ibm_row("300+75", (10, 1000, 1200, 2900), 0.9),
        _ibm_row("300", (120, 1100, 3100, 4500)),
    ]
    lines = ibm_cloud.checks(reversed_rows, "T")
    assert "**does not hold**: 1,100 s -> 1,000 s (cut 9%" in lines[0]
    assert "**does not hold**: 100 s with 150 nodes" in lines[1]
    assert "**holds in part**: 300+150 is lower at the 80th percentile(s)" in lines[2]
    assert "**does not hold**: 0.90 and 0.20" in lines[3]
    assert "not run" in ibm_cloud.checks([_ibm_row("300", (1, 2, 3, 4))], "T")[0]


def test_villegas_forwarding_runs_through_the_cli_and_writes_every_file(tmp_path: Path) -> None:
    # week 0: 90 jobs, one every 6,000 s, 1-128 processors (one of 200, capped at 128)
    sizes = [1, 64, 128, 16, 200, 100, 4, 32, 96]
    trace = write_swf(tmp_path / "v.swf", [(i * 6000.0, 3000.0 + 600.0 * (i % 7), sizes[i % 9]) for i in range(90)])
    out = tmp_path / "vf"
    runner = CliRunner()
    res = runner.invoke(
        app, ["experiment", "villegas-forwarding", "-t", str(trace), "--weeks", "0", "-j", "1", "-o", str(out)]
    )
    assert res.exit_code == 0, res.output
    for name in (
        "villegas-forwarding.csv",
        "aggregate.csv",
        "summary.md",
        "fig4_9_makespan.png",
        "fig4_10_bounded_slowdown.png",
        "fig4_11_bounded_slowdown.png",
        "fig7_8_makespan.png",
        "fig7_9_bounded_slowdown.png",
    ):
        assert (out / name).exists(), name
    rows = list(csv.DictReader((out / "villegas-forwarding.csv").open()))
    assert len(rows) == (1 + 2 * 5) + (1 + 5)
    ch4 = [r for r in rows if r["part"] == "ch4"]
    ch7 = [r for r in rows if r["part"] == "ch7"]
    assert all(int(r["jobs"]) == 60 and int(r["jobs_completed"]) == 60 for r in ch4)  # 2 of 3 of 90
    assert all(int(r["jobs"]) == 90 and int(r["jobs_completed"]) == 90 for r in ch7)  # none rejected: capped
    assert all(int(r["forwarded"]) == 0 for r in rows if r["sites"] == "1 site")
    rr3 = next(r for r in ch4 if r["sites"] == "3 sites" and r["selection"] == "round-robin")
    # job k enters site k mod 3: 20 jobs per manager, whose RoundRobin keeps its 1st, 4th, ...
    # (7 of 20) and forwards the other 13 to its peers in turn: 3 x 13 forwarded
    assert int(rr3["forwarded"]) == 39
    summary = (out / "summary.md").read_text()
    agg = list(csv.DictReader((out / "aggregate.csv").open()))
    hc = float(next(r for r in agg if r["part"] == "ch7" and r["selection"] == "highest-cap")["bounded_slowdown_mean"])
    assert f"HighestCap {hc:.3g} against" in summary
    for args, message in (
        (["--weeks", "x"], "--weeks: expected numbers"),
        (["--week", "1"], "--week does not apply to villegas-forwarding"),
        (["--window-start", "1d"], "--window-start does not apply"),
    ):
        res = runner.invoke(app, ["experiment", "villegas-forwarding", *args, "-o", str(tmp_path / "bad")])
        assert res.exit_code != 0 and message in res.output, (args, res.output)


def _agg(part: str, sites: str, selection: str, makespan: float, bsd: float) -> dict[str, object]:
    return {
        "trace": "T",
        "part": part,
        "sites": sites,
        "selection": selection,
        "makespan": makespan,
        "bounded_slowdown_mean": bsd,
    }


def test_villegas_checks_follow_the_rows() -> None:
    rows = [
        _agg("ch7", "1 site", "single", 1000, 2.0),
        _agg("ch7", "2 sites", "round-robin", 1500, 9.0),
        _agg("ch7", "2 sites", "highest-idle", 1400, 8.0),
        _agg("ch7", "2 sites", "bf-idle", 1010, 4.0),
        _agg("ch7", "2 sites", "highest-cap", 1000, 3.0),
        _agg("ch7", "2 sites", "bf-cap", 1020, 3.5),
    ]
    lines = villegas_forwarding.checks(rows, "T", ("ch7",))
    assert "**holds**" in lines[0] and "the two longest: RoundRobin, HighestIdle" in lines[0]
    assert "**holds**: HighestCap 3 against HighestIdle 8, BFCap 3.5 against BFIdle 4" in lines[1]
    rows[5]["bounded_slowdown_mean"] = 5.0  # BFCap now worse than BFIdle
    assert "**holds in part**" in villegas_forwarding.checks(rows, "T", ("ch7",))[1]
    ch4 = [
        _agg("ch4", "1 site", "single", 100, 1.0),
        *[_agg("ch4", s, "round-robin", 101, 3.0) for s in ("2 sites", "3 sites")],
        *[
            _agg("ch4", s, p, 100, v)
            for s in ("2 sites", "3 sites")
            for p, v in zip(villegas_forwarding.USAGE_POLICIES, (2.5, 2.0, 3.5, 2.2), strict=True)
        ],
    ]
    lines = villegas_forwarding.checks(ch4, "T", ("ch4",))
    assert "**holds**: makespans 100 s, 101 s, 101 s (spread 1.0%)" in lines[0]
    assert "**holds**: bounded slowdown 1, 3, 3" in lines[1]
    assert re.search(r"\*\*holds in part\*\*: 3 of 4 beat RoundRobin", lines[2])
    assert "the best is LowestQlenCpus (**holds**), 2 times the single site" in lines[2]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["ibm-cloud", "--weeks", "1"], "--weeks does not apply to ibm-cloud"),
        (["ibm-cloud", "--window-start", "soon"], "--window-start: expected seconds"),
        (["ibm-cloud", "--trace", "missing.swf"], "trace not found: missing.swf"),
        (["koala-c-realworld", "--weeks", "1"], "--weeks does not apply to koala-c-realworld"),
        (["villegas-fcbf", "--weeks", "1"], "--weeks does not apply to villegas-fcbf"),
    ],
)
def test_the_peer_experiments_refuse_options_that_do_not_apply(tmp_path: Path, args: list[str], message: str) -> None:
    result = CliRunner().invoke(app, ["experiment", *args, "-o", str(tmp_path / "out")])
    assert result.exit_code == 2, result.output
    assert message in result.output


def test_capacity_and_idle_forwarding_are_compared_week_by_week() -> None:
    def row(week: int, selection: str, bsd: float) -> dict[str, object]:
        return {"trace": "T", "part": "ch7", "week": week, "selection": selection, "bounded_slowdown_mean": bsd}

    rows = [
        row(1, "highest-cap", 2.0),
        row(1, "highest-idle", 3.0),
        row(1, "bf-cap", 5.0),
        row(1, "bf-idle", 4.0),
        row(2, "highest-cap", 2.0),
        row(2, "highest-idle", 2.0),  # a tie is not "below"
        row(2, "bf-cap", 1.0),
        row(2, "bf-idle", 4.0),
    ]
    assert villegas_forwarding.paired_weeks(rows, "T") == (
        "Week by week (the same jobs for every policy): HighestCap below HighestIdle in 1 of 2 weeks, "
        "BFCap below BFIdle in 1 of 2 weeks."
    )
