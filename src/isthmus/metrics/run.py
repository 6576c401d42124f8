"""All metrics of one run in one object: records, summary and time series, and their files."""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from isthmus.metrics.records import (
    BATCH_ROWS,
    JobRecords,
    Jobs,
    RecordsWriter,
    SpilledRecords,
    records_from_tables,
    records_in_chunks,
)
from isthmus.metrics.summary import FiguresBuilder, complete_summary, summarize, summarize_tables, write_summary
from isthmus.metrics.tables import EventColumns, FloatArray, LeaseTable, LogTables, RunTable, build_tables
from isthmus.metrics.timeseries import RunTimeSeries, SampledSeries, compute_timeseries, sample_timeseries
from isthmus.metrics.vm_shares import user_vm_metrics
from isthmus.model.environment import Environment
from isthmus.model.events import EventKind, EventLog


@dataclass(frozen=True, eq=False, slots=True)
class RunMetrics:
    """The metrics of one run.

    `records`: per-job records; `summary`: the summary dict (docs/metrics.md); `timeseries`: the
    step series the plots need; `runs` and `leases`: the run and VM-lease tables they were
    computed from; `site_names`: the environment's sites, in log index order.
    """

    records: JobRecords
    summary: dict[str, Any]
    timeseries: RunTimeSeries
    runs: RunTable
    leases: LeaseTable
    site_names: tuple[str, ...]

    @property
    def completed_wait(self) -> FloatArray:
        """The wait of each completed job (job order)."""
        wait: FloatArray = self.records.wait[self.records.completed]
        return wait


def compute_run_metrics(
    log: EventLog, jobs: Jobs, env: Environment, horizon: float | None = None, *, copy_log: bool = True
) -> RunMetrics:
    """Compute every metric of one run from its event log.

    `jobs` is the workload by job id or its `JobColumns` (jobs absent from the log count as
    unfinished); `env` the
    environment whose `sites` the log's site indices refer to; `horizon` the end of the run
    (default: the time of the last event): runs still going and VMs never released last until it.
    With `copy_log=False` the metrics read the log's columns in place instead of copying them
    (for a finished run: the log cannot grow while this call runs; the result keeps no view).
    """
    tables = build_tables(log, jobs.keys(), len(env.sites), horizon, copy=copy_log)
    # the series before the records: their temporaries never coexist with the records (27 MB
    # lower peak for 300k jobs)
    timeseries = compute_timeseries(tables, env)
    records = records_from_tables(tables, jobs, env, log.reasons)
    summary = _summary(log, records, tables, env)
    return RunMetrics(
        records=records,
        summary=summary,
        timeseries=timeseries,
        runs=tables.runs,
        leases=tables.leases,
        site_names=tuple(s.name for s in env.sites),
    )


def summarize_run(
    log: EventLog, jobs: Jobs, env: Environment, horizon: float | None = None
) -> tuple[JobRecords, dict[str, Any]]:
    """The per-job records and the summary of one run, as `compute_run_metrics` gives them,
    without the time series (what a sweep point keeps: its summary figures)."""
    tables = build_tables(log, jobs.keys(), len(env.sites), horizon)
    records = records_from_tables(tables, jobs, env, log.reasons)
    return records, _summary(log, records, tables, env)


def _summary(log: EventLog, records: JobRecords, tables: LogTables, env: Environment) -> dict[str, Any]:
    """The summary dict of a run from its records and tables (with the vm-share figures when
    VMs served one user)."""
    summary = summarize(records, tables, env)
    if (tables.events.kind == EventKind.VM_USER).any():
        summary.update(user_vm_metrics(log, tables, env.sites))
    return summary


def stream_run(
    log: EventLog,
    jobs: Jobs,
    env: Environment,
    horizon: float | None,
    csv_path: str | os.PathLike[str],
    parquet_path: str | os.PathLike[str],
    *,
    series: bool = True,
    observe: Callable[[JobRecords], None] | None = None,
    consume_log: bool = False,
    between: Callable[[], object] | None = None,
    rows: int = BATCH_ROWS,
) -> WrittenRun:
    """Compute the metrics of one run and write its per-job records files.

    What `compute_run_metrics` and then `write_run` give, value for value and byte for byte
    (the records files; the summary dict but for the caller's additions), without the whole
    run's records ever in memory: they are computed `rows` jobs at a time from the log's tables
    (`records_in_chunks`), passed to `observe` and kept in a temporary file (`SpilledRecords`)
    with the part of the summary that needs the tables (`summarize_tables`); then the tables go
    (and the log's columns, emptied with `consume_log`: for a caller done with the log), and
    only then are the summary's figures gathered (`FiguresBuilder`) and the files written
    (`RecordsWriter`, one Parquet row group per chunk, as `JobRecords.write_files` writes them)
    from the chunks read back: pyarrow (30 MB) and its writers never share the peak with the
    log. `between` (e.g. giving freed memory back) is called once the tables, series and the
    summary's part are built, once the tables are gone and once the figures are. With
    `series`, what the plots draw of the time series is computed (`sample_timeseries`: the
    values `compute_run_metrics(...).timeseries.sampled()` gives, without the whole-run
    series). The log is read in place (it may not grow while this runs).
    """
    ev = EventColumns.from_log(log, copy=False)
    reasons = log.reasons
    vm_users = bool((ev.kind == EventKind.VM_USER).any())  # VMs serving one user (vm-share): notes read
    if consume_log and not vm_users:
        log.clear()  # the columns the metrics do not read go now (the others live on as `ev`)
    tables = build_tables(ev, jobs.keys(), len(env.sites), horizon)
    del ev
    timeseries = sample_timeseries(tables, env) if series else None
    part = summarize_tables(tables, env)
    if vm_users:
        part = {**part, **user_vm_metrics(log, tables, env.sites)}
    if between is not None:
        between()  # (the temporaries of the tables, series and summary)
    n_jobs = tables.n_jobs
    Path(csv_path).parent.mkdir(parents=True, exist_ok=True)  # (the spill file goes beside the records)
    spill = SpilledRecords(tuple(s.name for s in env.sites), Path(csv_path).parent)
    with spill:
        for chunk in records_in_chunks(tables, jobs, env, reasons, rows):
            spill.add(chunk)
            if observe is not None:
                observe(chunk)
        del tables
        if consume_log:
            log.clear()
        if between is not None:
            between()
        figures = FiguresBuilder(n_jobs)
        for chunk in spill.chunks():
            figures.add(chunk)
        done = figures.build()
        del figures
        summary = complete_summary(part, done)
        summary.update({k: part[k] for k in ("vm_hours_by_user", "vm_share_spread") if k in part})
        completed_wait = done.wait  # (the plots' wait CDF); the other figures go
        del done
        if between is not None:
            between()  # (the figures)
        with RecordsWriter(csv_path, parquet_path) as writer:
            for chunk in spill.chunks():
                writer.write(chunk)
    return WrittenRun(
        summary=summary,
        completed_wait=completed_wait,
        series=timeseries,
        files={"jobs_csv": writer.paths[0], "jobs_parquet": writer.paths[1]},
        site_names=tuple(s.name for s in env.sites),
    )


@dataclass(frozen=True, eq=False, slots=True)
class WrittenRun:
    """The metrics of one run whose records went to files as they were computed (`stream_run`).

    `summary`: the summary dict; `completed_wait`: the wait of each completed job (job order);
    `files`: the records files by kind ("jobs_csv", "jobs_parquet"); `site_names`: the
    environment's sites; `timeseries` (only when computed) what the plots draw of the series.
    """

    summary: dict[str, Any]
    completed_wait: FloatArray
    series: SampledSeries | None
    files: dict[str, Path]
    site_names: tuple[str, ...]

    @property
    def timeseries(self) -> SampledSeries:
        """What the plots draw of the series (ValueError when the run was streamed without them)."""
        if self.series is None:
            raise ValueError("the time series of this run were not computed (stream_run(series=False))")
        return self.series


def write_run(metrics: RunMetrics, out_dir: str | os.PathLike[str], name: str) -> dict[str, Path]:
    """Write `<name>.jobs.csv`, `<name>.jobs.parquet` and `<name>.summary.json` into `out_dir`.

    Each file is written atomically; the two records files in one streamed pass
    (`JobRecords.write_files`). Returns the paths by kind: "jobs_csv", "jobs_parquet", "summary".
    """
    d = Path(out_dir)
    csv, parquet = metrics.records.write_files(d / f"{name}.jobs.csv", d / f"{name}.jobs.parquet")
    return {
        "jobs_csv": csv,
        "jobs_parquet": parquet,
        "summary": write_summary(metrics.summary, d / f"{name}.summary.json"),
    }


#: Columns of `compare_table` rows, in order, after "policy".
COMPARE_KEYS: tuple[str, ...] = (
    "jobs_total",
    "jobs_completed",
    "jobs_unfinished",
    "jobs_rejected",
    "wait_mean",
    "wait_median",
    "slowdown_mean",
    "bounded_slowdown_mean",
    "awrt",
    "delay_p80",
    "delay_p95",
    "makespan",
    "utilization",
    "cost_charged",
    "cost_actual",
    "restarts",
)


def compare_table(runs: Mapping[str, RunMetrics] | Mapping[str, WrittenRun]) -> list[dict[str, Any]]:
    """One row per run (keyed by policy name) with the key figures of its summary.

    Each row is {"policy": name, **{k: summary[k] for k in COMPARE_KEYS}}, in the order of `runs`.
    """
    return [{"policy": name, **{k: m.summary.get(k) for k in COMPARE_KEYS}} for name, m in runs.items()]
