"""Property tests: exact round trips, and clean errors for every kind of corruption."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from isthmus.workloads import SwfHeader, SwfRecord, WorkloadError, iter_swf, load_workload, read_swf_header, write_swf
from isthmus.workloads.swf import SWF_FIELDS, format_swf_record

SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])

ints = st.one_of(st.just(-1), st.integers(min_value=0, max_value=2**62))
floats = st.one_of(
    st.just(-1.0),
    st.floats(min_value=0.0, max_value=1e300, allow_nan=False, allow_infinity=False),
    st.integers(min_value=0, max_value=10**9).map(float),
)


@st.composite
def swf_records(draw: st.DrawFn) -> SwfRecord:
    """Any valid SWF record (each field -1 or >= 0, ints where SWF has integers)."""
    return SwfRecord._make(draw(ints if kind is int else floats) for _, _, kind in SWF_FIELDS)


header_keys = st.from_regex(r"[A-Za-z][A-Za-z0-9_]{0,15}", fullmatch=True)
header_values = st.text(
    alphabet=st.characters(min_codepoint=33, max_codepoint=0x2FF, exclude_characters=";"), max_size=40
).map(str.strip)


@SETTINGS
@given(records=st.lists(swf_records(), max_size=20), items=st.lists(st.tuples(header_keys, header_values), max_size=6))
def test_records_and_header_round_trip_exactly(records: list[SwfRecord], items: list[tuple[str, str]]) -> None:
    header = SwfHeader.from_items(items)
    with tempfile.TemporaryDirectory() as folder:
        for name in ("t.swf", "t.swf.gz"):
            path = Path(folder) / name
            write_swf(path, records, header)
            back = list(iter_swf(path))
            assert back == records
            for original, reread in zip(records, back, strict=True):
                assert [type(v) for v in original] == [type(v) for v in reread]
            assert read_swf_header(path).lines == header.lines


# --------------------------------------------------------------------------- corruption

job_records = st.lists(
    st.tuples(
        st.integers(0, 10**7).map(float),  # submit
        st.one_of(st.just(-1.0), st.integers(0, 10**6).map(float)),  # run time
        st.one_of(st.just(-1), st.integers(1, 512)),  # allocated
        st.one_of(st.just(-1.0), st.floats(0, 1e6, allow_nan=False)),  # requested time
    ),
    min_size=1,
    max_size=12,
)

#: Tokens that are not numbers in any field (nan/inf are numbers to float() but not finite).
garbage_tokens = st.one_of(
    st.sampled_from(["abc", "x", "1x", "--1", "1-2", "0x1A", "#", "1,5", "nan", "-inf", "1e", "e5", ".", "-", "+"]),
    st.sampled_from(["1.2.3", "١٢", "１", "1_0", "Infinity", "NaN", "+-1", "1e+", "0b1", "∞", "½", "1e999", "9" * 400]),
    st.text(alphabet="abcdefghijklmnopqrstuvwxyz!?@#$%&*()[]{}<>|~^", min_size=1, max_size=8),
)
negative_tokens = st.one_of(
    st.integers(max_value=-2).map(str),
    st.floats(min_value=-0.999, max_value=-0.001).map(repr),
    st.floats(min_value=-1e9, max_value=-1.001).map(repr),
)
junk_lines = st.text(alphabet="abcxyz 0123456789.-", min_size=1, max_size=60).filter(
    lambda s: bool(s.strip()) and any(c.isalpha() for c in s)
)


def _build(rows: list[tuple[float, float, int, float]]) -> list[str]:
    lines = ["; Version: 2.2", "; MaxProcs: 512"]
    for number, (submit, run, alloc, req) in enumerate(rows, start=1):
        record = SwfRecord(number, submit, -1.0, run, alloc, -1.0, -1.0, 4, req, -1.0, 1, 3, 2, 1, 1, -1, -1, -1.0)
        lines.append(format_swf_record(record))
    return lines


@st.composite
def corrupted_files(draw: st.DrawFn) -> tuple[list[str], int, str, int | None, int]:
    """(lines, 1-based number of the corrupted line, kind, field number or None, valid jobs left)."""
    lines = _build(draw(job_records))
    jobs = len(lines) - 2
    target = draw(st.integers(2, len(lines) - 1))  # index of a job line
    tokens = lines[target].split()
    kind = draw(st.sampled_from(["garbage", "negative", "fraction", "delete", "add", "insert", "truncate"]))
    field: int | None = None
    left = jobs - 1
    if kind == "garbage":
        i = draw(st.integers(0, 17))
        tokens[i] = draw(garbage_tokens)
        field = i + 1
        lines[target] = " ".join(tokens)
    elif kind == "negative":
        i = draw(st.integers(0, 17))
        tokens[i] = draw(negative_tokens)
        field = i + 1
        lines[target] = " ".join(tokens)
    elif kind == "fraction":  # a fraction where SWF wants an integer
        i = draw(st.sampled_from([n - 1 for n, _, k in SWF_FIELDS if k is int]))
        tokens[i] = draw(st.sampled_from(["1.5", "0.25", "7.000001", "1e-3"]))
        field = i + 1
        lines[target] = " ".join(tokens)
    elif kind == "delete":
        del tokens[draw(st.integers(0, 17))]
        lines[target] = " ".join(tokens)
    elif kind == "add":
        tokens.insert(draw(st.integers(0, 18)), draw(st.sampled_from(["1", "-1", "0.5", "77"])))
        lines[target] = " ".join(tokens)
    elif kind == "insert":
        lines.insert(target, draw(junk_lines))
        left = jobs
    else:  # truncate inside the line, losing at least the last field
        text = lines[target]
        last_start = text.rindex(" ") + 1
        lines[target] = text[: draw(st.integers(1, last_start))]
    return lines, target + 1, kind, field, left


@SETTINGS
@given(case=corrupted_files())
def test_any_corruption_gives_a_clean_error_naming_file_and_line(
    case: tuple[list[str], int, str, int | None, int],
) -> None:
    lines, line_number, kind, field, left = case
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "corrupt.swf"
        path.write_text("\n".join(lines) + "\n", encoding="utf-8")
        result = None
        try:
            result = load_workload(path)
        except WorkloadError as exc:
            message = str(exc)
            assert message.startswith(f"{path}:{line_number}: "), (kind, message)
            if field is not None:
                assert f"field {field} (" in message, (kind, message)
            assert isinstance(exc, ValueError)
        except Exception as exc:  # pragma: no cover - this is the failure being looked for
            pytest.fail(f"{kind}: {type(exc).__name__} instead of WorkloadError: {exc}")
        assert result is None, f"{kind}: a partial workload was returned"
        with pytest.raises(WorkloadError):
            list(iter_swf(path))
        skipped = load_workload(path, skip_invalid=True)
        assert skipped.skipped.count == 1
        assert len(skipped.jobs) == left
        assert str(line_number) in skipped.skipped.examples[0]


@pytest.mark.parametrize("field", [1, 5, 8, 11, 12, 13, 14, 15, 16, 17])
def test_an_integer_beyond_64_bits_is_refused_naming_its_field(tmp_path: Path, field: int) -> None:
    tokens = ["1", "0", "5", "100", "4", "-1", "-1", "4", "100", "-1", "1", "1", "1", "-1", "1", "-1", "-1", "-1"]
    tokens[field - 1] = "9" * 25
    path = tmp_path / "big.swf"
    path.write_text(" ".join(tokens) + "\n")
    with pytest.raises(WorkloadError, match=rf"big.swf:1: field {field} \(.*expected at most 9223372036854775807"):
        load_workload(path)
