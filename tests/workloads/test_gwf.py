"""GWF (Grid Workloads Archive format): reading, errors, mapping to jobs, conversion to SWF."""

from __future__ import annotations

import gzip
from pathlib import Path

import pytest
from workloads_helpers import GWF_HEADER, gwf_line, write_gwf_text

from isthmus.workloads import GwfReader, WorkloadError, convert_gwf_to_swf, iter_gwf, iter_swf, load_workload
from isthmus.workloads.gwf import GWF_FIELDS, parse_gwf_tokens, time_origin
from isthmus.workloads.swf import read_swf_header

T0 = 1_136_070_000


def test_reads_the_29_fields(tmp_path: Path) -> None:
    path = write_gwf_text(tmp_path / "t.gwf", [gwf_line(1, T0, 60, 4, req_procs=8, req_time=600, user="U7")])
    (record,) = list(iter_gwf(path))
    assert len(GWF_FIELDS) == 29
    assert record.job_id == 1
    assert record.submit_time == float(T0)
    assert record.nprocs == 4
    assert record.requested_procs == 8
    assert record.user_id == "U7"
    assert record.job_structure == "UNITARY"
    assert record.requested_platform == "x86,Linux,2.6"
    assert record.vo_id == "vo1"
    assert record.project_id == "-1"


def test_comments_are_collected(tmp_path: Path) -> None:
    path = write_gwf_text(tmp_path / "t.gwf", [gwf_line(1)])
    with GwfReader(path) as reader:
        list(reader)
    assert reader.comments[0] == "Version: 1.0"


def test_negative_wait_time_is_allowed_in_gwf(tmp_path: Path) -> None:
    path = write_gwf_text(tmp_path / "t.gwf", [gwf_line(1, wait=-60)])
    assert next(iter_gwf(path)).wait_time == -60.0


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        ({"run": "abc"}, "field 4 (RunTime): expected a number, got 'abc'"),
        ({"nprocs": "2.5"}, "field 5 (NProcs): expected an integer, got '2.5'"),
        ({"submit": "-5"}, "field 2 (SubmitTime): expected -1 (unknown) or a value >= 0, got '-5'"),
        ({"req_mem": "nan"}, "field 10 (ReqMemory): expected a finite number, got 'nan'"),
    ],
)
def test_malformed_gwf_line_names_file_line_and_field(tmp_path: Path, change: dict[str, str], expected: str) -> None:
    bad = gwf_line(2, **change)  # type: ignore[arg-type]
    path = write_gwf_text(tmp_path / "trace.gwf", [gwf_line(1), bad, gwf_line(3)])
    line = GWF_HEADER.count("\n") + 2
    with pytest.raises(WorkloadError) as info:
        load_workload(path)
    assert str(info.value) == f"{path}:{line}: {expected}"
    workload = load_workload(path, skip_invalid=True)
    assert [j.id for j in workload.jobs] == [1, 3]
    assert workload.skipped.count == 1


def test_wrong_field_count(tmp_path: Path) -> None:
    path = write_gwf_text(tmp_path / "t.gwf", [gwf_line(1) + "\textra"])
    with pytest.raises(WorkloadError, match="expected 29 whitespace-separated fields"):
        list(iter_gwf(path))
    with pytest.raises(ValueError, match="got 3 fields"):
        parse_gwf_tokens(["1", "2", "3"])


def test_jobs_from_gwf_use_swf_semantics_and_rebase_unix_times(tmp_path: Path) -> None:
    lines = [
        gwf_line(1, T0 + 100, run=5000, nprocs=2, req_time=3600, user="U1"),
        gwf_line(2, T0, run=-1, nprocs=-1, req_procs=4, user="alice"),
        gwf_line(3, T0 + 100, run=50, nprocs=1, req_mem=1024),
    ]
    workload = load_workload(write_gwf_text(tmp_path / "t.gwf", lines))
    assert [j.id for j in workload.jobs] == [2, 1, 3]  # sorted by submit, ties in file order
    two, one, three = workload.jobs
    assert two.submit == 0.0 and one.submit == 100.0
    assert workload.header.unix_start_time == T0
    assert one.runtime == 3600.0  # cut at the request
    assert two.runtime == 1.0 and two.size == 4  # unknown runtime, size from ReqNProcs
    assert one.user == "U1" and two.user == "alice"
    assert three.requested_memory == 1024.0
    assert workload.max_procs is None


def test_relative_gwf_times_are_not_rebased(tmp_path: Path) -> None:
    workload = load_workload(write_gwf_text(tmp_path / "t.gwf", [gwf_line(1, 50), gwf_line(2, 80)]))
    assert [j.submit for j in workload.jobs] == [50.0, 80.0]
    assert time_origin(50.0) == 0.0
    assert time_origin(50.0, rebase=True) == 50.0
    assert time_origin(None) == 0.0


def test_gwf_format_detected_from_content(tmp_path: Path) -> None:
    path = write_gwf_text(tmp_path / "trace.txt", [gwf_line(1)])
    assert len(load_workload(path).jobs) == 1
    packed = tmp_path / "trace.gwf.gz"
    packed.write_bytes(gzip.compress(path.read_bytes()))
    assert load_workload(packed).jobs == load_workload(path).jobs


def test_convert_gwf_to_swf(tmp_path: Path) -> None:
    lines = [
        gwf_line(1, T0 + 10, run=100, nprocs=2, user="U2", group="G1", wait=-30),
        gwf_line(2, T0, run=200, nprocs=4, user="U1", group="5"),
        gwf_line(3, T0 + 20, run=300, nprocs=1, user="U2", group="5"),
    ]
    source = write_gwf_text(tmp_path / "t.gwf", lines)
    target = tmp_path / "t.swf"
    written, skipped = convert_gwf_to_swf(source, target)
    assert written == 3 and skipped.count == 0
    records = list(iter_swf(target))
    assert [r.job_id for r in records] == [1, 2, 3]
    assert [r.submit_time for r in records] == [10.0, 0.0, 20.0]
    assert records[0].wait_time == -1.0  # SWF has no negative waits
    assert [r.user_id for r in records] == [1, 2, 1]  # names numbered by first appearance
    assert [r.group_id for r in records] == [6, 5, 5]  # after the largest numeric id of the field
    assert records[0].avg_cpu_time == 10.5
    assert records[0].used_memory == 2048.0
    header = read_swf_header(target)
    assert header.unix_start_time == T0
    assert header.max_jobs == 3
    assert any("negative GWF wait" in v for v in header.get_all("Note"))
    # the converted file gives the same jobs, except user names become numbers
    from_swf = load_workload(target).jobs
    from_gwf = load_workload(source).jobs
    assert [(j.id, j.submit, j.size, j.runtime) for j in from_swf] == [
        (j.id, j.submit, j.size, j.runtime) for j in from_gwf
    ]


def test_convert_refuses_bad_input_without_writing(tmp_path: Path) -> None:
    source = write_gwf_text(tmp_path / "t.gwf", [gwf_line(1), gwf_line(2, run="x")])  # type: ignore[arg-type]
    target = tmp_path / "out.swf"
    with pytest.raises(WorkloadError, match=r"t\.gwf:\d+: field 4"):
        convert_gwf_to_swf(source, target)
    assert not target.exists()
    written, skipped = convert_gwf_to_swf(source, target, skip_invalid=True)
    assert (written, skipped.count) == (1, 1)


def test_keep_records_for_gwf(tmp_path: Path) -> None:
    workload = load_workload(
        write_gwf_text(tmp_path / "t.gwf", [gwf_line(2, T0 + 5), gwf_line(1, T0)]), keep_records=True
    )
    assert workload.records is not None
    assert [r.job_id for r in workload.records] == [1, 2]
    assert [r.submit_time for r in workload.records] == [0.0, 5.0]


def test_filter_a_gwf_file_to_swf(tmp_path: Path) -> None:
    from isthmus.workloads import MaxSize
    from isthmus.workloads.pipeline import filter_trace

    lines = [gwf_line(i, T0 + i, nprocs=2**i, user=f"U{i % 2}") for i in range(1, 8)]
    source = write_gwf_text(tmp_path / "g.gwf", lines)
    result = filter_trace(source, tmp_path / "small.swf", [MaxSize(16)])
    assert (result.read, result.written) == (7, 4)
    records = list(iter_swf(tmp_path / "small.swf"))
    assert [r.allocated_procs for r in records] == [2, 4, 8, 16]
    assert [r.submit_time for r in records] == [0.0, 1.0, 2.0, 3.0]
    assert read_swf_header(tmp_path / "small.swf").unix_start_time == T0 + 1
