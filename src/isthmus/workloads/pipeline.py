"""Streaming trace-to-trace operations: filter or convert a file into an SWF file.

Input records are read one at a time, turned into jobs (for the filters' sake) and written
as SWF records, so a trace of any length needs memory only for its header and for the set of
job numbers seen (to refuse repeated ones). Outputs are written atomically: on any error the
output file is not created (or an existing one is left as it was).
"""

from __future__ import annotations

import os
from collections.abc import Generator, Iterator, Sequence
from dataclasses import dataclass, field

from isthmus.workloads.conversion import JobConverter, SwfConversion
from isthmus.workloads.errors import SkipReport, WorkloadError
from isthmus.workloads.filters import Filter, describe_filters, filter_entries
from isthmus.workloads.gwf import GwfReader, GwfToSwf, convert_gwf_to_swf
from isthmus.workloads.swf import SwfHeader, SwfReader, write_swf_stream
from isthmus.workloads.textio import atomic_writer
from isthmus.workloads.workload import Entry, detect_format


@dataclass(slots=True)
class StreamResult:
    """What a streaming operation did: records read (job lines that were valid), written,
    and skipped invalid lines."""

    read: int = 0
    written: int = 0
    skipped: SkipReport = field(default_factory=SkipReport)

    def to_dict(self) -> dict[str, object]:
        """A JSON-ready dict."""
        return {"read": self.read, "written": self.written, "skipped": self.skipped.to_dict()}


class TraceStream:
    """The entries of a trace file (SWF or GWF), one at a time, with the SWF header for output.

    Use as a context manager; iterate :meth:`entries`. GWF input is scanned once first (for
    its time origin and id numbering, see :class:`~isthmus.workloads.gwf.GwfToSwf`), which
    also validates it before anything is produced. `result.read` counts the valid records.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        conversion: SwfConversion | None = None,
        skip_invalid: bool = False,
    ) -> None:
        self.path = path
        self.source = str(path)
        self.conversion = conversion
        self.skip_invalid = skip_invalid
        self.format = detect_format(path)
        self.result = StreamResult()
        self.header = SwfHeader()

    def entries(self) -> Generator[Entry, None, None]:
        """Yield (job, SWF record, runtime known) for each valid job line, in file order."""
        if self.format == "gwf":
            yield from self._gwf_entries()
        else:
            yield from self._swf_entries()

    def _check(self, seen: set[int], entry_id: int, line: int) -> bool:
        if entry_id in seen:
            self.result.skipped.reject(
                f"field 1 (job number): job number {entry_id} is used by an earlier job",
                source=self.source,
                line=line,
                skip=self.skip_invalid,
            )
            return False
        seen.add(entry_id)
        return True

    def _swf_entries(self) -> Iterator[Entry]:
        with SwfReader(self.path, skip_invalid=self.skip_invalid) as reader:
            self.header = reader.read_header().copy()
            try:
                converter = JobConverter(self.conversion, self.header.machine_size)
            except ValueError as exc:
                raise WorkloadError(str(exc), source=self.source) from None
            seen: set[int] = set()
            try:
                for record in reader:
                    try:
                        job = converter.from_swf(record)
                    except ValueError as exc:
                        reader.skipped.reject(
                            str(exc), source=self.source, line=reader.line_number, skip=self.skip_invalid
                        )
                        continue
                    if job is None or not self._check(seen, job.id, reader.line_number):
                        continue
                    self.result.read += 1
                    yield Entry(job, record, record.run_time > 0)
            finally:
                self.result.skipped.merge(reader.skipped)
                reader.skipped = SkipReport()

    def _gwf_entries(self) -> Iterator[Entry]:
        with GwfReader(self.path, skip_invalid=self.skip_invalid) as first_pass:
            mapping = GwfToSwf.scan(first_pass)
        self.result.skipped.merge(first_pass.skipped)
        self.header = mapping.header(self.source)
        try:
            converter = JobConverter(self.conversion, None)
        except ValueError as exc:
            raise WorkloadError(str(exc), source=self.source) from None
        seen: set[int] = set()
        with GwfReader(self.path, skip_invalid=True) as reader:
            for gwf_record in reader:
                record = mapping(gwf_record)
                try:
                    job = converter.convert(
                        record.job_id,
                        record.submit_time,
                        record.run_time,
                        record.allocated_procs,
                        record.requested_procs,
                        record.requested_time,
                        record.requested_memory,
                        gwf_record.user_id,
                        gwf_record.group_id,
                        gwf_record.status,
                    )
                except ValueError as exc:
                    self.result.skipped.reject(
                        str(exc), source=self.source, line=reader.line_number, skip=self.skip_invalid
                    )
                    continue
                if job is None or not self._check(seen, job.id, reader.line_number):
                    continue
                self.result.read += 1
                yield Entry(job, record, record.run_time > 0)


def filter_trace(
    source: str | os.PathLike[str],
    target: str | os.PathLike[str],
    filters: Sequence[Filter],
    *,
    conversion: SwfConversion | None = None,
    skip_invalid: bool = False,
) -> StreamResult:
    """Write to `target` (SWF) the records of `source` (SWF or GWF) whose jobs pass `filters`.

    The records are written unchanged (all 18 fields); the header is the input's plus a
    ``Note`` naming the filters. Stops reading early when a FirstJobs quota is full, so in
    that case lines after the quota are not validated.
    """
    stream = TraceStream(source, conversion=conversion, skip_invalid=skip_invalid)
    entries = stream.entries()
    first = next(entries, None)  # reads the header
    header = stream.header.copy()
    header.add("Note", f"filtered by isthmus: {describe_filters(filters)}")

    def chained() -> Iterator[Entry]:
        if first is not None:
            yield first
        yield from entries

    try:
        with atomic_writer(target) as out:
            kept = (entry.record for entry in filter_entries(chained(), filters) if entry.record is not None)
            stream.result.written = write_swf_stream(out, kept, header)
    finally:
        entries.close()
    return stream.result


def convert_trace(
    source: str | os.PathLike[str],
    target: str | os.PathLike[str],
    *,
    skip_invalid: bool = False,
) -> StreamResult:
    """Convert `source` (SWF or GWF, plain or gzip) to an SWF file `target` (gzip if .gz).

    GWF is mapped field by field (see :mod:`isthmus.workloads.gwf`); SWF is rewritten record
    by record after validation (to check a file, compress or decompress it, or normalise its
    spacing). Records are not turned into jobs, so every valid record is kept (even one with
    an unknown submit time). A bad line raises before the output appears.
    """
    result = StreamResult()
    if detect_format(source) == "gwf":
        written, skipped = convert_gwf_to_swf(source, target, skip_invalid=skip_invalid)
        result.read = result.written = written
        result.skipped = skipped
        return result
    with SwfReader(source, skip_invalid=skip_invalid) as reader, atomic_writer(target) as out:
        header = reader.read_header().copy()
        header.add("Note", f"rewritten by isthmus workload convert from {os.path.basename(str(source))}")
        result.written = write_swf_stream(out, reader, header, validate=False)
        result.read = result.written
    result.skipped = reader.skipped
    return result
