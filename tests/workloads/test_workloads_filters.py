"""Filters: each one, their composition order, streaming and early stop."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from workloads_helpers import swf_line, write_swf_text

from isthmus.model.job import Job
from isthmus.workloads import (
    DropUnknownRuntime,
    Entry,
    FirstJobs,
    MaxSize,
    SubmitWindow,
    filter_entries,
    filter_jobs,
    iter_swf,
    load_workload,
    read_swf_header,
)
from isthmus.workloads.filters import describe_filters
from isthmus.workloads.pipeline import filter_trace


def jobs(sizes: list[int]) -> list[Job]:
    return [Job(id=i + 1, submit=float(10 * i), size=s, runtime=60.0) for i, s in enumerate(sizes)]


def test_max_size() -> None:
    kept = list(filter_jobs(jobs([1, 32, 33, 64, 2]), [MaxSize(32)]))
    assert [j.size for j in kept] == [1, 32, 2]
    with pytest.raises(ValueError):
        MaxSize(0)


def test_first_jobs() -> None:
    assert [j.id for j in filter_jobs(jobs([1] * 10), [FirstJobs(3)])] == [1, 2, 3]
    assert list(filter_jobs(jobs([1] * 10), [FirstJobs(0)])) == []
    assert len(list(filter_jobs(jobs([1] * 2), [FirstJobs(5)]))) == 2


def test_submit_window_is_half_open() -> None:
    kept = list(filter_jobs(jobs([1] * 10), [SubmitWindow(20.0, 50.0)]))
    assert [j.submit for j in kept] == [20.0, 30.0, 40.0]
    assert len(list(filter_jobs(jobs([1] * 10), [SubmitWindow(None, 20.0)]))) == 2
    assert len(list(filter_jobs(jobs([1] * 10), [SubmitWindow(85.0, None)]))) == 1
    with pytest.raises(ValueError):
        SubmitWindow(50.0, 50.0)


def test_order_matters_first_then_size_versus_size_then_first() -> None:
    sizes = [64, 1, 64, 2, 4, 8]
    assert [j.size for j in filter_jobs(jobs(sizes), [FirstJobs(3), MaxSize(32)])] == [1]
    assert [j.size for j in filter_jobs(jobs(sizes), [MaxSize(32), FirstJobs(3)])] == [1, 2, 4]
    assert describe_filters([FirstJobs(3), MaxSize(32)]) == "first 3 jobs, then size <= 32 processors"
    assert describe_filters([]) == "no filter"


def test_streaming_stops_reading_after_the_quota() -> None:
    consumed: list[int] = []

    def endless() -> Iterator[Entry]:
        i = 0
        while True:
            i += 1
            consumed.append(i)
            yield Entry(Job(id=i, submit=float(i), size=1 + i % 4, runtime=1.0), None, True)

    kept = list(filter_entries(endless(), [MaxSize(2), FirstJobs(5)]))
    assert len(kept) == 5
    assert all(e.job.size <= 2 for e in kept)
    assert len(consumed) == max(e.job.id for e in kept)  # not one entry more than needed


def test_drop_unknown_runtime_uses_the_record_or_the_conversion(tmp_path: Path) -> None:
    lines = [swf_line(1, run=100), swf_line(2, run=-1), swf_line(3, run=0), swf_line(4, run=5)]
    path = write_swf_text(tmp_path / "t.swf", lines)
    plain = load_workload(path)
    assert [j.id for j in plain.filter(DropUnknownRuntime()).jobs] == [1, 4]
    with_records = load_workload(path, keep_records=True)
    kept = with_records.filter(DropUnknownRuntime())
    assert [j.id for j in kept.jobs] == [1, 4]
    assert kept.records is not None
    assert [r.job_id for r in kept.records] == [1, 4]  # records stay aligned
    assert [j.id for j in filter_jobs(plain.jobs, [DropUnknownRuntime()])] == [1, 2, 3, 4]  # plain jobs: known


def test_workload_filter_and_head(tmp_path: Path) -> None:
    lines = [swf_line(i, submit=i, alloc=2**i) for i in range(1, 8)]
    workload = load_workload(write_swf_text(tmp_path / "t.swf", lines))
    small = workload.filter(MaxSize(16))
    assert [j.size for j in small.jobs] == [2, 4, 8, 16]
    assert small.header is workload.header and small.max_procs == workload.max_procs
    assert len(workload.head(2)) == 2
    with pytest.raises(ValueError):
        workload.head(-1)


def test_filter_trace_streams_records_unchanged(tmp_path: Path) -> None:
    lines = [swf_line(i, submit=10 * i, alloc=i * 10, req_time=999, user=i) for i in range(1, 9)]
    source = write_swf_text(tmp_path / "in.swf", lines)
    target = tmp_path / "out.swf.gz"
    result = filter_trace(source, target, [FirstJobs(6), MaxSize(32)])
    assert (result.read, result.written) == (6, 3)
    originals = {r.job_id: r for r in iter_swf(source)}
    out = list(iter_swf(target))
    assert [r.job_id for r in out] == [1, 2, 3]
    assert all(r == originals[r.job_id] for r in out)
    header = read_swf_header(target)
    assert header.max_procs == 64
    assert "first 6 jobs, then size <= 32 processors" in header.get_all("Note")[-1]


def test_filter_trace_failure_leaves_no_output(tmp_path: Path) -> None:
    source = write_swf_text(tmp_path / "in.swf", [swf_line(1), "garbage"])
    target = tmp_path / "out.swf"
    with pytest.raises(ValueError, match=r"in\.swf:\d+:"):
        filter_trace(source, target, [MaxSize(4)])
    assert not target.exists()
