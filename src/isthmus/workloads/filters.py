"""Job filters used to prepare traces as the seeds do (KOALA-C: jobs of at most 32 nodes,
the first 50,000 jobs of GWA traces; time windows; dropping jobs with unknown runtime).

Filters are small immutable objects applied in the order given, to a stream of
:class:`~isthmus.workloads.workload.Entry` (job, record, runtime known?) or of plain jobs,
one at a time: nothing is held in memory, and once a :class:`FirstJobs` filter has let its
count through the stream stops reading (so ``--first 100`` on a huge file reads 100 jobs).
Order matters: ``[FirstJobs(50000), MaxSize(32)]`` keeps the jobs of at most 32 processors
among the first 50,000 (KOALA-C's Table II), ``[MaxSize(32), FirstJobs(50000)]`` keeps
50,000 jobs of at most 32 processors.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass

from isthmus.model.job import Job
from isthmus.workloads.workload import Entry


class Filter:
    """Base of all filters: `keep(entry)` says whether the job passes; `describe()` says what
    the filter does, in words for reports and output headers."""

    def keep(self, entry: Entry) -> bool:
        """True when the job passes this filter."""
        raise NotImplementedError

    def describe(self) -> str:
        """A short description, e.g. 'size <= 32 processors'."""
        raise NotImplementedError


@dataclass(frozen=True, slots=True)
class MaxSize(Filter):
    """Keep jobs of at most `limit` processors (KOALA-C keeps jobs of at most 32 nodes)."""

    limit: int

    def __post_init__(self) -> None:
        if self.limit < 1:
            raise ValueError(f"the size limit must be >= 1, got {self.limit}")

    def keep(self, entry: Entry) -> bool:
        """True when the job's size is at most the limit."""
        return entry.job.size <= self.limit

    def describe(self) -> str:
        """'size <= N processors'."""
        return f"size <= {self.limit} processors"


@dataclass(frozen=True, slots=True)
class FirstJobs(Filter):
    """Keep the first `count` jobs that reach this filter (in stream order).

    Stateless as an object: the counting happens in :func:`filter_entries`, so one filter
    object can be reused on several streams.
    """

    count: int

    def __post_init__(self) -> None:
        if self.count < 0:
            raise ValueError(f"the job count must be >= 0, got {self.count}")

    def keep(self, entry: Entry) -> bool:
        """Always True: the count is enforced by the stream (see filter_entries)."""
        return True

    def describe(self) -> str:
        """'first N jobs'."""
        return f"first {self.count} jobs"


@dataclass(frozen=True, slots=True)
class SubmitWindow(Filter):
    """Keep jobs submitted in [start, end) seconds; None leaves that side open."""

    start: float | None = None
    end: float | None = None

    def __post_init__(self) -> None:
        for value in (self.start, self.end):
            if value is not None and not math.isfinite(value):
                raise ValueError(f"window bounds must be finite, got {value}")
        if self.start is not None and self.end is not None and self.end <= self.start:
            raise ValueError(f"the window end ({self.end:g}) must be after its start ({self.start:g})")

    def keep(self, entry: Entry) -> bool:
        """True when start <= submit < end."""
        submit = entry.job.submit
        if self.start is not None and submit < self.start:
            return False
        return self.end is None or submit < self.end

    def describe(self) -> str:
        """'submit in [a, b) s'."""
        lo = "-inf" if self.start is None else f"{self.start:g}"
        hi = "inf" if self.end is None else f"{self.end:g}"
        return f"submit in [{lo}, {hi}) s"


@dataclass(frozen=True, slots=True)
class DropUnknownRuntime(Filter):
    """Drop jobs whose trace runtime is unknown (-1) or 0 (jobs that never ran, e.g. cancelled
    before starting); the default conversion had given them 1 s."""

    def keep(self, entry: Entry) -> bool:
        """True when the trace knew a positive runtime."""
        if entry.record is not None:
            return entry.record.run_time > 0
        return entry.runtime_known

    def describe(self) -> str:
        """'runtime known'."""
        return "runtime known (not -1 or 0)"


def filter_entries(entries: Iterable[Entry], filters: Sequence[Filter]) -> Iterator[Entry]:
    """Yield the entries that pass every filter, in order, stopping early after a FirstJobs quota.

    Each FirstJobs counts the entries that reach it (those that passed the filters before it);
    once any quota is full no later entry can pass, so the input is not read further.
    """
    chain = list(filters)
    quotas = {i: f.count for i, f in enumerate(chain) if isinstance(f, FirstJobs)}
    if any(q == 0 for q in quotas.values()):
        return
    counts = dict.fromkeys(quotas, 0)
    for entry in entries:
        passed = True
        for i, flt in enumerate(chain):
            if i in quotas:
                counts[i] += 1
                continue
            if not flt.keep(entry):
                passed = False
                break
        if passed:
            yield entry
        if any(counts[i] >= quotas[i] for i in quotas):
            return


def filter_jobs(jobs: Iterable[Job], filters: Sequence[Filter]) -> Iterator[Job]:
    """Filter plain jobs (runtime taken as known), streaming; see :func:`filter_entries`."""
    for entry in filter_entries((Entry(job, None, True) for job in jobs), filters):
        yield entry.job


def describe_filters(filters: Sequence[Filter]) -> str:
    """The chain in words, e.g. 'first 50000 jobs, then size <= 32 processors'."""
    return ", then ".join(f.describe() for f in filters) if filters else "no filter"
