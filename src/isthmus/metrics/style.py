"""The one style every figure of isthmus uses (`isthmus simulate`'s plots, the experiments'
figures): a colour-blind-safe palette with a line style and marker per series, figure titles
naming workload and environment, legends outside the data, and vector files beside the PNG.

The palette is Okabe and Ito's (Color Universal Design, 2008), readable with every common
colour-vision deficiency and, through the line styles and markers, in grey print. The module
imports matplotlib only inside the functions that draw, so the CLI can parse `--figure-format`
without loading it.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

#: Okabe-Ito colours, in the order series get them (yellow last: weak on white).
PALETTE = ("#0072B2", "#E69F00", "#009E73", "#D55E00", "#CC79A7", "#56B4E9", "#000000", "#F0E442")
#: A line style and a marker per series, so that overlapping curves stay apart.
LINESTYLES: tuple[Any, ...] = (
    "-",
    "--",
    "-.",
    ":",
    (0, (5, 1, 1, 1)),
    (0, (1, 1)),
    (0, (8, 2)),
    (0, (3, 1, 1, 1, 1, 1)),
)
MARKERS = ("o", "s", "^", "D", "v", "P", "X", "*")
#: Hatches of bar series (grey print).
HATCHES = ("", "//", "..", "xx", "\\\\", "++")
#: Colours of the reference lines: capacity, and the processors owned (clusters).
CAPACITY_COLOUR = "#444444"

FORMATS = ("png", "pdf", "svg")
"""The file formats a figure can be written in."""
DEFAULT_FORMATS = ("png", "pdf")
"""PNG to look at, PDF to put in a paper."""

#: The metadata that leaves the creation date out of a file, by format.
_NO_DATE: dict[str, dict[str, Any]] = {"pdf": {"CreationDate": None}, "svg": {"Date": None}}

DPI = 150
FONT_SIZE = 9.0
TITLE_SIZE = 10.5


def parse_formats(text: str | Sequence[str]) -> tuple[str, ...]:
    """The formats of a comma-separated list (``png,pdf``), in order, without repeats;
    ValueError naming an unknown one (the valid ones: `FORMATS`)."""
    parts = text.split(",") if isinstance(text, str) else list(text)
    out: list[str] = []
    for part in parts:
        name = part.strip().lower().lstrip(".")
        if not name:
            continue
        if name not in FORMATS:
            raise ValueError(f"figure format {part.strip()!r}: expected one of {', '.join(FORMATS)}")
        if name not in out:
            out.append(name)
    if not out:
        raise ValueError(f"no figure format given: expected one or more of {', '.join(FORMATS)}")
    return tuple(out)


def rc() -> dict[str, Any]:
    """matplotlib settings giving axes made under them the palette (with a line style per
    series), the font sizes and the light grid of this style (`matplotlib.rc_context(rc())`)."""
    from cycler import cycler

    n = min(len(PALETTE), len(LINESTYLES))
    return {
        "axes.prop_cycle": cycler(color=list(PALETTE[:n])) + cycler(linestyle=list(LINESTYLES[:n])),
        "font.size": FONT_SIZE,
        "axes.titlesize": FONT_SIZE,
        "axes.labelsize": FONT_SIZE,
        "legend.fontsize": FONT_SIZE - 1,
        "xtick.labelsize": FONT_SIZE - 0.5,
        "ytick.labelsize": FONT_SIZE - 0.5,
        "axes.grid": True,
        "grid.alpha": 0.3,
        "grid.linewidth": 0.6,
        "axes.axisbelow": True,
        "axes.spines.top": False,
        "axes.spines.right": False,
        "figure.titlesize": TITLE_SIZE,
    }


def styled() -> AbstractContextManager[None]:
    """A context in which new axes take this style's settings (`rc`)."""
    import matplotlib

    return matplotlib.rc_context(rc())  # type: ignore[arg-type]


def series_style(i: int) -> dict[str, Any]:
    """Colour, line style and marker of the `i`-th series (cycling)."""
    return {
        "color": PALETTE[i % len(PALETTE)],
        "linestyle": LINESTYLES[i % len(LINESTYLES)],
        "marker": MARKERS[i % len(MARKERS)],
    }


@dataclass(frozen=True)
class Context:
    """What a figure's title names besides its content: the workload and the environment
    (either may be unknown: None)."""

    workload: str | None = None
    environment: str | None = None

    def title(self, what: str) -> str:
        """``what — workload on environment`` (the parts known)."""
        where = " on ".join(p for p in (self.workload, self.environment) if p)
        return f"{what} — {where}" if where else what


NO_CONTEXT = Context()
"""A figure whose workload and environment are unknown (its title names its content only)."""


def style_axes(ax: Axes) -> None:
    """Font sizes, a light grid behind the data, no top and right spines."""
    ax.tick_params(labelsize=FONT_SIZE)
    ax.xaxis.label.set_fontsize(FONT_SIZE)
    ax.yaxis.label.set_fontsize(FONT_SIZE)
    ax.grid(True, alpha=0.3, linewidth=0.6)
    ax.set_axisbelow(True)
    for side in ("top", "right"):
        ax.spines[side].set_visible(False)


def title(fig: Figure, text: str) -> None:
    """The figure's title, at its top."""
    fig.suptitle(text, fontsize=TITLE_SIZE)


def legend_outside(ax: Axes, *, title: str | None = None, handles: Iterable[Any] | None = None) -> None:
    """The axes' legend to the right of the data (the figure's right margin must leave room:
    `figure` with `legend=True`)."""
    kw: dict[str, Any] = {
        "loc": "upper left",
        "bbox_to_anchor": (1.01, 1.0),
        "borderaxespad": 0.0,
        "fontsize": FONT_SIZE,
        "frameon": False,
    }
    if title:
        kw["title"] = title
        kw["title_fontsize"] = FONT_SIZE
    if handles is not None:
        ax.legend(handles=list(handles), **kw)
    else:
        ax.legend(**kw)


def save(fig: Figure, path: str | os.PathLike[str], formats: Sequence[str] = DEFAULT_FORMATS) -> list[Path]:
    """Write `fig` in each of `formats` beside `path` (its suffix replaced), each file atomically;
    returns the paths in the order of `formats`."""
    import matplotlib

    from isthmus.metrics.records import atomic_write

    base = Path(path)
    out = []
    # fonts embedded as TrueType (editable, accepted by publishers), SVG text kept as text, and no
    # creation date in the files: the same figure gives the same bytes
    with matplotlib.rc_context({"pdf.fonttype": 42, "svg.fonttype": "none", "svg.hashsalt": "isthmus"}):
        for fmt in parse_formats(formats):
            metadata: dict[str, Any] = _NO_DATE.get(fmt, {})

            def write(tmp: Path, fmt: str = fmt, metadata: dict[str, Any] = metadata) -> None:
                fig.savefig(tmp, format=fmt, dpi=DPI, metadata=metadata)

            out.append(atomic_write(base.with_suffix(f".{fmt}"), write))
    return out


FIGURE_FORMAT_HELP = (
    f"Figure file formats, comma-separated, of {', '.join(FORMATS)}: PNG to look at, PDF or SVG (vector) "
    "for a paper; each figure is written once per format, same name."
)
"""The help of a command's `--figure-format` option."""


def figure_formats(value: str) -> str:
    """`--figure-format`'s check (a Typer callback): the formats, normalized; a usage error naming
    an unknown one."""
    try:
        return ",".join(parse_formats(value))
    except ValueError as exc:
        import typer

        raise typer.BadParameter(str(exc)) from None
