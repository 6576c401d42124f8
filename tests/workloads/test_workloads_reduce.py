"""Trace reduction (dissertation §4.5.1.2) and its Kolmogorov–Smirnov report."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from workloads_helpers import swf_line, write_swf_text

from isthmus.workloads import WorkloadError, generate, ks_distance, load_workload, reduce_workload
from isthmus.workloads.reduce import kolmogorov_pvalue, ks_test, sample_blocks


@pytest.fixture
def trace(tmp_path: Path) -> Path:
    rng = np.random.default_rng(7)
    lines = []
    submit = 0
    for i in range(1, 601):
        submit += int(rng.integers(1, 120))
        size = int(2 ** rng.integers(0, 7))
        run = int(rng.integers(10, 5000))
        lines.append(swf_line(i, submit, run, size, req_time=run * 2, wait=50))
    return write_swf_text(tmp_path / "trace.swf", lines)


def test_identity_reduction_has_zero_ks_distance(trace: Path) -> None:
    workload = load_workload(trace)
    reduced, report = reduce_workload(workload)
    assert len(reduced) == len(workload)
    assert report.size_vs_interval.statistic == 0.0
    assert report.size_vs_original.statistic == 0.0
    assert report.runtime_vs_interval.statistic == 0.0
    assert report.size_vs_interval.pvalue == 1.0
    first = workload.jobs[0].submit
    assert [j.submit for j in reduced.jobs] == [j.submit - first for j in workload.jobs]


def test_scaling_is_exact(trace: Path) -> None:
    workload = load_workload(trace, keep_records=True)
    reduced, _ = reduce_workload(workload, start=0.0, arrival_scale=0.25, runtime_scale=0.5)
    for before, after in zip(workload.jobs, reduced.jobs, strict=True):
        assert after.submit == before.submit * 0.25
        assert after.runtime == before.runtime * 0.5
        assert after.requested_runtime == before.requested_runtime * 0.5  # type: ignore[operator]
        assert after.size == before.size and after.id == before.id
    gaps_before = np.diff([j.submit for j in workload.jobs])
    gaps_after = np.diff([j.submit for j in reduced.jobs])
    assert np.array_equal(gaps_after, gaps_before * 0.25)
    assert reduced.records is not None and workload.records is not None
    for rec_before, rec_after in zip(workload.records, reduced.records, strict=True):
        assert rec_after.run_time == rec_before.run_time * 0.5
        assert rec_after.requested_time == rec_before.requested_time * 0.5
        assert rec_after.wait_time == -1.0
        assert rec_after.submit_time == rec_before.submit_time * 0.25


def test_interval_and_sampling(trace: Path) -> None:
    workload = load_workload(trace)
    start, end = workload.jobs[100].submit, workload.jobs[400].submit
    reduced, report = reduce_workload(workload, start=start, end=end, keep=2, every=3)
    assert report.interval_jobs == 300
    assert report.reduced_jobs == len(reduced) == 200
    assert reduced.jobs[0].submit == 0.0
    kept_ids = [j.id for j in reduced.jobs]
    window_ids = [j.id for j in workload.jobs if start <= j.submit < end]
    assert kept_ids == [jid for i, jid in enumerate(window_ids) if i % 3 < 2]
    assert report.size_vs_interval.statistic < 0.1
    assert "Note" in reduced.metadata
    assert reduced.name.endswith("-reduced")
    assert report.to_dict()["reduced_jobs"] == 200
    assert any("2 of every 3" in line for line in report.lines())


def test_random_sampling_is_seeded(trace: Path) -> None:
    workload = load_workload(trace)
    a, _ = reduce_workload(workload, keep=1, every=4, seed=3)
    b, _ = reduce_workload(workload, keep=1, every=4, seed=3)
    c, _ = reduce_workload(workload, keep=1, every=4, seed=4)
    assert [j.id for j in a.jobs] == [j.id for j in b.jobs]
    assert [j.id for j in a.jobs] != [j.id for j in c.jobs]
    assert len(a) == 150


def test_sample_blocks() -> None:
    assert sample_blocks(7, 2, 3, None) == [0, 1, 3, 4, 6]
    assert sample_blocks(6, 0, 3, None) == []
    assert sample_blocks(6, 3, 3, None) == list(range(6))
    with pytest.raises(WorkloadError):
        sample_blocks(6, 4, 3, None)


def test_bad_arguments(trace: Path) -> None:
    workload = load_workload(trace)
    with pytest.raises(WorkloadError, match="arrival_scale"):
        reduce_workload(workload, arrival_scale=0)
    with pytest.raises(WorkloadError, match="after its start"):
        reduce_workload(workload, start=100, end=50)


def test_ks_distance_matches_scipy() -> None:
    from scipy import stats

    rng = np.random.default_rng(1)
    for _ in range(20):
        a = rng.integers(1, 64, size=int(rng.integers(5, 300)))
        b = rng.integers(1, 80, size=int(rng.integers(5, 300)))
        ref = stats.ks_2samp(a, b)
        assert ks_distance(a, b) == pytest.approx(ref.statistic, abs=1e-12)
        ours = ks_test(a, b)
        asymptotic = stats.ks_2samp(a, b, method="asymp").pvalue
        assert ours.pvalue == pytest.approx(asymptotic, abs=0.05)


def test_ks_helpers_edge_cases() -> None:
    assert ks_distance([], [1, 2]) == 0.0
    assert ks_distance([1, 2, 3], [1, 2, 3]) == 0.0
    assert ks_distance([1, 1, 1], [2, 2, 2]) == 1.0
    assert kolmogorov_pvalue(0.0, 10, 10) == 1.0
    assert kolmogorov_pvalue(1.0, 1000, 1000) < 1e-10


def test_reduce_a_generated_workload() -> None:
    workload = generate("uniform", seed=1)
    reduced, report = reduce_workload(workload, keep=1, every=2, arrival_scale=2.0)
    assert len(reduced) == (len(workload) + 1) // 2
    assert report.load_interval is not None and report.load_reduced is not None
    assert report.load_reduced == pytest.approx(report.load_interval / 4, rel=0.15)
