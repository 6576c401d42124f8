"""Trace reduction as in the dissertation §4.5.1.2 (Villegas, "Workload Trace Reduction").

Three stages, applied to a real trace to bring it to a size that can be run in (emulated)
real time while keeping its key characteristics:

1. **interval**: keep the jobs submitted in [start, end) (avoid warm-up and wrap-up phases);
2. **sampling**: keep `keep` jobs of every `every` consecutive jobs ("taking only 2 out of
   3 jobs"); without a seed the first `keep` of each block are kept, with a seed a random
   `keep` of each block (numpy Generator, so the result is reproducible);
3. **time scaling**: independent factors multiply the inter-arrival times
   (`arrival_scale`) and the runtimes (`runtime_scale`); the dissertation used a common
   compression of 60, i.e. factors of 1/60.

Then the properties before and after are compared (the dissertation plots the cumulative
distribution of processors): :class:`ReductionReport` gives the two-sample
Kolmogorov–Smirnov distance of the processor counts between the reduced trace and the
selected interval (and the whole trace), and of the runtimes (unscaled), with asymptotic
p-values.

Scaling details: the reduced submit time is ``(submit - start) * arrival_scale``, so every
inter-arrival time (and the gap from the interval start to the first job) is multiplied by
exactly the factor. Runtimes, requested times and, in kept SWF records, the average CPU time
are multiplied by `runtime_scale`; think times by `arrival_scale`; recorded wait times,
which the reduced schedule no longer reproduces, become -1.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from isthmus.model.job import Job
from isthmus.workloads.errors import WorkloadError
from isthmus.workloads.stats import offered_load
from isthmus.workloads.swf import SwfRecord
from isthmus.workloads.workload import Workload


@dataclass(frozen=True, slots=True)
class KsResult:
    """Two-sample Kolmogorov–Smirnov comparison: the distance D and its asymptotic p-value."""

    statistic: float
    pvalue: float
    n1: int
    n2: int

    def to_dict(self) -> dict[str, float | int]:
        """A JSON-ready dict."""
        return {"statistic": self.statistic, "pvalue": self.pvalue, "n1": self.n1, "n2": self.n2}


def ks_distance(a: Sequence[float] | np.ndarray, b: Sequence[float] | np.ndarray) -> float:
    """The two-sample KS statistic: the largest gap between the two empirical CDFs.

    Exact for discrete data (ties handled by evaluating both CDFs at every observed value).
    Returns 0.0 when either sample is empty.
    """
    x = np.sort(np.asarray(a, dtype=np.float64))
    y = np.sort(np.asarray(b, dtype=np.float64))
    if x.size == 0 or y.size == 0:
        return 0.0
    points = np.concatenate([x, y])
    cdf_x = np.searchsorted(x, points, side="right") / x.size
    cdf_y = np.searchsorted(y, points, side="right") / y.size
    return float(np.max(np.abs(cdf_x - cdf_y)))


def kolmogorov_pvalue(statistic: float, n1: int, n2: int) -> float:
    """Asymptotic p-value of a two-sample KS distance: the Kolmogorov distribution
    Q(λ) = 2 Σ (-1)^(k-1) exp(-2 k² λ²) at λ = (√n + 0.12 + 0.11/√n)·D with n = n1·n2/(n1+n2)
    (Stephens' correction, as in Numerical Recipes' ``probks``)."""
    if n1 == 0 or n2 == 0:
        return 1.0
    en = math.sqrt(n1 * n2 / (n1 + n2))
    lam = (en + 0.12 + 0.11 / en) * statistic
    a2 = -2.0 * lam * lam
    factor = 2.0
    total = 0.0
    previous = 0.0
    for k in range(1, 101):
        term = factor * math.exp(a2 * k * k)
        total += term
        if abs(term) <= 1e-3 * previous or abs(term) <= 1e-8 * total:
            return min(1.0, max(0.0, total))
        factor = -factor
        previous = abs(term)
    return 1.0  # the series does not converge for tiny λ: no evidence of a difference


def ks_test(a: Sequence[float] | np.ndarray, b: Sequence[float] | np.ndarray) -> KsResult:
    """KS distance and asymptotic p-value between two samples."""
    n1, n2 = len(a), len(b)
    d = ks_distance(a, b)
    return KsResult(d, kolmogorov_pvalue(d, n1, n2), n1, n2)


@dataclass(frozen=True, slots=True)
class ReductionReport:
    """How well a reduction kept the trace's character (the CLI prints it, ``--json`` too)."""

    source: str
    original_jobs: int
    interval_start: float
    interval_end: float
    interval_jobs: int
    reduced_jobs: int
    keep: int
    every: int
    arrival_scale: float
    runtime_scale: float
    seed: int | None
    size_vs_interval: KsResult
    size_vs_original: KsResult
    runtime_vs_interval: KsResult
    mean_size_interval: float | None
    mean_size_reduced: float | None
    span_interval: float
    span_reduced: float
    load_interval: float | None
    load_reduced: float | None

    def to_dict(self) -> dict[str, object]:
        """A JSON-ready dict."""
        out: dict[str, object] = {}
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            out[f.name] = value.to_dict() if isinstance(value, KsResult) else value
        return out

    def lines(self) -> list[str]:
        """The report as text lines."""

        def fmt(x: float | None) -> str:
            return "-" if x is None else f"{x:.4g}"

        return [
            f"source: {self.source} ({self.original_jobs} jobs)",
            f"interval: submit in [{self.interval_start:g}, {self.interval_end:g}) s: {self.interval_jobs} jobs",
            f"sampling: {self.keep} of every {self.every} jobs"
            + (f" (random, seed {self.seed})" if self.seed is not None else " (first of each block)")
            + f": {self.reduced_jobs} jobs",
            f"scaling: inter-arrival x {self.arrival_scale:.6g}, runtime x {self.runtime_scale:.6g}",
            f"KS distance of processor counts vs interval: {self.size_vs_interval.statistic:.4f} "
            f"(p = {self.size_vs_interval.pvalue:.3g})",
            f"KS distance of processor counts vs whole trace: {self.size_vs_original.statistic:.4f} "
            f"(p = {self.size_vs_original.pvalue:.3g})",
            f"KS distance of runtimes (unscaled) vs interval: {self.runtime_vs_interval.statistic:.4f} "
            f"(p = {self.runtime_vs_interval.pvalue:.3g})",
            f"mean size: {fmt(self.mean_size_interval)} -> {fmt(self.mean_size_reduced)}",
            f"span: {self.span_interval:g} s -> {self.span_reduced:g} s",
            f"offered load: {fmt(self.load_interval)} -> {fmt(self.load_reduced)}",
        ]


def _check_factor(name: str, value: float) -> None:
    if not math.isfinite(value) or value <= 0:
        raise WorkloadError(f"{name} must be a positive finite number, got {value}")


def sample_blocks(n: int, keep: int, every: int, rng: np.random.Generator | None) -> list[int]:
    """Indices kept when sampling `keep` of every `every` consecutive items (0..n-1).

    Without `rng`, the first `keep` of each block; with it, a random `keep` of each block. A
    last, incomplete block keeps min(keep, its length), as the positional pattern would.
    """
    if every < 1 or keep < 0 or keep > every:
        raise WorkloadError(f"need 0 <= keep <= every and every >= 1, got keep={keep}, every={every}")
    kept: list[int] = []
    for block_start in range(0, n, every):
        length = min(every, n - block_start)
        quota = min(keep, length)
        if rng is None:
            kept.extend(range(block_start, block_start + quota))
        else:
            chosen = rng.choice(length, size=quota, replace=False)
            kept.extend(block_start + int(i) for i in sorted(chosen))
    return kept


def _scale_record(record: SwfRecord, submit: float, arrival: float, runtime: float) -> SwfRecord:
    def scaled(value: float, factor: float) -> float:
        return value * factor if value > 0 else value

    return record._replace(
        submit_time=submit,
        wait_time=-1.0,
        run_time=scaled(record.run_time, runtime),
        avg_cpu_time=scaled(record.avg_cpu_time, runtime),
        requested_time=scaled(record.requested_time, runtime),
        think_time=scaled(record.think_time, arrival),
    )


def reduce_workload(
    workload: Workload,
    *,
    start: float | None = None,
    end: float | None = None,
    keep: int = 1,
    every: int = 1,
    arrival_scale: float = 1.0,
    runtime_scale: float = 1.0,
    seed: int | None = None,
) -> tuple[Workload, ReductionReport]:
    """Reduce `workload` (interval, sampling, time scaling) and report what was kept.

    `start`/`end` default to the first submit and just after the last one. Returns the
    reduced workload (records scaled along when the input kept them) and the report.
    """
    _check_factor("arrival_scale", arrival_scale)
    _check_factor("runtime_scale", runtime_scale)
    jobs = workload.jobs
    if start is None:
        start = jobs[0].submit if jobs else 0.0
    if end is None:
        end = (jobs[-1].submit + 1.0) if jobs else start + 1.0
    if not (math.isfinite(start) and math.isfinite(end)) or end <= start:
        raise WorkloadError(f"the interval end ({end:g}) must be after its start ({start:g})")

    in_window = [i for i, job in enumerate(jobs) if start <= job.submit < end]
    rng = np.random.default_rng(seed) if seed is not None else None
    chosen = [in_window[i] for i in sample_blocks(len(in_window), keep, every, rng)]

    new_jobs: list[Job] = []
    new_records: list[SwfRecord] | None = [] if workload.records is not None else None
    for i in chosen:
        job = jobs[i]
        submit = (job.submit - start) * arrival_scale
        requested = job.requested_runtime * runtime_scale if job.requested_runtime is not None else None
        new_jobs.append(
            dataclasses.replace(job, submit=submit, runtime=job.runtime * runtime_scale, requested_runtime=requested)
        )
        if new_records is not None and workload.records is not None:
            new_records.append(_scale_record(workload.records[i], submit, arrival_scale, runtime_scale))

    header = workload.header.copy()
    header.add(
        "Note",
        f"reduced by isthmus (dissertation 4.5.1.2): submit in [{start:g}, {end:g}) s, "
        f"{keep} of every {every} jobs"
        + (f" (seed {seed})" if seed is not None else "")
        + f", inter-arrival x {arrival_scale:.6g}, runtime x {runtime_scale:.6g}",
    )
    reduced = dataclasses.replace(
        workload, jobs=new_jobs, records=new_records, header=header, name=f"{workload.name}-reduced"
    )

    interval_sizes = np.array([jobs[i].size for i in in_window], dtype=np.float64)
    reduced_sizes = np.array([j.size for j in new_jobs], dtype=np.float64)
    all_sizes = np.array([j.size for j in jobs], dtype=np.float64)
    interval_runtimes = np.array([jobs[i].runtime for i in in_window], dtype=np.float64)
    reduced_runtimes = np.array([jobs[i].runtime for i in chosen], dtype=np.float64)

    def span(values: list[float]) -> float:
        return (max(values) - min(values)) if values else 0.0

    interval_span = span([jobs[i].submit for i in in_window])
    reduced_span = span([j.submit for j in new_jobs])
    interval_area = float(sum(jobs[i].size * jobs[i].runtime for i in in_window))
    reduced_area = float(sum(j.size * j.runtime for j in new_jobs))
    report = ReductionReport(
        source=workload.source or workload.name,
        original_jobs=len(jobs),
        interval_start=float(start),
        interval_end=float(end),
        interval_jobs=len(in_window),
        reduced_jobs=len(new_jobs),
        keep=keep,
        every=every,
        arrival_scale=arrival_scale,
        runtime_scale=runtime_scale,
        seed=seed,
        size_vs_interval=ks_test(reduced_sizes, interval_sizes),
        size_vs_original=ks_test(reduced_sizes, all_sizes),
        runtime_vs_interval=ks_test(reduced_runtimes, interval_runtimes),
        mean_size_interval=float(interval_sizes.mean()) if interval_sizes.size else None,
        mean_size_reduced=float(reduced_sizes.mean()) if reduced_sizes.size else None,
        span_interval=interval_span,
        span_reduced=reduced_span,
        load_interval=offered_load(interval_area, workload.max_procs, interval_span),
        load_reduced=offered_load(reduced_area, workload.max_procs, reduced_span),
    )
    return reduced, report
