"""Synthetic workloads of chapter 6 of D. Villegas's dissertation (FIU, 2012): IaaS provisioning and allocation.

§6.4.3 defines three hour-long workloads of single-processor jobs whose runtimes average
47 s with a standard deviation of 41.1 s (as measured on DAS-4):

- **Uniform**: a steady stream, Poisson arrivals, average load about 70%;
- **Increasing**: the intensity increases over time in steps, average load about 50%;
- **Bursty**: short spikes of intense activity (170% for a few minutes) amid long periods of
  mild activity, average load about 15%.

§6.5 adds **Periodic** (a periodic increasing and decreasing arrival pattern) and, in §6.5.3
and §6.5.4, mixtures of short (10 s on average) and long (1 h on average) jobs with 25%,
50% and 75% short jobs (**SR25**, **SR50**, **SR75**) over 1,000 jobs. §6.5.4 gives the
arrival patterns: Uniform with 10 s between jobs; Periodic with four periods whose
inter-arrival time goes from 60 s down to 5 s and back; Bursty alternating five periods of
200 jobs with 30 s and 2 s between jobs.

What the text leaves open, and is decided here (see docs/workloads.md):

- "load" is offered load on `procs` processors (default 32, one KOALA-C cluster): the
  work asked for per second divided by the capacity;
- runtimes follow a gamma distribution with the given mean and standard deviation, rounded to
  whole seconds (at least 1 s); the SR mixtures use the same relative spread (CV 41.1/47)
  around their 10 s and 3600 s means, and have exactly round(fraction × jobs) short jobs in
  random positions;
- Increasing has `steps` equal steps whose loads rise linearly with the average given (four
  steps: 20%, 40%, 60%, 80%);
- Bursty has `bursts` evenly spaced spikes at `peak` load over a `base` load; the spike
  length follows from the average (defaults: 2 spikes of 109 s at 170% over 5%);
- the §6.5.4 arrival patterns are deterministic (the text gives fixed inter-arrival times);
  the first job arrives at 0.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np

from isthmus.model.job import Job
from isthmus.workloads.generators.common import (
    Estimates,
    Segment,
    gamma_runtimes,
    jobs_from_arrays,
    profile_arrivals,
    triangle_gaps,
)

#: DAS-4 job runtimes measured in the dissertation (§6.4.3): mean and standard deviation, s.
DAS4_MEAN = 47.0
DAS4_STD = 41.1


@dataclass(frozen=True, slots=True)
class LoadModelParams:
    """Common parameters of the hour-long §6.4.3 workloads.

    jobs: exact job count (None: Poisson count for `duration`); procs: capacity the load
    refers to; duration: seconds; load: average offered load; runtime_mean/std: seconds;
    size: processors per job; estimates: requested runtimes "none" or "exact".
    """

    jobs: int | None = None
    procs: int = 32
    duration: float = 3600.0
    load: float = 0.7
    runtime_mean: float = DAS4_MEAN
    runtime_std: float = DAS4_STD
    size: int = 1
    estimates: Estimates = "none"

    def check(self) -> None:
        """Raise ValueError for impossible values."""
        if self.jobs is not None and self.jobs < 0:
            raise ValueError(f"jobs must be >= 0, got {self.jobs}")
        if self.procs < 1 or self.size < 1 or self.size > self.procs:
            raise ValueError(f"need 1 <= size <= procs, got size={self.size}, procs={self.procs}")
        if self.duration <= 0 or self.load <= 0:
            raise ValueError("duration and load must be positive")
        if self.runtime_mean <= 0 or self.runtime_std <= 0:
            raise ValueError("runtime_mean and runtime_std must be positive")


@dataclass(frozen=True, slots=True)
class UniformParams(LoadModelParams):
    """Uniform (§6.4.3): Poisson arrivals at a constant rate, average load 70%."""


@dataclass(frozen=True, slots=True)
class IncreasingParams(LoadModelParams):
    """Increasing (§6.4.3): `steps` equal steps of rising load averaging `load` (50%)."""

    load: float = 0.5
    steps: int = 4

    def check(self) -> None:
        """Raise ValueError for impossible values."""
        LoadModelParams.check(self)
        if self.steps < 1:
            raise ValueError(f"steps must be >= 1, got {self.steps}")


@dataclass(frozen=True, slots=True)
class BurstyParams(LoadModelParams):
    """Bursty (§6.4.3): `bursts` spikes at `peak` load over a `base` load, averaging `load` (15%)."""

    load: float = 0.15
    peak: float = 1.7
    base: float = 0.05
    bursts: int = 2

    def check(self) -> None:
        """Raise ValueError for impossible values."""
        LoadModelParams.check(self)
        if self.bursts < 1:
            raise ValueError(f"bursts must be >= 1, got {self.bursts}")
        if not 0 <= self.base < self.load < self.peak:
            raise ValueError(f"need 0 <= base < load < peak, got base={self.base}, load={self.load}, peak={self.peak}")

    @property
    def burst_length(self) -> float:
        """Seconds of each spike: (load − base)/(peak − base) × duration / bursts."""
        return (self.load - self.base) / (self.peak - self.base) * self.duration / self.bursts


def uniform_segments(p: LoadModelParams) -> list[Segment]:
    """One segment at the average load."""
    return [Segment(0.0, p.duration, p.load)]


def increasing_segments(p: IncreasingParams) -> list[Segment]:
    """`steps` equal segments with loads 2·load·k/(steps+1), k = 1..steps (mean = load)."""
    width = p.duration / p.steps
    return [Segment(k * width, (k + 1) * width, 2.0 * p.load * (k + 1) / (p.steps + 1)) for k in range(p.steps)]


def bursty_segments(p: BurstyParams) -> list[Segment]:
    """Base-load segments with `bursts` evenly spaced spikes at peak load (centred in equal slots)."""
    slot = p.duration / p.bursts
    length = p.burst_length
    segments: list[Segment] = []
    for k in range(p.bursts):
        left = k * slot
        spike_start = left + (slot - length) / 2.0
        spike_end = spike_start + length
        if p.base > 0:
            segments.append(Segment(left, spike_start, p.base))
        segments.append(Segment(spike_start, spike_end, p.peak))
        if p.base > 0:
            segments.append(Segment(spike_end, left + slot, p.base))
    return segments


def _load_model(p: LoadModelParams, segments: list[Segment], rng: np.random.Generator) -> list[Job]:
    p.check()
    submits = profile_arrivals(rng, segments, procs=p.procs, mean_runtime=p.runtime_mean, size=p.size, jobs=p.jobs)
    runtimes = gamma_runtimes(rng, len(submits), p.runtime_mean, p.runtime_std)
    sizes = np.full(len(submits), p.size, dtype=np.int64)
    return jobs_from_arrays(submits, runtimes, sizes, estimates=p.estimates)


def generate_uniform(p: UniformParams, rng: np.random.Generator) -> list[Job]:
    """The Uniform workload (§6.4.3)."""
    return _load_model(p, uniform_segments(p), rng)


def generate_increasing(p: IncreasingParams, rng: np.random.Generator) -> list[Job]:
    """The Increasing workload (§6.4.3)."""
    p.check()
    return _load_model(p, increasing_segments(p), rng)


def generate_bursty(p: BurstyParams, rng: np.random.Generator) -> list[Job]:
    """The Bursty workload (§6.4.3)."""
    p.check()
    return _load_model(p, bursty_segments(p), rng)


# --------------------------------------------------------------------------- §6.5 job streams

Arrivals = Literal["periodic", "uniform", "bursty"]


@dataclass(frozen=True, slots=True)
class StreamParams:
    """Parameters of the §6.5 workloads: a fixed number of jobs with a fixed arrival pattern.

    arrivals: "periodic" (gaps from gap_max down to gap_min and back, `periods` times),
    "uniform" (a constant `gap`), "bursty" (blocks of `burst_jobs` jobs alternating gaps
    `gap_high` and `gap_low`). Runtimes: one gamma class (runtime_mean ± runtime_std) when
    `short_fraction` is None, else a mixture with that fraction of short jobs (mean
    `short_mean`) and long jobs (mean `long_mean`), both with coefficient of variation `cv`.
    procs is only recorded as the machine size (MaxProcs) of the generated trace.
    """

    jobs: int = 1000
    arrivals: Arrivals = "periodic"
    periods: int = 4
    gap_max: float = 60.0
    gap_min: float = 5.0
    gap: float = 10.0
    burst_jobs: int = 200
    gap_high: float = 30.0
    gap_low: float = 2.0
    runtime_mean: float = DAS4_MEAN
    runtime_std: float = DAS4_STD
    short_fraction: float | None = None
    short_mean: float = 10.0
    long_mean: float = 3600.0
    cv: float = DAS4_STD / DAS4_MEAN
    size: int = 1
    procs: int = 32
    estimates: Estimates = "none"

    def check(self) -> None:
        """Raise ValueError for impossible values."""
        if self.jobs < 0:
            raise ValueError(f"jobs must be >= 0, got {self.jobs}")
        if min(self.gap_max, self.gap_min, self.gap, self.gap_high, self.gap_low) < 0:
            raise ValueError("inter-arrival gaps must be >= 0")
        if self.periods < 1 or self.burst_jobs < 1:
            raise ValueError("periods and burst_jobs must be >= 1")
        if self.short_fraction is not None and not 0.0 <= self.short_fraction <= 1.0:
            raise ValueError(f"short_fraction must be in [0, 1], got {self.short_fraction}")
        if min(self.runtime_mean, self.runtime_std, self.short_mean, self.long_mean, self.cv) <= 0:
            raise ValueError("runtime means, std and cv must be positive")
        if self.procs < 1 or self.size < 1 or self.size > self.procs:
            raise ValueError(f"need 1 <= size <= procs, got size={self.size}, procs={self.procs}")


def stream_gaps(p: StreamParams) -> np.ndarray:
    """The inter-arrival gaps (before jobs 2..n; job 1 arrives at 0) of the chosen pattern."""
    count = max(p.jobs - 1, 0)
    if p.arrivals == "uniform":
        return np.full(count, p.gap)
    if p.arrivals == "bursty":
        block = (np.arange(1, count + 1) // p.burst_jobs) % 2
        return np.where(block == 0, p.gap_high, p.gap_low).astype(np.float64)
    return triangle_gaps(count, p.periods, p.gap_max, p.gap_min)


def generate_stream(p: StreamParams, rng: np.random.Generator) -> list[Job]:
    """A §6.5 workload: Periodic with DAS-4 runtimes, or an SR mixture of short and long jobs."""
    p.check()
    submits = np.concatenate([[0.0], np.cumsum(stream_gaps(p))]) if p.jobs else np.empty(0)
    if p.short_fraction is None:
        runtimes = gamma_runtimes(rng, p.jobs, p.runtime_mean, p.runtime_std)
    else:
        short_count = round(p.short_fraction * p.jobs)
        is_short = np.zeros(p.jobs, dtype=bool)
        is_short[rng.permutation(p.jobs)[:short_count]] = True
        short = gamma_runtimes(rng, p.jobs, p.short_mean, p.cv * p.short_mean)
        long = gamma_runtimes(rng, p.jobs, p.long_mean, p.cv * p.long_mean)
        runtimes = np.where(is_short, short, long)
    sizes = np.full(p.jobs, p.size, dtype=np.int64)
    return jobs_from_arrays(submits, runtimes, sizes, estimates=p.estimates)
