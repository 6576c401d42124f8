"""Grid Workloads Archive format (GWF): records, streaming reader, conversion to SWF.

A GWF file has ``#`` comment lines and one line per job with 29 whitespace-separated fields
(GWA format specification, Iosup et al., "The Grid Workloads Archive", FGCS 24(7), 2008):

 1 JobID, 2 SubmitTime, 3 WaitTime, 4 RunTime, 5 NProcs, 6 AverageCPUTimeUsed,
 7 UsedMemory, 8 ReqNProcs, 9 ReqTime, 10 ReqMemory, 11 Status, 12 UserID, 13 GroupID,
 14 ExecutableID, 15 QueueID, 16 PartitionID, 17 OrigSiteID, 18 LastRunSiteID,
 19 JobStructure, 20 JobStructureParams, 21 UsedNetwork, 22 UsedLocalDiskSpace,
 23 UsedResources, 24 ReqPlatform, 25 ReqNetwork, 26 ReqLocalDiskSpace, 27 ReqResources,
 28 VOID, 29 ProjectID.

-1 means unknown. Fields 1–11 and 21, 22, 25, 26 are numbers; the identifiers (12–20, 23,
24, 27–29) are strings in GWA traces (``U123``, ``UNITARY``, ...) and are kept as text. The
wait time may be negative (the GWA notes for Grid'5000 explain it by advance reservations),
so field 3 accepts any finite number; every other number must be -1 or >= 0.

Submit times in GWA traces are Unix times. When the smallest submit time looks like one
(>= 1e8 s, i.e. after 1973), jobs and converted SWF files are rebased so the first job is
submitted at 0, and the SWF header's ``UnixStartTime`` records the origin.
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import NamedTuple

from isthmus.workloads.conversion import IdMapper
from isthmus.workloads.errors import SkipReport, WorkloadError
from isthmus.workloads.swf import SwfHeader, SwfRecord, check_job_id, write_swf_stream
from isthmus.workloads.textio import READ_ERRORS, TextFileReader, atomic_writer


class GwfRecord(NamedTuple):
    """One job line of a GWF file: the 29 fields in file order (numbers as int/float, ids as str)."""

    job_id: int
    submit_time: float
    wait_time: float
    run_time: float
    nprocs: int
    avg_cpu_time: float
    used_memory: float
    requested_procs: int
    requested_time: float
    requested_memory: float
    status: int
    user_id: str
    group_id: str
    executable_id: str
    queue_id: str
    partition_id: str
    orig_site_id: str
    last_run_site_id: str
    job_structure: str
    job_structure_params: str
    used_network: float
    used_local_disk: float
    used_resources: str
    requested_platform: str
    requested_network: float
    requested_local_disk: float
    requested_resources: str
    vo_id: str
    project_id: str


#: (field number, GWA name, type) for the 29 fields; type str means "kept as text".
GWF_FIELDS: tuple[tuple[int, str, type], ...] = (
    (1, "JobID", int),
    (2, "SubmitTime", float),
    (3, "WaitTime", float),
    (4, "RunTime", float),
    (5, "NProcs", int),
    (6, "AverageCPUTimeUsed", float),
    (7, "UsedMemory", float),
    (8, "ReqNProcs", int),
    (9, "ReqTime", float),
    (10, "ReqMemory", float),
    (11, "Status", int),
    (12, "UserID", str),
    (13, "GroupID", str),
    (14, "ExecutableID", str),
    (15, "QueueID", str),
    (16, "PartitionID", str),
    (17, "OrigSiteID", str),
    (18, "LastRunSiteID", str),
    (19, "JobStructure", str),
    (20, "JobStructureParams", str),
    (21, "UsedNetwork", float),
    (22, "UsedLocalDiskSpace", float),
    (23, "UsedResources", str),
    (24, "ReqPlatform", str),
    (25, "ReqNetwork", float),
    (26, "ReqLocalDiskSpace", float),
    (27, "ReqResources", str),
    (28, "VOID", str),
    (29, "ProjectID", str),
)
GWF_FIELD_COUNT = 29
_WAIT_TIME_FIELD = 3
#: Submit times at or above this (1973-03-03) are taken as Unix times and rebased.
EPOCH_THRESHOLD = 1e8


def _show(token: str) -> str:
    return repr(token if len(token) <= 40 else token[:37] + "...")


def parse_gwf_tokens(tokens: list[str]) -> GwfRecord:
    """Validate and convert the 29 tokens of a GWF job line; ValueError names the bad field."""
    if len(tokens) != GWF_FIELD_COUNT:
        raise ValueError(
            f"expected {GWF_FIELD_COUNT} whitespace-separated fields (a GWF job line) "
            f"or a '#' comment, got {len(tokens)} field{'s' if len(tokens) != 1 else ''}"
        )
    values: list[int | float | str] = []
    for token, (number, name, kind) in zip(tokens, GWF_FIELDS, strict=True):
        if kind is str:
            values.append(token)
            continue
        value: int | float
        bad_text = not token.isascii() or "_" in token
        if kind is int:
            try:
                if bad_text:
                    raise ValueError
                value = int(token)
            except ValueError:
                try:
                    if bad_text:
                        raise ValueError from None
                    as_float = float(token)
                except ValueError:
                    raise ValueError(f"field {number} ({name}): expected an integer, got {_show(token)}") from None
                if not math.isfinite(as_float) or not as_float.is_integer():
                    raise ValueError(f"field {number} ({name}): expected an integer, got {_show(token)}") from None
                value = int(as_float)
        else:
            try:
                if bad_text:
                    raise ValueError
                value = float(token)
            except ValueError:
                raise ValueError(f"field {number} ({name}): expected a number, got {_show(token)}") from None
            if not math.isfinite(value):
                raise ValueError(f"field {number} ({name}): expected a finite number, got {_show(token)}")
        if value < 0 and value != -1 and number != _WAIT_TIME_FIELD:
            raise ValueError(f"field {number} ({name}): expected -1 (unknown) or a value >= 0, got {_show(token)}")
        values.append(value)
    job_id = values[0]
    assert isinstance(job_id, int)  # field 1 is an int field
    check_job_id(job_id, tokens[0], "JobID")
    return GwfRecord._make(values)


class GwfReader(TextFileReader):
    """Streaming reader of a GWF file (plain or gzip); same contract as :class:`SwfReader`.

    Iterating yields :class:`GwfRecord` objects; `comments` collects the ``#`` lines (without
    the ``#``); `line_number` is the line of the record last yielded; a malformed line raises
    WorkloadError naming ``file:line`` and the field, or is counted in `skipped` when
    `skip_invalid` is true.
    """

    def __init__(self, path: str | os.PathLike[str], *, skip_invalid: bool = False, name: str | None = None) -> None:
        super().__init__(path, skip_invalid=skip_invalid, name=name)
        self.comments: list[str] = []

    def __iter__(self) -> Iterator[GwfRecord]:
        self.open()
        assert self._file is not None
        try:
            for line in self._file:
                self.line_number += 1
                tokens = line.split()
                if not tokens:
                    continue
                if tokens[0][0] == "#":
                    self.comments.append(line.strip()[1:].strip())
                    continue
                try:
                    record = parse_gwf_tokens(tokens)
                except ValueError as exc:
                    self.skipped.reject(str(exc), source=self.name, line=self.line_number, skip=self.skip_invalid)
                    continue
                yield record
        except READ_ERRORS as exc:
            raise WorkloadError(f"cannot read past this line: {exc}", source=self.name, line=self.line_number) from None


def iter_gwf(path: str | os.PathLike[str], *, skip_invalid: bool = False) -> Iterator[GwfRecord]:
    """Yield the records of a GWF file one at a time (the file is closed at the end)."""
    with GwfReader(path, skip_invalid=skip_invalid) as reader:
        yield from reader


def time_origin(min_submit: float | None, rebase: bool | None = None) -> float:
    """The submit time that becomes 0: the smallest one if rebasing, else 0.

    With `rebase` None, rebase only when the smallest submit time looks like a Unix time.
    """
    if min_submit is None:
        return 0.0
    if rebase is None:
        rebase = min_submit >= EPOCH_THRESHOLD
    return float(min_submit) if rebase else 0.0


_ID_FIELDS = ("user_id", "group_id", "executable_id", "queue_id", "partition_id")


@dataclass(slots=True)
class GwfToSwf:
    """Maps GWF records to SWF records with a fixed time origin and fixed id numbering.

    Build it with :meth:`scan` over all records (it needs the smallest submit time and every
    numeric id first), then call it on each record. Negative wait times other than -1 become
    -1 in SWF (which does not allow them).
    """

    origin: float = 0.0
    mappers: dict[str, IdMapper] = field(default_factory=dict)
    count: int = 0
    negative_waits: int = 0

    @classmethod
    def scan(cls, records: Iterable[GwfRecord], *, rebase: bool | None = None) -> GwfToSwf:
        """Read every record once to fix the origin, the id numbering and the counts."""
        min_submit: float | None = None
        maxima: dict[str, int] = dict.fromkeys(_ID_FIELDS, 0)
        count = 0
        negative_waits = 0
        for record in records:
            count += 1
            if record.submit_time >= 0 and (min_submit is None or record.submit_time < min_submit):
                min_submit = record.submit_time
            if record.wait_time < 0 and record.wait_time != -1:
                negative_waits += 1
            for name in _ID_FIELDS:
                number = IdMapper.as_number(getattr(record, name))
                if number is not None and number > maxima[name]:
                    maxima[name] = number
        return cls(
            origin=time_origin(min_submit, rebase),
            mappers={name: IdMapper([maxima[name]]) for name in _ID_FIELDS},
            count=count,
            negative_waits=negative_waits,
        )

    def __call__(self, record: GwfRecord) -> SwfRecord:
        wait = record.wait_time
        if wait < 0 and wait != -1:
            wait = -1.0
        submit = record.submit_time - self.origin if record.submit_time >= 0 else -1.0
        m = self.mappers
        return SwfRecord(
            record.job_id,
            submit,
            wait,
            record.run_time,
            record.nprocs,
            record.avg_cpu_time,
            record.used_memory,
            record.requested_procs,
            record.requested_time,
            record.requested_memory,
            record.status,
            m["user_id"](record.user_id),
            m["group_id"](record.group_id),
            m["executable_id"](record.executable_id),
            m["queue_id"](record.queue_id),
            m["partition_id"](record.partition_id),
            -1,
            -1.0,
        )

    def header(self, source: str, names: Iterable[tuple[str, int]] = ()) -> SwfHeader:
        """The SWF header for a converted file: version, origin, and notes on what was mapped.

        `names` gives, per id field, how many names were numbered (known after the writing pass
        only when streaming, so callers that stream pass nothing and get a generic note).
        """
        header = SwfHeader()
        header.add("Version", "2.2")
        header.add("Conversion", f"isthmus workload convert, from the GWF file {os.path.basename(source)}")
        header.add("MaxJobs", self.count)
        header.add("MaxRecords", self.count)
        if self.origin:
            header.add("UnixStartTime", format(self.origin, ".0f") if self.origin.is_integer() else self.origin)
        header.add("Note", "fields 17-18 (preceding job, think time) are not in GWF: -1")
        header.add(
            "Note",
            "GWF user, group, executable, queue and partition ids that are not decimal numbers "
            "are numbered in order of first appearance, after the largest decimal id of the field",
        )
        for name, count in names:
            header.add("Note", f"{count} {name} names numbered")
        if self.negative_waits:
            header.add("Note", f"{self.negative_waits} negative GWF wait times written as -1")
        return header


def convert_gwf_to_swf(
    source: str | os.PathLike[str],
    target: str | os.PathLike[str],
    *,
    skip_invalid: bool = False,
    rebase: bool | None = None,
) -> tuple[int, SkipReport]:
    """Convert a GWF file to an SWF file; return (records written, skipped lines).

    Two streaming passes over the input: the first validates every line (a bad line raises
    before anything is written) and fixes the time origin, id numbering and counts; the
    second writes. The output is written atomically.
    """
    with GwfReader(source, skip_invalid=skip_invalid) as first_pass:
        mapping = GwfToSwf.scan(first_pass, rebase=rebase)
    with GwfReader(source, skip_invalid=True) as second_pass, atomic_writer(target) as out:
        written = write_swf_stream(out, (mapping(r) for r in second_pass), mapping.header(str(source)))
    return written, first_pass.skipped
