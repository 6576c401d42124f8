"""The :class:`Workload` every reader and generator returns, and loading one from a file."""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from operator import attrgetter
from pathlib import Path
from typing import TYPE_CHECKING, Literal, NamedTuple

import numpy as np

from isthmus.model.job import Job
from isthmus.model.jobtable import JobTable
from isthmus.workloads.conversion import ConversionStats, IdMapper, JobConverter, SwfConversion, record_from_job
from isthmus.workloads.errors import SkipReport, WorkloadError
from isthmus.workloads.swf import SwfHeader, SwfReader, SwfRecord
from isthmus.workloads.textio import open_text

if TYPE_CHECKING:
    from isthmus.workloads.filters import Filter
    from isthmus.workloads.gwf import GwfRecord

TraceFormat = Literal["swf", "gwf"]
_submit_of = attrgetter("submit")


class Entry(NamedTuple):
    """One job as filters see it: the Job, the trace record it came from (None for generated
    jobs or when records were not kept), and whether the trace knew its runtime."""

    job: Job
    record: SwfRecord | None
    runtime_known: bool


@dataclass(frozen=True, slots=True)
class Workload:
    """A complete workload: jobs sorted by submit time, plus what is known about their origin.

    - `name`: short name (file name without folder, or model name);
    - `jobs`: the jobs, sorted by submit time; equal submit times keep file (generation) order
      (a list, or a :class:`~isthmus.model.jobtable.JobTable` when loaded with ``lazy=True``);
    - `header`: the SWF header (metadata) of the file, or one describing the model;
    - `max_procs`: the machine size when known (header MaxProcs/MaxNodes, model parameter);
    - `source`: the path or the full model spec (with seed) the workload came from;
    - `records`: the SWF records aligned with `jobs` when asked for (``keep_records=True``,
      used to write filtered or reduced traces without losing fields), else None;
    - `conversion`: what the record → job conversion changed (None for generated workloads);
    - `skipped`: lines skipped with ``skip_invalid=True``.

    Treat the lists as read-only; derive new workloads with :meth:`filter`, :meth:`head`,
    :meth:`replace_jobs`.
    """

    name: str
    jobs: Sequence[Job]
    header: SwfHeader = field(default_factory=SwfHeader)
    max_procs: int | None = None
    source: str = ""
    records: list[SwfRecord] | None = None
    conversion: ConversionStats | None = None
    skipped: SkipReport = field(default_factory=SkipReport)

    def __post_init__(self) -> None:
        if self.records is not None and len(self.records) != len(self.jobs):
            raise ValueError(f"records ({len(self.records)}) must align with jobs ({len(self.jobs)})")

    def __len__(self) -> int:
        return len(self.jobs)

    def __iter__(self) -> Iterator[Job]:
        return iter(self.jobs)

    @property
    def metadata(self) -> dict[str, str]:
        """Header keys and (first) values, e.g. {'MaxProcs': '338', 'Acknowledge': '...'}."""
        return self.header.as_dict()

    def runtime_known(self, job: Job) -> bool:
        """False when the trace gave this job no runtime (-1 or 0, replaced by 1 s)."""
        return self.conversion is None or job.id not in self.conversion.unknown_runtime_ids

    def entries(self) -> Iterator[Entry]:
        """The jobs as filter entries (job, record or None, runtime known?)."""
        unknown = self.conversion.unknown_runtime_ids if self.conversion is not None else set()
        records: Iterable[SwfRecord | None] = self.records if self.records is not None else [None] * len(self.jobs)
        for job, record in zip(self.jobs, records, strict=True):
            yield Entry(job, record, job.id not in unknown)

    def replace_jobs(
        self, jobs: Sequence[Job], records: list[SwfRecord] | None = None, *, name: str | None = None
    ) -> Workload:
        """A workload with the same origin and metadata but other jobs (and aligned records)."""
        return dataclasses.replace(self, jobs=jobs, records=records, name=name if name is not None else self.name)

    def filter(self, *filters: Filter) -> Workload:
        """A workload keeping only the jobs every filter accepts, applied in the order given."""
        from isthmus.workloads.filters import filter_entries

        kept = list(filter_entries(self.entries(), filters))
        jobs = [e.job for e in kept]
        records = [e.record for e in kept if e.record is not None] if self.records is not None else None
        return self.replace_jobs(jobs, records)

    def head(self, count: int) -> Workload:
        """The first `count` jobs (by submit time)."""
        if count < 0:
            raise ValueError(f"count must be >= 0, got {count}")
        records = self.records[:count] if self.records is not None else None
        return self.replace_jobs(self.jobs[:count], records)

    def to_records(self) -> list[SwfRecord]:
        """SWF records for the jobs: the original ones when kept, else built from the jobs."""
        if self.records is not None:
            return list(self.records)
        ids = IdMapper(_numeric_ids(self.jobs))
        return [record_from_job(job, ids) for job in self.jobs]


def _numeric_ids(jobs: Sequence[Job]) -> list[int]:
    numbers = [0]
    for job in jobs:
        for text in (job.user, job.group):
            n = IdMapper.as_number(text)
            if n is not None:
                numbers.append(n)
    return [max(numbers)]


def sort_by_submit(jobs: list[Job], records: list[SwfRecord] | None = None) -> None:
    """Sort jobs by submit time in place, stably (equal times keep their order), records alongside."""
    if all(jobs[i].submit <= jobs[i + 1].submit for i in range(len(jobs) - 1)):
        return
    if records is None:
        jobs.sort(key=_submit_of)
        return
    order = sorted(range(len(jobs)), key=lambda i: jobs[i].submit)
    jobs[:] = [jobs[i] for i in order]
    records[:] = [records[i] for i in order]


# --------------------------------------------------------------------------- loading


def detect_format(path: str | os.PathLike[str]) -> TraceFormat:
    """'swf' or 'gwf', from the file name (.swf, .gwf, optionally .gz) or else from the content.

    Content: ';' comments or 18 fields mean SWF, '#' comments or 29 fields mean GWF.
    """
    name = os.fspath(path).lower()
    if name.endswith(".gz"):
        name = name[:-3]
    if name.endswith(".swf"):
        return "swf"
    if name.endswith(".gwf"):
        return "gwf"
    with open_text(path) as stream:
        for _, line in zip(range(1000), stream, strict=False):
            tokens = line.split()
            if not tokens:
                continue
            if tokens[0].startswith(";"):
                return "swf"
            if tokens[0].startswith("#"):
                return "gwf"
            if len(tokens) == 29:
                return "gwf"
            return "swf"
    return "swf"


def load_workload(
    path: str | os.PathLike[str],
    *,
    conversion: SwfConversion | None = None,
    skip_invalid: bool = False,
    keep_records: bool = False,
    first: int | None = None,
    format: TraceFormat | None = None,
    name: str | None = None,
    lazy: bool = False,
) -> Workload:
    """Read a whole SWF or GWF trace (plain or gzip) into a :class:`Workload`.

    Returns the complete workload or raises :class:`WorkloadError` (never a partial one): a
    malformed line stops reading with a message naming ``file:line`` and the field. With
    `skip_invalid`, such lines (and records that cannot be jobs, e.g. with an unknown submit
    time or a repeated job number) are counted in ``workload.skipped`` and left out.
    `conversion` sets the record → job semantics (:class:`SwfConversion`, pyss/Alea defaults).
    `keep_records` keeps the SWF records aligned with the jobs (to write them back unchanged).
    `first` stops after that many jobs (in file order). `format` forces 'swf' or 'gwf'.
    With `lazy`, a well-formed SWF file's jobs stay columns (a
    :class:`~isthmus.model.jobtable.JobTable`, each `Job` built when used) instead of a list.
    """
    if first is not None and first < 0:
        raise WorkloadError(f"first must be >= 0, got {first}")
    fmt = format or detect_format(path)
    if fmt == "swf":
        return load_swf(
            path,
            conversion=conversion,
            skip_invalid=skip_invalid,
            keep_records=keep_records,
            first=first,
            name=name,
            lazy=lazy,
        )
    if fmt == "gwf":
        return load_gwf(
            path, conversion=conversion, skip_invalid=skip_invalid, keep_records=keep_records, first=first, name=name
        )
    raise WorkloadError(f"unknown trace format {fmt!r}; expected 'swf' or 'gwf'", source=str(path))


def _short_name(path: str | os.PathLike[str]) -> str:
    base = Path(path).name
    for suffix in (".gz", ".swf", ".gwf"):
        if base.lower().endswith(suffix):
            base = base[: -len(suffix)]
    return base or str(path)


def load_swf(
    path: str | os.PathLike[str],
    *,
    conversion: SwfConversion | None = None,
    skip_invalid: bool = False,
    keep_records: bool = False,
    first: int | None = None,
    name: str | None = None,
    lazy: bool = False,
) -> Workload:
    """Read an SWF trace into a Workload (see :func:`load_workload` for the contract)."""
    source = str(path)
    if not keep_records and first is None:  # (`first` reads only the head of a file)
        fast = _load_swf_at_once(path, conversion, name, lazy)
        if fast is not None:
            return fast
    with SwfReader(path, skip_invalid=skip_invalid) as reader:
        header = reader.read_header()
        machine = header.machine_size
        try:
            converter = JobConverter(conversion, machine)
        except ValueError as exc:
            raise WorkloadError(str(exc), source=source) from None
        jobs: list[Job] = []
        records: list[SwfRecord] | None = [] if keep_records else None
        seen: set[int] = set()
        append = jobs.append
        convert = converter.from_swf
        limit = first if first is not None else -1
        if limit == 0:
            return _finish(path, name, jobs, records, header, converter, reader.skipped)
        for record in reader:
            try:
                job = convert(record)
            except ValueError as exc:
                _reject(reader.skipped, skip_invalid, str(exc), source, reader.line_number)
                continue
            if job is None:
                continue
            job_id = job.id
            if job_id in seen:
                _reject(
                    reader.skipped,
                    skip_invalid,
                    f"field 1 (job number): job number {job_id} is used by an earlier job",
                    source,
                    reader.line_number,
                )
                continue
            seen.add(job_id)
            append(job)
            if records is not None:
                records.append(record)
            if len(jobs) == limit:
                break
    return _finish(path, name, jobs, records, header, converter, reader.skipped)


def _load_swf_at_once(
    path: str | os.PathLike[str], conversion: SwfConversion | None, name: str | None, lazy: bool
) -> Workload | None:
    """The workload of a well-formed SWF file read at once into columns (isthmus.workloads.swf_columns),
    its jobs a :class:`JobTable` when `lazy`, else a list; None when the file needs the line-by-line
    reader (anything unusual, an error to report at its line)."""
    from isthmus.workloads.swf_columns import convert_columns, read_swf_columns

    table = read_swf_columns(path)
    if table is None:
        return None
    header = table.header
    try:
        converter = JobConverter(conversion, table.leading_header.machine_size)
    except ValueError as exc:
        raise WorkloadError(str(exc), source=str(path)) from None
    stats = converter.stats
    done = convert_columns(table.columns, converter.options, converter.machine_size, stats)
    if done is None:
        return None
    del table
    order = np.argsort(done.submit, kind="stable")
    jobs = JobTable(done.take(order))
    return Workload(
        name=name or _short_name(path),
        jobs=jobs if lazy else jobs.to_list(),
        header=header,
        max_procs=converter.machine_size,
        source=str(path),
        records=None,
        conversion=stats,
        skipped=SkipReport(),
    )


def _reject(report: SkipReport, skip: bool, message: str, source: str, line: int) -> None:
    error = WorkloadError(message, source=source, line=line)
    if not skip:
        raise error
    report.add(error)


def _finish(
    path: str | os.PathLike[str],
    name: str | None,
    jobs: list[Job],
    records: list[SwfRecord] | None,
    header: SwfHeader,
    converter: JobConverter,
    skipped: SkipReport,
) -> Workload:
    sort_by_submit(jobs, records)
    return Workload(
        name=name or _short_name(path),
        jobs=jobs,
        header=header,
        max_procs=converter.machine_size,
        source=str(path),
        records=records,
        conversion=converter.stats,
        skipped=skipped,
    )


def load_gwf(
    path: str | os.PathLike[str],
    *,
    conversion: SwfConversion | None = None,
    skip_invalid: bool = False,
    keep_records: bool = False,
    first: int | None = None,
    rebase: bool | None = None,
    name: str | None = None,
) -> Workload:
    """Read a GWF trace into a Workload (see :func:`load_workload`; GWF semantics in gwf.py).

    Sizes, runtimes and the unknown-value rules are those of SWF (NProcs is field 5,
    ReqNProcs field 8, ...). User and group keep the GWF identifier text. Submit times are
    rebased to the first job when they look like Unix times (header ``UnixStartTime``).
    """
    from isthmus.workloads.gwf import GwfReader, GwfToSwf, time_origin  # (an SWF file needs none of it)

    source = str(path)
    try:
        converter = JobConverter(conversion, None)
    except ValueError as exc:
        raise WorkloadError(str(exc), source=source) from None
    raw: list[GwfRecord] = []
    lines: list[int] = []
    with GwfReader(path, skip_invalid=skip_invalid) as reader:
        for record in reader:
            raw.append(record)
            lines.append(reader.line_number)
            if first is not None and len(raw) >= first:
                break
    skipped = reader.skipped
    min_submit = min((r.submit_time for r in raw if r.submit_time >= 0), default=None)
    origin = time_origin(min_submit, rebase)
    mapping = GwfToSwf.scan(raw, rebase=rebase) if keep_records else None
    jobs: list[Job] = []
    records: list[SwfRecord] | None = [] if keep_records else None
    seen: set[int] = set()
    for record, line in zip(raw, lines, strict=True):
        submit = record.submit_time - origin if record.submit_time >= 0 else -1.0
        try:
            job = converter.convert(
                record.job_id,
                submit,
                record.run_time,
                record.nprocs,
                record.requested_procs,
                record.requested_time,
                record.requested_memory,
                record.user_id,
                record.group_id,
                record.status,
            )
        except ValueError as exc:
            _reject(skipped, skip_invalid, _gwf_message(str(exc)), source, line)
            continue
        if job is None:
            continue
        if job.id in seen:
            _reject(skipped, skip_invalid, f"field 1 (JobID): job {job.id} is used by an earlier job", source, line)
            continue
        seen.add(job.id)
        jobs.append(job)
        if records is not None and mapping is not None:
            records.append(mapping(record))
    header = GwfToSwf(origin=origin, count=len(jobs)).header(source)
    header.lines = [ln for ln in header.lines if ln.key != "Conversion"]
    header.add("Note", f"read from the GWF file {os.path.basename(source)}")
    for comment in reader.comments:
        header.add(None, " " + comment if comment else "")
    sort_by_submit(jobs, records)
    return Workload(
        name=name or _short_name(path),
        jobs=jobs,
        header=header,
        max_procs=None,
        source=source,
        records=records,
        conversion=converter.stats,
        skipped=skipped,
    )


def _gwf_message(message: str) -> str:
    """Rename SWF field names in a conversion message to their GWF names."""
    return message.replace("field 1 (job number)", "field 1 (JobID)").replace(
        "field 2 (submit time)", "field 2 (SubmitTime)"
    )
