"""`isthmus compare RUN_A RUN_B ...`: simulation runs side by side, with each figure's difference
from the first run and whether the 95% confidence intervals overlap."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from isthmus.cli.simulate_cmd import COLUMNS, column_value, fail


def load_run(path: Path) -> dict[str, Any]:
    """The comparison.json of a `simulate --out` directory (or the file itself); ValueError
    saying what is missing."""
    file = path / "comparison.json" if path.is_dir() else path
    try:
        data = json.loads(file.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ValueError(f"{path}: no comparison.json (give a directory written by `isthmus simulate --out`)") from None
    except (OSError, json.JSONDecodeError) as exc:
        raise ValueError(f"{file}: cannot read: {exc}") from None
    if not isinstance(data, dict) or not isinstance(data.get("policies"), list):
        raise ValueError(f"{file}: not written by `isthmus simulate` (no policies)")
    return data


def figure_of(row: dict[str, Any], key: str) -> dict[str, Any]:
    """A policy row's figure as {"mean", "ci95", "low", "high", "n"}: a repeated run's interval
    as written, a single run's value with no interval."""
    value = row.get(key)
    if isinstance(value, dict):
        return value
    number = value if isinstance(value, int | float) and not isinstance(value, bool) else None
    return {"mean": number, "ci95": None, "low": None, "high": None, "n": 0 if number is None else 1}


def compare_runs(runs: list[dict[str, Any]], keys: list[str]) -> list[dict[str, Any]]:
    """One row per (policy, figure) present in the first run: each run's figure, its difference
    from the first run's mean (absolute and relative) and whether their 95% intervals overlap
    (None when either run has no interval: a single run, or fewer than two values)."""
    from isthmus.metrics.stats import overlap

    out: list[dict[str, Any]] = []
    for base_row in runs[0]["policies"]:
        policy = str(base_row["policy"])
        rows = [next((r for r in run["policies"] if str(r.get("policy")) == policy), None) for run in runs]
        for key in keys:
            base = figure_of(base_row, key)
            entry: dict[str, Any] = {"policy": policy, "figure": key, "runs": []}
            for row in rows:
                if row is None:
                    entry["runs"].append(None)
                    continue
                fig = figure_of(row, key)
                a, b = base["mean"], fig["mean"]
                diff = None if a is None or b is None else b - a
                entry["runs"].append(
                    {
                        **fig,
                        "difference": diff,
                        "relative": None if diff is None or not a else diff / abs(a),
                        "overlap": overlap(base, fig),
                    }
                )
            out.append(entry)
    return out


def _cell(fig: dict[str, Any] | None, kind: str, first: bool) -> str:
    if fig is None:
        return "(not run)"
    text = column_value(fig.get("mean"), kind)
    if fig.get("ci95") is not None:
        text += f" ± {column_value(fig['ci95'], kind)}"
    if first or fig.get("difference") is None:
        return text
    diff = column_value(fig["difference"], kind)
    sign = "+" if fig["difference"] >= 0 else ""
    rel = f", {fig['relative'] * 100:+.1f}%" if fig.get("relative") is not None else ""
    verdict = {True: "CIs overlap", False: "CIs apart", None: "no CI"}[fig.get("overlap")]
    return f"{text} ({sign}{diff}{rel}; {verdict})"


def register(app: typer.Typer) -> None:
    """Add the `compare` command to `app`."""

    @app.command("compare")
    def compare(
        run_dirs: Annotated[
            list[Path],
            typer.Argument(metavar="RUN_A RUN_B ...", help="Directories written by `isthmus simulate --out`."),
        ],
        as_json: Annotated[bool, typer.Option("--json", help="Print the comparison as JSON.")] = False,
    ) -> None:
        """Put simulation runs side by side: each figure, its difference from RUN_A and whether
        the 95% confidence intervals (of `simulate --repeat`) overlap."""
        if len(run_dirs) < 2:
            raise fail("give at least two runs to compare")
        try:
            runs = [load_run(p) for p in run_dirs]
        except ValueError as exc:
            raise fail(str(exc)) from None
        kinds = {key: kind for key, _, kind in COLUMNS if key != "policy"}
        rows = compare_runs(runs, list(kinds))
        if as_json:
            typer.echo(json.dumps({"runs": [str(p) for p in run_dirs], "rows": rows}, indent=2))
            return
        console = Console()
        if not console.is_terminal:
            console.width = max(console.width, 160)
        headers = {key: header for key, header, _ in COLUMNS}
        table = Table(
            title="Differences from the first run; CIs: 95% confidence intervals of repeated runs",
            title_justify="left",
            padding=(0, 1),
        )
        table.add_column("policy", no_wrap=True)
        table.add_column("figure", no_wrap=True)
        for p in run_dirs:
            table.add_column(escape(str(p)), justify="right")
        for row in rows:
            kind = kinds[row["figure"]]
            cells = [_cell(fig, kind, k == 0) for k, fig in enumerate(row["runs"])]
            table.add_row(escape(row["policy"]), headers[row["figure"]], *(escape(c) for c in cells))
        console.print(table)
