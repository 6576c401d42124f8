"""Reading an SWF file at once into columns (isthmus.workloads.swf_columns) against the
line-by-line reader: the same jobs, header and conversion counts for every well-formed file,
and for every unusual one no columns at all (the line-by-line reader then names the problem)."""

from __future__ import annotations

import gzip
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from isthmus.model.jobtable import JobTable
from isthmus.workloads import SwfConversion, WorkloadError, load_workload
from isthmus.workloads import workload as workload_module
from isthmus.workloads.swf_columns import read_swf_columns

SETTINGS = settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])

CONVERSIONS = [
    SwfConversion(),
    SwfConversion(cancelled="drop"),
    SwfConversion(cancelled="short", unknown="drop"),
    SwfConversion.accasim(64),
    SwfConversion.clipped(16),
    SwfConversion(oversize="reject"),  # the machine size from the header before the first job line
    SwfConversion(size_from="requested", cut_at_request=False),
]


def line_by_line(path: Path, conversion: SwfConversion) -> object:
    """What the line-by-line reader makes of `path`: the workload, or the error's text."""
    saved = workload_module._load_swf_at_once
    workload_module._load_swf_at_once = lambda *args: None  # type: ignore[assignment]
    try:
        return load_workload(path, conversion=conversion)
    except WorkloadError as exc:
        return f"error: {exc}"
    finally:
        workload_module._load_swf_at_once = saved


def at_once(path: Path, conversion: SwfConversion) -> object:
    """What `load_workload` makes of `path` (at once when it can)."""
    try:
        return load_workload(path, conversion=conversion)
    except WorkloadError as exc:
        return f"error: {exc}"


def same(a: object, b: object) -> bool:
    """Equal workloads (jobs with their field types, header, counts) or equal error texts."""
    if isinstance(a, str) or isinstance(b, str):
        return a == b
    assert isinstance(a, workload_module.Workload) and isinstance(b, workload_module.Workload)
    types = [tuple(type(v) for v in (j.id, j.submit, j.size, j.runtime, j.requested_runtime)) for j in a.jobs]
    other = [tuple(type(v) for v in (j.id, j.submit, j.size, j.runtime, j.requested_runtime)) for j in b.jobs]
    return (
        list(a.jobs) == list(b.jobs)
        and types == other
        and a.header.lines == b.header.lines
        and a.conversion == b.conversion
        and a.max_procs == b.max_procs
        and a.skipped == b.skipped
    )


decimal = st.one_of(
    st.integers(min_value=0, max_value=10**15 - 1).map(str),
    st.tuples(st.integers(0, 10**7), st.integers(0, 10**7)).map(lambda p: f"{p[0]}.{p[1]}"),
    st.integers(0, 10**6).map(lambda v: f"{v}."),
    st.integers(0, 10**6).map(lambda v: f".{v}"),
    st.just("-1"),
    st.just("-1.0"),
    st.just("0"),
)
integral = st.one_of(st.integers(0, 300).map(str), st.just("-1"), st.integers(0, 300).map(lambda v: f"{v}.0"))
status = st.sampled_from(["0", "1", "5", "-1"])


@st.composite
def job_line(draw: st.DrawFn, job_id: int) -> str:
    """A well-formed job line: decimals in time fields, integral values in integer fields."""
    fields = [str(job_id), draw(st.integers(0, 10**6).map(str) | decimal.filter(lambda t: not t.startswith("-")))]
    for number in range(3, 19):
        if number in (5, 8):
            fields.append(draw(integral))
        elif number == 11:
            fields.append(draw(status))
        elif number in (12, 13, 14, 15, 16, 17):
            fields.append(draw(integral))
        else:
            fields.append(draw(decimal))
    sep = draw(st.sampled_from([" ", "  ", "\t", " \t "]))
    return draw(st.sampled_from(["", " ", "  "])) + sep.join(fields) + draw(st.sampled_from(["", " ", "\t"]))


comment = st.one_of(
    st.just("; MaxProcs: 16"),
    st.just(";        MaxNodes: 8"),
    st.just("; Note: a note"),
    st.just(";"),
    st.just("   ; indented comment"),
    st.text(alphabet="abc xyz:;é", max_size=20).map(lambda t: ";" + t),
)


@st.composite
def swf_files(draw: st.DrawFn) -> bytes:
    """A well-formed SWF file: comment lines before and among the job lines, blank lines, LF or
    CRLF line ends, with or without a final line end."""
    n = draw(st.integers(0, 25))
    lines = draw(st.lists(comment, max_size=4))
    for i in range(n):
        if draw(st.integers(0, 6)) == 0:
            lines.append(draw(comment | st.sampled_from(["", "   "])))
        lines.append(draw(job_line(i + 1)))
    end = draw(st.sampled_from(["\n", "\r\n"]))
    text = end.join(lines) + draw(st.sampled_from([end, ""]))
    return text.encode()


@SETTINGS
@given(data=swf_files(), compressed=st.booleans())
def test_well_formed_files_read_at_once_as_line_by_line(data: bytes, compressed: bool) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / ("t.swf.gz" if compressed else "t.swf")
        path.write_bytes(gzip.compress(data) if compressed else data)
        assert read_swf_columns(path) is not None  # the fast path is taken
        for conversion in CONVERSIONS:
            assert same(at_once(path, conversion), line_by_line(path, conversion))


GOOD = "1 0 -1 10 2 -1 -1 2 20 -1 1 1 1 -1 -1 -1 -1 -1"


@pytest.mark.parametrize(
    "bad",
    [
        "2 5 -1 1e3 2 -1 -1 2 20 -1 1 1 1 -1 -1 -1 -1 -1",  # exponent
        "2 5 -1 nan 2 -1 -1 2 20 -1 1 1 1 -1 -1 -1 -1 -1",  # not a number
        "2 5 -1 -2 2 -1 -1 2 20 -1 1 1 1 -1 -1 -1 -1 -1",  # negative other than -1
        "2 5 -1 10 2.5 -1 -1 2 20 -1 1 1 1 -1 -1 -1 -1 -1",  # fraction in an integer field
        "2 5 -1 10 2 -1 -1 2 20 -1 1 1 1 -1 -1 -1 -1",  # 17 fields
        "2 5 -1 10 2 -1 -1 2 20 -1 1 1 1 -1 -1 -1 -1 -1 7",  # 19 fields
        "2 5 -1 1.2.3 2 -1 -1 2 20 -1 1 1 1 -1 -1 -1 -1 -1",  # two points
        "2 5 -1 . 2 -1 -1 2 20 -1 1 1 1 -1 -1 -1 -1 -1",  # a point alone
        "2 5 -1 1-0 2 -1 -1 2 20 -1 1 1 1 -1 -1 -1 -1 -1",  # minus inside
        "2 5 -1 1234567890123456 2 -1 -1 2 20 -1 1 1 1 -1 -1 -1 -1 -1",  # 16 digits
        "99999999999999999999 5 -1 10 2 -1 -1 2 20 -1 1 1 1 -1 -1 -1 -1 -1",  # job number too large
        "-1 5 -1 10 2 -1 -1 2 20 -1 1 1 1 -1 -1 -1 -1 -1",  # no job number
        "2 -1 -1 10 2 -1 -1 2 20 -1 1 1 1 -1 -1 -1 -1 -1",  # no submit time
        "1 5 -1 10 2 -1 -1 2 20 -1 1 1 1 -1 -1 -1 -1 -1",  # job number 1 again
        "2 5 -1 1_0 2 -1 -1 2 20 -1 1 1 1 -1 -1 -1 -1 -1",  # underscore
        "2 5 -1 ١٠ 2 -1 -1 2 20 -1 1 1 1 -1 -1 -1 -1 -1",  # non-ASCII digits
        "2 5 -1 10 2 -1 -1 2 20 -1 1 1 1 -1 -1 -1 -1 -1\r3 6 -1 10 2 -1 -1 2 20 -1 1 1 1 -1 -1 -1 -1 -1",  # lone CR
    ],
)
def test_unusual_files_are_read_line_by_line(tmp_path: Path, bad: str) -> None:
    path = tmp_path / "t.swf"
    path.write_text(f"; MaxProcs: 8\n{GOOD}\n\n{bad}\n")
    for conversion in (SwfConversion(), SwfConversion(cancelled="drop")):
        assert workload_module._load_swf_at_once(path, conversion, None, False) is None  # not read at once
        assert same(at_once(path, conversion), line_by_line(path, conversion))
    result = at_once(path, SwfConversion())
    if isinstance(result, str):  # an error names the file and the line of the bad job line
        assert result.startswith(f"error: {path}:4: ")


def test_lazy_load_keeps_columns_and_builds_jobs_on_use(tmp_path: Path) -> None:
    path = tmp_path / "t.swf"
    path.write_text(f"{GOOD}\n3 1 -1 5 4 -1 -1 4 -1 -1 1 7 2 -1 -1 -1 -1 -1\n")
    lazy = load_workload(path, lazy=True)
    eager = load_workload(path)
    assert isinstance(lazy.jobs, JobTable) and isinstance(eager.jobs, list)
    assert list(lazy.jobs) == eager.jobs == [lazy.jobs[0], lazy.jobs[1]]
    assert lazy.jobs[1].user == "7" and lazy.jobs[1].requested_runtime is None and lazy.jobs[0].submit == 0.0
    assert list(lazy.jobs[1:]) == eager.jobs[1:]
    by_id = lazy.jobs.by_id()
    assert by_id[3] == eager.jobs[1] and 1 in by_id and 2 not in by_id and list(by_id) == [1, 3]
    with pytest.raises(KeyError):
        by_id[2]


def test_machine_size_comes_from_the_header_before_the_first_job_line(tmp_path: Path) -> None:
    """A streaming reader knows only the comments before the first job line when it converts:
    a MaxProcs given after it does not count, read at once or not."""
    big = "2 5 -1 10 32 -1 -1 32 20 -1 1 1 1 -1 -1 -1 -1 -1"
    late = tmp_path / "late.swf"
    late.write_text(f"; Note: x\n{GOOD}\n; MaxProcs: 16\n{big}\n")
    early = tmp_path / "early.swf"
    early.write_text(f"; MaxProcs: 16\n{GOOD}\n{big}\n")
    reject = SwfConversion(oversize="reject")
    late_result = at_once(late, reject)
    assert late_result == line_by_line(late, reject)
    assert isinstance(late_result, str) and "needs the machine size" in late_result
    early_result = at_once(early, reject)
    assert same(early_result, line_by_line(early, reject))
    assert isinstance(early_result, workload_module.Workload) and [j.id for j in early_result.jobs] == [1]
    assert read_swf_columns(late) is not None and read_swf_columns(early) is not None
