"""Record → Job semantics (sizes, runtime cuts, oversize jobs, unknown values) and back."""

from __future__ import annotations

from pathlib import Path

import pytest
from workloads_helpers import swf_line, write_swf_text

from isthmus.model.job import Job, PriorityClass
from isthmus.workloads import SwfConversion, SwfRecord, WorkloadError, job_from_swf, load_workload, record_from_job
from isthmus.workloads.conversion import IdMapper, JobConverter


def record(**fields: float) -> SwfRecord:
    """A plain valid record with some fields replaced."""
    base = SwfRecord(1, 10.0, -1.0, 100.0, 8, -1.0, -1.0, 16, 3600.0, -1.0, 1, 5, 6, -1, 1, -1, -1, -1.0)
    return base._replace(**fields)


def test_default_mapping() -> None:
    job = job_from_swf(record(requested_memory=2048.0))
    assert job == Job(
        id=1, submit=10.0, size=8, runtime=100.0, requested_runtime=3600.0, user="5", group="6", requested_memory=2048.0
    )
    assert job is not None
    assert job.priority is PriorityClass.HIGH
    assert isinstance(job.runtime, float)


def test_size_falls_back_to_requested_processors_when_allocated_is_unknown() -> None:
    converter = JobConverter()
    assert converter.from_swf(record(allocated_procs=-1)).size == 16  # type: ignore[union-attr]
    assert converter.from_swf(record(allocated_procs=0)).size == 16  # type: ignore[union-attr]
    assert converter.stats.size_fallback == 2


def test_size_from_requested_prefers_field_8() -> None:
    options = SwfConversion(size_from="requested")
    assert job_from_swf(record(), options).size == 16  # type: ignore[union-attr]
    assert job_from_swf(record(requested_procs=-1), options).size == 8  # type: ignore[union-attr]


def test_runtime_is_cut_at_the_requested_time_by_default() -> None:
    converter = JobConverter()
    job = converter.from_swf(record(run_time=5000.0, requested_time=3600.0))
    assert job is not None
    assert job.runtime == 3600.0
    assert job.requested_runtime == 3600.0
    assert converter.stats.runtime_cut == 1
    uncut = job_from_swf(record(run_time=5000.0), SwfConversion(cut_at_request=False))
    assert uncut is not None
    assert uncut.runtime == 5000.0


def test_unknown_requested_time_means_no_estimate_and_no_cut() -> None:
    job = job_from_swf(record(run_time=5000.0, requested_time=-1.0))
    assert job is not None
    assert job.requested_runtime is None
    assert job.runtime == 5000.0  # pyss would make it 1 s (min(-1, run)); we do not copy that quirk
    zero = job_from_swf(record(requested_time=0.0))
    assert zero is not None
    assert zero.requested_runtime is None


@pytest.mark.parametrize("run_time", [-1.0, 0.0])
def test_unknown_or_zero_runtime_becomes_one_second_like_pyss(run_time: float) -> None:
    converter = JobConverter()
    job = converter.from_swf(record(run_time=run_time))
    assert job is not None
    assert job.runtime == 1.0
    assert converter.stats.runtime_fixed == 1
    assert converter.stats.unknown_runtime_ids == {1}


def test_no_usable_size_becomes_one_processor_like_pyss() -> None:
    converter = JobConverter()
    job = converter.from_swf(record(allocated_procs=-1, requested_procs=-1))
    assert job is not None
    assert job.size == 1
    assert converter.stats.size_fixed == 1


def test_unknown_drop_follows_alea() -> None:
    converter = JobConverter(SwfConversion(unknown="drop"))
    assert converter.from_swf(record(run_time=-1.0)) is None
    assert converter.from_swf(record(allocated_procs=-1, requested_procs=-1)) is None
    zero = converter.from_swf(record(run_time=0.0))
    assert zero is not None
    assert zero.runtime == 1.0
    assert converter.stats.dropped_unknown == 2


def test_oversize_keep_clip_reject() -> None:
    big = record(allocated_procs=500)
    assert job_from_swf(big, machine_size=128).size == 500  # type: ignore[union-attr]
    clip = JobConverter(SwfConversion.clipped(), 128)
    assert clip.from_swf(big).size == 128  # type: ignore[union-attr]
    assert clip.stats.clipped == 1
    reject = JobConverter(SwfConversion(oversize="reject"), 128)
    assert reject.from_swf(big) is None
    assert reject.stats.rejected_oversize == 1
    # max_procs in the options overrides the header
    assert job_from_swf(big, SwfConversion(oversize="clip", max_procs=64), 128).size == 64  # type: ignore[union-attr]


def test_clip_without_a_machine_size_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="machine size"):
        JobConverter(SwfConversion(oversize="clip"), None)
    path = write_swf_text(tmp_path / "t.swf", [swf_line(1)], header="; Version: 2.2\n")
    with pytest.raises(WorkloadError, match="MaxProcs"):
        load_workload(path, conversion=SwfConversion(oversize="clip"))


def test_accasim_preset() -> None:
    options = SwfConversion.accasim(max_procs=10)
    assert job_from_swf(record(allocated_procs=4, requested_procs=8), options).size == 8  # type: ignore[union-attr]
    assert job_from_swf(record(run_time=7200.0, requested_procs=8), options).runtime == 7200.0  # type: ignore[union-attr]
    assert job_from_swf(record(requested_procs=20), options) is None


def test_invalid_options_are_refused() -> None:
    with pytest.raises(ValueError, match="oversize"):
        SwfConversion(oversize="trim")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="size_from"):
        SwfConversion(size_from="used")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="max_procs"):
        SwfConversion(max_procs=0)


def test_unknown_submit_time_or_job_number_is_an_error_naming_the_line(tmp_path: Path) -> None:
    path = write_swf_text(tmp_path / "t.swf", [swf_line(1), swf_line(2, submit=-1)])
    with pytest.raises(WorkloadError, match=r"t\.swf:\d+: field 2 \(submit time\): unknown"):
        load_workload(path)
    path = write_swf_text(tmp_path / "u.swf", [swf_line(-1)])
    with pytest.raises(WorkloadError, match=r"field 1 \(job number\)"):
        load_workload(path)


def test_repeated_job_number_is_an_error_or_skipped(tmp_path: Path) -> None:
    path = write_swf_text(tmp_path / "t.swf", [swf_line(1), swf_line(2), swf_line(1, 5)])
    with pytest.raises(WorkloadError, match="job number 1 is used by an earlier job"):
        load_workload(path)
    workload = load_workload(path, skip_invalid=True)
    assert [j.id for j in workload.jobs] == [1, 2]
    assert workload.skipped.count == 1


def test_jobs_are_sorted_by_submit_and_equal_times_keep_file_order(tmp_path: Path) -> None:
    lines = [swf_line(5, 30), swf_line(1, 10), swf_line(9, 10), swf_line(3, 10), swf_line(2, 0)]
    workload = load_workload(write_swf_text(tmp_path / "t.swf", lines), keep_records=True)
    assert [j.id for j in workload.jobs] == [2, 1, 9, 3, 5]
    assert workload.records is not None
    assert [r.job_id for r in workload.records] == [2, 1, 9, 3, 5]


def test_first_n_jobs_in_file_order(tmp_path: Path) -> None:
    lines = [swf_line(i, 100 - i) for i in range(1, 11)]
    workload = load_workload(write_swf_text(tmp_path / "t.swf", lines), first=3)
    assert sorted(j.id for j in workload.jobs) == [1, 2, 3]
    assert [j.id for j in workload.jobs] == [3, 2, 1]


def test_workload_carries_header_machine_and_conversion_stats(tmp_path: Path) -> None:
    lines = [swf_line(1, run=-1), swf_line(2, alloc=-1, req_procs=4)]
    workload = load_workload(write_swf_text(tmp_path / "t.swf", lines))
    assert workload.max_procs == 64
    assert workload.metadata["MaxProcs"] == "64"
    assert workload.name == "t"
    assert workload.conversion is not None
    assert workload.conversion.to_dict()["runtime_unknown_set_to_1s"] == 1
    assert workload.conversion.to_dict()["size_from_other_field"] == 1
    assert workload.runtime_known(workload.jobs[0]) is False
    assert workload.runtime_known(workload.jobs[1]) is True
    assert any("1 s" in line for line in workload.conversion.lines())


def test_record_from_job_and_id_mapping() -> None:
    job = Job(id=4, submit=2.5, size=3, runtime=60.0, requested_runtime=None, user="alice", group="7")
    rec = record_from_job(job)
    assert rec.job_id == 4
    assert rec.submit_time == 3  # SWF times are whole seconds: rounded, halves up
    assert (rec.allocated_procs, rec.requested_procs) == (3, 3)
    assert rec.requested_time == -1.0
    assert rec.status == 1
    assert rec.group_id == 7
    assert rec.user_id == 1  # first non-numeric name
    mapper = IdMapper([10])
    assert [mapper("bob"), mapper("12"), mapper("carol"), mapper("bob"), mapper("-1"), mapper("")] == [
        11,
        12,
        12,
        11,
        -1,
        -1,
    ]
    assert mapper.mapped == {"bob": 11, "carol": 12}


def test_workload_to_records_without_kept_records(tmp_path: Path) -> None:
    workload = load_workload(write_swf_text(tmp_path / "t.swf", [swf_line(1, req_time=500)]))
    (rec,) = workload.to_records()
    assert rec.requested_time == 500.0
    assert rec.run_time == 100.0
