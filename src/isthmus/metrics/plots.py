"""Figures comparing runs (keyed by policy name), ready for a paper. Headless: matplotlib's Agg
canvas only (`matplotlib.figure.Figure`, never pyplot: no window, the global backend left alone).

Every figure follows `isthmus.metrics.style`: a title naming what it shows, the workload and the
environment; labelled axes with units; linear axes (a logarithmic wait axis only when asked);
a colour-blind-safe palette with a line style and marker per run; legends outside the data; the
processor panels on one y scale with the pool's capacity drawn; PNG and, beside it, the vector
formats asked for (PDF, SVG). Step series are downsampled (bin averages) before drawing, so
plotting 100k-job runs stays fast.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol

import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg, RendererAgg
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.mathtext import MathTextParser

from isthmus.metrics import style
from isthmus.metrics.style import NO_CONTEXT, Context
from isthmus.metrics.tables import FloatArray
from isthmus.metrics.timeseries import PLOT_POINTS, UTILIZATION_BINS, StepSeries
from isthmus.model.environment import Environment


class PlottedSeries(Protocol):
    """What the plots read of a run's series (`RunTimeSeries`, or the `SampledSeries` of a
    streamed run)."""

    @property
    def start(self) -> float:
        """The first event's time."""

    @property
    def end(self) -> float:
        """The horizon."""

    def utilization(self, bins: int = UTILIZATION_BINS) -> tuple[FloatArray, FloatArray]:
        """(bin centres, utilization per bin)."""

    def processors(self, max_points: int = PLOT_POINTS, site: str | None = None) -> tuple[StepSeries, StepSeries]:
        """Requested and allocated processors, downsampled to `max_points`."""


class PlottedRun(Protocol):
    """What the plots read of a run: its summary, time series and completed jobs' waits
    (`RunMetrics`, or `WrittenRun` of a run whose records were streamed to files)."""

    @property
    def summary(self) -> dict[str, Any]:
        """The summary dict."""

    @property
    def timeseries(self) -> PlottedSeries:
        """The step series (or what the plots draw of them)."""

    @property
    def completed_wait(self) -> FloatArray:
        """The wait of each completed job."""


#: Most points drawn per curve.
MAX_POINTS = PLOT_POINTS
#: Markers drawn per curve (a marker on every step of a long series would hide it).
_MARKERS_PER_CURVE = 12

#: Fixed margins in inches (left, right, bottom, top), the right one with and without a legend
#: beside the data, and the gap between stacked panels: a layout engine (constrained/tight)
#: would double the time each plot takes.
_MARGINS = (0.75, 0.2, 0.55, 0.55)
_MIN_LEGEND_MARGIN = 1.0
_PANEL_GAP = 0.4


class _Canvas(FigureCanvasAgg):
    """Agg's canvas whose renderers share one mathtext parser. Matplotlib caches parsed math
    text (the logarithmic axes' tick labels, `$\\mathdefault{10^{2}}$`) per parser, and every
    renderer makes its own: each figure parsed the same labels again. The cache is keyed by the
    text, resolution, font and rendering flags, so a shared parser draws exactly what a fresh
    one draws."""

    _mathtext = MathTextParser("path")  # what RendererAgg makes for itself

    def get_renderer(self) -> RendererAgg:
        """The canvas's renderer (as Agg's), with the shared parser."""
        renderer: RendererAgg = super().get_renderer()  # type: ignore[no-untyped-call]
        renderer.mathtext_parser = self._mathtext
        return renderer


def _legend_width(labels: Sequence[str]) -> float:
    """Inches the legend of `labels` takes beside the data (its handles, text and a gap)."""
    return 0.75 + 0.075 * max((len(x) for x in labels), default=0) * style.FONT_SIZE / 9.0


def _figure(width: float = 7.0, height: float = 4.2, panels: int = 1, *, legend: Sequence[str] = ()) -> Figure:
    """A figure whose data area is `width` wide, with the right margin for a legend of the
    labels `legend` (none: no legend)."""
    left, right, bottom, top = _MARGINS
    if legend:
        right = max(_legend_width(legend), _MIN_LEGEND_MARGIN)
    width += right - _MARGINS[1]  # the data keep their width; the legend gets its own
    fig = Figure(figsize=(width, height))
    panel = (height - bottom - top - _PANEL_GAP * (panels - 1)) / panels
    fig.subplots_adjust(
        left=left / width,
        right=1 - right / width,
        bottom=bottom / height,
        top=1 - top / height,
        hspace=_PANEL_GAP / panel,
    )
    _Canvas(fig)
    return fig


def _save(fig: Figure, path: str | os.PathLike[str], formats: Sequence[str]) -> Path:
    """Write `fig` in each format beside `path`; returns the first format's file."""
    return style.save(fig, path, formats)[0]


def _hours(t: FloatArray, start: float) -> FloatArray:
    return (t - start) / 3600.0


def _duration_unit(largest: float) -> tuple[str, float]:
    """A unit for durations up to `largest` seconds: (name, seconds per unit)."""
    if largest <= 300:
        return "s", 1.0
    if largest <= 3 * 3600:
        return "min", 60.0
    return "h", 3600.0


def _markevery(n: int, i: int, runs: int) -> tuple[int, int]:
    """Markers of the `i`-th of `runs` curves of `n` points: about `_MARKERS_PER_CURVE`, each
    curve's shifted along the curve so that curves on top of each other still show every marker."""
    step = max(n // _MARKERS_PER_CURVE, 1)
    return (step * i // max(runs, 1)) % step, step


def draw_wait_cdf(
    runs: Mapping[str, PlottedRun],
    *,
    context: Context = NO_CONTEXT,
    log: bool = False,
) -> Figure:
    """CDF of the wait time of completed jobs, one curve per run, on a linear wait axis in the unit
    that suits the longest wait (`log`: symmetric-log, linear below 1 s, so zero waits stay visible)."""
    fig = _figure(legend=["policy", *runs])
    ax = fig.add_subplot()
    style.style_axes(ax)
    waits = {}
    for name, m in runs.items():
        w = np.sort(m.completed_wait)
        waits[name] = w[~np.isnan(w)]
    largest = max((float(w[-1]) for w in waits.values() if w.size), default=0.0)
    unit, scale = ("s", 1.0) if log else _duration_unit(largest)
    for i, (name, w) in enumerate(waits.items()):
        if w.size == 0:
            continue
        frac = np.arange(1, w.size + 1) / w.size
        if w.size > MAX_POINTS:
            idx = np.unique(np.linspace(0, w.size - 1, MAX_POINTS).astype(np.int64))
            w, frac = w[idx], frac[idx]
        ax.plot(
            w / scale,
            frac,
            drawstyle="steps-post",
            label=name,
            markevery=_markevery(w.size, i, len(runs)),
            markersize=4,
            **style.series_style(i),
        )
    if log:
        ax.set_xscale("symlog", linthresh=1.0)
        ax.set_xlabel("wait time [s] (symmetric-log scale; linear below 1 s)")
    else:
        ax.set_xlim(left=0)
        ax.set_xlabel(f"wait time [{unit}]")
    ax.set_ylabel("fraction of completed jobs")
    ax.set_ylim(0, 1.02)
    style.title(fig, context.title("Wait time of completed jobs (CDF)"))
    if runs:
        style.legend_outside(ax, title="policy")
    return fig


def _bar(
    runs: Mapping[str, PlottedRun],
    *,
    keys: tuple[str, ...],
    labels: tuple[str, ...],
    ylabel: str,
    title: str,
    fmt: str = "{:.3g}",
    floor: float | None = None,
) -> Figure:
    """Grouped bars of summary `keys` per run, each bar labelled with its value, on a linear axis
    from 0 with room above the labels; `floor` draws a reference line (slowdowns: 1)."""
    legend = len(keys) > 1
    fig = _figure(legend=labels if legend else ())
    ax = fig.add_subplot()
    style.style_axes(ax)
    ax.grid(False, axis="x")
    names = list(runs)
    x = np.arange(len(names))
    width = 0.8 / max(len(keys), 1)
    top = 0.0
    for k, (key, label) in enumerate(zip(keys, labels, strict=True)):
        vals = [runs[n].summary.get(key) for n in names]
        heights = [float(v) if v is not None else 0.0 for v in vals]
        top = max([top, *heights])
        bars = ax.bar(
            x + (k - (len(keys) - 1) / 2) * width,
            heights,
            width,
            label=label,
            color=style.PALETTE[k % len(style.PALETTE)],
            hatch=style.HATCHES[k % len(style.HATCHES)],
            edgecolor="white",
            linewidth=0.5,
        )
        for b, v in zip(bars, vals, strict=True):
            text = "n/a" if v is None else fmt.format(float(v))
            ax.annotate(
                text,
                (b.get_x() + b.get_width() / 2, b.get_height()),
                xytext=(0, 2),
                textcoords="offset points",
                ha="center",
                va="bottom",
                fontsize=style.FONT_SIZE - 1,
            )
    if floor is not None:
        ax.axhline(floor, color=style.CAPACITY_COLOUR, linestyle=":", linewidth=1.0)
        top = max(top, floor)
    ax.set_ylim(0, (top or 1.0) * 1.15)  # room for the value labels
    ax.set_xticks(x, names)
    ax.set_xlabel("allocation policy")
    ax.set_ylabel(ylabel)
    style.title(fig, title)
    if legend:
        style.legend_outside(ax)
    return fig


def draw_mean_slowdown(
    runs: Mapping[str, PlottedRun],
    *,
    bounded: bool | None = None,
    context: Context = NO_CONTEXT,
) -> Figure:
    """Bars of the mean slowdown and the mean bounded slowdown per run (`bounded` True or False:
    only that one), on a linear axis from 0 with a dotted line at 1 (no slowdown)."""
    both = (("slowdown_mean", "mean slowdown"), ("bounded_slowdown_mean", "mean bounded slowdown (10 s)"))
    chosen = both if bounded is None else (both[1] if bounded else both[0],)
    what = "Mean slowdown" if len(chosen) > 1 or not bounded else "Mean bounded slowdown"
    return _bar(
        runs,
        keys=tuple(k for k, _ in chosen),
        labels=tuple(label for _, label in chosen),
        ylabel="slowdown [response time / runtime]",
        title=context.title(f"{what} per policy"),
        floor=1.0,
    )


def draw_cost(
    runs: Mapping[str, PlottedRun],
    *,
    context: Context = NO_CONTEXT,
) -> Figure:
    """Bars of the charged and actual cost of cloud leases per run (US$)."""
    return _bar(
        runs,
        keys=("cost_charged", "cost_actual"),
        labels=("charged (billing increments)", "actual (VM-seconds)"),
        ylabel="cost of cloud leases [US$]",
        title=context.title("Cost per policy"),
        fmt="${:,.2f}",
    )


def draw_utilization(
    runs: Mapping[str, PlottedRun],
    *,
    bins: int = UTILIZATION_BINS,
    context: Context = NO_CONTEXT,
) -> Figure:
    """Utilization over time (allocated / available processors, averaged per bin, in percent), one
    curve per run, each with its own colour, line style and markers."""
    fig = _figure(legend=["policy", *runs])
    ax = fig.add_subplot()
    style.style_axes(ax)
    for i, (name, m) in enumerate(runs.items()):
        ts = m.timeseries
        centres, util = ts.utilization(bins)
        ax.plot(
            _hours(centres, ts.start),
            100.0 * util,
            label=name,
            markevery=_markevery(centres.size, i, len(runs)),
            markersize=4,
            linewidth=1.2,
            **style.series_style(i),
        )
    ax.set_xlabel("time since the first event [h]")
    ax.set_ylabel("utilization [% of available processors]")
    ax.set_ylim(0, 105)
    ax.set_xlim(left=0)
    style.title(fig, context.title("Utilization over time"))
    if runs:
        style.legend_outside(ax, title="policy")
    return fig


def _capacities(environment: Environment | None) -> tuple[float | None, float | None]:
    """(the most processors the pool can hold: clusters and the clouds' largest leases, the
    clusters' processors; None where there is no cloud) of `environment` (None: unknown)."""
    if environment is None:
        return None, None
    most = float(sum(s.max_processors for s in environment.sites))
    owned = float(sum(s.max_processors for s in environment.sites if not s.is_cloud))
    return most, (owned if owned < most else None)


def draw_processors(
    runs: Mapping[str, PlottedRun],
    *,
    site: str | None = None,
    environment: Environment | None = None,
    context: Context = NO_CONTEXT,
) -> Figure:
    """Allocated vs requested processors over time (IBM seed Figs. 7, 8), one panel per run, all
    on one y scale, with the pool's capacity (and the clusters' processors, with clouds) drawn
    when `environment` is given.

    With `site`, the allocated curve is that site's and the capacity line is the site's;
    requested is always the whole system's.
    """
    n = max(len(runs), 1)
    most, owned = _capacities(environment)
    if site is not None and environment is not None:
        chosen = [s for s in environment.sites if s.name == site]
        most, owned = (float(chosen[0].max_processors), None) if chosen else (None, None)
    handles = [
        Line2D([], [], color=style.PALETTE[0], linestyle=style.LINESTYLES[0], label="requested"),
        Line2D([], [], color=style.PALETTE[1], linestyle=style.LINESTYLES[1], label="allocated"),
    ]
    if most is not None:
        what = f"capacity of {site}" if site is not None else "capacity"
        handles.append(Line2D([], [], color=style.CAPACITY_COLOUR, linestyle="--", label=f"{what}: {most:g}"))
    if owned is not None:
        handles.append(Line2D([], [], color=style.CAPACITY_COLOUR, linestyle=":", label=f"clusters: {owned:g}"))
    fig = _figure(7.0, 0.9 + 1.9 * n, panels=n, legend=[str(h.get_label()) for h in handles])
    axes = fig.subplots(n, 1, squeeze=False, sharex=True, sharey=True)[:, 0]
    top = most or 0.0
    for ax, (name, m) in zip(axes, runs.items(), strict=False):
        style.style_axes(ax)
        ts = m.timeseries
        for k, series in enumerate(ts.processors(MAX_POINTS, site)):  # requested, allocated
            x, y = series.plot_xy(ts.end)
            top = max(top, float(np.max(y)) if y.size else 0.0)
            ax.plot(
                _hours(x, ts.start),
                y,
                drawstyle="steps-post",
                color=style.PALETTE[k],
                linestyle=style.LINESTYLES[k],
                linewidth=1.1,
            )
        if most is not None:
            ax.axhline(most, color=style.CAPACITY_COLOUR, linestyle="--", linewidth=1.0)
        if owned is not None:
            ax.axhline(owned, color=style.CAPACITY_COLOUR, linestyle=":", linewidth=1.0)
        ax.set_title(name if site is None else f"{name}, allocated on {site}", loc="left", fontsize=style.FONT_SIZE)
        ax.set_ylabel("processors")
    axes[0].set_ylim(0, (top or 1.0) * 1.05)  # one scale for every panel (sharey)
    axes[0].set_xlim(left=0)
    axes[-1].set_xlabel("time since the first event [h]")
    style.legend_outside(axes[0], handles=handles)
    style.title(fig, context.title("Requested and allocated processors"))
    return fig


def plot_wait_cdf(
    runs: Mapping[str, PlottedRun], path: str | os.PathLike[str], *, formats: Sequence[str] = ("png",), **kw: Any
) -> Path:
    """`draw_wait_cdf` written to `path` in each of `formats`; returns the first file."""
    return _save(draw_wait_cdf(runs, **kw), path, formats)


def plot_mean_slowdown(
    runs: Mapping[str, PlottedRun], path: str | os.PathLike[str], *, formats: Sequence[str] = ("png",), **kw: Any
) -> Path:
    """`draw_mean_slowdown` written to `path` in each of `formats`; returns the first file."""
    return _save(draw_mean_slowdown(runs, **kw), path, formats)


def plot_cost(
    runs: Mapping[str, PlottedRun], path: str | os.PathLike[str], *, formats: Sequence[str] = ("png",), **kw: Any
) -> Path:
    """`draw_cost` written to `path` in each of `formats`; returns the first file."""
    return _save(draw_cost(runs, **kw), path, formats)


def plot_utilization(
    runs: Mapping[str, PlottedRun], path: str | os.PathLike[str], *, formats: Sequence[str] = ("png",), **kw: Any
) -> Path:
    """`draw_utilization` written to `path` in each of `formats`; returns the first file."""
    return _save(draw_utilization(runs, **kw), path, formats)


def plot_processors(
    runs: Mapping[str, PlottedRun], path: str | os.PathLike[str], *, formats: Sequence[str] = ("png",), **kw: Any
) -> Path:
    """`draw_processors` written to `path` in each of `formats`; returns the first file."""
    return _save(draw_processors(runs, **kw), path, formats)


def draw_all(
    runs: Mapping[str, PlottedRun], *, workload: str | None = None, environment: Environment | None = None
) -> dict[str, Figure]:
    """Every figure by kind, titled with `workload` and `environment`'s name, the processor panels
    with `environment`'s capacity. The cost figure is left out for an environment without cloud
    sites (every bar would be $0)."""
    context = Context(workload, environment.name if environment is not None else None)
    figures = {
        "wait_cdf": draw_wait_cdf(runs, context=context),
        "slowdown": draw_mean_slowdown(runs, context=context),
        "utilization": draw_utilization(runs, context=context),
        "processors": draw_processors(runs, environment=environment, context=context),
    }
    if environment is None or any(s.is_cloud for s in environment.sites):
        figures["cost"] = draw_cost(runs, context=context)
    return figures


def plot_all(
    runs: Mapping[str, PlottedRun],
    out_dir: str | os.PathLike[str],
    prefix: str = "",
    *,
    formats: str | Sequence[str] = ("png",),
    workload: str | None = None,
    environment: Environment | None = None,
) -> dict[str, Path]:
    """Write every figure into `out_dir` as `<prefix><kind>.<format>` for each of `formats`
    (`style.parse_formats`), titled with `workload` and `environment`'s name, the processor
    panels with `environment`'s capacity (no cost figure without cloud sites); returns the first
    format's path by kind."""
    d = Path(out_dir)
    fmts = style.parse_formats(formats)
    figures = draw_all(runs, workload=workload, environment=environment)
    return {kind: _save(fig, d / f"{prefix}{kind}.png", fmts) for kind, fig in figures.items()}


#: The figures of a repeated run (`draw_repeated`): kind -> (comparison.json key, what it shows,
#: y label without its unit, unit: "duration" for seconds shown in a readable unit).
REPEATED_FIGURES: dict[str, tuple[str, str, str, str]] = {
    "wait": ("wait_mean", "Mean wait", "mean wait", "duration"),
    "slowdown": ("bounded_slowdown_mean", "Mean bounded slowdown (10 s)", "mean bounded slowdown", "ratio"),
    "utilization": ("utilization", "Utilization", "utilization", "fraction"),
    "cost": ("cost_charged", "Charged cost of cloud leases", "charged cost", "usd"),
}


def _interval_of(row: Mapping[str, Any], key: str) -> tuple[float | None, float | None]:
    """(mean, 95% half-width) of figure `key` in a repeated run's policy `row` (None: unknown)."""
    cell = row.get(key)
    if not isinstance(cell, Mapping):
        return None, None
    mean, half = cell.get("mean"), cell.get("ci95")
    return (None if mean is None else float(mean)), (None if half is None else float(half))


def draw_interval_bars(
    rows: Sequence[Mapping[str, Any]],
    key: str,
    *,
    what: str,
    ylabel: str,
    unit: str,
    runs: int,
    context: Context = NO_CONTEXT,
) -> Figure:
    """One bar per policy of a repeated run (`rows`: comparison.json's "policies") at the mean of
    figure `key`, its 95% confidence interval as an error bar, each bar labelled with mean ± the
    half-width; a linear axis from 0. `unit` is "duration" (seconds, drawn in s, min or h),
    "ratio" (a dotted line at 1: no slowdown), "fraction" (0 to 1) or "usd"."""
    names = [str(r.get("policy", "")) for r in rows]
    cells = [_interval_of(r, key) for r in rows]
    highest = max((m + (h or 0.0) for m, h in cells if m is not None), default=0.0)
    scale, unit_name = 1.0, ""
    if unit == "duration":
        unit_name, scale = _duration_unit(highest)
    elif unit == "ratio":
        unit_name = "response time / runtime"
    elif unit == "fraction":
        unit_name = "busy / available processor-time"
    elif unit == "usd":
        unit_name = "US$"
    fig = _figure(height=4.4)
    fig.subplots_adjust(top=1 - 0.75 / 4.4)  # the title's two lines
    ax = fig.add_subplot()
    style.style_axes(ax)
    ax.grid(False, axis="x")
    x = np.arange(len(names), dtype=float)
    heights = [0.0 if m is None else m / scale for m, _ in cells]
    errors = [np.nan if m is None or h is None else h / scale for m, h in cells]
    ax.bar(
        x,
        heights,
        0.6,
        yerr=errors,
        capsize=6,
        color=[style.PALETTE[i % len(style.PALETTE)] for i in range(len(names))],
        edgecolor="white",
        linewidth=0.5,
        error_kw={"ecolor": "black", "elinewidth": 1.2, "capthick": 1.2},
    )
    for i, (m, h) in enumerate(cells):
        if m is None:
            text, y = "n/a", 0.0
        else:
            fmt = "${:,.2f}" if unit == "usd" else "{:.3g}"
            text = fmt.format(m / scale) + ("" if h is None else " ± " + fmt.format(h / scale).lstrip("$"))
            y = (m + (h or 0.0)) / scale
        ax.annotate(
            text,
            (float(x[i]), y),
            xytext=(0, 3),
            textcoords="offset points",
            ha="center",
            va="bottom",
            fontsize=style.FONT_SIZE - 1,
        )
    top = highest / scale
    if unit == "ratio":
        ax.axhline(1.0, color=style.CAPACITY_COLOUR, linestyle=":", linewidth=1.0)
        top = max(top, 1.0)
    if unit == "fraction":
        ax.set_ylim(0, max(1.0, top) * 1.12)
    else:
        ax.set_ylim(0, (top or 1.0) * 1.15)  # room for the value labels
    ax.set_xticks(x, names)
    ax.set_xlim(-0.6, len(names) - 0.4)
    ax.set_xlabel("allocation policy")
    ax.set_ylabel(f"{ylabel} [{unit_name}]" if unit_name else ylabel)
    # two lines: a workload and environment name long enough would push one line off the figure
    style.title(fig, context.title(f"{what} per policy") + f"\nmean ± 95% confidence interval over {runs} runs")
    return fig


def draw_repeated(
    rows: Sequence[Mapping[str, Any]],
    *,
    runs: int,
    workload: str | None = None,
    environment: Environment | None = None,
) -> dict[str, Figure]:
    """The figures of a repeated run by kind (`REPEATED_FIGURES`): bars of each policy's mean
    with its 95% confidence interval as error bars, titled with `workload` and `environment`'s
    name. The cost figure is left out for an environment without cloud sites."""
    context = Context(workload, environment.name if environment is not None else None)
    cloud = environment is None or any(s.is_cloud for s in environment.sites)
    return {
        kind: draw_interval_bars(rows, key, what=what, ylabel=ylabel, unit=unit, runs=runs, context=context)
        for kind, (key, what, ylabel, unit) in REPEATED_FIGURES.items()
        if kind != "cost" or cloud
    }


def plot_repeated(
    rows: Sequence[Mapping[str, Any]],
    out_dir: str | os.PathLike[str],
    *,
    runs: int,
    formats: str | Sequence[str] = ("png",),
    workload: str | None = None,
    environment: Environment | None = None,
) -> dict[str, Path]:
    """Write `draw_repeated`'s figures into `out_dir` as `repeated_<kind>.<format>` for each of
    `formats`; returns the first format's path by kind."""
    d = Path(out_dir)
    fmts = style.parse_formats(formats)
    figures = draw_repeated(rows, runs=runs, workload=workload, environment=environment)
    return {kind: _save(fig, d / f"repeated_{kind}.png", fmts) for kind, fig in figures.items()}
