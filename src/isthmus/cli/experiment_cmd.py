"""`isthmus experiment`: regenerate a seed's evaluation (CSV, PNG figures, Markdown summary)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

from isthmus.cli.simulate_cmd import CANCELLED_HELP, fail
from isthmus.workloads.conversion import CANCELLED_CHOICES, CANCELLED_MEANINGS, RUN_CANCELLED

SHARED_TRACES = Path(__file__).resolve().parents[3].parent / "shared" / "traces"


def _ints(text: str | None, name: str) -> tuple[int, ...] | None:
    """'1-10' or '5,10,15' or '5-180/5' -> a tuple of ints."""
    if text is None:
        return None
    out: list[int] = []
    try:
        for part in text.split(","):
            rng, _, step = part.partition("/")
            lo, dash, hi = rng.partition("-")
            if dash:
                out += list(range(int(lo), int(hi) + 1, int(step or 1)))
            else:
                out.append(int(rng))
    except ValueError:
        raise fail(f"{name}: expected numbers like '1-10', '5,10,20' or '5-180/5', got {text!r}") from None
    if not out:
        raise fail(f"{name}: no values in {text!r}")
    return tuple(out)


def experiment_command(
    name: Annotated[
        str, typer.Argument(help="koala-c-limits | koala-c-sets | koala-c-multicluster | koala-c-multicloud")
    ],
    trace: Annotated[
        list[Path] | None, typer.Option("--trace", "-t", help="Trace file (repeat); default: the paper's traces found.")
    ] = None,
    out: Annotated[
        Path | None, typer.Option("--out", "-o", help="Output directory (default out/experiments/NAME).")
    ] = None,
    workers: Annotated[
        int | None, typer.Option("--workers", "-j", help="Parallel simulations (default: local cores).")
    ] = None,
    chains: Annotated[str | None, typer.Option(help="Numbers of chains, e.g. '1-10' (limits, multicluster).")] = None,
    limits: Annotated[
        str | None, typer.Option(help="Runtime limits in minutes, e.g. '5-180/5' (limits, sets).")
    ] = None,
    cancelled: Annotated[str, typer.Option("--cancelled", help=CANCELLED_HELP)] = RUN_CANCELLED,
    as_json: Annotated[
        bool, typer.Option("--json", help="Print every simulation's row and the files as JSON.")
    ] = False,
) -> None:
    """Run a KOALA-C experiment and write CSV, PNG figures and a Markdown summary beside the paper's numbers."""
    from isthmus.experiments.koala_c import DEFAULT_TRACES, EXPERIMENTS

    run = EXPERIMENTS.get(name)
    if run is None:
        raise fail(f"unknown experiment {name!r}; valid: {', '.join(EXPERIMENTS)}")
    if trace:
        missing = [str(t) for t in trace if not t.exists()]
        if missing:
            raise fail(f"trace not found: {', '.join(missing)}")
        paths = [str(t) for t in trace]
    else:
        paths = [str(SHARED_TRACES / t) for t in DEFAULT_TRACES if (SHARED_TRACES / t).exists()]
        if not paths:
            raise fail(f"no --trace given and none of the paper's traces found in {SHARED_TRACES}")
    if cancelled not in CANCELLED_CHOICES:
        raise fail(f"--cancelled: expected one of {', '.join(CANCELLED_CHOICES)}, got {cancelled!r}")
    kwargs: dict[str, object] = {"cancelled": cancelled}
    chain_values = _ints(chains, "--chains")
    limit_values = _ints(limits, "--limits")
    if chain_values is not None:
        if name not in ("koala-c-limits", "koala-c-multicluster"):
            raise fail(f"--chains does not apply to {name}")
        kwargs["chains"] = chain_values
    if limit_values is not None:
        if name not in ("koala-c-limits", "koala-c-sets"):
            raise fail(f"--limits does not apply to {name}")
        kwargs["limits_min"] = limit_values
    out_dir = out or Path("out/experiments") / name
    out_dir.mkdir(parents=True, exist_ok=True)
    console = Console(stderr=as_json)
    console.print(f"[bold]{name}[/] on {len(paths)} trace(s) -> {out_dir}")
    console.print(f"Jobs cancelled before they started: --cancelled {cancelled} ({CANCELLED_MEANINGS[cancelled]})")
    with Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        TimeRemainingColumn(),
        console=console,
    ) as progress:
        task = progress.add_task("simulations", total=None)

        def tick(done: int, total: int) -> None:
            progress.update(task, completed=done, total=total)

        try:
            result = run(paths, out_dir, workers=workers, progress=tick, **kwargs)
        except (ValueError, OSError) as exc:
            raise fail(str(exc)) from None
    if as_json:
        files = {k: str(v) for k, v in result.files.items()}
        typer.echo(json.dumps({"experiment": name, "rows": result.rows, "files": files}, indent=1, default=str))
        return
    console.print(f"{len(result.rows)} simulations; summary: [bold]{result.files['summary']}[/]")
    for key, path in result.files.items():
        console.print(f"  {key}: {path}")


def register(app: typer.Typer) -> None:
    """Add `experiment` to the main command."""
    app.command("experiment")(experiment_command)
