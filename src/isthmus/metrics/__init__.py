"""Metrics computed from the event log: per-job records, run summaries, time series and plots.

Entry point: `compute_run_metrics(log, jobs, env, horizon=None) -> RunMetrics`, then
`write_run(metrics, out_dir, name)` and `compare_table({policy: metrics, ...})`. Plots live in
`isthmus.metrics.plots` (imported on demand: it loads matplotlib). Definitions: docs/metrics.md.
"""

from isthmus.metrics.records import (
    BOUNDED_SLOWDOWN_THRESHOLD,
    COLUMNS,
    JobColumns,
    JobRecords,
    JobStatus,
    compute_records,
    read_records,
    records_from_tables,
)
from isthmus.metrics.run import COMPARE_KEYS, RunMetrics, compare_table, compute_run_metrics, write_run
from isthmus.metrics.summary import (
    DELAY_PERCENTILES,
    percentile_cdf,
    read_summary,
    short_long_breakdown,
    summarize,
    write_summary,
)
from isthmus.metrics.tables import LeaseTable, LogTables, RunTable, build_tables
from isthmus.metrics.timeseries import RunTimeSeries, StepSeries, compute_timeseries, utilization_over_time

__all__ = [
    "BOUNDED_SLOWDOWN_THRESHOLD",
    "COLUMNS",
    "COMPARE_KEYS",
    "DELAY_PERCENTILES",
    "JobColumns",
    "JobRecords",
    "JobStatus",
    "LeaseTable",
    "LogTables",
    "RunMetrics",
    "RunTable",
    "RunTimeSeries",
    "StepSeries",
    "build_tables",
    "compare_table",
    "compute_records",
    "compute_run_metrics",
    "compute_timeseries",
    "percentile_cdf",
    "read_records",
    "read_summary",
    "records_from_tables",
    "short_long_breakdown",
    "summarize",
    "utilization_over_time",
    "write_run",
    "write_summary",
]
