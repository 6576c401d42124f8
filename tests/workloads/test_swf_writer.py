"""SWF writing: number formatting, headers, gzip, atomic replacement."""

from __future__ import annotations

import gzip
import os
from pathlib import Path

import pytest

from isthmus.workloads import SwfHeader, SwfRecord, WorkloadError, iter_swf, read_swf_header, write_swf
from isthmus.workloads.swf import format_number, format_swf_record
from isthmus.workloads.textio import atomic_writer

RECORD = SwfRecord(1, 0.0, -1.0, 3600.0, 4, 12.25, -1.0, 4, 7200.0, -1.0, 1, 7, 2, -1, 1, -1, -1, -1.0)


@pytest.mark.parametrize(
    ("value", "text"),
    [(-1.0, "-1"), (3600.0, "3600"), (0.5, "0.5"), (1e-07, "1e-07"), (12, "12"), (1e20, "1e+20"), (0.1, "0.1")],
)
def test_format_number(value: float, text: str) -> None:
    assert format_number(value) == text
    assert float(text) == value


def test_format_record_has_no_decimal_point_for_integers() -> None:
    assert format_swf_record(RECORD) == "1 0 -1 3600 4 12.25 -1 4 7200 -1 1 7 2 -1 1 -1 -1 -1"


def test_write_then_read_gives_the_same_records_and_header(tmp_path: Path) -> None:
    header = SwfHeader.from_items([("Version", "2.2"), ("MaxProcs", 64), ("Acknowledge", "someone")])
    header.add(None, " free text")
    records = [RECORD, RECORD._replace(job_id=2, submit_time=10.125)]
    for name in ("out.swf", "out.swf.gz"):
        path = tmp_path / name
        assert write_swf(path, records, header) == 2
        assert list(iter_swf(path)) == records
        assert read_swf_header(path).lines == header.lines
    with gzip.open(tmp_path / "out.swf.gz", "rt") as stream:
        assert stream.readline() == "; Version: 2.2\n"


def test_gzip_output_is_byte_identical_for_equal_content(tmp_path: Path) -> None:
    write_swf(tmp_path / "a.swf.gz", [RECORD])
    write_swf(tmp_path / "b.swf.gz", [RECORD])
    assert (tmp_path / "a.swf.gz").read_bytes() == (tmp_path / "b.swf.gz").read_bytes()


def test_invalid_record_raises_and_leaves_nothing(tmp_path: Path) -> None:
    bad = RECORD._replace(run_time=float("nan"))
    target = tmp_path / "out.swf"
    with pytest.raises(WorkloadError, match="field 4"):
        write_swf(target, [RECORD, bad])
    assert not target.exists()
    assert os.listdir(tmp_path) == []  # no temporary file left behind


def test_failure_keeps_the_previous_file_untouched(tmp_path: Path) -> None:
    target = tmp_path / "out.swf"
    write_swf(target, [RECORD])
    before = target.read_bytes()
    with pytest.raises(WorkloadError):
        write_swf(target, [RECORD._replace(allocated_procs=-5)])
    assert target.read_bytes() == before
    assert sorted(os.listdir(tmp_path)) == ["out.swf"]


def test_atomic_writer_removes_its_temporary_file_on_any_exception(tmp_path: Path) -> None:
    target = tmp_path / "x.txt"
    with pytest.raises(RuntimeError), atomic_writer(target) as out:
        out.write("partial")
        raise RuntimeError("boom")
    assert os.listdir(tmp_path) == []


def test_written_file_gets_normal_permissions(tmp_path: Path) -> None:
    target = tmp_path / "out.swf"
    write_swf(target, [RECORD])
    assert target.stat().st_mode & 0o044  # readable by others, not 0600 from mkstemp


def test_header_set_replaces_first_value() -> None:
    header = SwfHeader.from_items([("MaxJobs", 10), ("Note", "a")])
    header.set("maxjobs", 20)
    header.set("MaxProcs", 8)
    assert header.max_jobs == 20
    assert header.max_procs == 8
    assert header.render() == ["; MaxJobs: 20", "; Note: a", "; MaxProcs: 8"]


def test_writing_over_a_directory_is_a_clean_error(tmp_path: Path) -> None:
    (tmp_path / "taken").mkdir()
    with pytest.raises(WorkloadError, match="cannot write"):
        write_swf(tmp_path / "taken", [RECORD])
    assert os.listdir(tmp_path) == ["taken"]
