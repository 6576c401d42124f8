"""Every real trace in ../shared/traces: job counts from MANIFEST.md, sanity, speed, Table II."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from workloads_helpers import EXPECTED_JOB_LINES, manifest_job_lines

from isthmus.workloads import FirstJobs, MaxSize, Workload, iter_swf, load_workload, summarize

pytestmark = pytest.mark.traces


def test_manifest_counts_are_parsed_and_agree_with_the_hard_coded_ones(traces_dir: Path) -> None:
    counts = manifest_job_lines()
    assert counts, "MANIFEST.md lists no 'Job lines: N'"
    for name, expected in EXPECTED_JOB_LINES.items():
        if name in counts:
            assert counts[name] == expected
    assert set(counts) == {p.name for p in traces_dir.glob("*.swf.gz")}


def test_every_trace_has_the_manifest_job_count(loaded_traces: dict[str, Workload]) -> None:
    counts = manifest_job_lines()
    assert loaded_traces, "no trace was loaded"
    for name, workload in loaded_traces.items():
        expected = counts.get(name, EXPECTED_JOB_LINES.get(name))
        assert expected is not None, f"{name} is not in MANIFEST.md"
        assert len(workload) == expected, name
        assert workload.skipped.count == 0


def test_every_trace_is_sane(loaded_traces: dict[str, Workload]) -> None:
    for name, workload in loaded_traces.items():
        submits = np.array([j.submit for j in workload.jobs])
        assert np.all(np.diff(submits) >= 0), name
        assert len({j.id for j in workload.jobs}) == len(workload), name
        assert all(j.runtime >= 1 and j.size >= 1 for j in workload.jobs), name
        assert workload.max_procs is not None and workload.max_procs > 0, name
        assert workload.header.get("Acknowledge"), f"{name}: credit the people in Acknowledge"
        assert workload.header.unix_start_time is not None, name


def test_manifest_machine_sizes(loaded_traces: dict[str, Workload]) -> None:
    expected = {"CTC-SP2-1996-3.1-cln.swf.gz": 338, "LCG.swf.gz": 24515, "NASA-iPSC-1993-3.1-cln.swf.gz": 128}
    for name, procs in expected.items():
        if name in loaded_traces:
            assert loaded_traces[name].max_procs == procs


def test_streaming_reader_agrees_with_the_loader(traces_dir: Path, loaded_traces: dict[str, Workload]) -> None:
    name = "NASA-iPSC-1993-3.1-cln.swf.gz"
    path = traces_dir / name
    if not path.exists():
        pytest.skip(f"{name} not in {traces_dir}")
    records = list(iter_swf(path))
    assert len(records) == len(loaded_traces[name])
    assert {r.job_id for r in records} == {j.id for j in loaded_traces[name].jobs}


def test_koala_c_table_ii_for_kth(loaded_traces: dict[str, Workload]) -> None:
    """KOALA-C Table II: KTH-SP2, jobs of at most 32 nodes: 27K (96%), runtime minutes
    mean 149, Q1 1, median 14, Q3 164, 99th 1,323."""
    name = "KTH-SP2-1996-2.1-cln.swf.gz"
    if name not in loaded_traces:
        pytest.skip(f"{name} not available")
    kth = loaded_traces[name]
    small = kth.filter(MaxSize(32))
    assert round(100 * len(small) / len(kth)) == 96
    assert round(len(small) / 1000) == 27
    stats = summarize(small).runtime
    assert stats is not None
    minutes = {k: v / 60 for k, v in (("mean", stats.mean), ("q1", stats.q1), ("median", stats.median))}
    assert round(minutes["mean"]) == 149
    assert round(minutes["q1"]) == 1
    assert round(minutes["median"]) == 14
    assert round(stats.q3 / 60) == 164
    assert stats.p99 / 60 == pytest.approx(1323, rel=0.03)


def test_lcg_first_50000_as_koala_c(loaded_traces: dict[str, Workload]) -> None:
    if "LCG.swf.gz" not in loaded_traces:
        pytest.skip("LCG.swf.gz not available")
    lcg = loaded_traces["LCG.swf.gz"].filter(FirstJobs(50_000), MaxSize(32))
    assert len(lcg) == 50_000  # Table II: 50K (100%)
    stats = summarize(lcg).runtime
    assert stats is not None
    assert (round(stats.q1 / 60), round(stats.median / 60), round(stats.q3 / 60)) == (2, 4, 27)


def test_reading_lcg_reads_every_line(traces_dir: Path) -> None:
    """188,041 lines into Jobs (its speed is measured by benchmarks/bench_sim.py, not here)."""
    path = traces_dir / "LCG.swf.gz"
    if not path.exists():
        pytest.skip("LCG.swf.gz not available")
    workload = load_workload(path)
    assert len(workload) == 188_041
