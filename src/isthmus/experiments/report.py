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

#: The metrics table: (summary key, header, format); one format per column, so that a column's
#: numbers line up (never 1.151e+06 beside 6,890).
_METRICS = (
    ("policy", "policy", ""),
    ("jobs_completed", "completed", "{:,.0f}"),
    ("jobs_unfinished", "unfinished", "{:,.0f}"),
    ("jobs_rejected", "rejected", "{:,.0f}"),
    ("wait_mean", "mean wait (s)", "{:,.0f}"),
    ("slowdown_mean", "mean slowdown", "{:,.2f}"),
    ("bounded_slowdown_mean", "mean bounded slowdown", "{:,.2f}"),
    ("makespan", "makespan (s)", "{:,.0f}"),
    ("utilization", "utilization", "{:.3f}"),
    ("cost_charged", "charged cost ($)", "{:,.2f}"),
    ("restarts", "restarts", "{:,.0f}"),
)

#: The figures of a simulation in the order a reader needs them, each with what it shows.
FIGURES = (
    ("wait_cdf", "Wait time: the share of jobs (y) that waited at most x seconds, one curve per policy."),
    ("slowdown", "Mean slowdown per policy: (wait + runtime) / runtime, averaged over the jobs."),
    ("utilization", "Utilization over time: busy processors over the processors online, per policy."),
    ("processors", "Processors online over time (clusters and leased VMs), per policy."),
    ("cost", "Charged cost of cloud leases per policy (whole billing increments), in dollars."),
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
    """The PNG figures of `run_dir`: those of `FIGURES` first, in its order and with its
    captions, then any other in name order, captioned by name."""
    pngs = sorted(run_dir.glob("*.png"))
    if not pngs:
        return ""
    known = {stem: (k, caption) for k, (stem, caption) in enumerate(FIGURES)}
    ordered = sorted(pngs, key=lambda p: (known.get(p.stem, (len(FIGURES), ""))[0], p.name))
    items = "".join(
        f'<figure><img src="{_e(os.path.relpath(p, page_dir))}" alt="{_e(p.stem)}">'
        f"<figcaption>Figure {k}. {_e(known[p.stem][1] if p.stem in known else p.stem)}</figcaption></figure>"
        for k, p in enumerate(ordered, start=1)
    )
    return f"<h2>Figures</h2>{items}"


def _formatted(value: Any, fmt: str) -> str:
    """A metrics cell: a number in its column's format, a repeated run's interval as mean ± half-width."""
    if isinstance(value, dict):
        mean, half = value.get("mean"), value.get("ci95")
        text = _formatted(mean, fmt)
        return text if half is None else f"{text} ± {_formatted(half, fmt)}"
    if fmt and _is_number(value):
        return _e(fmt.format(value))
    return "-" if value is None else _e(value)


def _metrics_table(policies: Sequence[dict[str, Any]]) -> str:
    head = "".join(f"<th>{_e(label)}</th>" for _, label, _ in _METRICS)
    body = "".join(
        "<tr>"
        + "".join(
            f'<td class="num">{_formatted(p.get(k), fmt)}</td>' if fmt else f"<td>{_e(p.get(k))}</td>"
            for k, _, fmt in _METRICS
        )
        + "</tr>"
        for p in policies
    )
    return f'<table id="metrics"><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>'


def _cancelled_text(info: Any) -> str:
    """What was done with the jobs cancelled before they started, in words (not raw JSON)."""
    if not isinstance(info, dict):
        return "" if info is None else str(info)
    if not info.get("treatment"):
        return str(info.get("meaning") or "not applicable")
    return (
        f"{info.get('treatment')}: {info.get('jobs', 0):,} jobs ({info.get('meaning', '')}); "
        f"{info.get('dropped', 0):,} dropped, {info.get('run_as_1s', 0):,} run as 1 s"
    )


def _pairs_table(pairs: Sequence[tuple[str, Any]], id_: str) -> str:
    """A two-column table of (name, value), numbers with thousands separators."""
    rows = []
    for name, value in pairs:
        if isinstance(value, float):
            text = f"{value:,.2f}"
        elif isinstance(value, int) and not isinstance(value, bool):
            text = f"{value:,}"
        else:
            text = "" if value is None else str(value)
        rows.append(f"<tr><th>{_e(name)}</th><td>{_e(text)}</td></tr>")
    return f'<table id="{_e(id_)}"><tbody>{"".join(rows)}</tbody></table>'


def _option(value: Any) -> Any:
    """An experiment option in words: a list as its items separated by commas."""
    return ", ".join(map(str, value)) if isinstance(value, list | tuple) else value


def _provenance(doc: dict[str, Any]) -> str:
    parts = []
    if doc.get("command"):
        parts.append(f"<h2>Command</h2><pre>{_e(doc['command'])}</pre>")
    if doc.get("command_with_defaults"):
        parts.append(f"<p>With every default spelled out:</p><pre>{_e(doc['command_with_defaults'])}</pre>")
    versions = doc.get("versions") or {}
    if versions or doc.get("seed") is not None:
        repeat = doc.get("repeat") or {}
        pairs: list[tuple[str, Any]] = [("seed", str(doc.get("seed")))] if "seed" in doc else []
        if repeat:
            pairs += [
                ("repetitions", repeat.get("count")),
                ("seeds", ", ".join(map(str, repeat.get("seeds", [])))),
                ("resampling", repeat.get("resampling")),
                ("interval", repeat.get("interval")),
            ]
        pairs += [("isthmus", versions.get("isthmus")), ("Python", versions.get("python"))]
        pairs += [(name, v) for name, v in (versions.get("libraries") or {}).items()]
        pairs.append(("platform", versions.get("platform")))
        parts.append("<h2>Provenance</h2>" + _pairs_table(pairs, "provenance"))
    return "".join(parts)


def _environment(doc: dict[str, Any]) -> str:
    detail = doc.get("environment_detail")
    if not isinstance(detail, dict) or not detail.get("sites"):
        return ""
    keys: list[str] = []
    for site in detail["sites"]:
        keys += [k for k in site if k not in keys]
    rows = [[site.get(k, "") for k in keys] for site in detail["sites"]]
    interval = detail.get("round_interval_s")
    rounds = "a round after every instant with events" if interval is None else f"a round every {interval:g} s"
    return f"<h2>Environment</h2><p>{_e(detail.get('name'))}: {_e(rounds)}.</p>" + _table(keys, rows, id_="sites")


def _workload(doc: dict[str, Any]) -> str:
    stats = doc.get("workload_statistics")
    if not isinstance(stats, dict) or not stats:
        return ""
    return "<h2>Workload statistics</h2>" + _pairs_table(
        [(k.replace("_", " "), v) for k, v in stats.items()], "workload-statistics"
    )


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
    title = f"isthmus simulate: {doc.get('environment')} × {doc.get('workload') or doc.get('workload_spec')}"
    parts = [_provenance(doc)]
    prep = doc.get("workload_preparation") or {}
    config = [
        ("environment", doc.get("environment")),
        ("workload", doc.get("workload_spec")),
        ("jobs", doc.get("jobs")),
        ("provisioning", doc.get("provisioning")),
        ("jobs read", prep.get("jobs_read")),
        ("cancelled before start", _cancelled_text(prep.get("cancelled_before_start"))),
        ("dropped (larger than max size)", prep.get("dropped_max_size")),
    ]
    parts.append("<h2>Configuration</h2>" + _pairs_table([(k, v) for k, v in config if v is not None], "configuration"))
    parts.append(_environment(doc))
    parts.append(_workload(doc))
    policies = doc.get("policies") or []
    note = (
        "<p>Each figure: mean ± half-width of its 95% confidence interval over the repetitions.</p>"
        if doc.get("repeat")
        else ""
    )
    parts.append("<h2>Metrics</h2>" + note + _metrics_table(policies))
    parts.append(_figures(run_dir, page_dir))
    return title, "".join(parts)


def _experiment(run_dir: Path, summary: str, page_dir: Path) -> tuple[str, str]:
    first = next((line.lstrip("# ").strip() for line in summary.splitlines() if line.strip()), run_dir.name)
    provenance = run_dir / "provenance.json"
    doc: dict[str, Any] = {}
    if provenance.exists():
        try:
            loaded = json.loads(provenance.read_text())
        except json.JSONDecodeError as exc:
            raise ReportError(f"{provenance}: not JSON ({exc})") from None
        doc = loaded if isinstance(loaded, dict) else {}
    options = doc.get("options") or {}
    parts = [
        _provenance(doc),
        "<h2>Options</h2>" + _pairs_table([(k, _option(v)) for k, v in options.items()], "options") if options else "",
        f"<h2>Summary</h2><pre>{_e(summary)}</pre>",
        _csv_tables(run_dir, set()),
        _figures(run_dir, page_dir),
    ]
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
