"""Run many independent simulations (sweep points) in parallel, resumably.

A point is plain, picklable data; `evaluate` (a top-level function, so any worker process can
import it) turns it into a row of figures in whatever process runs it. `run_points` takes any
`concurrent.futures.Executor`: local processes by default, or a Dask cluster's executor
(`isthmus.experiments.cluster`). With a `PointStore` every finished point is saved as it
completes and saved points are reused instead of recomputed. Progress is counted in points and
in jobs, the expected work of a point being its number of jobs.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Executor, Future, as_completed
from dataclasses import dataclass, field
from functools import cached_property, lru_cache
from typing import TYPE_CHECKING, Any, cast

from isthmus.experiments.cluster import process_pool
from isthmus.model.environment import PolicyChoice
from isthmus.model.job import Job
from isthmus.workloads.conversion import RUN_CANCELLED

if TYPE_CHECKING:
    from isthmus.experiments.store import PointStore
    from isthmus.metrics.records import JobColumns


@dataclass(frozen=True)
class Point:
    """One simulation of a sweep.

    `trace` is a workload spec (file or model); `max_size` drops larger jobs and `first` keeps
    the first N (KOALA-C §V-A trace preparation). `allocation`/`provisioning` are (name, params)
    pairs; None uses the environment's. `labels` are copied into the result row.
    `short_threshold` adds figures for jobs with runtime at most that many seconds.
    `cancelled` is the treatment of jobs cancelled before they started ("keep", "drop" or
    "short", see `SwfConversion.cancelled`); it and the number of such jobs dropped are
    copied into the row. `window` = (offset, length) in seconds keeps the jobs submitted in
    that window, counted from the first job's submit (a week of a year-long trace).
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
    window: tuple[float, float] | None = None


def policy(name: str, **params: Any) -> tuple[str, tuple[tuple[str, Any], ...]]:
    """A picklable (name, params) pair for a Point."""
    return name, tuple(sorted(params.items()))


@dataclass(frozen=True)
class PreparedJobs:
    """The jobs of a sweep point and how many jobs cancelled before start were dropped."""

    jobs: tuple[Job, ...]
    cancelled_dropped: int

    @cached_property
    def columns(self) -> JobColumns:
        """The jobs as the metrics read them (by id, as a simulation's result holds them),
        built once per process for every point on these jobs."""
        from isthmus.metrics.records import JobColumns

        by_id = {j.id: j for j in self.jobs}
        return JobColumns.from_jobs(by_id.values(), by_id.keys())


@lru_cache(maxsize=8)
def prepare_trace(
    trace: str,
    max_size: int | None,
    first: int | None,
    cancelled: str = RUN_CANCELLED,
    window: tuple[float, float] | None = None,
) -> PreparedJobs:
    """The trace's jobs, read once per process with the `cancelled` treatment: larger than
    `max_size` dropped, then those submitted in `window` (offset, length from the first
    submit), then the first `first`."""
    from isthmus.workloads import SwfConversion, resolve_workload
    from isthmus.workloads.conversion import Cancelled

    workload = resolve_workload(trace, conversion=SwfConversion(cancelled=cast(Cancelled, cancelled)))
    jobs = workload.jobs
    if max_size is not None:
        jobs = [j for j in jobs if j.size <= max_size]
    if window is not None and jobs:
        t0 = min(j.submit for j in jobs) + window[0]
        jobs = [j for j in jobs if t0 <= j.submit < t0 + window[1]]
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
    "jobs_rejected",
    "wait_mean",
    "slowdown_mean",
    "bounded_slowdown_mean",
    "awrt",
    "speedup",
    "makespan",
    "vm_leases",
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
    from isthmus.metrics.run import summarize_run
    from isthmus.metrics.summary import short_long_breakdown
    from isthmus.sim.runner import simulate

    prepared = prepare_trace(point.trace, point.max_size, point.first, point.cancelled, point.window)
    jobs = prepared.jobs
    env = load_environment(point.env)
    alloc = PolicyChoice(point.allocation[0], dict(point.allocation[1]))
    prov = PolicyChoice(point.provisioning[0], dict(point.provisioning[1])) if point.provisioning else None
    result = simulate(env, jobs, alloc, prov)
    records, summary = summarize_run(result.log, prepared.columns, env, result.end_time)
    row: dict[str, Any] = dict(point.labels)
    row.update({k: summary.get(k) for k in SUMMARY_KEYS})
    row["simulation_seconds"] = round(result.wall_seconds, 3)
    row["cancelled"] = point.cancelled
    row["cancelled_dropped"] = prepared.cancelled_dropped
    if point.short_threshold is not None:
        parts = short_long_breakdown(records, point.short_threshold)
        for part in ("short", "long"):
            for key in ("fraction", "wait_mean", "slowdown_mean"):
                row[f"{part}_{key}"] = parts[part].get(key)
    row.update(dict(point.extra))
    return row


def default_workers() -> int:
    """Local cores available to this process."""
    return max(1, len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1)


def point_jobs(point: Point) -> int:
    """The expected work of a point: the number of jobs it simulates (its trace after preparation)."""
    return len(prepare_trace(point.trace, point.max_size, point.first, point.cancelled, point.window).jobs)


@dataclass(frozen=True)
class SweepStatus:
    """Where a sweep stands, in points and in jobs (a point's weight is its number of jobs).

    `reused_*` count the points taken from a points file; `jobs_per_second` and `eta_seconds`
    use only the jobs simulated by this run, so a resumed sweep is not credited with old work.
    """

    points_total: int
    points_done: int
    points_reused: int
    jobs_total: int
    jobs_done: int
    jobs_reused: int
    elapsed_seconds: float

    @property
    def jobs_per_second(self) -> float | None:
        """Jobs simulated per second of this run so far; None before the first point finished."""
        computed = self.jobs_done - self.jobs_reused
        if computed <= 0 or self.elapsed_seconds <= 0:
            return None
        return computed / self.elapsed_seconds

    @property
    def eta_seconds(self) -> float | None:
        """Time left: the jobs not yet simulated at the rate observed so far (None while unknown)."""
        if self.jobs_done >= self.jobs_total:
            return 0.0
        rate = self.jobs_per_second
        return None if rate is None else (self.jobs_total - self.jobs_done) / rate


ProgressCallback = Callable[[SweepStatus], None]


class PointFailedError(RuntimeError):
    """A point's simulation raised; the points finished before it are kept in the points file."""

    def __init__(self, point: Point, error: BaseException) -> None:
        labels = ", ".join(f"{k}={v}" for k, v in point.labels)
        super().__init__(f"simulation of {point.trace} ({labels}) failed: {type(error).__name__}: {error}")
        self.point = point


def run_points(
    points: Sequence[Point],
    *,
    workers: int | None = None,
    executor: Executor | None = None,
    progress: ProgressCallback | None = None,
    evaluate_point: Callable[[Point], Mapping[str, Any]] | None = None,
    store: PointStore | None = None,
    experiment: str = "",
    clock: Callable[[], float] = time.monotonic,
    weigh_point: Callable[[Point], int] | None = None,
) -> list[dict[str, Any]]:
    """Evaluate every point; rows come back in the order of `points`.

    With `executor` given it is used as is (a local pool, or a Dask cluster's executor);
    otherwise `workers` local processes (1: in this process, no pool). With `store`, a point of
    `experiment` already saved there is not evaluated but its saved row is used, and each newly
    finished point is appended to the store as soon as it completes. `progress` gets a
    `SweepStatus` once before the first simulation and after every finished point.
    `weigh_point` gives a point's expected work in jobs (default `point_jobs`: its trace's jobs;
    experiments whose points build their own workloads give their own). On a pool the points
    are submitted heaviest first.
    Raises `PointFailedError` when a simulation raises.
    """
    run = evaluate_point or evaluate
    weigh = weigh_point or point_jobs
    total = len(points)
    rows: list[dict[str, Any] | None] = [None] * total
    weights = [0] * total
    todo: list[int] = []
    for i, p in enumerate(points):
        saved = store.get(experiment, p) if store else None
        if saved is None:
            weights[i] = weigh(p)
            todo.append(i)
        else:
            weights[i] = saved.jobs
            rows[i] = dict(saved.row)
    reused = [i for i in range(total) if rows[i] is not None]
    start = clock()
    done_points = len(reused)
    jobs_reused = sum(weights[i] for i in reused)
    done_jobs = jobs_reused

    def finished(i: int, row: Mapping[str, Any] | None) -> None:
        nonlocal done_points, done_jobs
        if row is not None:
            rows[i] = dict(row)
            if store:
                store.add(experiment, points[i], weights[i], row)
            done_points += 1
            done_jobs += weights[i]
        if progress:
            progress(
                SweepStatus(total, done_points, len(reused), sum(weights), done_jobs, jobs_reused, clock() - start)
            )

    finished(-1, None)
    workers = workers or default_workers()
    if executor is None and (workers <= 1 or len(todo) <= 1):
        for i in todo:
            try:
                row = run(points[i])
            except Exception as exc:
                raise PointFailedError(points[i], exc) from exc
            finished(i, row)
        return [r for r in rows if r is not None]
    if executor is None:
        with process_pool(workers) as (pool, _):
            _collect(pool, run, points, todo, weights, finished)
    else:
        _collect(executor, run, points, todo, weights, finished)
    return [r for r in rows if r is not None]


def _collect(
    pool: Executor,
    run: Callable[[Point], Mapping[str, Any]],
    points: Sequence[Point],
    todo: Sequence[int],
    weights: Sequence[int],
    finished: Callable[[int, Mapping[str, Any] | None], None],
) -> None:
    """Submit the points `todo` to `pool` and hand each row to `finished` as it comes back."""
    futures: dict[Future[Mapping[str, Any]], int] = {}
    try:
        # the heaviest points first (most jobs; stable for equal weights), so that the last
        # points to finish are short ones and no worker idles long at the end
        futures.update({pool.submit(run, points[i]): i for i in sorted(todo, key=lambda i: -weights[i])})
        for fut in as_completed(futures):
            i = futures[fut]
            try:
                row = fut.result()
            except Exception as exc:
                raise PointFailedError(points[i], exc) from exc
            finished(i, row)
    finally:
        for fut in futures:  # on an error or Ctrl-C: points not yet started are not run
            fut.cancel()


@dataclass(frozen=True)
class Sweep:
    """How an experiment runs its points: on what, reporting progress to whom, saving them where.

    `executor` wins over `workers` (local processes; 1 runs in this process). With `store`,
    finished points are saved and saved ones reused (see `run_points`); `evaluate_point` and
    `weigh_point` replace the default simulation of a point and its weight in jobs.
    """

    workers: int | None = None
    executor: Executor | None = None
    progress: ProgressCallback | None = None
    store: PointStore | None = None
    evaluate_point: Callable[[Point], Mapping[str, Any]] | None = None
    weigh_point: Callable[[Point], int] | None = None

    def run(self, experiment: str, points: Sequence[Point]) -> list[dict[str, Any]]:
        """The rows of `points`, in their order."""
        return run_points(
            points,
            workers=self.workers,
            executor=self.executor,
            progress=self.progress,
            evaluate_point=self.evaluate_point,
            store=self.store,
            experiment=experiment,
            weigh_point=self.weigh_point,
        )
