"""What an experiment returns and the steps every experiment shares: run the points, select
rows, write the CSV and the Markdown summary."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from isthmus.experiments.output import write_csv
from isthmus.experiments.runner import Point, Sweep
from isthmus.metrics import style
from isthmus.workloads.conversion import CANCELLED_MEANINGS


@dataclass
class ExperimentResult:
    """Rows, files and the Markdown summary of one experiment."""

    name: str
    out_dir: Path
    rows: list[dict[str, Any]]
    files: dict[str, Path] = field(default_factory=dict)
    markdown: str = ""


def run_experiment(name: str, points: list[Point], workers: int | None, sweep: Sweep | None) -> list[dict[str, Any]]:
    """The rows of `points`, run by `sweep` (or local `workers`), in the order of the points."""
    if sweep is not None and workers is not None:
        raise ValueError("give workers inside the Sweep, not beside it")
    return (sweep or Sweep(workers=workers)).run(name, points)


def select(rows: list[dict[str, Any]], **where: Any) -> list[dict[str, Any]]:
    """The rows whose labels equal every `where` value."""
    return [r for r in rows if all(r.get(k) == v for k, v in where.items())]


def finish(result: ExperimentResult, title: str, body: list[str], *, traces: bool = True) -> ExperimentResult:
    """Write the CSV and summary.md (title, body, then the figures); with `traces`, say how
    jobs cancelled before they started were treated."""
    result.files["csv"] = write_csv(result.rows, result.out_dir / f"{result.name}.csv")
    figs = [f"![{k}]({p.name})" for k, p in result.files.items() if p.suffix == ".png"]
    treatments = sorted({str(r["cancelled"]) for r in result.rows if "cancelled" in r}) if traces else []
    if treatments:
        body = [
            *body,
            "Jobs cancelled before they started (SWF status 5 without processors or runtime): "
            + ", ".join(f"`--cancelled {t}` ({CANCELLED_MEANINGS.get(t, t)})" for t in treatments)
            + "; dropped per trace: "
            + ", ".join(
                f"{label} {n:,}"
                for label, n in sorted({(str(r.get("trace")), r.get("cancelled_dropped", 0)) for r in result.rows})
            )
            + ".",
        ]
    result.markdown = "\n\n".join([f"# {title}", *body, "## Figures", *figs]) + "\n"
    path = result.out_dir / "summary.md"
    path.write_text(result.markdown)
    result.files["summary"] = path
    return result


def log_axis(ax: Any, xlabel: str, ylabel: str, title: str) -> None:
    """Label an axis, with a logarithmic y scale (the paper's), said in the y label, when it has
    positive values."""
    log = ax.dataLim.y1 > 0  # a log axis needs some positive value (a free run costs $0)
    if log:
        ax.set_yscale("log")
    ax.set_xlabel(xlabel)
    ax.set_ylabel(f"{ylabel}, log scale" if log else ylabel)
    ax.set_title(title, fontsize=style.FONT_SIZE)
    ax.grid(True, which="both", alpha=0.3)
