"""Turning trace records into :class:`~isthmus.model.job.Job` objects, and back.

Trace formats leave several things open, and simulators answer them differently (see the
peers' notes and ``docs/workloads.md``). The choices are gathered in :class:`SwfConversion`;
its defaults follow pyss and Alea, so that a strict-FCFS schedule computed by isthmus agrees
with theirs:

- **size**: allocated processors (SWF field 5); when unknown (-1 or 0), the requested
  processors (field 8). ``size_from="requested"`` gives AccaSim's preference instead.
- **runtime cut**: a job whose runtime exceeds its requested time ends at the requested time
  (pyss, Alea). ``cut_at_request=False`` keeps the full runtime (AccaSim).
- **jobs larger than the machine** are kept by default (``oversize="keep"``): the engine and
  the environment decide what is impossible. ``"clip"`` makes them machine-sized (pyss,
  Alea), ``"reject"`` drops and counts them (AccaSim). The machine size is `max_procs`, or
  the header's MaxProcs, or its MaxNodes.
- **runtime -1 or 0, no usable size**: with ``unknown="fix"`` (pyss) the runtime becomes
  1 s and the size 1; with ``unknown="drop"`` (Alea) jobs with runtime -1 or no usable size
  are dropped and a runtime of 0 becomes 1 s.
- **requested time** -1 or 0 → ``requested_runtime=None``; **requested memory** -1 →
  None, otherwise kilobytes per processor as SWF says; **user/group** are the decimal ids
  as strings (``"-1"`` when unknown); **priority** is HIGH for every job.
- a job needs a known submit time and a job number: -1 there is an error naming the line.
- **jobs cancelled before they started** (status 5 with allocated processors -1 or 0 and/or
  runtime -1 or 0): ``cancelled="keep"`` reads them by the rules above like any job (the
  reading default, so a loaded trace has every job line of the file), ``"drop"`` leaves them
  out and counts them, ``"short"`` runs them as 1-second jobs. Runs (``isthmus simulate``,
  experiments, ``validate``) default to :data:`RUN_CANCELLED` ("drop"); docs/workloads.md
  explains why.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Literal

from isthmus.model.job import Job, PriorityClass
from isthmus.workloads.swf import UNKNOWN, SwfRecord

Oversize = Literal["keep", "clip", "reject"]
SizeSource = Literal["allocated", "requested"]
UnknownPolicy = Literal["fix", "drop"]
Cancelled = Literal["keep", "drop", "short"]

OVERSIZE_CHOICES: tuple[str, ...] = ("keep", "clip", "reject")
SIZE_SOURCES: tuple[str, ...] = ("allocated", "requested")
UNKNOWN_CHOICES: tuple[str, ...] = ("fix", "drop")
CANCELLED_CHOICES: tuple[str, ...] = ("keep", "drop", "short")
#: How every command that runs a trace treats jobs cancelled before they started, unless told.
RUN_CANCELLED: Cancelled = "drop"
#: SWF/GWF status of a cancelled job.
STATUS_CANCELLED = 5
#: One line per treatment, for help texts and summaries.
CANCELLED_MEANINGS: dict[str, str] = {
    "keep": "run as recorded (size and runtime by the usual rules)",
    "drop": "dropped (never run)",
    "short": "run as 1-second jobs",
}

#: Runtime given to jobs whose runtime is unknown or zero (pyss: 1-second jobs).
MIN_RUNTIME = 1.0


@dataclass(frozen=True, slots=True)
class SwfConversion:
    """How trace records become jobs; every field's default is the pyss/Alea behaviour.

    `max_procs` overrides the machine size read from the header (used by ``oversize``).
    `cancelled` says what becomes of jobs cancelled before they started (see
    :func:`cancelled_before_start`): "keep" (read like any job), "drop", or "short" (1 s).
    """

    size_from: SizeSource = "allocated"
    cut_at_request: bool = True
    oversize: Oversize = "keep"
    unknown: UnknownPolicy = "fix"
    max_procs: int | None = None
    cancelled: Cancelled = "keep"

    def __post_init__(self) -> None:
        if self.size_from not in SIZE_SOURCES:
            raise ValueError(f"size_from must be one of {', '.join(SIZE_SOURCES)}, got {self.size_from!r}")
        if self.oversize not in OVERSIZE_CHOICES:
            raise ValueError(f"oversize must be one of {', '.join(OVERSIZE_CHOICES)}, got {self.oversize!r}")
        if self.unknown not in UNKNOWN_CHOICES:
            raise ValueError(f"unknown must be one of {', '.join(UNKNOWN_CHOICES)}, got {self.unknown!r}")
        if self.cancelled not in CANCELLED_CHOICES:
            raise ValueError(f"cancelled must be one of {', '.join(CANCELLED_CHOICES)}, got {self.cancelled!r}")
        if self.max_procs is not None and self.max_procs <= 0:
            raise ValueError(f"max_procs must be positive, got {self.max_procs}")

    @property
    def cancelled_meaning(self) -> str:
        """The treatment of jobs cancelled before they started, in words."""
        return f"{self.cancelled}: {CANCELLED_MEANINGS[self.cancelled]}"

    @classmethod
    def clipped(cls, max_procs: int | None = None) -> SwfConversion:
        """pyss/Alea exactly: jobs larger than the machine are made machine-sized."""
        return cls(oversize="clip", max_procs=max_procs)

    @classmethod
    def accasim(cls, max_procs: int | None = None) -> SwfConversion:
        """AccaSim's reading: requested processors first, full runtime, oversize jobs dropped."""
        return cls(size_from="requested", cut_at_request=False, oversize="reject", max_procs=max_procs)


@dataclass(slots=True)
class ConversionStats:
    """What the conversion changed or dropped, counted per kind (a report, not an error).

    `unknown_runtime_ids` holds the ids of the jobs whose runtime was -1 or 0 in the trace
    (so filters can still drop them after the conversion gave them 1 s).
    """

    runtime_cut: int = 0
    runtime_fixed: int = 0
    size_fallback: int = 0
    size_fixed: int = 0
    clipped: int = 0
    rejected_oversize: int = 0
    dropped_unknown: int = 0
    cancelled_before_start: int = 0
    cancelled_dropped: int = 0
    cancelled_short: int = 0
    cancelled_treatment: Cancelled = "keep"
    unknown_runtime_ids: set[int] = field(default_factory=set)

    def cancelled_report(self) -> dict[str, object]:
        """The jobs cancelled before they started: treatment applied and how many met it."""
        return {
            "treatment": self.cancelled_treatment,
            "meaning": CANCELLED_MEANINGS[self.cancelled_treatment],
            "jobs": self.cancelled_before_start,
            "dropped": self.cancelled_dropped,
            "run_as_1s": self.cancelled_short,
        }

    def to_dict(self) -> dict[str, int]:
        """Counters as a JSON-ready dict (the id set is summarised by the runtime_fixed count)."""
        return {
            "runtime_cut_at_request": self.runtime_cut,
            "runtime_unknown_set_to_1s": self.runtime_fixed,
            "size_from_other_field": self.size_fallback,
            "size_unknown_set_to_1": self.size_fixed,
            "clipped_to_machine": self.clipped,
            "rejected_oversize": self.rejected_oversize,
            "dropped_unknown": self.dropped_unknown,
            "cancelled_before_start": self.cancelled_before_start,
            "cancelled_dropped": self.cancelled_dropped,
            "cancelled_run_as_1s": self.cancelled_short,
        }

    def lines(self) -> list[str]:
        """Human-readable lines for the non-zero counters."""
        labels = {
            "runtime_cut_at_request": "runtime cut at the requested time",
            "runtime_unknown_set_to_1s": "runtime -1 or 0 set to 1 s",
            "size_from_other_field": "size taken from the other processor field",
            "size_unknown_set_to_1": "size unknown set to 1",
            "clipped_to_machine": "size clipped to the machine",
            "rejected_oversize": "dropped: larger than the machine",
            "dropped_unknown": "dropped: runtime or size unknown",
            "cancelled_before_start": "cancelled before they started (status 5)",
            "cancelled_dropped": "dropped: cancelled before they started",
            "cancelled_run_as_1s": "cancelled before they started, run as 1 s",
        }
        return [f"{labels[k]}: {v}" for k, v in self.to_dict().items() if v]


class JobConverter:
    """Applies a :class:`SwfConversion` to one record after another, counting what it changes.

    `machine_size` is the processor count used by ``oversize`` ("clip"/"reject" need it).
    :meth:`convert` returns the Job, None when the job is dropped by the options, and raises
    ValueError (with a message naming the field) when the record cannot be a job.
    """

    def __init__(self, options: SwfConversion | None = None, machine_size: int | None = None) -> None:
        self.options = options or SwfConversion()
        size = self.options.max_procs or machine_size
        if self.options.oversize != "keep" and size is None:
            raise ValueError(
                f"oversize={self.options.oversize!r} needs the machine size, but the header has "
                "no MaxProcs or MaxNodes; give max_procs"
            )
        self.machine_size = size
        self.stats = ConversionStats(cancelled_treatment=self.options.cancelled)
        self._names: dict[int, str] = {}

    def name_of(self, ident: int) -> str:
        """The decimal id as a string, cached (user and group ids repeat a lot)."""
        name = self._names.get(ident)
        if name is None:
            name = self._names[ident] = str(ident)
        return name

    def convert(
        self,
        job_id: int,
        submit: float,
        run_time: float,
        allocated: int,
        requested_procs: int,
        requested_time: float,
        requested_memory: float,
        user: str,
        group: str,
        status: int = UNKNOWN,
    ) -> Job | None:
        """The job for these trace values (already validated as numbers), or None if dropped.

        `status` is the trace's status field (5: cancelled), used by the `cancelled` option.
        """
        opts = self.options
        stats = self.stats
        if job_id < 0:
            raise ValueError("field 1 (job number): unknown (-1), but a job needs an id")
        if submit < 0:
            raise ValueError("field 2 (submit time): unknown (-1), but a job needs a submit time")
        short = False
        if status == STATUS_CANCELLED and cancelled_before_start(status, allocated, run_time):
            stats.cancelled_before_start += 1
            if opts.cancelled == "drop":
                stats.cancelled_dropped += 1
                return None
            if opts.cancelled == "short":
                short = True
                stats.cancelled_short += 1
                if run_time <= 0:
                    stats.unknown_runtime_ids.add(job_id)

        # size
        if opts.size_from == "allocated":
            size = allocated
            if size <= 0:
                size = requested_procs
                if size > 0:
                    stats.size_fallback += 1
        else:
            size = requested_procs
            if size <= 0:
                size = allocated
                if size > 0:
                    stats.size_fallback += 1
        if size <= 0:
            if opts.unknown == "drop":
                stats.dropped_unknown += 1
                return None
            size = 1
            stats.size_fixed += 1

        # runtime
        runtime = MIN_RUNTIME if short else run_time
        if runtime <= 0:
            if runtime < 0 and opts.unknown == "drop":
                stats.dropped_unknown += 1
                return None
            runtime = MIN_RUNTIME
            stats.runtime_fixed += 1
            stats.unknown_runtime_ids.add(job_id)
        requested: float | None = requested_time if requested_time > 0 else None
        if requested is not None and runtime > requested and opts.cut_at_request:
            runtime = requested
            stats.runtime_cut += 1

        # machine size
        machine = self.machine_size
        if machine is not None and size > machine:
            if opts.oversize == "clip":
                size = machine
                stats.clipped += 1
            elif opts.oversize == "reject":
                stats.rejected_oversize += 1
                return None

        memory: float | None = requested_memory if requested_memory != UNKNOWN else None
        return Job(job_id, submit, size, runtime, requested, user, group, memory, PriorityClass.HIGH)

    def from_swf(self, record: SwfRecord) -> Job | None:
        """The job for one SWF record, or None when the options drop it (ValueError if invalid)."""
        names = self._names
        user = names.get(record[11]) or self.name_of(record[11])
        group = names.get(record[12]) or self.name_of(record[12])
        return self.convert(
            record[0], record[1], record[3], record[4], record[7], record[8], record[9], user, group, record[10]
        )


def cancelled_report(stats: ConversionStats | None) -> dict[str, object]:
    """:meth:`ConversionStats.cancelled_report`, or for a generated workload (no conversion) a
    report saying the treatment does not apply."""
    if stats is None:
        return {"treatment": None, "meaning": "not applicable: generated workload", "jobs": 0, "dropped": 0,
                "run_as_1s": 0}  # fmt: skip
    return stats.cancelled_report()


def describe_cancelled(report: dict[str, object]) -> str:
    """One line for a :func:`cancelled_report`, e.g. 'cancelled before start: 5,681 jobs, dropped'."""
    if report.get("treatment") is None:
        return f"cancelled before start: {report['meaning']}"
    jobs = report.get("jobs", 0)
    count = f"{jobs:,}" if isinstance(jobs, int) else str(jobs)
    treatment = f"--cancelled {report['treatment']}: {report['meaning']}"
    noun = "job" if jobs == 1 else "jobs"
    return f"cancelled before start (status 5): {count} {noun} in the trace, {treatment}"


def cancelled_before_start(status: int, allocated: int, run_time: float) -> bool:
    """True for a job cancelled before it started: status 5 (cancelled) with no processors
    allocated (-1 or 0) and/or no runtime (-1 or 0). A cancelled job with both recorded ran
    for a while and is an ordinary job."""
    return status == STATUS_CANCELLED and (allocated <= 0 or run_time <= 0)


def job_from_swf(
    record: SwfRecord, options: SwfConversion | None = None, machine_size: int | None = None
) -> Job | None:
    """Convert one record with `options` (see :class:`SwfConversion`); None when dropped."""
    return JobConverter(options, machine_size).from_swf(record)


class IdMapper:
    """Maps identifier strings to SWF integers: decimal ids stay as they are, others are numbered.

    Non-numeric names get 1, 2, 3, ... in order of first appearance, starting after the largest
    numeric id seen in the `known_numbers` given at construction (so they never collide).
    ``"-1"`` and the empty string stay -1 (unknown).
    """

    def __init__(self, known_numbers: Iterable[int] = ()) -> None:
        self._next = max([0, *known_numbers]) + 1
        self._names: dict[str, int] = {}

    @staticmethod
    def as_number(text: str) -> int | None:
        """The integer a decimal id string stands for (>= -1), or None for a name."""
        if text.isascii() and (text.isdigit() or text == "-1"):
            return int(text)
        return None

    def __call__(self, text: str) -> int:
        number = self.as_number(text)
        if number is not None:
            return number
        if not text:
            return UNKNOWN
        mapped = self._names.get(text)
        if mapped is None:
            mapped = self._names[text] = self._next
            self._next += 1
        return mapped

    @property
    def mapped(self) -> dict[str, int]:
        """The names numbered so far."""
        return dict(self._names)


def whole_seconds(value: float, *, positive: bool = False) -> int:
    """`value` rounded to the nearest integer, halves up (SWF times are whole seconds); with
    `positive`, a value above 0 gives at least 1 (a job that ran does not become a 0 s job)."""
    whole = math.floor(value + 0.5)
    return max(whole, 1) if positive and value > 0 else whole


def record_from_job(job: Job, ids: IdMapper | None = None) -> SwfRecord:
    """The SWF record that describes `job` (status 1 = completed, unknown fields -1). Times
    (submit, runtime, requested runtime) and the requested memory are written in whole units,
    rounded by `whole_seconds`: an archive's files hold integers there.

    Allocated and requested processors are both the job's size. User and group names that are
    not decimal ids go through `ids` (a fresh :class:`IdMapper` when None).
    """
    mapper = ids or IdMapper()
    return SwfRecord(
        job.id,
        float(whole_seconds(job.submit)),
        -1.0,
        float(whole_seconds(job.runtime, positive=True)),
        job.size,
        -1.0,
        -1.0,
        job.size,
        float(whole_seconds(job.requested_runtime, positive=True)) if job.requested_runtime is not None else -1.0,
        float(whole_seconds(job.requested_memory)) if job.requested_memory is not None else -1.0,
        1,
        mapper(job.user),
        mapper(job.group),
        -1,
        -1,
        -1,
        -1,
        -1.0,
    )
