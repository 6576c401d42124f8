"""Jobs cancelled before they started (SWF status 5 without processors or runtime): keep, drop, short."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner
from workloads_helpers import TRACES_DIR, gwf_line, swf_line, write_gwf_text, write_swf_text

from isthmus.cli.main import app
from isthmus.workloads import (
    RUN_CANCELLED,
    DropUnknownRuntime,
    SwfConversion,
    cancelled_before_start,
    load_workload,
    summarize,
)
from isthmus.workloads.pipeline import filter_trace

runner = CliRunner()


@pytest.fixture
def trace(tmp_path: Path) -> Path:
    """Six jobs; 2, 3 and 4 were cancelled before they started, 5 was cancelled while running."""
    lines = [
        swf_line(1, submit=0, run=100, alloc=4, req_procs=4, req_time=200),
        swf_line(2, submit=10, run=-1, alloc=-1, req_procs=8, req_time=600, status=5),  # never started
        swf_line(3, submit=20, run=0, alloc=2, req_procs=2, req_time=900, status=5),  # runtime 0
        swf_line(4, submit=30, run=50, alloc=-1, req_procs=16, req_time=300, status=5),  # runtime, no procs
        swf_line(5, submit=40, run=70, alloc=4, req_procs=4, req_time=300, status=5),  # ran, then cancelled
        swf_line(6, submit=50, run=-1, alloc=-1, req_procs=2, req_time=60, status=0),  # failed, not cancelled
    ]
    return write_swf_text(tmp_path / "cancelled.swf", lines)


def test_which_jobs_count_as_cancelled_before_start() -> None:
    assert cancelled_before_start(5, -1, -1.0)
    assert cancelled_before_start(5, 0, 30.0)
    assert cancelled_before_start(5, 4, 0.0)
    assert not cancelled_before_start(5, 4, 70.0)  # it ran
    assert not cancelled_before_start(0, -1, -1.0)  # failed, not cancelled
    assert not cancelled_before_start(1, -1, -1.0)


def test_keep_reads_them_like_any_job(trace: Path) -> None:
    w = load_workload(trace, conversion=SwfConversion(cancelled="keep"))
    jobs = {j.id: j for j in w.jobs}
    assert sorted(jobs) == [1, 2, 3, 4, 5, 6]
    # size falls back to requested processors, runtime -1/0 becomes 1 s, a recorded runtime stays
    assert (jobs[2].size, jobs[2].runtime, jobs[2].requested_runtime) == (8, 1.0, 600.0)
    assert (jobs[3].size, jobs[3].runtime) == (2, 1.0)
    assert (jobs[4].size, jobs[4].runtime) == (16, 50.0)
    assert (jobs[5].size, jobs[5].runtime) == (4, 70.0)
    assert w.conversion is not None
    assert w.conversion.cancelled_report() == {
        "treatment": "keep",
        "meaning": "run as recorded (size and runtime by the usual rules)",
        "jobs": 3,
        "dropped": 0,
        "run_as_1s": 0,
    }


def test_keep_is_the_reading_default_so_a_loaded_trace_has_every_job_line(trace: Path) -> None:
    assert SwfConversion().cancelled == "keep"
    assert len(load_workload(trace)) == 6


def test_drop_leaves_them_out_and_counts_them(trace: Path) -> None:
    w = load_workload(trace, conversion=SwfConversion(cancelled="drop"))
    assert [j.id for j in w.jobs] == [1, 5, 6]
    assert w.conversion is not None
    assert w.conversion.cancelled_before_start == 3
    assert w.conversion.cancelled_dropped == 3
    # job 6 (failed, runtime -1) is not affected: it is still made a 1-second job
    assert w.conversion.runtime_fixed == 1


def test_short_runs_them_for_one_second(trace: Path) -> None:
    w = load_workload(trace, conversion=SwfConversion(cancelled="short"))
    jobs = {j.id: j for j in w.jobs}
    assert sorted(jobs) == [1, 2, 3, 4, 5, 6]
    assert (jobs[2].size, jobs[2].runtime, jobs[2].requested_runtime) == (8, 1.0, 600.0)
    assert (jobs[4].size, jobs[4].runtime) == (16, 1.0)  # its recorded 50 s is not used
    assert jobs[5].runtime == 70.0
    assert w.conversion is not None and w.conversion.cancelled_short == 3
    # the trace knew no runtime for 2 and 3 (and 6): DropUnknownRuntime still sees that
    assert [j.id for j in w.filter(DropUnknownRuntime()).jobs] == [1, 4, 5]


def test_short_is_not_dropped_by_unknown_drop(trace: Path) -> None:
    keep = load_workload(trace, conversion=SwfConversion(unknown="drop", cancelled="keep"))
    short = load_workload(trace, conversion=SwfConversion(unknown="drop", cancelled="short"))
    assert [j.id for j in keep.jobs] == [1, 3, 4, 5]  # runtime -1 dropped by unknown="drop"
    assert [j.id for j in short.jobs] == [1, 2, 3, 4, 5]


def test_a_bad_treatment_is_refused() -> None:
    with pytest.raises(ValueError, match="cancelled must be one of keep, drop, short"):
        SwfConversion(cancelled="ignore")  # type: ignore[arg-type]


def test_gwf_status_is_used_too(tmp_path: Path) -> None:
    path = write_gwf_text(
        tmp_path / "g.gwf",
        [gwf_line(1, run=100), gwf_line(2, run=-1, nprocs=-1, req_procs=4, status=5), gwf_line(3, run=30)],
    )
    assert [j.id for j in load_workload(path, conversion=SwfConversion(cancelled="drop")).jobs] == [1, 3]
    assert len(load_workload(path)) == 3


def test_filter_trace_applies_the_treatment(trace: Path, tmp_path: Path) -> None:
    result = filter_trace(trace, tmp_path / "out.swf", [], conversion=SwfConversion(cancelled="drop"))
    assert (result.read, result.written) == (3, 3)


def test_summary_reports_the_treatment(trace: Path) -> None:
    summary = summarize(load_workload(trace, conversion=SwfConversion(cancelled="drop")))
    assert summary.cancelled["jobs"] == 3 and summary.cancelled["treatment"] == "drop"
    assert summary.to_dict()["cancelled_before_start"] == summary.cancelled


def test_workload_info_shows_count_and_treatment(trace: Path) -> None:
    assert RUN_CANCELLED == "drop"
    result = runner.invoke(app, ["workload", "info", str(trace), "--json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["jobs"] == 3
    assert data["cancelled_before_start"]["treatment"] == "drop"
    assert data["cancelled_before_start"]["jobs"] == 3
    result = runner.invoke(app, ["workload", "info", str(trace), "--cancelled", "short", "--json"])
    data = json.loads(result.stdout)
    assert (data["jobs"], data["cancelled_before_start"]["run_as_1s"]) == (6, 3)
    table = runner.invoke(app, ["workload", "info", str(trace), "--cancelled", "keep"])
    assert table.exit_code == 0
    assert "cancelled before start" in table.stdout
    assert "3 jobs in the trace, --cancelled keep" in " ".join(table.stdout.split())
    bad = runner.invoke(app, ["workload", "info", str(trace), "--cancelled", "nope"])
    assert bad.exit_code == 2
    assert "--cancelled" in bad.stderr and "keep, drop, short" in bad.stderr


def test_generated_workloads_have_no_cancelled_jobs() -> None:
    result = runner.invoke(app, ["workload", "info", "lublin:jobs=20", "--json"])
    data = json.loads(result.stdout)
    assert data["cancelled_before_start"]["treatment"] is None
    assert data["cancelled_before_start"]["jobs"] == 0


@pytest.mark.traces
def test_sdsc_sp2_counts_as_documented() -> None:
    """docs/workloads.md: SDSC-SP2 has 5,681 jobs cancelled before start (5,669 without processors)."""
    path = TRACES_DIR / "SDSC-SP2-1998-4.2-cln.swf.gz"
    if not path.exists():
        pytest.skip(f"{path.name} not in {TRACES_DIR}")
    w = load_workload(path, conversion=SwfConversion(cancelled="drop"))
    assert w.conversion is not None
    assert w.conversion.cancelled_dropped == 5_681
    assert len(w) == 59_715 - 5_681


def test_workload_filter_keeps_them_unless_asked(trace: Path, tmp_path: Path) -> None:
    out = tmp_path / "out.swf"
    result = runner.invoke(app, ["workload", "filter", str(trace), str(out), "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["written"] == 6
    result = runner.invoke(app, ["workload", "filter", str(trace), str(out), "--cancelled", "drop", "--json"])
    assert json.loads(result.stdout)["written"] == 3
    assert [j.id for j in load_workload(out).jobs] == [1, 5, 6]
