"""Building blocks shared by the synthetic workload models (all draws from a passed-in
``numpy.random.Generator``; nothing here touches global random state)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np

from isthmus.model.job import Job, PriorityClass

Estimates = Literal["none", "exact"]

#: Runtimes are whole seconds, at least this long.
MIN_RUNTIME = 1.0


def gamma_runtimes(rng: np.random.Generator, count: int, mean: float, std: float) -> np.ndarray:
    """`count` runtimes from a gamma distribution with this mean and standard deviation,
    rounded to whole seconds and at least 1 s (shape (mean/std)², scale std²/mean)."""
    if mean <= 0 or std <= 0:
        raise ValueError(f"runtime mean and std must be positive, got {mean} and {std}")
    shape = (mean / std) ** 2
    scale = std * std / mean
    values = rng.gamma(shape, scale, size=count)
    return np.maximum(np.rint(values), MIN_RUNTIME)


def jobs_from_arrays(
    submits: Sequence[float] | np.ndarray,
    runtimes: Sequence[float] | np.ndarray,
    sizes: Sequence[int] | np.ndarray,
    *,
    estimates: Estimates = "none",
    user: str = "1",
) -> list[Job]:
    """Jobs numbered 1..n in submit order (stable), with the given times and sizes.

    `estimates` "exact" sets each job's requested runtime to its runtime; "none" leaves it
    unknown (None).
    """
    submit_arr = np.asarray(submits, dtype=np.float64)
    order = np.argsort(submit_arr, kind="stable")
    runtime_arr = np.asarray(runtimes, dtype=np.float64)
    size_arr = np.asarray(sizes, dtype=np.int64)
    jobs = []
    exact = estimates == "exact"
    for number, i in enumerate(order.tolist(), start=1):
        runtime = float(runtime_arr[i])
        jobs.append(
            Job(
                id=number,
                submit=float(submit_arr[i]),
                size=int(size_arr[i]),
                runtime=runtime,
                requested_runtime=runtime if exact else None,
                user=user,
                group=user,
                priority=PriorityClass.HIGH,
            )
        )
    return jobs


@dataclass(frozen=True, slots=True)
class Segment:
    """A stretch of time [start, end) seconds during which the offered load is `load`."""

    start: float
    end: float
    load: float


def profile_arrivals(
    rng: np.random.Generator,
    segments: Sequence[Segment],
    *,
    procs: int,
    mean_runtime: float,
    size: int,
    jobs: int | None,
) -> np.ndarray:
    """Arrival times of a Poisson process whose rate follows a piecewise-constant load profile.

    In a segment of load L the rate is L × procs / (mean_runtime × size), so the offered load
    (work asked for / capacity) is L on average. With `jobs` None the number of jobs is
    Poisson-distributed with the profile's expected count; with `jobs` = N exactly N jobs are
    drawn and the profile's time axis is stretched by N / expected count, which keeps the
    load levels (the shape lasts longer or shorter). Given the count, the times of a Poisson
    process are independent draws from the normalised rate, which is what is done here.
    Returns sorted times.
    """
    if procs < 1 or size < 1:
        raise ValueError("procs and size must be >= 1")
    unit_rate = procs / (mean_runtime * size)
    lengths = np.array([s.end - s.start for s in segments], dtype=np.float64)
    loads = np.array([s.load for s in segments], dtype=np.float64)
    if np.any(lengths <= 0) or np.any(loads < 0):
        raise ValueError("segments need positive lengths and non-negative loads")
    weights = lengths * loads * unit_rate
    expected = float(weights.sum())
    if expected <= 0:
        raise ValueError("the load profile asks for no jobs")
    if jobs is None:
        count = int(rng.poisson(expected))
        stretch = 1.0
    else:
        count = jobs
        stretch = jobs / expected
    starts = np.array([s.start for s in segments], dtype=np.float64)
    which = rng.choice(len(segments), size=count, p=weights / expected)
    offsets = rng.random(count) * lengths[which]
    return np.sort((starts[which] + offsets) * stretch)


def triangle_gaps(count: int, periods: int, gap_max: float, gap_min: float) -> np.ndarray:
    """Inter-arrival gaps that go from `gap_max` down to `gap_min` and back, `periods` times.

    Job i of a period of m jobs waits gap_max − (gap_max − gap_min)·(1 − |2x − 1|) after
    the previous one, x = i/m: each period starts and ends slow and peaks halfway.
    """
    if periods < 1:
        raise ValueError(f"periods must be >= 1, got {periods}")
    per_period = max(1, int(np.ceil(count / periods)))
    x = (np.arange(count) % per_period) / per_period
    return gap_max - (gap_max - gap_min) * (1.0 - np.abs(2.0 * x - 1.0))
