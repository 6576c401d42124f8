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

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from isthmus.metrics.tables import BoolArray, FloatArray, IntArray, LogTables, kind_mask
from isthmus.model.environment import Environment
from isthmus.model.events import EventKind

#: What the plots draw: the most points of each processor curve and the bins of the utilization.
PLOT_POINTS = 2000
UTILIZATION_BINS = 500


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

    def utilization(self, bins: int = UTILIZATION_BINS) -> tuple[FloatArray, FloatArray]:
        """Utilization over time on a regular grid: (bin centres, allocated / capacity per bin).

        Each value is ∫ allocated / ∫ capacity over the bin (NaN where nothing is available).
        """
        return utilization_over_time(self, bins)

    def processors(self, max_points: int = PLOT_POINTS, site: str | None = None) -> tuple[StepSeries, StepSeries]:
        """Requested and allocated (on `site`, or everywhere) processors, each downsampled to
        at most `max_points` steps over `[first change, end]` (what the plots draw)."""
        allocated = self.allocated if site is None else self.allocated_by_site[site]
        return self.requested.downsample(max_points, self.end), allocated.downsample(max_points, self.end)

    def sampled(self, bins: int = UTILIZATION_BINS, max_points: int = PLOT_POINTS) -> SampledSeries:
        """What the plots draw of these series (`SampledSeries`)."""
        return SampledSeries(
            start=self.start,
            end=self.end,
            max_points=max_points,
            bins=bins,
            requested=self.requested.downsample(max_points, self.end),
            allocated=self.allocated.downsample(max_points, self.end),
            allocated_by_site={k: v.downsample(max_points, self.end) for k, v in self.allocated_by_site.items()},
            utilization_bins=self.utilization(bins),
        )


def utilization_over_time(ts: RunTimeSeries, bins: int = UTILIZATION_BINS) -> tuple[FloatArray, FloatArray]:
    """Utilization of `ts` on `bins` regular bins over `[ts.start, ts.end]`: (centres, values)."""
    edges = _utilization_edges(ts.start, ts.end, bins)
    return _utilization(edges, ts.allocated.integral_to(edges), ts.capacity.integral_to(edges))


#: Log positions whose changes are counted and turned into steps at a time (`_feed_dense`: its
#: temporaries stay small).
SERIES_CHUNK = 1 << 16


class _Steps:
    """`StepSeries.from_sorted_changes` fed its changes a chunk at a time (in time order): the
    same running sums, the same merging of equal times and dropping of steps that change
    nothing, so the same series, without whole-run temporaries. With `sink`, the steps go to it
    as they are found (in order, a chunk at a time) rather than into a series."""

    def __init__(self, sink: Callable[[FloatArray, FloatArray], None] | None = None) -> None:
        self._sink = sink
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
        if self._sink is not None:
            self._sink(t[keep].astype(np.float64, copy=False), v[keep])
            return
        self._times.append(t[keep])
        self._values.append(v[keep])

    def build(self) -> StepSeries:
        if self._pending is not None:
            self._emit(np.array([self._pending[0]]), np.array([self._pending[1]]))
            self._pending = None
        if not self._times:
            return StepSeries.empty()
        return StepSeries(np.concatenate(self._times).astype(np.float64, copy=False), np.concatenate(self._values))


def _feed_dense(
    steps: _Steps, times: FloatArray, horizon: float, up: IntArray, down: IntArray, weights: FloatArray
) -> _Steps:
    """Feed `steps` a series rising by `weights[k]` at log position `up[k]` and falling by as
    much at `down[k]` (position len(times) means the horizon).

    Changes are summed per log position, `SERIES_CHUNK` positions at a time: each chunk's rises
    and falls are counted (bincount, in input order, so the very sums one count over every
    position gives) and subtracted, which keeps them in log order without sorting and no
    temporary spans the whole log.
    """
    n = times.size
    for lo in range(0, n + 1, SERIES_CHUNK):
        hi = min(lo + SERIES_CHUNK, n + 1)
        rise = (up >= lo) & (up < hi)
        fall = (down >= lo) & (down < hi)
        d = np.bincount(up[rise] - lo, weights=weights[rise], minlength=hi - lo).astype(np.float64, copy=False)
        d -= np.bincount(down[fall] - lo, weights=weights[fall], minlength=hi - lo)
        nz = np.flatnonzero(d)
        at = times[np.minimum(nz + lo, n - 1)] if n else np.full(nz.size, horizon)
        if nz.size and nz[-1] + lo == n:  # only the last position can be the horizon's
            at[-1] = horizon
        steps.add(at, d[nz])
    return steps


def _dense_series(times: FloatArray, horizon: float, up: IntArray, down: IntArray, weights: FloatArray) -> StepSeries:
    """The step series `_feed_dense` describes."""
    return _feed_dense(_Steps(), times, horizon, up, down, weights).build()


def _allocation_changes(tables: LogTables, mask: BoolArray | None) -> tuple[IntArray, IntArray, FloatArray]:
    """Rise positions, fall positions and sizes of the runs (those of `mask`): allocated processors."""
    runs = tables.runs
    sp, ep, sz = runs.start_pos, runs.end_pos, runs.size
    if mask is not None:
        sp, ep, sz = sp[mask], ep[mask], sz[mask]
    return sp, ep, sz


def _request_changes(tables: LogTables) -> tuple[IntArray, IntArray, FloatArray]:
    """Rise positions (SUBMIT), fall positions (END/FAIL/CANCEL/REJECT, or the horizon) and
    sizes of the jobs: requested processors. (Each temporary goes as soon as it is used: they
    add to the peak of the metrics, the log's tables being in memory.)"""
    ev, row = tables.events, tables.event_row
    terminal = kind_mask(ev.kind, (EventKind.END, EventKind.FAIL, EventKind.CANCEL, EventKind.REJECT))
    terminal &= row >= 0
    term = np.flatnonzero(terminal)
    del terminal
    term_pos = np.full(tables.n_jobs, len(ev), dtype=np.int64)
    term_pos[row[term]] = term
    del term
    sub = np.flatnonzero((ev.kind == EventKind.SUBMIT) & (row >= 0))
    sub_rows = row[sub]
    down = term_pos[sub_rows]
    del term_pos
    size = np.zeros(tables.n_jobs)
    size[sub_rows] = ev.value[sub]
    return sub, down, size[sub_rows]


def _start(tables: LogTables) -> float:
    ev = tables.events
    return float(ev.time[0]) if len(ev) else tables.horizon


def _capacity(tables: LogTables, env: Environment) -> tuple[StepSeries, dict[str, StepSeries]]:
    """The processors available over time, and the VMs leased on each cloud site."""
    ev = tables.events
    horizon = tables.horizon
    t_start = _start(tables)
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
    return capacity, leased


def compute_timeseries(tables: LogTables, env: Environment) -> RunTimeSeries:
    """Build the step series of a run from its `tables`."""
    time, horizon = tables.events.time, tables.horizon
    allocated = _dense_series(time, horizon, *_allocation_changes(tables, None))
    if len(env.sites) == 1:  # every run is on the one site (build_tables checks START's site)
        by_site = {env.sites[0].name: allocated}
    else:
        by_site = {
            s.name: _dense_series(time, horizon, *_allocation_changes(tables, tables.runs.site == i))
            for i, s in enumerate(env.sites)
        }
    requested = _dense_series(time, horizon, *_request_changes(tables))
    capacity, leased = _capacity(tables, env)
    return RunTimeSeries(
        start=_start(tables),
        end=horizon,
        allocated=allocated,
        requested=requested,
        capacity=capacity,
        allocated_by_site=by_site,
        leased_vms_by_site=leased,
    )


class _EdgeIntegrals:
    """`StepSeries.integral_to` and `value_at` at sorted `edges`, computed from the series' steps
    fed a chunk at a time (in order) with the very operations those methods do over the whole
    series (a running sum carried from chunk to chunk is the same sequential sum), so the same
    floats, without the whole series in memory."""

    def __init__(self, edges: FloatArray) -> None:
        self.edges = edges
        self.integrals = np.zeros(edges.size)
        self.values = np.zeros(edges.size)
        self._done = 0  # edges[:_done] are resolved

    def resolve(self, t: FloatArray, v: FloatArray, cum: FloatArray, final: bool) -> None:
        """Resolve the edges before `t[-1]` (every edge left when `final`) from steps `t`, `v`
        whose integrals from -inf to each step are `cum` (the steps before `t[0]` are done)."""
        stop = self.edges.size if final else int(np.searchsorted(self.edges, t[-1], side="left"))
        if stop <= self._done:
            return
        tt = self.edges[self._done : stop]
        i = np.searchsorted(t, tt, side="right") - 1
        ic = np.maximum(i, 0)
        out = cum[ic] + v[ic] * (tt - t[ic])
        self.integrals[self._done : stop] = np.where(i >= 0, out, 0.0)
        self.values[self._done : stop] = np.where(i >= 0, v[ic], 0.0)
        self._done = stop


class _SeriesSampler:
    """What the plots draw of one step series, from its steps fed a chunk at a time: the series
    downsampled to `max_points` over `[first step, end]` (`StepSeries.downsample`), and its
    integrals at `edges` (utilization), equal to what the whole series gives."""

    def __init__(self, end: float, max_points: int, edges: FloatArray | None = None) -> None:
        self._end = end
        self._max_points = max_points
        self._count = 0
        self._raw_t: list[FloatArray] = []  # the steps themselves while they are few
        self._raw_v: list[FloatArray] = []
        self._last: tuple[float, float, float] | None = None  # time, value and integral of the last step
        self._grid: _EdgeIntegrals | None = None
        self.at_edges = None if edges is None else _EdgeIntegrals(edges)

    def add(self, t: FloatArray, v: FloatArray) -> None:
        """Take the next steps (times increasing, after every step taken so far)."""
        if t.size == 0:
            return
        if self._grid is None:  # the downsampling grid starts at the first step
            self._grid = _EdgeIntegrals(np.linspace(float(t[0]), max(self._end, float(t[0])), self._max_points + 1))
        self._count += t.size
        if self._count <= self._max_points:
            self._raw_t.append(t)
            self._raw_v.append(v)
        else:
            self._raw_t, self._raw_v = [], []
        if self._last is None:
            cum = np.concatenate([[0.0], np.cumsum(v[:-1] * np.diff(t))])
        else:
            tp, vp, cp = self._last
            t, v = np.concatenate([[tp], t]), np.concatenate([[vp], v])
            products = v[:-1] * np.diff(t)
            products[0] = cp + products[0]  # the sum so far, carried: the same sequential sum
            cum = np.concatenate([[cp], np.cumsum(products)])
        self._resolve(t, v, cum, final=False)
        self._last = (float(t[-1]), float(v[-1]), float(cum[-1]))

    def _resolve(self, t: FloatArray, v: FloatArray, cum: FloatArray, final: bool) -> None:
        for e in (self._grid, self.at_edges):
            if e is not None:
                e.resolve(t, v, cum, final)

    def finish(self) -> StepSeries:
        """Resolve the edges after the last step; return the downsampled series."""
        if self._last is None:  # the function is 0 everywhere (as the integrals at the edges are)
            return StepSeries.empty()
        tp, vp, cp = self._last
        self._resolve(np.array([tp]), np.array([vp]), np.array([cp]), final=True)
        if self._count <= self._max_points:
            return StepSeries(np.concatenate(self._raw_t), np.concatenate(self._raw_v))
        assert self._grid is not None
        edges = self._grid.edges
        widths = np.diff(edges)
        with np.errstate(invalid="ignore", divide="ignore"):
            means = np.diff(self._grid.integrals) / widths
        return StepSeries(edges[:-1], np.where(widths > 0, means, self._grid.values[:-1]))


def _utilization(edges: FloatArray, allocated: FloatArray, capacity: FloatArray) -> tuple[FloatArray, FloatArray]:
    """(bin centres, ∫ allocated / ∫ capacity per bin) from both integrals at `edges`."""
    alloc = np.diff(allocated)
    cap = np.diff(capacity)
    with np.errstate(invalid="ignore", divide="ignore"):
        util = np.where(cap > 0, alloc / cap, np.nan)
    return (edges[:-1] + edges[1:]) / 2, util


def _utilization_edges(start: float, end: float, bins: int) -> FloatArray:
    return np.linspace(start, max(end, start), bins + 1)


@dataclass(frozen=True, eq=False, slots=True)
class SampledSeries:
    """What the plots draw of a run's series, without the series: `requested`, `allocated` and
    `allocated_by_site` downsampled to `max_points` (`StepSeries.downsample` over `[first
    change, end]`) and the utilization on `bins` bins (`RunTimeSeries.utilization`), the same
    values the whole series give (`RunTimeSeries.sampled`, `sample_timeseries`)."""

    start: float
    end: float
    max_points: int
    bins: int
    requested: StepSeries
    allocated: StepSeries
    allocated_by_site: dict[str, StepSeries]
    utilization_bins: tuple[FloatArray, FloatArray]

    def utilization(self, bins: int = UTILIZATION_BINS) -> tuple[FloatArray, FloatArray]:
        """The utilization on `bins` bins (ValueError for another number of bins than sampled)."""
        if bins != self.bins:
            raise ValueError(f"the series were sampled for {self.bins} utilization bins, not {bins}")
        return self.utilization_bins

    def processors(self, max_points: int = PLOT_POINTS, site: str | None = None) -> tuple[StepSeries, StepSeries]:
        """Requested and allocated (on `site`, or everywhere) processors, downsampled to
        `max_points` (ValueError for another number of points than sampled)."""
        if max_points != self.max_points:
            raise ValueError(f"the series were sampled to {self.max_points} points, not {max_points}")
        return self.requested, self.allocated if site is None else self.allocated_by_site[site]


def sample_timeseries(
    tables: LogTables, env: Environment, *, bins: int = UTILIZATION_BINS, max_points: int = PLOT_POINTS
) -> SampledSeries:
    """What `compute_timeseries(tables, env).sampled(bins, max_points)` gives, value for value,
    computed a chunk of log positions at a time: no whole-run series or temporary is built but
    the capacity's (clusters' bounds and VM leases)."""
    time, horizon = tables.events.time, tables.horizon
    start = _start(tables)
    edges = _utilization_edges(start, horizon, bins)

    def sample(changes: tuple[IntArray, IntArray, FloatArray], at: FloatArray | None = None) -> _SeriesSampler:
        sampler = _SeriesSampler(horizon, max_points, at)
        _feed_dense(_Steps(sampler.add), time, horizon, *changes).build()
        return sampler

    whole = sample(_allocation_changes(tables, None), edges)
    allocated = whole.finish()
    if len(env.sites) == 1:
        by_site = {env.sites[0].name: allocated}
    else:
        by_site = {
            s.name: sample(_allocation_changes(tables, tables.runs.site == i)).finish() for i, s in enumerate(env.sites)
        }
    requested = sample(_request_changes(tables)).finish()
    capacity, _ = _capacity(tables, env)
    assert whole.at_edges is not None
    return SampledSeries(
        start=start,
        end=horizon,
        max_points=max_points,
        bins=bins,
        requested=requested,
        allocated=allocated,
        allocated_by_site=by_site,
        utilization_bins=_utilization(edges, whole.at_edges.integrals, capacity.integral_to(edges)),
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


__all__ = [
    "PLOT_POINTS",
    "UTILIZATION_BINS",
    "RunTimeSeries",
    "SampledSeries",
    "StepSeries",
    "charged_spend",
    "compute_timeseries",
    "sample_timeseries",
    "utilization_over_time",
]
