"""Standard Workload Format (SWF) of the Parallel Workloads Archive: records, header, reader, writer.

An SWF file is a block of header comments (lines starting with ``;``, most of them
``; Key: value``) followed by one line per job with 18 whitespace-separated numeric fields.
-1 means "unknown" in every field. This module reads and writes exactly that, without
interpreting it; turning a record into a :class:`~isthmus.model.job.Job` is the business of
:mod:`isthmus.workloads.conversion`.

Reading is streaming (one line at a time, gzip or plain, decided by the file's first bytes)
and fast: a job line is split once and converted field by field in a tight loop; only a line
that looks unusual goes through the slower path that names the faulty field.
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import NamedTuple, TextIO

from isthmus.workloads.errors import WorkloadError
from isthmus.workloads.textio import READ_ERRORS, TextFileReader


class SwfRecord(NamedTuple):
    """One job line of an SWF file: the 18 fields, in file order, -1 for unknown.

    Times are in seconds, memory in kilobytes per processor; fields that SWF allows to be
    fractional (times, memory) are floats, identifiers and counts are ints.
    """

    job_id: int
    submit_time: float
    wait_time: float
    run_time: float
    allocated_procs: int
    avg_cpu_time: float
    used_memory: float
    requested_procs: int
    requested_time: float
    requested_memory: float
    status: int
    user_id: int
    group_id: int
    executable_id: int
    queue_id: int
    partition_id: int
    preceding_job: int
    think_time: float


#: (field number, name used in messages, type) for each of the 18 SWF fields, in order.
SWF_FIELDS: tuple[tuple[int, str, type], ...] = (
    (1, "job number", int),
    (2, "submit time", float),
    (3, "wait time", float),
    (4, "run time", float),
    (5, "allocated processors", int),
    (6, "average CPU time", float),
    (7, "used memory", float),
    (8, "requested processors", int),
    (9, "requested time", float),
    (10, "requested memory", float),
    (11, "status", int),
    (12, "user id", int),
    (13, "group id", int),
    (14, "executable number", int),
    (15, "queue number", int),
    (16, "partition number", int),
    (17, "preceding job number", int),
    (18, "think time", float),
)
SWF_FIELD_COUNT = 18
UNKNOWN = -1
#: Lines at least this long skip the fast path (a 300-digit number could overflow to inf).
_FAST_LINE_LIMIT = 300
#: Integers with at least this many characters take the careful path (64-bit range check).
_FAST_ID_DIGITS = 19

#: A ``; Key: value`` line: any key when it follows ';' closely (up to two blanks), as most
#: archive files write them.
_HEADER_KEY = re.compile(r"^;[ \t]{0,2}([A-Za-z][A-Za-z0-9_\-]*)[ \t]*:(?:[ \t]+(.*?))?[ \t]*$")
#: The same shape with any indentation (``;        MaxProcs: 140``, as in LPC-EGEE); such a
#: line is a key only when the key is one the SWF definition lists (see SWF_HEADER_KEYS), so an
#: indented continuation of a free-text note (``;      Remark: ...``) stays free text.
_INDENTED_HEADER_KEY = re.compile(r"^;[ \t]*([A-Za-z][A-Za-z0-9_\-]*)[ \t]*:(?:[ \t]+(.*?))?[ \t]*$")
#: Header keys of the SWF definition (Parallel Workloads Archive, SWF version 2.2), lower case.
SWF_HEADER_KEYS = frozenset(
    k.lower()
    for k in (
        "Version", "Computer", "Installation", "Acknowledge", "Information", "Conversion", "MaxJobs",
        "MaxRecords", "Preemption", "UnixStartTime", "TimeZone", "TimeZoneString", "StartTime", "EndTime",
        "MaxNodes", "MaxProcs", "MaxRuntime", "MaxMemory", "AllowOveruse", "MaxQueues", "Queues", "Queue",
        "MaxPartitions", "Partitions", "Partition", "Note",
    )
)  # fmt: skip
#: Largest job number: the event log keeps job ids in a signed 64-bit column (``array('q')``).
MAX_JOB_ID = 2**63 - 1
_LEADING_INT = re.compile(r"^\s*([-+]?\d+)")
_LEADING_FLOAT = re.compile(r"^\s*([-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?)")


# --------------------------------------------------------------------------- header


@dataclass(frozen=True, slots=True)
class HeaderLine:
    """One header comment line: `key` and `value` for ``; Key: value``, key None for free text."""

    key: str | None
    value: str

    def render(self) -> str:
        """The line as written in a file (without the newline)."""
        if self.key is None:
            return ";" + self.value if self.value else ";"
        return f"; {self.key}: {self.value}" if self.value else f"; {self.key}:"


@dataclass(slots=True)
class SwfHeader:
    """The header comments of an SWF file, every line kept in order (repeated keys too).

    `get(key)` returns the first value of a key (keys compare case-insensitively), `get_all`
    every value; the typed properties (`max_procs`, `max_nodes`, `unix_start_time`, ...) parse
    the leading number of the value (``MaxNodes: 338 (batch partition; 512 total)`` gives 338)
    and return None when the key is absent or holds no number.
    """

    lines: list[HeaderLine] = field(default_factory=list)

    @classmethod
    def from_items(cls, items: Iterable[tuple[str, object]]) -> SwfHeader:
        """A header with one ``Key: value`` line per item (values turned into text)."""
        return cls([HeaderLine(k, str(v)) for k, v in items])

    def add_comment_line(self, line: str) -> None:
        """Parse one raw comment line (starting with ';') and append it."""
        text = line.rstrip("\r\n")
        match = _HEADER_KEY.match(text)
        if match is None:
            indented = _INDENTED_HEADER_KEY.match(text)
            if indented is not None and indented.group(1).lower() in SWF_HEADER_KEYS:
                match = indented
        if match:
            self.lines.append(HeaderLine(match.group(1), match.group(2) or ""))
        else:
            self.lines.append(HeaderLine(None, text.lstrip()[1:].rstrip()))

    def get(self, key: str, default: str | None = None) -> str | None:
        """The value of the first ``; key:`` line, or `default`."""
        wanted = key.lower()
        for line in self.lines:
            if line.key is not None and line.key.lower() == wanted:
                return line.value
        return default

    def get_all(self, key: str) -> list[str]:
        """Every value given for `key`, in file order (e.g. all ``Queue:`` lines)."""
        wanted = key.lower()
        return [ln.value for ln in self.lines if ln.key is not None and ln.key.lower() == wanted]

    def get_int(self, key: str) -> int | None:
        """The leading integer of the value of `key`, or None."""
        value = self.get(key)
        if value is None:
            return None
        match = _LEADING_INT.match(value)
        return int(match.group(1)) if match else None

    def get_float(self, key: str) -> float | None:
        """The leading number of the value of `key` as a float, or None."""
        value = self.get(key)
        if value is None:
            return None
        match = _LEADING_FLOAT.match(value)
        return float(match.group(1)) if match else None

    def set(self, key: str, value: object) -> None:
        """Replace the first ``key`` line's value, or append the line when the key is absent."""
        wanted = key.lower()
        for i, line in enumerate(self.lines):
            if line.key is not None and line.key.lower() == wanted:
                self.lines[i] = HeaderLine(line.key, str(value))
                return
        self.lines.append(HeaderLine(key, str(value)))

    def add(self, key: str | None, value: object) -> None:
        """Append a line (a repeated key, a ``Note``, or free text when key is None)."""
        self.lines.append(HeaderLine(key, str(value)))

    def copy(self) -> SwfHeader:
        """An independent copy (the lines are immutable, the list is new)."""
        return SwfHeader(list(self.lines))

    def as_dict(self) -> dict[str, str]:
        """Key → value of the first occurrence of each key (free-text lines left out)."""
        out: dict[str, str] = {}
        for line in self.lines:
            if line.key is not None and line.key not in out:
                out[line.key] = line.value
        return out

    def render(self) -> list[str]:
        """Every line as written in a file."""
        return [line.render() for line in self.lines]

    def __len__(self) -> int:
        return len(self.lines)

    @property
    def version(self) -> str | None:
        """The ``Version`` of the SWF format the file claims."""
        return self.get("Version")

    @property
    def max_procs(self) -> int | None:
        """``MaxProcs``: processors of the machine."""
        return self.get_int("MaxProcs")

    @property
    def max_nodes(self) -> int | None:
        """``MaxNodes``: nodes of the machine."""
        return self.get_int("MaxNodes")

    @property
    def unix_start_time(self) -> int | None:
        """``UnixStartTime``: the Unix time that submit time 0 stands for."""
        return self.get_int("UnixStartTime")

    @property
    def time_zone(self) -> int | None:
        """``TimeZone``: offset in seconds (deprecated in SWF 2.2 in favour of TimeZoneString)."""
        return self.get_int("TimeZone")

    @property
    def max_jobs(self) -> int | None:
        """``MaxJobs``: jobs in the (raw) log."""
        return self.get_int("MaxJobs")

    @property
    def max_records(self) -> int | None:
        """``MaxRecords``: records in the (raw) log."""
        return self.get_int("MaxRecords")

    @property
    def max_runtime(self) -> int | None:
        """``MaxRuntime``: the largest runtime allowed, seconds."""
        return self.get_int("MaxRuntime")

    @property
    def max_memory(self) -> int | None:
        """``MaxMemory``: the largest memory per processor, kilobytes."""
        return self.get_int("MaxMemory")

    @property
    def max_queues(self) -> int | None:
        """``MaxQueues``: number of queues."""
        return self.get_int("MaxQueues")

    @property
    def max_partitions(self) -> int | None:
        """``MaxPartitions``: number of partitions."""
        return self.get_int("MaxPartitions")

    @property
    def machine_size(self) -> int | None:
        """The machine size a simulation should assume: MaxProcs, else MaxNodes, else None."""
        procs = self.max_procs
        if procs is not None and procs > 0:
            return procs
        nodes = self.max_nodes
        if nodes is not None and nodes > 0:
            return nodes
        return None


# --------------------------------------------------------------------------- parsing


def _show(token: str) -> str:
    """A token quoted for an error message, shortened when long."""
    return repr(token if len(token) <= 40 else token[:37] + "...")


def parse_field(token: str, number: int, name: str, kind: type) -> int | float:
    """Convert one token of a numeric field, raising ValueError(message) naming what was expected.

    Ints accept an integral decimal ("64.0"); every value must be -1 (unknown) or >= 0.
    """
    value: int | float
    if not token.isascii() or "_" in token:
        expected = "an integer" if kind is int else "a number"
        raise ValueError(f"field {number} ({name}): expected {expected}, got {_show(token)}")
    if kind is int:
        try:
            value = int(token)
        except ValueError:
            try:
                as_float = float(token)
            except ValueError:
                raise ValueError(f"field {number} ({name}): expected an integer, got {_show(token)}") from None
            if not math.isfinite(as_float) or not as_float.is_integer():
                raise ValueError(f"field {number} ({name}): expected an integer, got {_show(token)}") from None
            value = int(as_float)
        if value > MAX_JOB_ID:  # 64 bits hold every integer the store and the API take
            raise ValueError(f"field {number} ({name}): expected at most {MAX_JOB_ID}, got {_show(token)}")
    else:
        try:
            value = float(token)
        except ValueError:
            raise ValueError(f"field {number} ({name}): expected a number, got {_show(token)}") from None
        if not math.isfinite(value):
            raise ValueError(f"field {number} ({name}): expected a finite number, got {_show(token)}")
    if value < 0 and value != UNKNOWN:
        raise ValueError(f"field {number} ({name}): expected -1 (unknown) or a value >= 0, got {_show(token)}")
    return value


def parse_swf_tokens(tokens: list[str]) -> SwfRecord:
    """Validate and convert the tokens of one job line; ValueError names the first bad field.

    This is the careful path; readers try a faster one first and fall back to this one.
    """
    if len(tokens) != SWF_FIELD_COUNT:
        raise ValueError(
            f"expected {SWF_FIELD_COUNT} whitespace-separated fields (an SWF job line) "
            f"or a ';' comment, got {len(tokens)} field{'s' if len(tokens) != 1 else ''}"
        )
    values = [
        parse_field(tok, number, name, kind) for tok, (number, name, kind) in zip(tokens, SWF_FIELDS, strict=True)
    ]
    return SwfRecord._make(values)


def check_job_id(value: int | float, token: str, name: str) -> None:
    """Raise ValueError (naming field 1) when a job number exceeds the 64-bit job-id column."""
    if value > MAX_JOB_ID:
        raise ValueError(
            f"field 1 ({name}): expected at most {MAX_JOB_ID} (job ids are signed 64-bit integers), got {_show(token)}"
        )


def parse_swf_line(line: str) -> SwfRecord:
    """Parse one job line (no comment, no blank); ValueError names the first bad field."""
    return parse_swf_tokens(line.split())


class SwfReader(TextFileReader):
    """Streaming reader of an SWF file (plain or gzip).

    Use as a context manager and iterate::

        with SwfReader("trace.swf.gz") as reader:
            header = reader.read_header()   # optional: comments before the first job line
            for record in reader:
                ...

    Iteration yields :class:`SwfRecord` objects one at a time; `line_number` is the line of
    the record last yielded. A malformed line raises :class:`WorkloadError` naming
    ``file:line`` and the field, unless `skip_invalid` is true, in which case the line is
    counted in `skipped` and reading goes on. Comment lines met after the first job line are
    added to `header` too. `name` is what messages call the file (default: the path as given).
    """

    def __init__(self, path: str | os.PathLike[str], *, skip_invalid: bool = False, name: str | None = None) -> None:
        super().__init__(path, skip_invalid=skip_invalid, name=name)
        self.header = SwfHeader()
        self._lines: Iterator[str] | None = None
        self._pending: str | None = None

    def open(self) -> SwfReader:
        """Open the file (done by ``with`` and by the first read)."""
        if self._lines is None:
            self._lines = iter(super().open().text())
        return self

    def close(self) -> None:
        """Close the file; safe to call twice."""
        super().close()
        self._lines = None

    # -- reading
    def _next_line(self) -> str | None:
        self.open()
        assert self._lines is not None
        try:
            line = next(self._lines)
        except StopIteration:
            return None
        except READ_ERRORS as exc:
            raise WorkloadError(f"cannot read past this line: {exc}", source=self.name, line=self.line_number) from None
        self.line_number += 1
        return line

    def read_header(self) -> SwfHeader:
        """Read the comment lines before the first job line and return the header.

        The first job line is kept for iteration. Calling it again returns the same header.
        """
        if self._pending is not None:
            return self.header
        while True:
            line = self._next_line()
            if line is None:
                return self.header
            stripped = line.lstrip()
            if not stripped:
                continue
            if stripped[0] == ";":
                self.header.add_comment_line(stripped)
                continue
            self._pending = line
            self.line_number -= 1  # re-counted when the pending line is consumed
            return self.header

    def _fail(self, message: str) -> None:
        self.skipped.reject(message, source=self.name, line=self.line_number, skip=self.skip_invalid)

    def __iter__(self) -> Iterator[SwfRecord]:
        self.open()
        lines = self._lines
        assert lines is not None
        new = tuple.__new__
        record_type = SwfRecord
        to_int = int
        to_float = float
        try:
            if self._pending is not None:
                pending, self._pending = self._pending, None
                chained: Iterable[str] = _prepend(pending, lines)
            else:
                chained = lines
            for line in chained:
                self.line_number += 1
                tokens = line.split()
                if not tokens:
                    continue
                first = tokens[0]
                if first[0] == ";":
                    self.header.add_comment_line(line.lstrip())
                    continue
                # Fast path: exactly 18 fields, ASCII, every '-' belongs to a "-1" token (so no
                # other negative), no 'n'/'N' (no nan/inf), no exponent and a short line (no
                # overflow to inf), no '_': then plain int()/float() conversion is validation
                # enough. Anything else takes the careful path, which names the faulty field.
                if (
                    len(tokens) == SWF_FIELD_COUNT
                    and len(line) < _FAST_LINE_LIMIT
                    and len(first) < _FAST_ID_DIGITS
                    and line.isascii()
                    and line.count("-") == tokens.count("-1")
                    and "n" not in line
                    and "N" not in line
                    and "e" not in line
                    and "E" not in line
                    and "_" not in line
                ):
                    (t0, t1, t2, t3, t4, t5, t6, t7, t8, t9, t10, t11, t12, t13, t14, t15, t16,
                     t17) = tokens  # fmt: skip
                    try:
                        # an integer of 19+ digits may not fit 64 bits: the careful path says so
                        if (len(t4) | len(t7) | len(t10) | len(t11) | len(t12) | len(t13) | len(t14)
                                | len(t15) | len(t16)) >= _FAST_ID_DIGITS:  # fmt: skip
                            raise ValueError
                        fast: SwfRecord | None = new(
                            record_type,
                            (
                                to_int(t0), to_float(t1), to_float(t2), to_float(t3), to_int(t4),
                                to_float(t5), to_float(t6), to_int(t7), to_float(t8), to_float(t9),
                                to_int(t10), to_int(t11), to_int(t12), to_int(t13), to_int(t14),
                                to_int(t15), to_int(t16), to_float(t17),
                            ),
                        )  # fmt: skip
                    except ValueError:
                        fast = None
                    if fast is not None:
                        yield fast
                        continue
                try:
                    record = parse_swf_tokens(tokens)
                except ValueError as exc:
                    self._fail(str(exc))
                    continue
                yield record
        except READ_ERRORS as exc:
            raise WorkloadError(f"cannot read past this line: {exc}", source=self.name, line=self.line_number) from None


def _prepend(first: str, rest: Iterator[str]) -> Iterator[str]:
    yield first
    yield from rest


def read_swf_header(path: str | os.PathLike[str]) -> SwfHeader:
    """Read only the header comments of an SWF file (stops at the first job line)."""
    with SwfReader(path) as reader:
        return reader.read_header()


def iter_swf(path: str | os.PathLike[str], *, skip_invalid: bool = False) -> Iterator[SwfRecord]:
    """Yield the records of an SWF file one at a time (the file is closed at the end).

    Raises WorkloadError naming ``file:line`` for a malformed line, unless `skip_invalid`.
    """
    with SwfReader(path, skip_invalid=skip_invalid) as reader:
        yield from reader


# --------------------------------------------------------------------------- writing


def format_number(value: float) -> str:
    """A number as SWF text that reads back to the same value.

    Integral values are written without a decimal point (``-1``, ``3600``); other floats use
    Python's shortest round-tripping representation (``0.5``, ``1e-07``).
    """
    if isinstance(value, int):
        return str(value)
    if value.is_integer() and abs(value) < 1e16:
        return str(int(value))
    return repr(value)


def format_swf_record(record: SwfRecord) -> str:
    """One job line for `record` (fields separated by single spaces, no newline)."""
    return " ".join([format_number(v) for v in record])


def validate_record(record: SwfRecord) -> None:
    """Raise ValueError when a record could not be read back (wrong type, NaN, negative)."""
    if len(record) != SWF_FIELD_COUNT:
        raise ValueError(f"an SWF record has {SWF_FIELD_COUNT} fields, got {len(record)}")
    for value, (number, name, kind) in zip(record, SWF_FIELDS, strict=True):
        if kind is int and (not isinstance(value, int) or isinstance(value, bool)):
            if isinstance(value, float) and value.is_integer():
                continue
            raise ValueError(f"field {number} ({name}): expected an integer, got {value!r}")
        if not isinstance(value, int | float) or not math.isfinite(value):
            raise ValueError(f"field {number} ({name}): expected a finite number, got {value!r}")
        if value < 0 and value != UNKNOWN:
            raise ValueError(f"field {number} ({name}): expected -1 or a value >= 0, got {value!r}")
    check_job_id(record[0], str(record[0]), "job number")


def write_swf_stream(
    out: TextIO, records: Iterable[SwfRecord], header: SwfHeader | None = None, *, validate: bool = True
) -> int:
    """Write a header block and the records to an open text stream; return the record count.

    With `validate` (the default) a record that could not be read back raises ValueError
    before anything of it is written.
    """
    if header is not None:
        for line in header.render():
            out.write(line)
            out.write("\n")
    count = 0
    fmt = format_number
    for record in records:
        if validate:
            validate_record(record)
        out.write(" ".join([fmt(v) for v in record]))
        out.write("\n")
        count += 1
    return count


def write_swf(
    path: str | os.PathLike[str],
    records: Iterable[SwfRecord],
    header: SwfHeader | None = None,
) -> int:
    """Write an SWF file atomically (gzip when the name ends in .gz); return the record count.

    The file appears only once it is complete: a failure (invalid record, full disk) leaves any
    previous file at `path` untouched. Invalid records raise WorkloadError.
    """
    from isthmus.workloads.textio import atomic_writer

    try:
        with atomic_writer(path) as out:
            return write_swf_stream(out, records, header)
    except ValueError as exc:
        if isinstance(exc, WorkloadError):
            raise
        raise WorkloadError(f"cannot write an invalid record: {exc}", source=str(path)) from None
