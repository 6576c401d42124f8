"""Time series of a run as step functions: allocated and requested processors, leased VMs, capacity.

- allocated processors (IBM seed Figs. 7, 8): processors in use by running jobs, overall and per site;
- requested processors (same figures): processors of all jobs in the system, queued or running
  (from SUBMIT to the job's END / FAIL / CANCEL / REJECT; unfinished jobs until the horizon);
- leased VMs per cloud site: VMs between VM_LEASE and VM_RELEASE (billing), or the horizon;
- capacity: processors available, cluster processors (within `available_from/until`) plus
  leased VMs × cores per node;
- utilization over time: allocated / capacity, averaged over the bins of a regular grid.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from isthmus.metrics.tables import BoolArray, FloatArray, IntArray, LogTables, kind_mask
from isthmus.model.environment import Environment
from isthmus.model.events import EventKind


@dataclass(frozen=True, eq=False, slots=True)
class StepSeries:
    """A right-continuous step function: `values[i]` holds on `[times[i], times[i+1])`.

    The value is 0 before `times[0]`; the last value holds after `times[-1]`. `times` is strictly
    increasing.
    """

    times: FloatArray
    values: FloatArray

    def __len__(self) -> int:
        return int(self.times.size)

    @classmethod
    def empty(cls) -> StepSeries:
        """The function that is 0 everywhere."""
        return cls(np.zeros(0), np.zeros(0))

    @classmethod
    def from_sorted_changes(cls, times: FloatArray, deltas: FloatArray) -> StepSeries:
        """Build from changes `deltas` at non-decreasing `times` (equal times are merged)."""
        if times.size == 0:
            return cls.empty()
        values = np.cumsum(deltas, dtype=np.float64)
        last_of_time = np.ones(times.size, dtype=np.bool_)
        last_of_time[:-1] = times[1:] != times[:-1]
        t, v = times[last_of_time], values[last_of_time]
        keep = np.ones(t.size, dtype=np.bool_)
        keep[1:] = v[1:] != v[:-1]  # drop steps that change nothing
        return cls(t[keep].astype(np.float64, copy=False), v[keep])

    @classmethod
    def from_changes(cls, times: FloatArray, deltas: FloatArray) -> StepSeries:
        """Build from changes `deltas` at `times` in any order."""
        order = np.argsort(times, kind="stable")
        return cls.from_sorted_changes(times[order], deltas[order])

    def value_at(self, t: FloatArray | float) -> FloatArray:
        """The value at each time of `t`."""
        tt = np.asarray(t, dtype=np.float64)
        i = np.searchsorted(self.times, tt, side="right") - 1
        padded = np.concatenate([self.values, [0.0]])  # index -1 -> 0 before the first step
        return padded[i]

    def integral_to(self, t: FloatArray | float) -> FloatArray:
        """∫ value dt from -inf to each time of `t` (the function is 0 before `times[0]`)."""
        tt = np.asarray(t, dtype=np.float64)
        if self.times.size == 0:
            return np.zeros_like(tt)
        cum = np.concatenate([[0.0], np.cumsum(self.values[:-1] * np.diff(self.times))])
        i = np.searchsorted(self.times, tt, side="right") - 1
        ic = np.maximum(i, 0)
        out = cum[ic] + self.values[ic] * (tt - self.times[ic])
        return np.where(i >= 0, out, 0.0)

    def bin_means(self, edges: FloatArray) -> FloatArray:
        """Time-average of the function over each bin `[edges[k], edges[k+1])`."""
        widths = np.diff(edges)
        with np.errstate(invalid="ignore", divide="ignore"):
            means = np.diff(self.integral_to(edges)) / widths
        return np.where(widths > 0, means, self.value_at(edges[:-1]))

    def downsample(self, max_points: int = 2000, end: float | None = None) -> StepSeries:
        """At most `max_points` steps: bin averages over a regular grid when there are more.

        The grid spans `times[0]` to `end` (default: the last change). Used to plot 100k-job runs.
        """
        if self.times.size <= max_points:
            return self
        t0 = float(self.times[0])
        t1 = float(self.times[-1] if end is None else max(end, self.times[-1]))
        edges = np.linspace(t0, t1, max_points + 1)
        return StepSeries(edges[:-1], self.bin_means(edges))

    def plot_xy(self, end: float) -> tuple[FloatArray, FloatArray]:
        """x, y arrays drawing the steps up to `end` (for `ax.plot(..., drawstyle='steps-post')`)."""
        if self.times.size == 0:
            return np.array([end]), np.array([0.0])
        return np.append(self.times, max(end, float(self.times[-1]))), np.append(self.values, self.values[-1])


@dataclass(frozen=True, eq=False, slots=True)
class RunTimeSeries:
    """The step series of one run, over `[start, end]` (first event to horizon).

    `allocated_by_site` has every site; `leased_vms_by_site` every cloud site.
    """

    start: float
    end: float
    allocated: StepSeries
    requested: StepSeries
    capacity: StepSeries
    allocated_by_site: dict[str, StepSeries]
    leased_vms_by_site: dict[str, StepSeries]

    def utilization(self, bins: int = 500) -> tuple[FloatArray, FloatArray]:
        """Utilization over time on a regular grid: (bin centres, allocated / capacity per bin).

        Each value is ∫ allocated / ∫ capacity over the bin (NaN where nothing is available).
        """
        return utilization_over_time(self, bins)


def utilization_over_time(ts: RunTimeSeries, bins: int = 500) -> tuple[FloatArray, FloatArray]:
    """Utilization of `ts` on `bins` regular bins over `[ts.start, ts.end]`: (centres, values)."""
    edges = np.linspace(ts.start, max(ts.end, ts.start), bins + 1)
    alloc = np.diff(ts.allocated.integral_to(edges))
    cap = np.diff(ts.capacity.integral_to(edges))
    with np.errstate(invalid="ignore", divide="ignore"):
        util = np.where(cap > 0, alloc / cap, np.nan)
    return (edges[:-1] + edges[1:]) / 2, util


#: Log positions turned into steps at a time by `_dense_series` (its temporaries stay small).
SERIES_CHUNK = 1 << 16


class _Steps:
    """`StepSeries.from_sorted_changes` fed its changes a chunk at a time (in time order): the
    same running sums, the same merging of equal times and dropping of steps that change
    nothing, so the same series, without whole-run temporaries."""

    def __init__(self) -> None:
        self._sum: float | None = None  # the running sum so far
        self._pending: tuple[float, float] | None = None  # the last change: equal times may follow
        self._previous: float | None = None  # the value of the last time emitted
        self._times: list[FloatArray] = []
        self._values: list[FloatArray] = []

    def add(self, times: FloatArray, deltas: FloatArray) -> None:
        if times.size == 0:
            return
        d = np.array(deltas, dtype=np.float64)
        if self._sum is not None:
            d[0] = self._sum + d[0]  # what a cumulative sum over every change adds here
        values = np.cumsum(d)
        self._sum = float(values[-1])
        if self._pending is not None:
            times = np.concatenate([[self._pending[0]], times])
            values = np.concatenate([[self._pending[1]], values])
        last_of_time = times[1:] != times[:-1]
        self._pending = (float(times[-1]), float(values[-1]))
        self._emit(times[:-1][last_of_time], values[:-1][last_of_time])

    def _emit(self, t: FloatArray, v: FloatArray) -> None:
        if t.size == 0:
            return
        keep = np.ones(t.size, dtype=np.bool_)
        keep[1:] = v[1:] != v[:-1]
        keep[0] = self._previous is None or v[0] != self._previous
        self._previous = float(v[-1])
        self._times.append(t[keep])
        self._values.append(v[keep])

    def build(self) -> StepSeries:
        if self._pending is not None:
            self._emit(np.array([self._pending[0]]), np.array([self._pending[1]]))
            self._pending = None
        if not self._times:
            return StepSeries.empty()
        return StepSeries(np.concatenate(self._times).astype(np.float64, copy=False), np.concatenate(self._values))


def _dense_series(times: FloatArray, horizon: float, up: IntArray, down: IntArray, weights: FloatArray) -> StepSeries:
    """Step series rising by `weights[k]` at log position `up[k]` and falling by as much at
    `down[k]` (position len(times) means the horizon).

    Changes are summed per log position (bincount), which keeps them in log order without
    sorting; rises and falls are counted apart and subtracted (what one count of the rises
    and the negated falls gives, exactly, without joining them into two more arrays); the
    positions are then turned into steps `SERIES_CHUNK` at a time.
    """
    n = times.size
    d = np.bincount(up, weights=weights, minlength=n + 1).astype(np.float64, copy=False)
    d -= np.bincount(down, weights=weights, minlength=n + 1)
    steps = _Steps()
    for lo in range(0, n + 1, SERIES_CHUNK):
        nz = np.flatnonzero(d[lo : lo + SERIES_CHUNK]) + lo
        at = times[np.minimum(nz, n - 1)] if n else np.full(nz.size, horizon)
        if nz.size and nz[-1] == n:  # only the last position can be the horizon's
            at[-1] = horizon
        steps.add(at, d[nz])
    return steps.build()


def compute_timeseries(tables: LogTables, env: Environment) -> RunTimeSeries:
    """Build the step series of a run from its `tables`."""
    ev = tables.events
    row = tables.event_row
    horizon = tables.horizon
    t_start = float(ev.time[0]) if len(ev) else horizon
    runs = tables.runs

    def alloc(mask: BoolArray | None) -> StepSeries:
        sp, ep, sz = runs.start_pos, runs.end_pos, runs.size
        if mask is not None:
            sp, ep, sz = sp[mask], ep[mask], sz[mask]
        return _dense_series(ev.time, horizon, sp, ep, sz)

    allocated = alloc(None)
    if len(env.sites) == 1:  # every run is on the one site (build_tables checks START's site)
        by_site = {env.sites[0].name: allocated}
    else:
        by_site = {s.name: alloc(runs.site == i) for i, s in enumerate(env.sites)}

    sub = np.flatnonzero((ev.kind == EventKind.SUBMIT) & (row >= 0))
    size = np.zeros(tables.n_jobs)
    size[row[sub]] = ev.value[sub]
    terminal = kind_mask(ev.kind, (EventKind.END, EventKind.FAIL, EventKind.CANCEL, EventKind.REJECT))
    term = np.flatnonzero(terminal & (row >= 0))
    term_pos = np.full(tables.n_jobs, len(ev), dtype=np.int64)
    term_pos[row[term]] = term
    sub_rows = row[sub]
    requested = _dense_series(ev.time, horizon, sub, term_pos[sub_rows], size[sub_rows])

    leases = tables.leases
    leased: dict[str, StepSeries] = {}
    cap_times: list[FloatArray] = []
    cap_deltas: list[FloatArray] = []
    for i, s in enumerate(env.sites):
        if s.is_cloud:
            m = leases.site == i
            ones = np.ones(int(m.sum()))
            series = _dense_series(ev.time, horizon, leases.start_pos[m], leases.end_pos[m], ones)
            leased[s.name] = series
            if s.instance_types:  # each lease adds the cores of its type (VM_LEASE value: its index)
                type_cores = np.array([t.cores for t in s.types], dtype=np.float64)
                cores = type_cores[ev.value[leases.start_pos[m]].astype(np.int64)]
                cores_series = _dense_series(ev.time, horizon, leases.start_pos[m], leases.end_pos[m], cores)
                if cores_series.times.size:
                    cap_times.append(cores_series.times)
                    cap_deltas.append(np.diff(cores_series.values, prepend=0.0))
            elif series.times.size:
                cap_times.append(series.times)
                cap_deltas.append(np.diff(series.values, prepend=0.0) * s.cores_per_node)
        elif s.max_processors > 0:
            a = t_start if s.available_from is None else max(t_start, s.available_from)
            b = np.inf if s.available_until is None else s.available_until
            if b > a:
                p = float(s.max_processors)
                cap_times.append(np.array([a, b]) if np.isfinite(b) else np.array([a]))
                cap_deltas.append(np.array([p, -p]) if np.isfinite(b) else np.array([p]))
    capacity = (
        StepSeries.from_changes(np.concatenate(cap_times), np.concatenate(cap_deltas))
        if cap_times
        else StepSeries.empty()
    )
    return RunTimeSeries(
        start=t_start,
        end=horizon,
        allocated=allocated,
        requested=requested,
        capacity=capacity,
        allocated_by_site=by_site,
        leased_vms_by_site=leased,
    )


_LEASE_BLOCK = 2048


def charged_spend(tables: LogTables, env: Environment, times: FloatArray) -> FloatArray:
    """Charged cost committed by each time of `times` ($): a lease of a paid site pays its price
    per increment for every billing increment it has begun by then (docs/metrics.md, charged
    cost), until its release. At the run's horizon this equals the summary's charged cost."""
    tt = np.asarray(times, dtype=np.float64)
    out = np.zeros(tt.size)
    leases = tables.leases
    for i, s in enumerate(env.sites):
        if not (s.is_cloud and s.is_paid):
            continue
        m = leases.site == i
        if not m.any():
            continue
        starts, ends = leases.start[m], leases.end[m]
        prices = None
        if s.instance_types:  # each lease at the price of its type (VM_LEASE value)
            types = tables.events.value[leases.start_pos[m]].astype(np.int64)
            prices = np.array([s.type_price_per_increment(t) for t in range(len(s.types))])[types]
        for k in range(0, starts.size, _LEASE_BLOCK):  # blocks keep the lease x time matrix small
            start, end = starts[k : k + _LEASE_BLOCK, None], ends[k : k + _LEASE_BLOCK, None]
            held = np.minimum(tt[None, :], end) - start
            n = np.where(held > 0, np.ceil(held / s.billing_increment - 1e-9), 0.0)
            if prices is None:
                out += n.sum(axis=0) * s.price_per_increment
            else:
                out += (n * prices[k : k + _LEASE_BLOCK, None]).sum(axis=0)
    return out


__all__ = ["RunTimeSeries", "StepSeries", "charged_spend", "compute_timeseries", "utilization_over_time"]
