"""SWF reading: header, records, gzip, and the errors a malformed line gives."""

from __future__ import annotations

import gzip
from pathlib import Path

import pytest
from workloads_helpers import SWF_HEADER, swf_line, write_swf_text

from isthmus.workloads import SwfReader, SwfRecord, WorkloadError, iter_swf, load_workload, read_swf_header
from isthmus.workloads.swf import SWF_FIELDS, SwfHeader, parse_swf_line


def test_reads_all_18_fields_with_their_types(tmp_path: Path) -> None:
    line = "7 12.5 30 3600 16 3400.25 1024 32 7200 2048 1 42 3 17 2 1 5 60"
    path = write_swf_text(tmp_path / "t.swf", [line])
    (record,) = list(iter_swf(path))
    assert record == SwfRecord(
        7, 12.5, 30.0, 3600.0, 16, 3400.25, 1024.0, 32, 7200.0, 2048.0, 1, 42, 3, 17, 2, 1, 5, 60.0
    )
    for value, (_, _, kind) in zip(record, SWF_FIELDS, strict=True):
        assert type(value) is kind
    assert len(SWF_FIELDS) == 18


def test_header_keys_and_typed_accessors(tmp_path: Path) -> None:
    path = write_swf_text(tmp_path / "t.swf", [swf_line(1)])
    header = read_swf_header(path)
    assert header.version == "2.2"
    assert header.get("acknowledge") == "the isthmus tests"  # keys compare case-insensitively
    assert header.max_procs == 64
    assert header.max_nodes == 64  # leading number of "64 (all of them)"
    assert header.get("MaxNodes") == "64 (all of them)"
    assert header.unix_start_time == 1_000_000_000
    assert header.max_jobs == 4
    assert header.max_records == 4
    assert header.max_runtime is None
    assert header.machine_size == 64
    texts = [line.value for line in header.lines if line.key is None]
    assert texts == ["", "   free text line"]


def test_header_keeps_every_key_and_repeats(tmp_path: Path) -> None:
    header_text = "; Queue:  1 DSI      \n; Queue:  2 astro\n; Information: http://example.org/\n;      http://second.example.org/\n"
    path = write_swf_text(tmp_path / "t.swf", [swf_line(1)], header=header_text)
    header = read_swf_header(path)
    assert header.get_all("Queue") == ["1 DSI", "2 astro"]
    assert header.get("Information") == "http://example.org/"
    # a continuation line with a URL is free text, not a key "http"
    assert header.get("http") is None
    assert header.lines[-1].key is None


def test_machine_size_falls_back_to_max_nodes() -> None:
    header = SwfHeader.from_items([("MaxNodes", "128")])
    assert header.max_procs is None
    assert header.machine_size == 128
    assert SwfHeader().machine_size is None


def test_comments_blank_lines_and_crlf(tmp_path: Path) -> None:
    text = SWF_HEADER + "\r\n" + swf_line(1) + "\r\n   \n; Note: mid-file comment\n" + swf_line(2, 5) + "\n"
    path = tmp_path / "t.swf"
    path.write_bytes(text.encode())
    with SwfReader(path) as reader:
        records = list(reader)
        assert [r.job_id for r in records] == [1, 2]
        assert reader.header.get("Note") == "mid-file comment"


def test_gzip_is_detected_by_content_not_name(tmp_path: Path) -> None:
    plain = write_swf_text(tmp_path / "t.swf", [swf_line(1), swf_line(2, 3)])
    packed = tmp_path / "no-suffix.bin"
    packed.write_bytes(gzip.compress(plain.read_bytes()))
    assert list(iter_swf(packed)) == list(iter_swf(plain))
    assert load_workload(packed, format="swf").jobs == load_workload(plain).jobs


def test_integral_decimal_in_an_int_field_is_accepted(tmp_path: Path) -> None:
    path = write_swf_text(tmp_path / "t.swf", ["1 0 -1 10 64.0 -1 -1 -1 -1 -1 1 1 1 1 1 -1 -1 -1"])
    assert next(iter_swf(path)).allocated_procs == 64


def test_scientific_notation_and_minus_one_point_zero(tmp_path: Path) -> None:
    path = write_swf_text(tmp_path / "t.swf", ["1 1e3 -1.0 2.5e-1 4 -1 -1 -1 -1 -1 1 1 1 1 1 -1 -1 -1"])
    record = next(iter_swf(path))
    assert record.submit_time == 1000.0
    assert record.wait_time == -1.0
    assert record.run_time == 0.25


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        (
            "1 0 -1 abc 4 -1 -1 -1 -1 -1 1 1 1 1 1 -1 -1 -1",
            "field 4 (run time): expected a number, got 'abc'",
        ),
        (
            "1 0 -1 10 4.5 -1 -1 -1 -1 -1 1 1 1 1 1 -1 -1 -1",
            "field 5 (allocated processors): expected an integer, got '4.5'",
        ),
        (
            "1 0 -1 10 4 -1 -1 -1 -1 -1 1 -7 1 1 1 -1 -1 -1",
            "field 12 (user id): expected -1 (unknown) or a value >= 0, got '-7'",
        ),
        (
            "1 -0.5 -1 10 4 -1 -1 -1 -1 -1 1 1 1 1 1 -1 -1 -1",
            "field 2 (submit time): expected -1 (unknown) or a value >= 0, got '-0.5'",
        ),
        (
            "1 0 -1 -1e-1 4 -1 -1 -1 -1 -1 1 1 1 1 1 -1 -1 -1",
            "field 4 (run time): expected -1 (unknown) or a value >= 0, got '-1e-1'",
        ),
        (
            "1 0 -1 nan 4 -1 -1 -1 -1 -1 1 1 1 1 1 -1 -1 -1",
            "field 4 (run time): expected a finite number, got 'nan'",
        ),
        (
            "1 0 -1 10 4 -1 -1 -1 inf -1 1 1 1 1 1 -1 -1 -1",
            "field 9 (requested time): expected a finite number, got 'inf'",
        ),
        (
            "1 0 -1 1e999 4 -1 -1 -1 -1 -1 1 1 1 1 1 -1 -1 -1",
            "field 4 (run time): expected a finite number, got '1e999'",
        ),
        (
            "1 0 -1 " + "9" * 400 + " 4 -1 -1 -1 -1 -1 1 1 1 1 1 -1 -1 -1",
            "field 4 (run time): expected a finite number",
        ),
        (
            "1 0 -1 1_000 4 -1 -1 -1 -1 -1 1 1 1 1 1 -1 -1 -1",
            "field 4 (run time): expected a number, got '1_000'",
        ),
        (
            "1 0 -1 １０ 4 -1 -1 -1 -1 -1 1 1 1 1 1 -1 -1 -1",
            "field 4 (run time): expected a number, got '１０'",
        ),
        ("1 0 -1 10 4 -1 -1 -1 -1 -1 1 1 1 1 1 -1 -1", "expected 18 whitespace-separated fields"),
        ("1 0 -1 10 4 -1 -1 -1 -1 -1 1 1 1 1 1 -1 -1 -1 9", "got 19 fields"),
        ("hello world", "got 2 fields"),
    ],
)
def test_malformed_line_names_file_line_and_field(tmp_path: Path, line: str, expected: str) -> None:
    path = write_swf_text(tmp_path / "trace.swf", [swf_line(1), swf_line(2), line, swf_line(4)])
    bad_line = SWF_HEADER.count("\n") + 3
    with pytest.raises(WorkloadError) as info:
        list(iter_swf(path))
    message = str(info.value)
    assert message.startswith(f"{path}:{bad_line}: ")
    assert expected in message
    assert info.value.line == bad_line
    assert isinstance(info.value, ValueError)
    with pytest.raises(WorkloadError, match=f":{bad_line}: "):
        load_workload(path)


def test_error_message_format_is_exactly_as_documented(tmp_path: Path) -> None:
    path = tmp_path / "trace.swf"
    path.write_text("1 0 -1 abc 4 -1 -1 -1 -1 -1 1 1 1 1 1 -1 -1 -1\n")
    with pytest.raises(WorkloadError) as info:
        load_workload(path)
    assert str(info.value) == f"{path}:1: field 4 (run time): expected a number, got 'abc'"


def test_skip_invalid_counts_reports_and_skips(tmp_path: Path) -> None:
    lines = [swf_line(1), "bad line", swf_line(2), "1 0 -1 x 4 -1 -1 -1 -1 -1 1 1 1 1 1 -1 -1 -1", swf_line(3)]
    path = write_swf_text(tmp_path / "t.swf", lines)
    with SwfReader(path, skip_invalid=True) as reader:
        assert [r.job_id for r in reader] == [1, 2, 3]
    assert reader.skipped.count == 2
    assert len(reader.skipped.examples) == 2
    assert "got 2 fields" in reader.skipped.examples[0]
    assert "skipped 2 invalid lines" in reader.skipped.summary()
    workload = load_workload(path, skip_invalid=True)
    assert [j.id for j in workload.jobs] == [1, 2, 3]
    assert workload.skipped.count == 2


def test_skip_report_keeps_only_the_first_few_examples(tmp_path: Path) -> None:
    lines = [swf_line(1)] + [f"bad {i}" for i in range(20)]
    workload = load_workload(write_swf_text(tmp_path / "t.swf", lines), skip_invalid=True)
    assert workload.skipped.count == 20
    assert len(workload.skipped.examples) == 5


def test_missing_file_and_directory_give_workload_errors(tmp_path: Path) -> None:
    with pytest.raises(WorkloadError, match="no such file"):
        load_workload(tmp_path / "missing.swf")
    with pytest.raises(WorkloadError, match="directory"):
        load_workload(tmp_path, format="swf")


def test_truncated_gzip_gives_a_workload_error(tmp_path: Path) -> None:
    plain = write_swf_text(tmp_path / "t.swf", [swf_line(i, i) for i in range(1, 2000)])
    packed = gzip.compress(plain.read_bytes())
    broken = tmp_path / "broken.swf.gz"
    broken.write_bytes(packed[: len(packed) // 2])
    with pytest.raises(WorkloadError, match="cannot read"):
        load_workload(broken)


def test_non_utf8_bytes_in_a_job_line_give_a_field_error(tmp_path: Path) -> None:
    path = tmp_path / "t.swf"
    path.write_bytes(b"1 0 -1 1\xff0 4 -1 -1 -1 -1 -1 1 1 1 1 1 -1 -1 -1\n")
    with pytest.raises(WorkloadError, match=r":1: field 4 \(run time\)"):
        load_workload(path)


def test_parse_swf_line_direct() -> None:
    record = parse_swf_line(swf_line(3, 10, 20, 2))
    assert (record.job_id, record.submit_time, record.run_time, record.allocated_procs) == (3, 10.0, 20.0, 2)


def test_read_header_then_iterate_does_not_lose_the_first_job(tmp_path: Path) -> None:
    path = write_swf_text(tmp_path / "t.swf", [swf_line(1), swf_line(2)])
    with SwfReader(path) as reader:
        assert reader.read_header().max_procs == 64
        assert reader.read_header().max_procs == 64  # idempotent
        assert [r.job_id for r in reader] == [1, 2]
        assert reader.line_number == SWF_HEADER.count("\n") + 2


def test_empty_file_is_an_empty_workload(tmp_path: Path) -> None:
    path = tmp_path / "empty.swf"
    path.write_text("")
    workload = load_workload(path)
    assert workload.jobs == []
    assert len(workload.header) == 0
