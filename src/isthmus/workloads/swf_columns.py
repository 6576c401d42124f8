"""Reading a whole SWF trace at once into NumPy columns, and converting them to jobs as columns.

The line-by-line reader (:class:`~isthmus.workloads.swf.SwfReader`) converts and checks every
field of every line in Python. This module does the same for the usual file in a few NumPy
passes over its bytes: numbers are parsed by digit arithmetic, and every token must be a plain
decimal (digits with at most one point, 15 digits at most, or ``-1``), every job line must have
exactly 18 of them, and integer fields must be integral. A file in which anything is unusual
(a bad field, a token of another shape, a lone carriage return, a job the conversion cannot
make, a repeated job number) is not read here at all: :func:`read_swf_columns` returns None
and the caller reads the file with the line-by-line reader, which names the file, line and
field of every problem. So this path never changes what a file means or which error it gives;
it only reads well-formed files faster.

With 15 digits at most, the digits of a token form an integer below 2**53, which float64
holds exactly, and a point divides it by a power of ten up to 10**15, also exact: one
correctly rounded division gives the same float as Python's ``float()`` (Clinger's fast path).
"""

from __future__ import annotations

import gzip
import os
import zlib
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from numpy.typing import NDArray

from isthmus.model.jobtable import JobColumnsData
from isthmus.workloads.conversion import MIN_RUNTIME, STATUS_CANCELLED, ConversionStats, SwfConversion
from isthmus.workloads.swf import SWF_FIELD_COUNT, SWF_FIELDS, UNKNOWN, SwfHeader
from isthmus.workloads.textio import is_gzip

IntArray = NDArray[np.int64]
FloatArray = NDArray[np.float64]

#: Fields (0-based) a job is made of: job number, submit, run time, allocated processors,
#: requested processors, requested time, requested memory, status, user, group.
_WANTED = (0, 1, 3, 4, 7, 8, 9, 10, 11, 12)
_INT_FIELDS = np.array([kind is int for _n, _name, kind in SWF_FIELDS])
#: Most digits of a token read here (2**53 > 10**15).
_MAX_DIGITS = 15
_POW10 = 10.0 ** np.arange(_MAX_DIGITS + 2)
#: Bytes of job lines handled per pass (bounds the temporary arrays: about 20 bytes each).
_CHUNK = 1 << 18

_SPACE, _TAB, _LF, _CR, _DOT, _MINUS, _SEMI = 32, 9, 10, 13, 46, 45, 59


@dataclass(slots=True)
class SwfColumns:
    """The job lines of an SWF file as columns, in file order: the fields a job needs."""

    job_id: IntArray
    submit: FloatArray
    run_time: FloatArray
    allocated: IntArray
    requested_procs: IntArray
    requested_time: FloatArray
    requested_memory: FloatArray
    status: IntArray
    user: IntArray
    group: IntArray


def _read_bytes(path: str | os.PathLike[str]) -> bytes | None:
    """The whole file, decompressed; None when it cannot be read (the careful reader says why)."""
    p = Path(path)
    try:
        if is_gzip(p):
            return gzip.decompress(p.read_bytes())  # at once: a third of the time of reading a GzipFile
        return p.read_bytes()
    except (OSError, EOFError, zlib.error):
        return None


#: The class of every byte value: a job line holds digits, points, minus signs and blanks only.
_OTHER, _DIGIT, _POINT, _SIGN, _BLANK, _NEWLINE = range(6)
_CLASS = np.full(256, _OTHER, dtype=np.uint8)
_CLASS[48:58] = _DIGIT
_CLASS[[_DOT, _MINUS, _SPACE, _TAB, _CR, _LF]] = [_POINT, _SIGN, _BLANK, _BLANK, _BLANK, _NEWLINE]


def _parse_chunk(buf: NDArray[np.uint8]) -> NDArray[np.float64] | None:
    """The numbers of a block of job lines (comment lines blanked, ends at a line end) as an
    (n, 18) array; None when a token or a line is not of the plain shape."""
    kind = _CLASS[buf]
    if not bool(kind.all()):  # a byte of class _OTHER
        return None
    cr = np.flatnonzero(buf == _CR)
    if cr.size and (cr[-1] + 1 >= buf.size or bool(np.any(buf[cr + 1] != _LF))):
        return None  # a lone CR is a line break to the text reader
    in_token = kind < _BLANK
    first = in_token.copy()  # a token's first byte
    first[1:] &= ~in_token[:-1]
    last = in_token.copy()  # a token's last byte
    last[:-1] &= ~in_token[1:]
    starts = np.flatnonzero(first)
    ends = np.flatnonzero(last) + 1
    n_tokens = starts.size
    if n_tokens == 0:
        return np.empty((0, SWF_FIELD_COUNT))
    # 18 tokens on every line that has any (the block ends with a line end)
    before_line_end = np.searchsorted(starts, np.flatnonzero(kind == _NEWLINE))
    counts = np.diff(before_line_end, prepend=0)
    if not bool(np.all(counts[counts > 0] == SWF_FIELD_COUNT)):
        return None
    is_digit = kind == _DIGIT
    cum_digits = np.zeros(buf.size + 1, dtype=np.int64)  # digits before each byte
    np.cumsum(is_digit, out=cum_digits[1:])
    digits_before = cum_digits[starts]
    digits_through = cum_digits[ends]
    digits = digits_through - digits_before
    if int(digits.min()) < 1 or int(digits.max()) > _MAX_DIGITS:
        return None
    dots = np.flatnonzero(kind == _POINT)
    dot_token = np.searchsorted(starts, dots, side="right") - 1
    if dots.size > 1 and bool(np.any(dot_token[1:] == dot_token[:-1])):
        return None  # two points in a token
    minus = np.flatnonzero(kind == _SIGN)
    if minus.size and not bool(first[minus].all()):
        return None  # '-' only as a sign
    # each digit times ten to the power of the digits after it in its token, summed per token:
    # integers below 2**53, exact in float64 whatever the order of the sum
    place = np.repeat(digits_through - 1, digits) - np.arange(int(cum_digits[-1]))
    weighted = (buf[is_digit] - 48) * _POW10[place]
    mantissa: FloatArray = np.add.reduceat(weighted, digits_before)
    fraction = np.zeros(n_tokens, dtype=np.int64)
    fraction[dot_token] = digits_through[dot_token] - cum_digits[dots]
    values = mantissa / _POW10[fraction]
    if minus.size:
        minus_token = np.searchsorted(starts, minus)
        if not bool(np.all(values[minus_token] == 1.0)):
            return None  # a negative other than -1: the careful reader says which field
        values[minus_token] = -1.0
    return values.reshape(-1, SWF_FIELD_COUNT)


@dataclass(slots=True)
class SwfTable:
    """An SWF file read at once: its header (every comment line, in file order), how many of
    those lines come before the first job line (what a streaming reader knows when it starts
    converting), and the fields a job needs of every job line, in file order."""

    header: SwfHeader
    leading: int
    columns: SwfColumns

    @property
    def leading_header(self) -> SwfHeader:
        """The header as it stands before the first job line."""
        return SwfHeader(self.header.lines[: self.leading])


def _comments(
    chunk: NDArray[np.uint8], data: bytes, offset: int, header: SwfHeader
) -> tuple[NDArray[np.uint8], bool, int] | None:
    """Add the comment lines of `chunk` (bytes `offset`... of `data`, whole lines) to `header`
    and return the chunk with them blanked, whether it has a job line, and how many comment
    lines come before its first job line; None when a comment holds a lone carriage return."""
    ends = np.flatnonzero(chunk == _LF) + 1
    starts = np.concatenate(([0], ends[:-1]))
    blank = (chunk == _SPACE) | (chunk == _TAB) | (chunk == _CR) | (chunk == 11) | (chunk == 12) | (chunk == _LF)
    visible = np.flatnonzero(~blank)
    if visible.size == 0:
        return chunk, False, 0
    first = np.searchsorted(visible, starts)
    first_pos = visible[np.minimum(first, visible.size - 1)]
    has_first = (first < visible.size) & (first_pos < ends)
    comment = has_first & (chunk[first_pos] == _SEMI)
    jobs = starts[has_first & ~comment]
    before = int(np.count_nonzero(starts[comment] < jobs[0])) if jobs.size else 0
    if not bool(comment.any()):
        return chunk, bool(jobs.size), before
    chunk = chunk.copy()
    for start, end in zip(starts[comment].tolist(), ends[comment].tolist(), strict=True):
        text = data[offset + start : offset + end].decode("utf-8", errors="replace")
        if "\r" in text.rstrip("\r\n"):
            return None  # a CR inside: the text reader would see more lines
        header.add_comment_line(text.lstrip())
        chunk[start : end - 1] = _SPACE
    return chunk, bool(jobs.size), before


def read_swf_columns(path: str | os.PathLike[str]) -> SwfTable | None:
    """The header and job lines of an SWF file (:class:`SwfTable`), or None when the file is
    unusual in any way and must be read line by line.

    Every comment line goes to the header in file order, as the line-by-line reader does.
    Integer fields hold integral values (below 2**53) and every value is -1 or >= 0. The file
    is handled a few hundred kilobytes at a time, so the temporary arrays stay small.
    """
    data = _read_bytes(path)
    if data is None:
        return None
    if data and not data.endswith(b"\n"):
        data += b"\n"
    header = SwfHeader()
    leading = -1  # header lines before the first job line, once it is met
    lines = 0  # header lines before this chunk
    out = np.empty((len(_WANTED), data.count(b"\n")))
    rows = 0
    begin, size = 0, len(data)
    while begin < size:
        stop = size if begin + _CHUNK >= size else data.rfind(b"\n", begin, begin + _CHUNK) + 1
        if stop <= begin:
            return None  # a line of hundreds of kilobytes is no job line
        chunk = np.frombuffer(data, dtype=np.uint8, count=stop - begin, offset=begin)
        if leading < 0 or data.find(b";", begin, stop) >= 0:  # else no comment line, jobs already met
            done = _comments(chunk, data, begin, header)
            if done is None:
                return None
            chunk, has_jobs, before = done
            if leading < 0 and has_jobs:
                leading = lines + before
            lines = len(header.lines)
        block = _parse_chunk(chunk)
        if block is None:
            return None
        integral = block[:, _INT_FIELDS]
        if not bool(np.all(integral == np.floor(integral))):
            return None
        out[:, rows : rows + block.shape[0]] = block[:, _WANTED].T
        rows += block.shape[0]
        begin = stop
    if leading < 0:
        leading = len(header.lines)
    values: FloatArray = out[:, :rows]
    fields = [values[k] for k in range(len(_WANTED))]  # the fields of _WANTED, in that order
    as_int = {k: fields[k].astype(np.int64) for k in (0, 3, 4, 7, 8, 9)}
    columns = SwfColumns(
        as_int[0], fields[1].copy(), fields[2].copy(), as_int[3], as_int[4], fields[5].copy(), fields[6].copy(),
        as_int[7], as_int[8], as_int[9],
    )  # fmt: skip
    return SwfTable(header, leading, columns)


def convert_columns(
    cols: SwfColumns, options: SwfConversion, machine_size: int | None, stats: ConversionStats
) -> JobColumnsData | None:
    """:meth:`JobConverter.convert` applied to every record at once, counting into `stats`: the
    kept jobs as columns in file order (NaN for an unknown requested runtime or memory); None
    when some record cannot be a job (unknown job number or submit time) or a job number repeats,
    so that the careful reader reports it at its line."""
    if bool(np.any(cols.job_id < 0)) or bool(np.any(cols.submit < 0)):
        return None
    n = cols.job_id.size
    kept = np.ones(n, dtype=np.bool_)
    cancelled = (cols.status == STATUS_CANCELLED) & ((cols.allocated <= 0) | (cols.run_time <= 0))
    short = np.zeros(n, dtype=np.bool_)
    if options.cancelled == "drop":
        kept &= ~cancelled
    elif options.cancelled == "short":
        short = cancelled
    if options.size_from == "allocated":
        primary, other = cols.allocated, cols.requested_procs
    else:
        primary, other = cols.requested_procs, cols.allocated
    fallback = (primary <= 0) & (other > 0)
    size = np.where(primary > 0, primary, other)
    size_unknown = size <= 0
    runtime = np.where(short, MIN_RUNTIME, cols.run_time)
    dropped_unknown = np.zeros(n, dtype=np.bool_)
    if options.unknown == "drop":
        dropped_unknown = kept & (size_unknown | (~size_unknown & (runtime < 0)))
    else:
        size = np.where(size_unknown, 1, size)
    alive = kept & ~dropped_unknown  # still a job after the size and runtime rules
    fixed = runtime <= 0
    runtime = np.where(fixed, MIN_RUNTIME, runtime)
    requested = np.where(cols.requested_time > 0, cols.requested_time, np.nan)
    cut = np.zeros(n, dtype=np.bool_)
    if options.cut_at_request:
        cut = runtime > requested  # False where requested is NaN
        runtime = np.where(cut, requested, runtime)
    machine = options.max_procs or machine_size
    clipped = np.zeros(n, dtype=np.bool_)
    rejected = np.zeros(n, dtype=np.bool_)
    if machine is not None:
        over = size > machine
        if options.oversize == "clip":
            clipped = alive & over
            size = np.where(over, machine, size)
        elif options.oversize == "reject":
            rejected = alive & over
    made = alive & ~rejected
    ids = cols.job_id[made]
    if not bool(np.all(ids[1:] > ids[:-1])):  # job numbers usually increase: no sort needed
        ordered = np.sort(ids)
        if bool(np.any(ordered[1:] == ordered[:-1])):
            return None
    stats.cancelled_before_start += int(np.count_nonzero(cancelled))
    if options.cancelled == "drop":
        stats.cancelled_dropped += int(np.count_nonzero(cancelled))
    elif options.cancelled == "short":
        stats.cancelled_short += int(np.count_nonzero(cancelled))
    live = kept  # reached the size rule
    stats.size_fallback += int(np.count_nonzero(live & fallback))
    if options.unknown == "drop":
        stats.dropped_unknown += int(np.count_nonzero(dropped_unknown))
    else:
        stats.size_fixed += int(np.count_nonzero(live & size_unknown))
    reached_runtime = alive
    stats.runtime_fixed += int(np.count_nonzero(reached_runtime & fixed & ~short))
    unknown_runtime = (reached_runtime & fixed & ~short) | (cancelled & short & (cols.run_time <= 0))
    stats.unknown_runtime_ids.update(cols.job_id[unknown_runtime].tolist())
    stats.runtime_cut += int(np.count_nonzero(reached_runtime & cut))
    stats.clipped += int(np.count_nonzero(clipped))
    stats.rejected_oversize += int(np.count_nonzero(rejected))
    memory = cols.requested_memory[made]
    return JobColumnsData(
        ids=ids,
        submit=cols.submit[made],
        size=size[made],
        runtime=runtime[made],
        requested=requested[made],
        user=cols.user[made],
        group=cols.group[made],
        memory=np.where(memory != UNKNOWN, memory, np.nan),
    )
