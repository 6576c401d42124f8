"""Streamed metrics (`stream_run`: records computed and written a chunk of jobs at a time) give
exactly what the whole-run computation (`compute_run_metrics` + `write_run`) gives: the same
records files byte for byte, the same summary, waits and series, on runs with clusters, a paid
cloud, kills, restarts, rejections, unfinished jobs, bags of tasks and walltime limits."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from metrics_helpers import LogBuilder, env_with_cloud
from metrics_synthetic import synthetic_run

from isthmus.config import load_environment, single_cluster
from isthmus.metrics.records import (
    JobColumns,
    JobRecords,
    RecordsWriter,
    records_from_tables,
    records_in_chunks,
)
from isthmus.metrics.run import compute_run_metrics, stream_run, write_run
from isthmus.metrics.summary import FiguresBuilder, JobFigures
from isthmus.metrics.tables import build_tables, event_rows
from isthmus.metrics.timeseries import SampledSeries, StepSeries, sample_timeseries
from isthmus.model.environment import Environment, PolicyChoice
from isthmus.model.events import EventKind, EventLog
from isthmus.model.job import Job
from isthmus.model.site import Site, SiteKind
from isthmus.sim.runner import simulate
from isthmus.workloads import resolve_workload
from isthmus.workloads.bags import parse_bag

_ARRAYS = [f for f in JobRecords.__dataclass_fields__ if f != "site_names"]


def _concat(chunks: list[JobRecords]) -> dict[str, np.ndarray]:
    return {f: np.concatenate([getattr(c, f) for c in chunks]) for f in _ARRAYS}


def _same(a: np.ndarray, b: np.ndarray) -> bool:
    if a.dtype == object or b.dtype == object:
        return a.tolist() == b.tolist()
    return a.dtype == b.dtype and bool(np.array_equal(a, b, equal_nan=True))


def _same_json(a: Any, b: Any) -> None:
    assert json.dumps(a, sort_keys=True, default=str) == json.dumps(b, sort_keys=True, default=str)


@pytest.mark.parametrize("rows", [1, 7, 64, 1000, 5000])
def test_chunks_join_into_the_whole_records(rows: int) -> None:
    log, jobs, env = synthetic_run(3000, seed=2)
    log.reasons.update({5: "a reason", 2999: "another", 10_000: "not a job"})
    tables = build_tables(log, jobs.keys(), len(env.sites))
    whole = records_from_tables(tables, jobs, env, log.reasons)
    chunks = list(records_in_chunks(tables, jobs, env, log.reasons, rows=rows))
    assert [len(c) for c in chunks] == [min(rows, 3000 - lo) for lo in range(0, 3000, rows)]
    joined = _concat(chunks)
    for f in _ARRAYS:
        assert _same(joined[f], getattr(whole, f)), f
    with pytest.raises(ValueError, match="rows must be at least 1"):
        next(records_in_chunks(tables, jobs, env, rows=0))


def test_figures_of_chunks_equal_the_figures_of_the_whole_records() -> None:
    log, jobs, env = synthetic_run(2000, seed=5)
    tables = build_tables(log, jobs.keys(), len(env.sites))
    whole = JobFigures.from_records(records_from_tables(tables, jobs, env, log.reasons))
    builder = FiguresBuilder(tables.n_jobs)
    for chunk in records_in_chunks(tables, jobs, env, log.reasons, rows=333):
        builder.add(chunk)
    built = builder.build()
    assert (built.total, built.counts, built.restarts) == (whole.total, whole.counts, whole.restarts)
    assert whole.restarts > 0 and whole.counts[3] > 0  # kills and rejections are covered
    for name in ("wasted", "site", "size", "runtime", "response", "wait", "slowdown", "bounded_slowdown"):
        assert _same(getattr(built, name), getattr(whole, name)), name
    with pytest.raises(ValueError, match="more than the 10 jobs"):
        FiguresBuilder(10).add(next(records_in_chunks(tables, jobs, env, rows=11)))


def _streamed_equals_whole(
    tmp_path: Path,
    log: EventLog,
    jobs: dict[int, Job] | JobColumns,
    env: Environment,
    horizon: float | None,
    rows: int,
    consume_log: bool = False,
) -> None:
    whole = compute_run_metrics(log, jobs, env, horizon)
    a = write_run(whole, tmp_path / "whole", "run")
    # write_run's files in batches of `rows`, as stream_run's chunks
    whole.records.write_files(a["jobs_csv"], a["jobs_parquet"], batch_rows=rows)
    seen: list[int] = []
    calls: list[int] = []
    n_events = len(log)
    streamed = stream_run(
        log,
        jobs,
        env,
        horizon,
        tmp_path / "streamed" / "run.jobs.csv",
        tmp_path / "streamed" / "run.jobs.parquet",
        rows=rows,
        observe=lambda chunk: seen.append(len(chunk)),
        consume_log=consume_log,
        between=lambda: calls.append(len(log)),
    )
    # after the tables, series and summary part are built, once the tables are gone (the log emptied by then
    # if asked), once the figures are
    assert len(calls) == 3 and calls[1:] == [len(log)] * 2
    assert list(streamed.files["jobs_csv"].parent.glob("tmp*")) == []  # the spill file is gone
    assert sum(seen) == len(whole.records)
    assert len(log) == (0 if consume_log else n_events)
    for kind in ("jobs_csv", "jobs_parquet"):
        assert streamed.files[kind].read_bytes() == a[kind].read_bytes(), kind
    _same_json(streamed.summary, whole.summary)
    assert _same(streamed.completed_wait, whole.completed_wait)
    _same_sample(streamed.timeseries, whole.timeseries.sampled())


def _same_sample(a: SampledSeries, b: SampledSeries) -> None:
    """The same plotted values, float for float."""
    assert (a.start, a.end, a.bins, a.max_points) == (b.start, b.end, b.bins, b.max_points)
    assert all(_same(x, y) for x, y in zip(a.utilization(a.bins), b.utilization(b.bins), strict=True))
    assert a.allocated_by_site.keys() == b.allocated_by_site.keys()
    for site in (None, *a.allocated_by_site):
        for x, y in zip(a.processors(a.max_points, site), b.processors(b.max_points, site), strict=True):
            assert _same(x.times, y.times) and _same(x.values, y.values), site


@pytest.mark.parametrize("rows", [1, 100, 16_384])
def test_stream_run_writes_what_the_whole_computation_writes(tmp_path: Path, rows: int) -> None:
    log, jobs, env = synthetic_run(1500, seed=3)
    _streamed_equals_whole(tmp_path, log, jobs, env, None, rows)
    columns = JobColumns.from_jobs(jobs.values())
    _streamed_equals_whole(tmp_path / "cols", log, columns, env, 40 * 86400.0, rows, consume_log=True)
    assert len(log) == 0 and not log.reasons and log.core_columns()["time"].tolist() == []


def test_stream_run_of_a_small_hand_written_log(tmp_path: Path) -> None:
    b = LogBuilder()
    b.lease(0, 1, vm=0).submit(1, 1, 2, runtime=50, user="bob").start(2, 1, 1).fail(40, 1, 1)
    b.submit(3, 2, 1, runtime=30).start(3, 2, 0).kill(10, 2, 0).start(12, 2, 0).kill(20, 2, 0)
    b.start(25, 2, 0).end(55, 2, 0).release(3600, 1, vm=0)
    b.submit(4, 3, 1).cancel(9, 3).submit(5, 4, 99).reject(5, 4, 'too large, "really"')
    b.submit(6, 5, 1, user="carol").start(60, 5, 0)
    _streamed_equals_whole(tmp_path, b.build(), b.jobs, env_with_cloud(), 4000.0, 2)


def test_stream_run_without_series_and_of_an_empty_run(tmp_path: Path) -> None:
    env = single_cluster(4)
    run = stream_run(EventLog(), {}, env, None, tmp_path / "e.csv", tmp_path / "e.parquet", series=False)
    assert run.summary["jobs_total"] == 0 and run.completed_wait.size == 0
    assert (tmp_path / "e.csv").read_text().startswith('"job_id","submit","start","end","site"')
    with pytest.raises(ValueError, match="time series of this run were not computed"):
        _ = run.timeseries


def _simulated(env: Environment, jobs: list[Job], policy: str, **options: Any) -> tuple[EventLog, float]:
    result = simulate(env, jobs, policy, **options)
    return result.log, result.end_time


def test_streamed_metrics_of_simulations_with_kills_clouds_and_bags(tmp_path: Path) -> None:
    jobs = list(resolve_workload("lublin:jobs=400,procs=32,max_size=16,load=0.95", seed=4).jobs)
    by_id = {j.id: j for j in jobs}
    # walltime kills on one cluster (EASY)
    limited = [Job(j.id, j.submit, j.size, j.runtime, requested_runtime=max(1.0, j.runtime * 0.8)) for j in jobs]
    log, end = _simulated(single_cluster(32), limited, "easy", round_interval=None, enforce_walltime=True)
    assert (np.frombuffer(log.core_columns()["kind"], np.int8) == EventKind.KILL).any()
    _streamed_equals_whole(tmp_path / "kills", log, {j.id: j for j in limited}, single_cluster(32), end, 64)
    # clusters and paid clouds (the multicloud environment's provisioning leases VMs)
    cloud_env = load_environment("koala-c-multicloud")
    log, end = _simulated(cloud_env, jobs, "ff")
    assert (np.frombuffer(log.core_columns()["kind"], np.int8) == EventKind.VM_LEASE).any()
    _streamed_equals_whole(tmp_path / "clouds", log, by_id, cloud_env, end, 100)
    # VMs leased for one user each (vm-share: the summary's VM-hours per user, from the notes)
    share_env = Environment(
        "share", (Site("cloud", kind=SiteKind.CLOUD, max_vms=3, boot_time=10.0),), round_interval=None
    )
    shared = [Job(k, 5.0 * k, 1, 100.0, user="ab"[k % 2]) for k in range(12)]
    log, end = _simulated(share_env, shared, "ff", provisioning="none", fairshare=PolicyChoice("vm-share", {}))
    assert (np.frombuffer(log.core_columns()["kind"], np.int8) == EventKind.VM_USER).any()
    _streamed_equals_whole(tmp_path / "share", log, {j.id: j for j in shared}, share_env, end, 5, consume_log=True)
    # a bag of tasks beside the jobs (its events are not a rigid job's records)
    bag = parse_bag("tasks=50,runtime=30,user=alice", max(by_id) + 1)
    log, end = _simulated(single_cluster(32), jobs, "fcfs", bags=[bag], fairshare="sep")
    _streamed_equals_whole(tmp_path / "bags", log, by_id, single_cluster(32), end, 50)


def test_event_rows_give_each_event_its_row_in_the_sorted_union_of_ids() -> None:
    rng = np.random.default_rng(7)
    for dense in (True, False):
        log = EventLog()
        scale = 1 if dense else 10**12
        for i in range(500):
            kind = int(rng.choice([EventKind.SUBMIT, EventKind.START, EventKind.VM_LEASE, EventKind.END]))
            job = -1 if kind == EventKind.VM_LEASE else int(rng.integers(0, 300)) * scale
            log.append(float(i), kind, job, 0, 0, 1.0)
        known = np.arange(0, 200, 3, dtype=np.int64) * scale
        tables = build_tables(log, known, 1)
        ev = tables.events
        job_pos = np.flatnonzero((ev.kind <= EventKind.SHARED) & (ev.job >= 0))
        ids = np.unique(np.concatenate([known, ev.job[job_pos]]))
        rows = np.searchsorted(ids, ev.job[job_pos])
        expected = np.full(len(ev), -1, dtype=np.int64)
        expected[job_pos] = rows
        for chunk in (1, 13, 1 << 16):
            got_ids, got_rows = event_rows(ev, known, chunk)
            assert _same(got_ids, ids) and _same(got_rows, expected)
    empty_ids, empty_rows = event_rows(build_tables(EventLog(), [], 1).events, np.zeros(0, np.int64))
    assert empty_ids.size == 0 and empty_rows.size == 0


def test_records_writer_removes_its_files_on_an_error(tmp_path: Path) -> None:
    log, jobs, env = synthetic_run(50, seed=1)
    tables = build_tables(log, jobs.keys(), len(env.sites))
    with pytest.raises(RuntimeError, match="stop"), RecordsWriter(tmp_path / "r.csv", tmp_path / "r.parquet") as w:
        for chunk in records_in_chunks(tables, jobs, env, rows=10):
            w.write(chunk)
            raise RuntimeError("stop")
    assert list(tmp_path.iterdir()) == []


def test_a_cleared_log_is_empty_and_usable() -> None:
    log = EventLog()
    p = log.policy_index("easy")
    log.append(0.0, EventKind.SUBMIT, 1, value=2.0)
    log.append(1.0, EventKind.START, 1, 0, value=2.0, policy=p, task=4)
    log.reasons[1] = "r"
    log.notes[0] = "n"
    assert len(log.columns()["slots"]) == 2
    log.clear()
    assert len(log) == 0 and log.reasons == {} and log.notes == {}
    assert all(len(c) == 0 for c in log.columns().values())
    log.append(2.0, EventKind.START, 7, 0, value=3.0, policy=log.policy_index("easy"))
    assert [(e.job, e.slots, e.policy, e.task) for e in log] == [(7, 3, "easy", -1)]


@pytest.mark.parametrize("chunk", [1, 2, 5, 64, 10_000])
def test_steps_fed_in_chunks_equal_the_whole_changes(chunk: int) -> None:
    from isthmus.metrics.timeseries import StepSeries, _Steps

    rng = np.random.default_rng(chunk)
    times = np.sort(rng.integers(0, 300, 2000)).astype(np.float64)  # many equal times
    deltas = rng.choice([-3.0, -1.0, 0.5, 1.0, 2.0], 2000)  # steps that cancel out too
    whole = StepSeries.from_sorted_changes(times, deltas)
    steps = _Steps()
    for lo in range(0, times.size, chunk):
        steps.add(times[lo : lo + chunk], deltas[lo : lo + chunk])
    built = steps.build()
    assert _same(built.times, whole.times) and _same(built.values, whole.values)
    assert _Steps().build().times.size == 0


def test_series_built_in_small_chunks_equal_the_default(monkeypatch: pytest.MonkeyPatch) -> None:
    import isthmus.metrics.timeseries as timeseries

    log, jobs, env = synthetic_run(1200, seed=9)
    tables = build_tables(log, jobs.keys(), len(env.sites))
    default = timeseries.compute_timeseries(tables, env)
    monkeypatch.setattr(timeseries, "SERIES_CHUNK", 3)
    small = timeseries.compute_timeseries(tables, env)
    for name in ("allocated", "requested", "capacity"):
        a, b = getattr(default, name), getattr(small, name)
        assert _same(a.times, b.times) and _same(a.values, b.values), name
    for site, series in default.leased_vms_by_site.items():
        assert _same(series.values, small.leased_vms_by_site[site].values), site
    # and the allocation is what every run's start and end, sorted and summed, give
    runs, time = tables.runs, tables.events.time
    ends = np.where(runs.end_pos < len(time), time[np.minimum(runs.end_pos, len(time) - 1)], tables.horizon)
    changes = np.concatenate([time[runs.start_pos], ends]), np.concatenate([runs.size, -runs.size])
    direct = StepSeries.from_changes(*changes)
    assert _same(default.allocated.times, direct.times) and _same(default.allocated.values, direct.values)


def _sampled_runs() -> list[tuple[EventLog, dict[int, Job], Environment, float | None]]:
    log, jobs, env = synthetic_run(1500, seed=11)  # three clusters and a paid cloud
    lublin = resolve_workload("lublin:jobs=400,procs=32,max_size=16,load=0.95", seed=4).jobs
    one = simulate(single_cluster(16), lublin, "easy", "none")
    b = LogBuilder()
    b.lease(0, 1, vm=0).submit(1, 1, 2, runtime=50).start(2, 1, 1).end(40, 1, 1).release(3600, 1, vm=0)
    return [
        (log, jobs, env, None),
        (log, jobs, env, 45 * 86400.0),
        (one.log, {j.id: j for j in one.jobs.values()}, single_cluster(16), None),
        (b.build(), b.jobs, env_with_cloud(), 4000.0),
        (EventLog(), {}, single_cluster(4), None),
    ]


@pytest.mark.parametrize("chunk", [2, 7, 1 << 16])
@pytest.mark.parametrize("points", [1, 5, 64, 2000])
def test_sampled_series_equal_the_whole_series_sampled(
    monkeypatch: pytest.MonkeyPatch, chunk: int, points: int
) -> None:
    """`sample_timeseries` (the series fed a chunk of log positions at a time, never whole)
    gives the plotted values of the whole series, float for float: downsampled or not (fewer
    steps than points), on one cluster, several sites and a cloud, and an empty run."""
    import isthmus.metrics.timeseries as timeseries

    monkeypatch.setattr(timeseries, "SERIES_CHUNK", chunk)
    steps = []
    for log, jobs, env, horizon in _sampled_runs():
        tables = build_tables(log, jobs.keys(), len(env.sites), horizon)
        whole = timeseries.compute_timeseries(tables, env)
        steps.append(len(whole.allocated))
        for bins in (1, 13, 500):
            sampled = sample_timeseries(tables, env, bins=bins, max_points=points)
            _same_sample(sampled, whole.sampled(bins, points))
    assert steps[0] > 2000 and 0 < steps[3] < 5 and steps[4] == 0  # downsampled, or not, or empty


def test_sampled_series_refuse_other_points_or_bins() -> None:
    log, jobs, env = synthetic_run(300, seed=1)
    sampled = sample_timeseries(build_tables(log, jobs.keys(), len(env.sites)), env, bins=50, max_points=100)
    assert sampled.utilization(50)[1].size == 50 and len(sampled.processors(100)[0]) == 100
    with pytest.raises(ValueError, match="sampled for 50 utilization bins, not 500"):
        sampled.utilization()
    with pytest.raises(ValueError, match="sampled to 100 points, not 2000"):
        sampled.processors()
