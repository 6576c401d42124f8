"""The Lublin & Feitelson model of rigid parallel jobs (the embedded default workload).

U. Lublin and D. G. Feitelson, "The workload on parallel supercomputers: modeling the
characteristics of rigid jobs", J. Parallel Distrib. Comput. 63(11):1105–1122, 2003.
The parameter values are the published ones for batch jobs (and, with
``interactive=true``, for interactive jobs), as in the authors' reference program.

- **Size**: with probability `serial_prob` a job is serial (1 processor). Otherwise
  log2(size) is drawn from a two-stage uniform distribution: U(ulow, umed) with
  probability `uprob`, else U(umed, uhi), where uhi = log2(max_size); with probability
  `pow2_prob` (of all jobs) the exponent is rounded, giving a power of two. The size is
  round(2^exponent), capped at `max_size`. ``umed`` defaults to uhi − 2 (the published
  batch values are umed = 5 for uhi = 7).
- **Runtime**: ln(runtime) follows a hyper-gamma distribution, a mixture of
  Gamma(a1, b1) and Gamma(a2, b2) whose mixing probability depends on the size,
  p = pa·size + pb (clipped to [0, 1]), so larger jobs run longer. Draws above 12
  (e^12 s ≈ 45 h) are redrawn; the runtime is ⌊e^x⌋ seconds, at least 1.
- **Arrivals**: ln(inter-arrival time) follows Gamma(aarr·arar, barr) (values above 13
  redrawn) for the rush hours, and the day is divided into 48 half-hour buckets weighted by
  a Gamma(anum, bnum) density (cyclically shifted to start at bucket 11), so fewer jobs
  arrive at night. Each drawn inter-arrival time is "paid" with the weights of the buckets
  it crosses, exactly as in the reference program. The first job arrives at 0 (midnight when
  `start_hour` is 0).

Extra knobs (not in the paper): ``load`` rescales all submit times so the offered load on
`procs` processors (default `max_size`) is exactly that value (this stretches or compresses
the daily cycle along with the gaps); ``estimates=exact`` sets requested runtimes to the
runtimes (the model has no user estimates, so by default they are unknown).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from isthmus.model.job import Job
from isthmus.workloads.generators.common import Estimates, jobs_from_arrays

BUCKETS = 48
SECONDS_PER_BUCKET = 86_400 / BUCKETS
CYCLIC_DAY_START = 11
TOO_MUCH_TIME = 12.0
TOO_MUCH_ARRIVE_TIME = 13.0


@dataclass(frozen=True, slots=True)
class JobClass:
    """Model parameters of one job type (batch or interactive), as published."""

    serial_prob: float
    pow2_prob: float
    ulow: float
    uprob: float
    a1: float
    b1: float
    a2: float
    b2: float
    pa: float
    pb: float
    aarr: float
    barr: float
    arar: float
    anum: float
    bnum: float


#: Published parameters for interactive jobs (used with interactive=true).
INTERACTIVE = JobClass(
    serial_prob=0.1541, pow2_prob=0.625, ulow=1.0, uprob=0.705,
    a1=3.8351, b1=0.6605, a2=7.073, b2=0.6856, pa=-0.0118, pb=0.9156,
    aarr=6.5510, barr=0.6621, arar=0.9797, anum=8.9186, bnum=3.6680,
)  # fmt: skip
#: Published interactive size range: the largest interactive job has 2^5.5 ≈ 45 nodes for a
#: 128-node machine, i.e. uhi_interactive = uhi − 1.5 and umed = uhi − 4.
INTERACTIVE_UHI_OFFSET = -1.5
INTERACTIVE_UMED_OFFSET = -4.0


@dataclass(frozen=True, slots=True)
class LublinParams:
    """Parameters of the Lublin & Feitelson (2003) model; defaults are the published batch values.

    jobs: job count; max_size: largest job (the machine size the model is set for);
    procs: machine size for MaxProcs and `load` (default max_size); umed: None for uhi − 2;
    interactive: also generate interactive jobs; load: None for the model's own load;
    start_hour: hour of day of time 0; estimates: "none" or "exact".
    """

    jobs: int = 2000
    max_size: int = 32
    procs: int | None = None
    serial_prob: float = 0.2927
    pow2_prob: float = 0.6686
    ulow: float = 1.2
    umed: float | None = None
    uprob: float = 0.875
    a1: float = 6.57
    b1: float = 0.823
    a2: float = 639.1
    b2: float = 0.0156
    pa: float = -0.003
    pb: float = 0.6986
    aarr: float = 6.0415
    barr: float = 0.8531
    arar: float = 1.0519
    anum: float = 6.1271
    bnum: float = 5.2740
    start_hour: int = 0
    interactive: bool = False
    load: float | None = None
    estimates: Estimates = "none"

    @property
    def uhi(self) -> float:
        """log2 of the largest job size."""
        return math.log2(self.max_size)

    @property
    def machine(self) -> int:
        """Processors of the machine the workload is for (procs, else max_size)."""
        return self.procs if self.procs is not None else self.max_size

    def batch_class(self) -> JobClass:
        """The batch job parameters as a JobClass."""
        return JobClass(
            self.serial_prob, self.pow2_prob, self.ulow, self.uprob,
            self.a1, self.b1, self.a2, self.b2, self.pa, self.pb,
            self.aarr, self.barr, self.arar, self.anum, self.bnum,
        )  # fmt: skip

    def check(self) -> None:
        """Raise ValueError for impossible values."""
        if self.jobs < 0:
            raise ValueError(f"jobs must be >= 0, got {self.jobs}")
        if self.max_size < 1:
            raise ValueError(f"max_size must be >= 1, got {self.max_size}")
        if self.procs is not None and self.procs < self.max_size:
            raise ValueError(f"procs ({self.procs}) must be >= max_size ({self.max_size})")
        for name in ("serial_prob", "pow2_prob", "uprob"):
            value = getattr(self, name)
            if not 0.0 <= value <= 1.0:
                raise ValueError(f"{name} must be in [0, 1], got {value}")
        if self.serial_prob + self.pow2_prob > 1.0 + 1e-12:
            raise ValueError("serial_prob + pow2_prob must be <= 1")
        for name in ("a1", "b1", "a2", "b2", "aarr", "barr", "arar", "anum", "bnum"):
            if getattr(self, name) <= 0:
                raise ValueError(f"{name} must be positive")
        if not 0 <= self.start_hour < 24:
            raise ValueError(f"start_hour must be in 0..23, got {self.start_hour}")
        if self.load is not None and self.load <= 0:
            raise ValueError(f"load must be positive, got {self.load}")


# --------------------------------------------------------------------------- distributions


def gamma_cdf(x: float, shape: float, scale: float) -> float:
    """P(X <= x) for X ~ Gamma(shape, scale): the regularized lower incomplete gamma function,
    by its series below shape + 1 and its continued fraction above (Numerical Recipes)."""
    if x <= 0:
        return 0.0
    z = x / scale
    log_prefix = shape * math.log(z) - z - math.lgamma(shape)
    if z < shape + 1.0:
        term = 1.0 / shape
        total = term
        a = shape
        for _ in range(1000):
            a += 1.0
            term *= z / a
            total += term
            if abs(term) < abs(total) * 1e-15:
                break
        return min(1.0, total * math.exp(log_prefix))
    tiny = 1e-300
    b = z + 1.0 - shape
    c = 1.0 / tiny
    d = 1.0 / b
    h = d
    for i in range(1, 1000):
        an = -i * (i - shape)
        b += 2.0
        d = an * d + b
        d = tiny if abs(d) < tiny else d
        c = b + an / c
        c = tiny if abs(c) < tiny else c
        d = 1.0 / d
        delta = d * c
        h *= delta
        if abs(delta - 1.0) < 1e-15:
            break
    return max(0.0, 1.0 - math.exp(log_prefix) * h)


def bucket_weights(anum: float, bnum: float) -> list[float]:
    """The 48 half-hour weights of the daily cycle, normalised to mean 1.

    Bucket i (1-based, i = 11..58, stored at (i − 1) mod 48) gets
    cdf(i + 0.5) − cdf(i − 0.5) of Gamma(anum, bnum), as in the reference program.
    """
    weights = [0.0] * BUCKETS
    for i in range(CYCLIC_DAY_START, BUCKETS + CYCLIC_DAY_START):
        weights[(i - 1) % BUCKETS] = gamma_cdf(i + 0.5, anum, bnum) - gamma_cdf(i - 0.5, anum, bnum)
    mean = sum(weights) / BUCKETS
    return [w / mean for w in weights]


def _truncated_gamma(rng: np.random.Generator, shape: float, scale: float, limit: float, count: int) -> np.ndarray:
    """`count` Gamma(shape, scale) draws, each redrawn while above `limit`."""
    values = rng.gamma(shape, scale, size=count)
    bad = values > limit
    while bad.any():
        values[bad] = rng.gamma(shape, scale, size=int(bad.sum()))
        bad = values > limit
    return values


def log_gaps(rng: np.random.Generator, count: int, cls: JobClass) -> np.ndarray:
    """`count` draws of ln(inter-arrival time) for one job type (values above 13 redrawn)."""
    return _truncated_gamma(rng, cls.aarr * cls.arar, cls.barr, TOO_MUCH_ARRIVE_TIME, count)


def arrival_times(gaps: np.ndarray, cls: JobClass, start_hour: int) -> np.ndarray:
    """Arrival times (seconds, first at 0) for drawn inter-arrival times `gaps` (seconds),
    spread over the day by the half-hour bucket weights of `cls` (the reference algorithm)."""
    weights = bucket_weights(cls.anum, cls.bnum)
    count = gaps.size
    times = np.empty(count, dtype=np.float64)
    bucket = start_hour * BUCKETS // 24
    points = 0.0
    remainder = 0.0
    now = 0.0
    for k, gap in enumerate(gaps.tolist()):
        times[k] = now
        points += gap / SECONDS_PER_BUCKET
        step = 0.0
        while points > weights[bucket]:
            points -= weights[bucket]
            bucket = (bucket + 1) % BUCKETS
            step += SECONDS_PER_BUCKET
        new_remainder = points / weights[bucket]
        step += SECONDS_PER_BUCKET * (new_remainder - remainder)
        remainder = new_remainder
        now += step
    return times


def size_range(ulow: float, umed: float | None, uhi: float) -> tuple[float, float, float]:
    """(ulow, umed, uhi) made consistent for small machines: ulow <= umed <= uhi.

    umed None means uhi − 2 (the published batch values are umed 5 for uhi 7).
    """
    low = min(ulow, uhi)
    med = uhi - 2.0 if umed is None else umed
    return low, min(max(med, low), uhi), uhi


def sizes_for(
    rng: np.random.Generator, count: int, cls: JobClass, bounds: tuple[float, float, float], max_size: int
) -> np.ndarray:
    """`count` job sizes: serial, power-of-two or other parallel (two-stage uniform in log2
    between `bounds` = (ulow, umed, uhi))."""
    ulow, umed, uhi = bounds
    u = rng.random(count)
    low_stage = rng.random(count) <= cls.uprob
    first = rng.uniform(ulow, umed, size=count)
    second = rng.uniform(umed, uhi, size=count)
    exponent = np.where(low_stage, first, second)
    pow2 = u <= cls.serial_prob + cls.pow2_prob
    exponent = np.where(pow2, np.floor(exponent + 0.5), exponent)
    sizes = np.floor(np.power(2.0, exponent) + 0.5).astype(np.int64)
    sizes = np.where(u <= cls.serial_prob, 1, sizes)
    return np.clip(sizes, 1, max_size)


def runtimes_for(rng: np.random.Generator, sizes: np.ndarray, cls: JobClass) -> np.ndarray:
    """Runtimes (whole seconds >= 1) from the size-dependent hyper-gamma of ln(runtime)."""
    count = sizes.size
    p = np.clip(cls.pa * sizes + cls.pb, 0.0, 1.0)
    first = rng.random(count) <= p
    values = np.where(
        first,
        rng.gamma(cls.a1, cls.b1, size=count),
        rng.gamma(cls.a2, cls.b2, size=count),
    )
    bad = values > TOO_MUCH_TIME
    while bad.any():
        n = int(bad.sum())
        redo_first = rng.random(n) <= p[bad]
        values[bad] = np.where(redo_first, rng.gamma(cls.a1, cls.b1, size=n), rng.gamma(cls.a2, cls.b2, size=n))
        bad = values > TOO_MUCH_TIME
    return np.maximum(np.floor(np.exp(values)), 1.0)


def _offered_load(submits: np.ndarray, sizes: np.ndarray, runtimes: np.ndarray, procs: int) -> float:
    span = float(submits.max() - submits.min()) if submits.size > 1 else 0.0
    if span <= 0:
        return math.inf
    return float(np.dot(sizes.astype(np.float64), runtimes)) / (procs * span)


def generate_lublin(p: LublinParams, rng: np.random.Generator) -> list[Job]:
    """A Lublin & Feitelson workload of `p.jobs` jobs for a machine of `p.max_size` processors.

    With `p.load`, every drawn inter-arrival time is multiplied by one factor, found by a few
    fixed-point steps, so the offered load on `p.machine` processors is within 0.5% of the
    target; the daily cycle keeps its 24-hour period.
    """
    p.check()
    if p.jobs == 0:
        return []
    batch = p.batch_class()
    batch_bounds = size_range(batch.ulow, p.umed, p.uhi)
    batch_gaps = np.exp(log_gaps(rng, p.jobs, batch))
    inter_gaps = np.exp(log_gaps(rng, p.jobs, INTERACTIVE)) if p.interactive else None

    def place(factor: float) -> tuple[np.ndarray, np.ndarray]:
        """Submit times and an is-interactive mask for the gaps multiplied by `factor`."""
        batch_times = arrival_times(batch_gaps * factor, batch, p.start_hour)
        if inter_gaps is None:
            return batch_times, np.zeros(p.jobs, dtype=bool)
        inter_times = arrival_times(inter_gaps * factor, INTERACTIVE, p.start_hour)
        # the reference program takes, at each step, the type whose next job arrives first
        merged = np.concatenate([batch_times, inter_times])
        kinds = np.concatenate([np.zeros(p.jobs, dtype=bool), np.ones(p.jobs, dtype=bool)])
        order = np.argsort(merged, kind="stable")[: p.jobs]
        return merged[order], kinds[order]

    submits, is_inter = place(1.0)
    n_inter = int(is_inter.sum())
    sizes = np.empty(p.jobs, dtype=np.int64)
    runtimes = np.empty(p.jobs, dtype=np.float64)
    batch_sizes = sizes_for(rng, p.jobs - n_inter, batch, batch_bounds, p.max_size)
    sizes[~is_inter] = batch_sizes
    runtimes[~is_inter] = runtimes_for(rng, batch_sizes, batch)
    if n_inter:
        inter_uhi = max(p.uhi + INTERACTIVE_UHI_OFFSET, 0.0)
        inter_bounds = size_range(INTERACTIVE.ulow, p.uhi + INTERACTIVE_UMED_OFFSET, inter_uhi)
        inter_sizes = sizes_for(rng, n_inter, INTERACTIVE, inter_bounds, p.max_size)
        sizes[is_inter] = inter_sizes
        runtimes[is_inter] = runtimes_for(rng, inter_sizes, INTERACTIVE)

    if p.load is not None and p.jobs > 1:
        factor = 1.0
        for _ in range(50):
            current = _offered_load(submits, sizes, runtimes, p.machine)
            if not math.isfinite(current) or abs(current / p.load - 1.0) < 0.005:
                break
            factor *= current / p.load
            # jobs keep the sizes and runtimes drawn for their place in the arrival order
            submits, _ = place(factor)
    return jobs_from_arrays(submits, runtimes, sizes, estimates=p.estimates)
