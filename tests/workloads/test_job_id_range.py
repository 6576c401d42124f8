"""Job numbers must fit the event log's signed 64-bit job column (array('q'))."""

from __future__ import annotations

from array import array
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from workloads_helpers import gwf_line, swf_line, write_gwf_text, write_swf_text

from isthmus.model.events import EventLog
from isthmus.workloads import SwfRecord, WorkloadError, iter_gwf, iter_swf, load_workload, write_swf
from isthmus.workloads.swf import MAX_JOB_ID, parse_swf_line

INT64_MAX = 2**63 - 1


def test_the_limit_is_what_the_event_log_column_holds() -> None:
    assert MAX_JOB_ID == INT64_MAX
    assert EventLog()._job.typecode == "q"
    column = array("q")
    column.append(MAX_JOB_ID)
    with pytest.raises(OverflowError):
        column.append(MAX_JOB_ID + 1)


@pytest.mark.parametrize("job_id", [10**23, INT64_MAX + 1, 10**19])
def test_swf_job_number_too_large_names_file_line_and_field(tmp_path: Path, job_id: int) -> None:
    path = write_swf_text(tmp_path / "big.swf", [swf_line(1), swf_line(job_id, submit=5)], header="; Version: 2.2\n")
    with pytest.raises(WorkloadError) as info:
        list(iter_swf(path))
    assert info.value.line == 3
    assert str(info.value).startswith(f"{path}:3: field 1 (job number): expected at most {INT64_MAX}")
    with pytest.raises(WorkloadError, match=r":3: field 1 \(job number\)"):
        load_workload(path)


def test_largest_64_bit_job_number_is_accepted_and_simulated(tmp_path: Path) -> None:
    path = write_swf_text(tmp_path / "edge.swf", [swf_line(INT64_MAX)], header="; MaxProcs: 4\n")
    (job,) = load_workload(path).jobs
    assert job.id == INT64_MAX
    log = EventLog()
    log.append(0.0, 0, job.id)  # what the engine does at SUBMIT: no OverflowError
    assert next(iter(log)).job == INT64_MAX


def test_integral_decimal_job_number_is_range_checked_too() -> None:
    with pytest.raises(ValueError, match=r"field 1 \(job number\): expected at most"):
        parse_swf_line(swf_line(1).replace("1 ", "1e23 ", 1))


def test_too_large_job_number_is_skipped_and_counted(tmp_path: Path) -> None:
    path = write_swf_text(tmp_path / "big.swf", [swf_line(1), swf_line(10**23, submit=5), swf_line(2, submit=9)])
    workload = load_workload(path, skip_invalid=True)
    assert [j.id for j in workload.jobs] == [1, 2]
    assert workload.skipped.count == 1
    assert "field 1 (job number)" in workload.skipped.examples[0]


def test_gwf_job_id_too_large(tmp_path: Path) -> None:
    path = write_gwf_text(tmp_path / "big.gwf", [gwf_line(1), gwf_line(10**23)])
    with pytest.raises(WorkloadError) as info:
        list(iter_gwf(path))
    assert f"{path}:5: field 1 (JobID): expected at most {INT64_MAX}" in str(info.value)
    assert len(list(iter_gwf(write_gwf_text(tmp_path / "edge.gwf", [gwf_line(INT64_MAX)])))) == 1


def test_writer_refuses_a_job_number_it_could_not_read_back(tmp_path: Path) -> None:
    record = SwfRecord(10**23, 0.0, -1.0, 10.0, 1, -1.0, -1.0, 1, -1.0, -1.0, 1, 1, 1, -1, -1, -1, -1, -1.0)
    with pytest.raises(WorkloadError, match=r"field 1 \(job number\)"):
        write_swf(tmp_path / "out.swf", [record])
    assert not (tmp_path / "out.swf").exists()


@given(st.integers(min_value=0, max_value=10**30))
def test_a_job_number_is_accepted_exactly_when_it_fits(job_id: int) -> None:
    line = swf_line(job_id)
    if job_id <= INT64_MAX:
        assert parse_swf_line(line).job_id == job_id
    else:
        with pytest.raises(ValueError, match=r"field 1 \(job number\)"):
            parse_swf_line(line)
