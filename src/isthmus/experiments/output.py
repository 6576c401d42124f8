"""Writing experiment results: CSV rows, figures (matplotlib, Agg; PNG with a PDF beside it, in the
style of `isthmus.metrics.style`) and Markdown tables."""

from __future__ import annotations

import csv
import os
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from isthmus.metrics import style
from isthmus.metrics.records import readable_as_umask


def write_csv(rows: Sequence[Mapping[str, Any]], path: Path) -> Path:
    """Write rows (union of their keys, first-seen order) atomically as CSV."""
    keys: list[str] = []
    for r in rows:
        keys += [k for k in r if k not in keys]
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    readable_as_umask(Path(tmp))  # as every other output, not mkstemp's 0600
    with os.fdopen(fd, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=keys)
        w.writeheader()
        w.writerows(rows)
    os.replace(tmp, path)
    return path


def figure(ncols: int = 1, nrows: int = 1, width: float = 6.0, height: float = 4.0) -> tuple[Figure, Any]:
    """A figure with a grid of axes in the figures' style (`isthmus.metrics.style`: colour-blind-safe
    palette with a line style per series, fonts, grid), no pyplot, no window."""
    with style.styled():
        fig = Figure(figsize=(width * ncols, height * nrows), layout="constrained")
        FigureCanvasAgg(fig)
        axes = fig.subplots(nrows, ncols, squeeze=False)
    return fig, axes


def save(fig: Figure, path: Path) -> Path:
    """Save a figure as PNG at `path` with a PDF beside it (`style.DEFAULT_FORMATS`); returns the
    PNG. Each panel's legend is moved beside its data first (the layout makes room for it)."""
    for ax in fig.axes:
        legend = ax.get_legend()
        if legend is not None:
            style.legend_outside(ax, title=legend.get_title().get_text() or None)
    return style.save(fig, path, style.DEFAULT_FORMATS)[0]


def fmt(value: Any, digits: int = 3) -> str:
    """A number for a Markdown table."""
    if value is None or value == "":
        return "–"
    if isinstance(value, float):
        if value == 0:
            return "0"
        if abs(value) >= 1000:
            return f"{value:,.0f}"
        return f"{value:.{digits}g}"
    return str(value)


def markdown_table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    """A GitHub Markdown table."""
    lines = ["| " + " | ".join(headers) + " |", "|" + "|".join(" --- " for _ in headers) + "|"]
    lines += ["| " + " | ".join(fmt(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)
