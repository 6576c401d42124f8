"""One self-contained HTML page for a run directory: `isthmus report RUN_DIR`.

A simulation's directory (`isthmus simulate --out DIR`: comparison.json, per-policy records and
summaries, PNG figures) or an experiment's (`isthmus experiment NAME --out DIR`: CSV tables, PNG
figures, summary.md) becomes `DIR/report.html`: the exact command when it was recorded, the
configuration, the tables and the figures (referenced by relative path, so the directory can be
moved or served as is). Every text is escaped; nothing is fetched from elsewhere.
"""

from __future__ import annotations

import csv
import html
import json
import os
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

MAX_ROWS = 500
"""Rows of a CSV table shown in the page (the file itself has them all)."""

_METRICS = (
    ("policy", "policy"),
    ("jobs_completed", "completed"),
    ("jobs_unfinished", "unfinished"),
    ("jobs_rejected", "rejected"),
    ("wait_mean", "mean wait (s)"),
    ("slowdown_mean", "mean slowdown"),
    ("bounded_slowdown_mean", "mean bounded slowdown"),
    ("makespan", "makespan (s)"),
    ("utilization", "utilization"),
    ("cost_charged", "charged cost ($)"),
    ("restarts", "restarts"),
)

_STYLE = """
body { font-family: system-ui, sans-serif; margin: 1.5rem; color: #1d232a; }
h1 { font-size: 1.4rem; } h2 { font-size: 1.1rem; margin-top: 1.6rem; }
table { border-collapse: collapse; font-size: .9rem; margin: .5rem 0; }
th, td { border-bottom: 1px solid #e3e6ea; padding: .2rem .6rem; text-align: left; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
pre { background: #f6f7f9; padding: .6rem; overflow-x: auto; }
figure { display: inline-block; margin: .5rem; } img { max-width: 640px; border: 1px solid #e3e6ea; }
"""


class ReportError(ValueError):
    """The directory is not a run directory isthmus wrote."""


def _e(value: Any) -> str:
    return html.escape("" if value is None else str(value))


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _num(value: Any) -> str:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return _e(value)
    return f"{value:,}" if isinstance(value, int) else f"{value:,.4g}"


def _table(header: Sequence[str], rows: Iterable[Sequence[Any]], *, id_: str = "") -> str:
    head = "".join(f"<th>{_e(h)}</th>" for h in header)
    body = []
    for row in rows:
        cells = "".join(
            f'<td class="num">{_num(v)}</td>'
            if isinstance(v, int | float) and not isinstance(v, bool)
            else f"<td>{_e(v)}</td>"
            for v in row
        )
        body.append(f"<tr>{cells}</tr>")
    ident = f' id="{_e(id_)}"' if id_ else ""
    return f"<table{ident}><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>"


def _figures(run_dir: Path, page_dir: Path) -> str:
    pngs = sorted(run_dir.glob("*.png"))
    if not pngs:
        return ""
    items = "".join(
        f'<figure><img src="{_e(os.path.relpath(p, page_dir))}" alt="{_e(p.stem)}">'
        f"<figcaption>{_e(p.stem)}</figcaption></figure>"
        for p in pngs
    )
    return f"<h2>Figures</h2>{items}"


def _csv_tables(run_dir: Path, skip: set[str]) -> str:
    out = []
    for path in sorted(run_dir.glob("*.csv")):
        if path.name in skip:
            continue
        with path.open(newline="") as f:
            reader = csv.reader(f)
            header = next(reader, None)
            if header is None:
                continue
            rows = []
            for i, row in enumerate(reader):
                if i >= MAX_ROWS:
                    break
                rows.append([_cell(v) for v in row])
        more = f"<p>First {MAX_ROWS} rows of {_e(path.name)}.</p>" if len(rows) == MAX_ROWS else ""
        out.append(f"<h2>{_e(path.name)}</h2>{_table(header, rows, id_=path.stem)}{more}")
    return "".join(out)


def _cell(text: str) -> Any:
    try:
        return int(text)
    except ValueError:
        pass
    try:
        return float(text)
    except ValueError:
        return text


def _simulation(run_dir: Path, doc: dict[str, Any], page_dir: Path) -> tuple[str, str]:
    title = f"isthmus simulate: {doc.get('environment')} × {doc.get('workload')}"
    parts = []
    if doc.get("command"):
        parts.append(f"<h2>Command</h2><pre>{_e(doc['command'])}</pre>")
    prep = doc.get("workload_preparation") or {}
    config = [
        ("environment", doc.get("environment")),
        ("workload", doc.get("workload_spec")),
        ("jobs", doc.get("jobs")),
        ("provisioning", doc.get("provisioning")),
        ("jobs read", prep.get("jobs_read")),
        ("cancelled before start", json.dumps(prep.get("cancelled_before_start"))),
        ("dropped (larger than max size)", prep.get("dropped_max_size")),
    ]
    parts.append("<h2>Configuration</h2>" + _table(["", ""], config, id_="configuration"))
    policies = doc.get("policies") or []
    rows = [[p.get(k) for k, _ in _METRICS] for p in policies]
    parts.append("<h2>Metrics</h2>" + _table([label for _, label in _METRICS], rows, id_="metrics"))
    parts.append(_figures(run_dir, page_dir))
    return title, "".join(parts)


def _experiment(run_dir: Path, summary: str, page_dir: Path) -> tuple[str, str]:
    first = next((line.lstrip("# ").strip() for line in summary.splitlines() if line.strip()), run_dir.name)
    parts = [f"<h2>Summary</h2><pre>{_e(summary)}</pre>", _csv_tables(run_dir, set()), _figures(run_dir, page_dir)]
    return f"isthmus experiment: {first}", "".join(parts)


def write_report(run_dir: str | Path, out: str | Path | None = None) -> Path:
    """Write the HTML report of `run_dir` (default `run_dir/report.html`); its path.

    ReportError when the directory holds neither a simulation's comparison.json nor an
    experiment's summary.md."""
    run_dir = Path(run_dir)
    if not run_dir.is_dir():
        raise ReportError(f"{run_dir}: not a directory")
    comparison, summary = run_dir / "comparison.json", run_dir / "summary.md"
    path = Path(out) if out is not None else run_dir / "report.html"
    page_dir = path.resolve().parent
    if comparison.exists():
        try:
            doc = json.loads(comparison.read_text())
        except json.JSONDecodeError as exc:
            raise ReportError(f"{comparison}: not JSON ({exc})") from None
        if not isinstance(doc, dict):
            raise ReportError(f"{comparison}: expected an object")
        title, body = _simulation(run_dir.resolve(), doc, page_dir)
    elif summary.exists():
        title, body = _experiment(run_dir.resolve(), summary.read_text(), page_dir)
    else:
        raise ReportError(
            f"{run_dir}: no comparison.json (isthmus simulate --out) or summary.md (isthmus experiment --out)"
        )
    page = (
        '<!doctype html><html lang="en"><head><meta charset="utf-8">'
        f"<title>{_e(title)}</title><style>{_STYLE}</style></head>"
        f"<body><h1>{_e(title)}</h1>{body}</body></html>\n"
    )
    path.write_text(page, encoding="utf-8")
    return path
