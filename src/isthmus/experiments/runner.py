"""Run many independent simulations (sweep points) in parallel.

A point is plain, picklable data; `evaluate` turns it into a row of figures in whatever process
runs it. `run_points` takes any `concurrent.futures.Executor`: local processes by default, and
the same call works with an executor backed by a cluster engine (Dask's `Client.get_executor()`,
Ray's `ray.util.ActorPool`-based executors) without touching the experiments.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Executor, ProcessPoolExecutor, as_completed
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any, cast

from isthmus.model.environment import PolicyChoice
from isthmus.model.job import Job
from isthmus.workloads.conversion import RUN_CANCELLED


@dataclass(frozen=True)
class Point:
    """One simulation of a sweep.

    `trace` is a workload spec (file or model); `max_size` drops larger jobs and `first` keeps
    the first N (KOALA-C §V-A trace preparation). `allocation`/`provisioning` are (name, params)
    pairs; None uses the environment's. `labels` are copied into the result row.
    `short_threshold` adds figures for jobs with runtime at most that many seconds.
    `cancelled` is the treatment of jobs cancelled before they started ("keep", "drop" or
    "short", see `SwfConversion.cancelled`); it and the number of such jobs dropped are
    copied into the row.
    """

    trace: str
    env: str
    allocation: tuple[str, tuple[tuple[str, Any], ...]]
    provisioning: tuple[str, tuple[tuple[str, Any], ...]] | None = None
    max_size: int | None = None
    first: int | None = None
    labels: tuple[tuple[str, Any], ...] = ()
    short_threshold: float | None = None
    extra: tuple[tuple[str, Any], ...] = field(default=())
    cancelled: str = RUN_CANCELLED


def policy(name: str, **params: Any) -> tuple[str, tuple[tuple[str, Any], ...]]:
    """A picklable (name, params) pair for a Point."""
    return name, tuple(sorted(params.items()))


@dataclass(frozen=True)
class PreparedJobs:
    """The jobs of a sweep point and how many jobs cancelled before start were dropped."""

    jobs: tuple[Job, ...]
    cancelled_dropped: int


@lru_cache(maxsize=8)
def prepare_trace(trace: str, max_size: int | None, first: int | None, cancelled: str = RUN_CANCELLED) -> PreparedJobs:
    """The trace's jobs, read once per process with the `cancelled` treatment: larger than
    `max_size` dropped, then the first `first`."""
    from isthmus.workloads import SwfConversion, resolve_workload
    from isthmus.workloads.conversion import Cancelled

    workload = resolve_workload(trace, conversion=SwfConversion(cancelled=cast(Cancelled, cancelled)))
    jobs = workload.jobs
    if max_size is not None:
        jobs = [j for j in jobs if j.size <= max_size]
    if first is not None:
        jobs = jobs[:first]
    dropped = workload.conversion.cancelled_dropped if workload.conversion is not None else 0
    return PreparedJobs(tuple(jobs), dropped)


def prepared_jobs(
    trace: str, max_size: int | None, first: int | None, cancelled: str = RUN_CANCELLED
) -> tuple[Job, ...]:
    """The jobs of :func:`prepare_trace` (read once per process)."""
    return prepare_trace(trace, max_size, first, cancelled).jobs


SUMMARY_KEYS = (
    "jobs_completed",
    "jobs_unfinished",
    "wait_mean",
    "slowdown_mean",
    "bounded_slowdown_mean",
    "makespan",
    "utilization",
    "cost_charged",
    "cost_actual",
    "restarts",
    "wasted_processor_seconds",
    "killed_work_cost",
)


def evaluate(point: Point) -> dict[str, Any]:
    """Simulate one point and return its row: labels plus the summary figures."""
    from isthmus.config import load_environment
    from isthmus.metrics.run import compute_run_metrics
    from isthmus.metrics.summary import short_long_breakdown
    from isthmus.sim.runner import simulate

    prepared = prepare_trace(point.trace, point.max_size, point.first, point.cancelled)
    jobs = prepared.jobs
    env = load_environment(point.env)
    alloc = PolicyChoice(point.allocation[0], dict(point.allocation[1]))
    prov = PolicyChoice(point.provisioning[0], dict(point.provisioning[1])) if point.provisioning else None
    result = simulate(env, jobs, alloc, prov)
    metrics = compute_run_metrics(result.log, result.jobs, env, result.end_time)
    row: dict[str, Any] = dict(point.labels)
    row.update({k: metrics.summary.get(k) for k in SUMMARY_KEYS})
    row["simulation_seconds"] = round(result.wall_seconds, 3)
    row["cancelled"] = point.cancelled
    row["cancelled_dropped"] = prepared.cancelled_dropped
    if point.short_threshold is not None:
        parts = short_long_breakdown(metrics.records, point.short_threshold)
        for part in ("short", "long"):
            for key in ("fraction", "wait_mean", "slowdown_mean"):
                row[f"{part}_{key}"] = parts[part].get(key)
    row.update(dict(point.extra))
    return row


def default_workers() -> int:
    """Local cores available to this process."""
    return max(1, len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1)


def run_points(
    points: Sequence[Point],
    *,
    workers: int | None = None,
    executor: Executor | None = None,
    progress: Callable[[int, int], None] | None = None,
    evaluate_point: Callable[[Point], Mapping[str, Any]] = evaluate,
) -> list[dict[str, Any]]:
    """Evaluate every point; rows come back in the order of `points`.

    With `executor` given it is used as is; otherwise `workers` local processes (1: in this
    process, no pool). `progress(done, total)` is called after each point.
    """
    total = len(points)
    rows: list[dict[str, Any] | None] = [None] * total
    workers = workers or default_workers()
    if executor is None and workers <= 1:
        for i, p in enumerate(points):
            rows[i] = dict(evaluate_point(p))
            if progress:
                progress(i + 1, total)
        return [r for r in rows if r is not None]
    own = executor is None
    pool: Executor = executor or ProcessPoolExecutor(max_workers=workers)
    try:
        futures = {pool.submit(evaluate_point, p): i for i, p in enumerate(points)}
        for done, fut in enumerate(as_completed(futures), 1):
            rows[futures[fut]] = dict(fut.result())
            if progress:
                progress(done, total)
    finally:
        if own:
            pool.shutdown(cancel_futures=True)
    return [r for r in rows if r is not None]
