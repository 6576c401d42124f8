"""Summary statistics of a workload: what KOALA-C's Table II shows, and a little more.

Table II of the KOALA-C paper gives, per trace, the job count (and the fraction kept after
dropping jobs larger than 32 nodes) and the job runtime mean, Q1, median, Q3 and 99th
percentile in minutes. :func:`summarize` computes those (in seconds and minutes), the size
distribution in power-of-two buckets, the submit span and the offered load.
Percentiles use linear interpolation between order statistics (numpy's default).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

import numpy as np

from isthmus.workloads.conversion import cancelled_report
from isthmus.workloads.workload import Workload

SECONDS_PER_DAY = 86_400.0


@dataclass(frozen=True, slots=True)
class RuntimeStats:
    """Runtime statistics in seconds (mean, quartiles, 99th percentile, extremes)."""

    mean: float
    q1: float
    median: float
    q3: float
    p99: float
    minimum: float
    maximum: float

    def in_minutes(self) -> dict[str, float]:
        """The same statistics in minutes."""
        return {k: v / 60.0 for k, v in asdict(self).items()}


@dataclass(frozen=True, slots=True)
class SizeBucket:
    """Jobs with size in [low, high] processors (power-of-two buckets: 1, 2, 3-4, 5-8, ...)."""

    low: int
    high: int
    count: int
    fraction: float

    @property
    def label(self) -> str:
        """'1', '2', '3-4', '5-8', ..."""
        return str(self.low) if self.low == self.high else f"{self.low}-{self.high}"


@dataclass(frozen=True, slots=True)
class WorkloadSummary:
    """What ``isthmus workload info`` prints; :meth:`to_dict` is its ``--json`` form."""

    name: str
    source: str
    jobs: int
    runtime: RuntimeStats | None
    size_min: int | None
    size_max: int | None
    size_mean: float | None
    size_buckets: list[SizeBucket]
    first_submit: float | None
    last_submit: float | None
    span_seconds: float
    total_area: float
    max_procs: int | None
    offered_load: float | None
    requested_runtime_known: int
    users: int
    metadata: dict[str, str] = field(default_factory=dict)
    conversion: dict[str, int] = field(default_factory=dict)
    cancelled: dict[str, object] = field(default_factory=dict)
    skipped: dict[str, object] = field(default_factory=dict)

    @property
    def span_days(self) -> float:
        """Span between first and last submit, in days."""
        return self.span_seconds / SECONDS_PER_DAY

    def to_dict(self) -> dict[str, object]:
        """A JSON-ready dict (runtime in seconds and in minutes)."""
        out: dict[str, object] = {
            "name": self.name,
            "source": self.source,
            "jobs": self.jobs,
            "runtime_seconds": asdict(self.runtime) if self.runtime else None,
            "runtime_minutes": self.runtime.in_minutes() if self.runtime else None,
            "size": {
                "min": self.size_min,
                "max": self.size_max,
                "mean": self.size_mean,
                "buckets": [
                    {"label": b.label, "low": b.low, "high": b.high, "count": b.count, "fraction": b.fraction}
                    for b in self.size_buckets
                ],
            },
            "submit": {
                "first": self.first_submit,
                "last": self.last_submit,
                "span_seconds": self.span_seconds,
                "span_days": self.span_days,
            },
            "total_area_proc_seconds": self.total_area,
            "max_procs": self.max_procs,
            "offered_load": self.offered_load,
            "requested_runtime_known": self.requested_runtime_known,
            "users": self.users,
            "metadata": self.metadata,
            "conversion": self.conversion,
            "cancelled_before_start": self.cancelled,
            "skipped": self.skipped,
        }
        return out


def size_buckets(sizes: np.ndarray) -> list[SizeBucket]:
    """Counts per power-of-two bucket: 1, 2, 3-4, 5-8, 9-16, ... up to the largest size."""
    if sizes.size == 0:
        return []
    total = float(sizes.size)
    # bucket k holds sizes in (2^(k-1), 2^k], bucket 0 holds size 1
    exponents = np.ceil(np.log2(np.maximum(sizes, 1))).astype(np.int64)
    counts = np.bincount(exponents)
    buckets = []
    for k, count in enumerate(counts):
        low = 1 if k == 0 else (1 << (k - 1)) + 1
        high = 1 << k
        buckets.append(SizeBucket(low, high, int(count), float(count) / total))
    return buckets


def runtime_stats(runtimes: np.ndarray) -> RuntimeStats | None:
    """Mean, quartiles and 99th percentile of runtimes in seconds; None when there are none."""
    if runtimes.size == 0:
        return None
    q1, median, q3, p99 = np.percentile(runtimes, [25, 50, 75, 99])
    return RuntimeStats(
        mean=float(runtimes.mean()),
        q1=float(q1),
        median=float(median),
        q3=float(q3),
        p99=float(p99),
        minimum=float(runtimes.min()),
        maximum=float(runtimes.max()),
    )


def offered_load(total_area: float, procs: int | None, span: float) -> float | None:
    """Σ size × runtime / (procs × span): the fraction of the machine the jobs ask for."""
    if not procs or span <= 0:
        return None
    return total_area / (procs * span)


def summarize(workload: Workload) -> WorkloadSummary:
    """The summary of `workload` (runtimes as converted: cut at the request, unknown → 1 s)."""
    jobs = workload.jobs
    n = len(jobs)
    runtimes = np.fromiter((j.runtime for j in jobs), dtype=np.float64, count=n)
    sizes = np.fromiter((j.size for j in jobs), dtype=np.int64, count=n)
    submits = np.fromiter((j.submit for j in jobs), dtype=np.float64, count=n)
    area = float(np.dot(runtimes, sizes.astype(np.float64))) if n else 0.0
    first = float(submits.min()) if n else None
    last = float(submits.max()) if n else None
    span = (last - first) if first is not None and last is not None else 0.0
    return WorkloadSummary(
        name=workload.name,
        source=workload.source,
        jobs=n,
        runtime=runtime_stats(runtimes),
        size_min=int(sizes.min()) if n else None,
        size_max=int(sizes.max()) if n else None,
        size_mean=float(sizes.mean()) if n else None,
        size_buckets=size_buckets(sizes),
        first_submit=first,
        last_submit=last,
        span_seconds=span,
        total_area=area,
        max_procs=workload.max_procs,
        offered_load=offered_load(area, workload.max_procs, span),
        requested_runtime_known=sum(1 for j in jobs if j.requested_runtime is not None),
        users=len({j.user for j in jobs}),
        metadata=workload.metadata,
        conversion=workload.conversion.to_dict() if workload.conversion else {},
        cancelled=cancelled_report(workload.conversion),
        skipped=workload.skipped.to_dict(),
    )
