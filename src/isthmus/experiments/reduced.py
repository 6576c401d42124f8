"""Reduced traces for the peer-manager experiments: a week of a real trace, sampled and
compressed in time as in the Villegas dissertation §4.5.1.2 (`isthmus.workloads.reduce`).

The reduction is plain, picklable data (`Reduction`) so that a sweep point can carry it and any
worker process can rebuild the same jobs; the jobs are read once per process.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, cast

from isthmus.model.job import Job
from isthmus.workloads.conversion import RUN_CANCELLED

DAY = 86400.0


@dataclass(frozen=True)
class Reduction:
    """Which part of a trace to keep and how to compress it.

    `start_day`/`days`: the interval, in days from the trace's first submit (stage 1);
    `keep` of every `every` consecutive jobs (stage 2, the first `keep` of each block);
    `arrival_scale`/`runtime_scale`: factors on inter-arrival times and runtimes (stage 3);
    `cap`: a job asking for more processors is given this many (None: sizes unchanged).
    """

    start_day: float
    days: float = 7.0
    keep: int = 1
    every: int = 1
    arrival_scale: float = 1.0
    runtime_scale: float = 1.0
    cap: int | None = None

    def __post_init__(self) -> None:
        if self.start_day < 0 or self.days <= 0:
            raise ValueError(
                f"the interval must start at a day >= 0 and last > 0 days, got {self.start_day}, {self.days}"
            )
        if not 1 <= self.keep <= self.every:
            raise ValueError(f"sampling keeps 1..every jobs of every block, got {self.keep} of {self.every}")
        if not (self.arrival_scale > 0 and self.runtime_scale > 0):
            raise ValueError("time-scaling factors must be > 0")
        if self.cap is not None and self.cap < 1:
            raise ValueError(f"cap must be >= 1 processor, got {self.cap}")

    def as_items(self) -> tuple[tuple[str, Any], ...]:
        """The reduction as sorted (name, value) pairs (a sweep point's `extra`)."""
        return tuple(sorted(dataclasses.asdict(self).items()))

    @classmethod
    def from_items(cls, items: dict[str, Any]) -> Reduction:
        """The reduction from a dict holding (at least) its fields."""
        names = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in items.items() if k in names})

    def describe(self) -> str:
        """One sentence saying what was kept."""
        text = (
            f"days {self.start_day:g}-{self.start_day + self.days:g} from the first submit, "
            f"{self.keep} of every {self.every} jobs, inter-arrival times x 1/{1 / self.arrival_scale:.3g}, "
            f"runtimes x 1/{1 / self.runtime_scale:.3g}"
        )
        return text + (f", sizes capped at {self.cap} processors" if self.cap is not None else "")


@lru_cache(maxsize=16)
def reduced_jobs(trace: str, reduction: Reduction, cancelled: str = RUN_CANCELLED) -> tuple[Job, ...]:
    """The jobs of `trace` reduced by `reduction` (read once per process), submit times from 0."""
    from isthmus.workloads.reduce import reduce_workload

    workload = _workload(trace, cancelled)
    if not workload.jobs:
        raise ValueError(f"{trace}: no jobs")
    start = workload.jobs[0].submit + reduction.start_day * DAY
    reduced, _ = reduce_workload(
        workload,
        start=start,
        end=start + reduction.days * DAY,
        keep=reduction.keep,
        every=reduction.every,
        arrival_scale=reduction.arrival_scale,
        runtime_scale=reduction.runtime_scale,
    )
    jobs = reduced.jobs
    if not jobs:
        raise ValueError(f"{trace}: no job submitted in {reduction.describe()}")
    if reduction.cap is not None:
        cap = reduction.cap
        jobs = [dataclasses.replace(j, size=min(j.size, cap)) if j.size > cap else j for j in jobs]
    return tuple(jobs)


def cancelled_dropped(trace: str, cancelled: str = RUN_CANCELLED) -> int:
    """How many jobs cancelled before they started the `cancelled` treatment dropped from the
    whole trace (0 when it keeps them)."""
    conversion = _workload(trace, cancelled).conversion
    return int(conversion.cancelled_dropped) if conversion is not None else 0


@lru_cache(maxsize=4)
def _workload(trace: str, cancelled: str) -> Any:
    from isthmus.workloads import SwfConversion, resolve_workload
    from isthmus.workloads.conversion import Cancelled

    return resolve_workload(trace, conversion=SwfConversion(cancelled=cast(Cancelled, cancelled)))
