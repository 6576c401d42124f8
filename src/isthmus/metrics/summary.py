"""The summary of a run: one JSON-serialisable dict of its key figures, overall and per site.

Performance figures (wait, slowdown, AWRT, delay, speedup, throughput) are over the completed
jobs. Undefined values (no completed job, nothing available, ...) are None. See docs/metrics.md
for every key and its definition.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from isthmus.metrics.records import JobRecords, JobStatus, atomic_write
from isthmus.metrics.tables import FloatArray, IntArray, LogTables
from isthmus.metrics.vm_shares import lease_cores, lease_hourly_prices, lease_types
from isthmus.model.environment import Environment
from isthmus.model.events import EventKind
from isthmus.model.site import Site
from isthmus.model.status import StatusCode

#: Percentiles of the IBM delay time reported in the summary (IBM seed, Table 1).
DELAY_PERCENTILES: tuple[int, ...] = (50, 80, 90, 95)


def _num(x: float | np.floating[Any] | np.integer[Any] | None) -> float | None:
    """A plain float, or None for None / NaN / infinity."""
    if x is None:
        return None
    f = float(x)
    return f if math.isfinite(f) else None


def _mean(a: FloatArray) -> float | None:
    a = a[~np.isnan(a)]
    return float(a.mean()) if a.size else None


def _median(a: FloatArray) -> float | None:
    a = a[~np.isnan(a)]
    return float(np.median(a)) if a.size else None


def _ratio(num: float, den: float) -> float | None:
    return num / den if den > 0 else None


def percentile_cdf(values: FloatArray, q: float) -> float | None:
    """The q-th percentile as read off the empirical CDF (IBM seed §4.2, Fig. 6, Table 1).

    The smallest value v such that at least q % of the values are ≤ v (numpy's
    'inverted_cdf' method: no interpolation, always one of the values).
    """
    v = values[~np.isnan(values)]
    if v.size == 0:
        return None
    return float(np.percentile(v, q, method="inverted_cdf"))


def charged_costs(site: Site, seconds: FloatArray) -> FloatArray:
    """`site.charged_cost` of each lease duration in `seconds`, vectorized (same rounding rule)."""
    if not site.is_paid:
        return np.zeros(seconds.size)
    n = np.ceil(seconds / site.billing_increment - 1e-9)
    costs: FloatArray = np.where(seconds > 0, n * site.price_per_increment, 0.0)
    return costs


def typed_charged_costs(site: Site, seconds: FloatArray, hourly: FloatArray) -> FloatArray:
    """Charged cost of each lease of `seconds` at its own price per hour (`hourly`)."""
    n = np.ceil(seconds / site.billing_increment - 1e-9)
    costs: FloatArray = np.where(seconds > 0, n * hourly * site.billing_increment / 3600.0, 0.0)
    return costs


def _window(tables: LogTables) -> tuple[float | None, float | None]:
    """(first SUBMIT time, last END time), None when there is none."""
    ev = tables.events
    sub = ev.time[ev.kind == EventKind.SUBMIT]
    end = ev.time[ev.kind == EventKind.END]
    return (float(sub.min()) if sub.size else None, float(end.max()) if end.size else None)


def _clip_seconds(start: FloatArray, end: FloatArray, t0: float, t1: float) -> FloatArray:
    """Length of each interval [start, end] inside [t0, t1]."""
    inside: FloatArray = np.maximum(np.minimum(end, t1) - np.maximum(start, t0), 0.0)
    return inside


@dataclass(frozen=True, eq=False, slots=True)
class JobFigures:
    """What the summary takes of the per-job records: the number of jobs, of each status, the
    restarts, every job's wasted processor-seconds, and the site, size, runtime, response,
    wait, slowdown and bounded slowdown of the completed jobs (in job order)."""

    total: int
    counts: tuple[int, ...]
    restarts: int
    wasted: FloatArray
    site: IntArray
    size: FloatArray
    runtime: FloatArray
    response: FloatArray
    wait: FloatArray
    slowdown: FloatArray
    bounded_slowdown: FloatArray

    @classmethod
    def from_records(cls, records: JobRecords) -> JobFigures:
        """The figures of `records`."""
        done = records.completed
        return cls(
            total=len(records),
            counts=tuple(records.count(s) for s in JobStatus),
            restarts=int(records.restarts.sum()),
            wasted=records.wasted_processor_seconds,
            **{name: getattr(records, name)[done] for name in _DONE_COLUMNS},
        )


_DONE_COLUMNS = ("site", "size", "runtime", "response", "wait", "slowdown", "bounded_slowdown")


class FiguresBuilder:
    """`JobFigures` of the records of `n` jobs that come in chunks (in job order): `add` each
    chunk, then `build`; the result equals `JobFigures.from_records` of the whole records value
    for value (the same arrays, filled in place: no chunk is kept and nothing is joined at the
    end)."""

    def __init__(self, n: int) -> None:
        self._total = self._restarts = self._done = 0
        self._counts = [0] * len(JobStatus)
        self._wasted = np.empty(n, dtype=np.float64)
        self._columns: dict[str, NDArray[Any]] = {
            name: np.empty(n, dtype=np.int64 if name == "site" else np.float64) for name in _DONE_COLUMNS
        }

    def add(self, records: JobRecords) -> None:
        """Take the figures of one chunk of records."""
        f = JobFigures.from_records(records)
        if self._total + f.total > self._wasted.size:
            raise ValueError(f"more than the {self._wasted.size} jobs announced")
        self._wasted[self._total : self._total + f.total] = f.wasted
        k = f.site.size
        for name, column in self._columns.items():
            column[self._done : self._done + k] = getattr(f, name)
        self._total += f.total
        self._done += k
        self._restarts += f.restarts
        self._counts = [a + b for a, b in zip(self._counts, f.counts, strict=True)]

    def build(self) -> JobFigures:
        """The figures of every chunk added (views of the builder's arrays)."""
        done = {name: column[: self._done] for name, column in self._columns.items()}
        return JobFigures(self._total, tuple(self._counts), self._restarts, self._wasted[: self._total], **done)


def summarize(records: JobRecords, tables: LogTables, env: Environment) -> dict[str, Any]:
    """The summary dict of one run (keys in docs/metrics.md)."""
    return summarize_figures(JobFigures.from_records(records), tables, env)


def summarize_figures(figures: JobFigures, tables: LogTables, env: Environment) -> dict[str, Any]:
    """The summary dict of one run from the figures of its records (`summarize`)."""
    return complete_summary(summarize_tables(tables, env), figures)


def summarize_tables(tables: LogTables, env: Environment) -> dict[str, Any]:
    """The part of the summary that comes from the log's tables alone (window, utilization,
    leases, costs, kills by site, refusals), for `complete_summary` to finish with the jobs'
    figures: a caller may let the tables go in between. Each site's "jobs_completed" and
    "completed_fraction" are left None."""
    n_sites = len(env.sites)
    first_submit, last_end = _window(tables)
    makespan = (last_end - first_submit) if (first_submit is not None and last_end is not None) else None
    if makespan is not None:
        makespan = max(makespan, 0.0)

    # Utilization over the makespan window W = [first submit, last end].
    runs, leases = tables.runs, tables.leases
    busy: FloatArray = np.zeros(n_sites)
    available: FloatArray = np.zeros(n_sites)
    if makespan:
        assert first_submit is not None and last_end is not None
        t0, t1 = first_submit, last_end
        busy = np.bincount(
            runs.site, weights=runs.size * _clip_seconds(runs.start, runs.end, t0, t1), minlength=n_sites
        )[:n_sites].astype(np.float64)
        leased_in_w = _clip_seconds(leases.start, leases.end, t0, t1)
        for i, s in enumerate(env.sites):
            if s.is_cloud and s.instance_types:  # each lease has the cores of its type
                m = leases.site == i
                cores = lease_cores(s, lease_types(tables)[m])
                available[i] = float((cores * leased_in_w[m]).sum())
            elif s.is_cloud:
                available[i] = s.cores_per_node * float(leased_in_w[leases.site == i].sum())
            else:
                a = t0 if s.available_from is None else max(t0, s.available_from)
                b = t1 if s.available_until is None else min(t1, s.available_until)
                available[i] = s.max_processors * max(b - a, 0.0)

    # Costs of the VM leases (full leases, up to the horizon when never released).
    secs = leases.seconds
    killed = runs.killed
    wasted_by_site = np.bincount(
        runs.site[killed], weights=runs.size[killed] * runs.duration[killed], minlength=n_sites
    )[:n_sites]
    restarts_by_site = np.bincount(runs.site[killed], minlength=n_sites)[:n_sites]

    sites: dict[str, dict[str, Any]] = {}
    tot_actual = tot_charged = tot_killed_cost = 0.0
    for i, s in enumerate(env.sites):
        m = leases.site == i
        if s.is_cloud and s.instance_types:  # each lease at the price of its type
            hourly = lease_hourly_prices(s, lease_types(tables)[m])
            actual = float((secs[m] * hourly).sum()) / 3600.0
            charged = float(typed_charged_costs(s, secs[m], hourly).sum())
        else:
            actual = float(secs[m].sum()) * s.price_per_hour / 3600.0 if s.is_cloud else 0.0
            charged = float(charged_costs(s, secs[m]).sum())
        killed_cost = float(wasted_by_site[i]) * s.price_per_hour / 3600.0 / s.cores_per_node if s.is_paid else 0.0
        tot_actual += actual
        tot_charged += charged
        tot_killed_cost += killed_cost
        sites[s.name] = {
            "kind": s.kind.value,
            "busy_processor_seconds": float(busy[i]),
            "available_processor_seconds": float(available[i]),
            "utilization": _num(_ratio(float(busy[i]), float(available[i]))),
            "jobs_completed": None,
            "completed_fraction": None,
            "vm_leases": int(m.sum()),
            "vm_seconds": float(secs[m].sum()),
            "cost_actual": actual,
            "cost_charged": charged,
            "restarts": int(restarts_by_site[i]),
            "wasted_processor_seconds": float(wasted_by_site[i]),
            "killed_work_cost": killed_cost,
        }

    total_busy, total_available = float(busy.sum()), float(available.sum())
    return {
        "horizon": tables.horizon,
        "first_submit": first_submit,
        "last_end": last_end,
        "makespan": makespan,
        "busy_processor_seconds": total_busy,
        "available_processor_seconds": total_available,
        "utilization": _num(_ratio(total_busy, total_available)),
        "vm_leases": len(leases),
        "vm_seconds": float(secs.sum()),
        "cost_actual": tot_actual,
        "cost_charged": tot_charged,
        "killed_work_cost": tot_killed_cost,
        "sites": sites,
        "refusals": refusal_counts(tables),
    }


def complete_summary(part: Mapping[str, Any], figures: JobFigures) -> dict[str, Any]:
    """The summary dict of one run: `part` (`summarize_tables`) with the jobs' `figures`."""
    size, runtime, response = figures.size, figures.runtime, figures.response
    sites = {name: dict(site) for name, site in part["sites"].items()}
    completed_by_site = np.bincount(figures.site[figures.site >= 0], minlength=len(sites))[: len(sites)]
    n_done = int(figures.site.size)
    for i, site in enumerate(sites.values()):
        site["jobs_completed"] = int(completed_by_site[i])
        site["completed_fraction"] = _num(_ratio(float(completed_by_site[i]), float(n_done)))
    makespan = part["makespan"]
    area = size * runtime
    summary: dict[str, Any] = {
        "horizon": part["horizon"],
        "jobs_total": figures.total,
        "jobs_completed": n_done,
        "jobs_failed": figures.counts[JobStatus.FAILED],
        "jobs_cancelled": figures.counts[JobStatus.CANCELLED],
        "jobs_rejected": figures.counts[JobStatus.REJECTED],
        "jobs_unfinished": figures.counts[JobStatus.UNFINISHED],
        "wait_mean": _mean(figures.wait),
        "wait_median": _median(figures.wait),
        "response_mean": _mean(response),
        "slowdown_mean": _mean(figures.slowdown),
        "bounded_slowdown_mean": _mean(figures.bounded_slowdown),
        "awrt": _num(_ratio(float((area * response).sum()), float(area.sum()))),
    }
    delay = response - runtime  # the records' delay of the completed jobs
    for q in DELAY_PERCENTILES:
        summary[f"delay_p{q}"] = percentile_cdf(delay, q)
    summary.update({k: part[k] for k in _TABLE_KEYS})
    summary.update(
        {
            "restarts": figures.restarts,
            "wasted_processor_seconds": float(figures.wasted.sum()),
            "killed_work_cost": part["killed_work_cost"],
            "speedup": _num(_ratio(float(runtime.sum()), makespan or 0.0)),
            "throughput": _num(_ratio(float(n_done), makespan or 0.0)),
            "sites": sites,
            "refusals": part["refusals"],
        }
    )
    return summary


#: Keys of `summarize_tables` copied in this order after the jobs' figures.
_TABLE_KEYS = (
    "first_submit",
    "last_end",
    "makespan",
    "busy_processor_seconds",
    "available_processor_seconds",
    "utilization",
    "vm_leases",
    "vm_seconds",
    "cost_actual",
    "cost_charged",
)


def refusal_counts(tables: LogTables) -> dict[str, int]:
    """Decisions refused (or held) per status code, e.g. {'no capacity': 12}, from DECISION events."""
    ev = tables.events
    codes = ev.value[ev.kind == EventKind.DECISION].astype(np.int64)
    values, counts = np.unique(codes, return_counts=True)
    return {StatusCode(int(v)).label: int(c) for v, c in zip(values, counts, strict=True)}


def short_long_breakdown(records: JobRecords, threshold: float) -> dict[str, dict[str, Any]]:
    """Mean slowdown and wait of short and long completed jobs (KOALA-C Fig. 7b, 7d).

    A job is short when its runtime (of the completing run) is ≤ `threshold` seconds, long
    otherwise. Returns {"short": ..., "long": ..., "all": ...}, each with jobs, fraction,
    wait_mean, slowdown_mean and bounded_slowdown_mean (None when the class is empty).
    """
    done = records.completed
    short = done & (records.runtime <= threshold)
    long_ = done & (records.runtime > threshold)
    total = int(done.sum())
    out: dict[str, dict[str, Any]] = {}
    for name, m in (("short", short), ("long", long_), ("all", done)):
        k = int(m.sum())
        out[name] = {
            "jobs": k,
            "fraction": _ratio(float(k), float(total)),
            "wait_mean": _mean(records.wait[m]),
            "slowdown_mean": _mean(records.slowdown[m]),
            "bounded_slowdown_mean": _mean(records.bounded_slowdown[m]),
        }
    return out


def _jsonable(x: Any) -> Any:
    """Convert numpy scalars and non-finite floats (-> None) recursively."""
    if isinstance(x, Mapping):
        return {str(k): _jsonable(v) for k, v in x.items()}
    if isinstance(x, list | tuple):
        return [_jsonable(v) for v in x]
    if isinstance(x, np.integer | np.bool_):
        return x.item()
    if isinstance(x, float | np.floating):
        return _num(x)
    return x


def write_summary(summary: Mapping[str, Any], path: str | os.PathLike[str]) -> Path:
    """Write `summary` as indented JSON (NaN and infinity written as null), atomically."""
    text = json.dumps(_jsonable(summary), indent=2, allow_nan=False) + "\n"

    def write(tmp: Path) -> None:
        tmp.write_text(text, encoding="utf-8")

    return atomic_write(path, write)


def read_summary(path: str | os.PathLike[str]) -> dict[str, Any]:
    """Read a summary written by `write_summary`."""
    data: dict[str, Any] = json.loads(Path(path).read_text(encoding="utf-8"))
    return data
