"""PNG plots comparing runs (keyed by policy name). Headless: uses matplotlib's Agg canvas only.

Figures are built with `matplotlib.figure.Figure` (never pyplot), so no window is ever opened and
the global backend is left alone. Step series are downsampled (bin averages) before drawing, so
plotting 100k-job runs stays fast.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Protocol

import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg, RendererAgg
from matplotlib.figure import Figure
from matplotlib.mathtext import MathTextParser

from isthmus.metrics.records import atomic_write
from isthmus.metrics.tables import FloatArray
from isthmus.metrics.timeseries import PLOT_POINTS, UTILIZATION_BINS, StepSeries


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
_DPI = 110


#: Fixed margins in inches (left, right, bottom, top) and the gap between stacked panels: a
#: layout engine (constrained/tight) would double the time each plot takes.
_MARGINS = (0.8, 0.15, 0.55, 0.35)
_PANEL_GAP = 0.45


class _Canvas(FigureCanvasAgg):
    """Agg's canvas whose renderers share one mathtext parser. Matplotlib caches parsed math
    text (the logarithmic axes' tick labels, `$\\mathdefault{10^{2}}$`) per parser, and every
    renderer makes its own: each figure parsed the same labels again (a third of the wait CDF's
    and the slowdown chart's time). The cache is keyed by the text, resolution, font and
    rendering flags, so a shared parser draws exactly what a fresh one draws."""

    _mathtext = MathTextParser("path")  # what RendererAgg makes for itself

    def get_renderer(self) -> RendererAgg:
        """The canvas's renderer (as Agg's), with the shared parser."""
        renderer: RendererAgg = super().get_renderer()  # type: ignore[no-untyped-call]
        renderer.mathtext_parser = self._mathtext
        return renderer


def _figure(width: float = 7.0, height: float = 4.5, panels: int = 1) -> Figure:
    left, right, bottom, top = _MARGINS
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


def _save(fig: Figure, path: str | os.PathLike[str]) -> Path:
    return atomic_write(path, lambda tmp: fig.savefig(tmp, format="png", dpi=_DPI))


def _hours(t: FloatArray, start: float) -> FloatArray:
    return (t - start) / 3600.0


def plot_wait_cdf(runs: Mapping[str, PlottedRun], path: str | os.PathLike[str]) -> Path:
    """CDF of the wait time of completed jobs, one curve per run, logarithmic x axis.

    The x axis is symmetric-log (linear below 1 s) so that zero waits stay visible.
    """
    fig = _figure()
    ax = fig.add_subplot()
    for name, m in runs.items():
        w = np.sort(m.completed_wait)
        w = w[~np.isnan(w)]
        if w.size == 0:
            continue
        frac = np.arange(1, w.size + 1) / w.size
        if w.size > MAX_POINTS:
            idx = np.unique(np.linspace(0, w.size - 1, MAX_POINTS).astype(np.int64))
            w, frac = w[idx], frac[idx]
        ax.plot(w, frac, drawstyle="steps-post", label=name)
    ax.set_xscale("symlog", linthresh=1.0)
    ax.set_xlabel("wait time [s] (log scale; linear below 1 s)")
    ax.set_ylabel("fraction of completed jobs")
    ax.set_ylim(0, 1.02)
    ax.grid(True, which="both", alpha=0.3)
    ax.set_title("Wait time CDF")
    if runs:
        ax.legend()
    return _save(fig, path)


def _bar(
    runs: Mapping[str, PlottedRun],
    path: str | os.PathLike[str],
    *,
    keys: tuple[str, ...],
    labels: tuple[str, ...],
    ylabel: str,
    title: str,
    log: bool,
    fmt: str = "{:.3g}",
) -> Path:
    fig = _figure()
    ax = fig.add_subplot()
    names = list(runs)
    x = np.arange(len(names))
    width = 0.8 / max(len(keys), 1)
    positive = False
    for k, (key, label) in enumerate(zip(keys, labels, strict=True)):
        vals = [runs[n].summary.get(key) for n in names]
        heights = [float(v) if v is not None else 0.0 for v in vals]
        positive = positive or any(h > 0 for h in heights)
        bars = ax.bar(x + (k - (len(keys) - 1) / 2) * width, heights, width, label=label)
        for b, v in zip(bars, vals, strict=True):
            text = "n/a" if v is None else fmt.format(float(v))
            ax.annotate(text, (b.get_x() + b.get_width() / 2, b.get_height()), ha="center", va="bottom", fontsize=8)
    if log and positive:
        ax.set_yscale("log")
        shown = [float(v) for n in names for k in keys if (v := runs[n].summary.get(k))]
        if min(shown, default=1.0) >= 1.0:
            ax.set_ylim(bottom=1.0)  # slowdowns start at 1
        ax.set_ylim(top=max(shown, default=1.0) * 1.5)  # room for the labels
    else:
        ax.margins(y=0.12)
    ax.set_xticks(x, names)
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    if len(keys) > 1:
        ax.legend()
    return _save(fig, path)


def plot_mean_slowdown(runs: Mapping[str, PlottedRun], path: str | os.PathLike[str], *, bounded: bool = False) -> Path:
    """Bar chart of the mean (or mean bounded) slowdown per run, logarithmic y axis."""
    key = "bounded_slowdown_mean" if bounded else "slowdown_mean"
    label = "mean bounded slowdown" if bounded else "mean slowdown"
    title = label.capitalize() + " per policy"
    return _bar(runs, path, keys=(key,), labels=(label,), ylabel=label, title=title, log=True)


def plot_cost(runs: Mapping[str, PlottedRun], path: str | os.PathLike[str]) -> Path:
    """Bar chart of the charged and actual cost per run (US$)."""
    return _bar(
        runs,
        path,
        keys=("cost_charged", "cost_actual"),
        labels=("charged", "actual"),
        ylabel="cost [$]",
        title="Cost per policy",
        log=False,
        fmt="${:,.2f}",
    )


def plot_utilization(
    runs: Mapping[str, PlottedRun], path: str | os.PathLike[str], *, bins: int = UTILIZATION_BINS
) -> Path:
    """Utilization over time (allocated / available processors, averaged per bin), one curve per run."""
    fig = _figure()
    ax = fig.add_subplot()
    for name, m in runs.items():
        ts = m.timeseries
        centres, util = ts.utilization(bins)
        ax.plot(_hours(centres, ts.start), util, label=name)
    ax.set_xlabel("time since start [h]")
    ax.set_ylabel("utilization")
    ax.set_ylim(0, 1.05)
    ax.grid(True, alpha=0.3)
    ax.set_title("Utilization over time")
    if runs:
        ax.legend()
    return _save(fig, path)


def plot_processors(runs: Mapping[str, PlottedRun], path: str | os.PathLike[str], *, site: str | None = None) -> Path:
    """Allocated vs requested processors over time (IBM seed Figs. 7, 8), one panel per run.

    With `site`, the allocated curve is that site's; requested is always the whole system's.
    """
    n = max(len(runs), 1)
    fig = _figure(7.0, 2.6 * n, panels=n)
    axes = fig.subplots(n, 1, squeeze=False, sharex=True)[:, 0]
    for ax, (name, m) in zip(axes, runs.items(), strict=False):
        ts = m.timeseries
        for series, label in zip(ts.processors(MAX_POINTS, site), ("requested", "allocated"), strict=True):
            x, y = series.plot_xy(ts.end)
            ax.plot(_hours(x, ts.start), y, drawstyle="steps-post", label=label)
        ax.set_ylabel("processors")
        ax.set_title(name if site is None else f"{name} — allocated on {site}", fontsize=10)
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=8)
    axes[-1].set_xlabel("time since start [h]")
    return _save(fig, path)


def plot_all(runs: Mapping[str, PlottedRun], out_dir: str | os.PathLike[str], prefix: str = "") -> dict[str, Path]:
    """Write every plot into `out_dir` as `<prefix><kind>.png`; returns the paths by kind."""
    d = Path(out_dir)
    return {
        "wait_cdf": plot_wait_cdf(runs, d / f"{prefix}wait_cdf.png"),
        "slowdown": plot_mean_slowdown(runs, d / f"{prefix}slowdown.png"),
        "utilization": plot_utilization(runs, d / f"{prefix}utilization.png"),
        "processors": plot_processors(runs, d / f"{prefix}processors.png"),
        "cost": plot_cost(runs, d / f"{prefix}cost.png"),
    }
