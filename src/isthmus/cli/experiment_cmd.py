"""`isthmus experiment`: regenerate a seed's evaluation (CSV, PNG figures, Markdown summary)."""

from __future__ import annotations

import json
import time
from contextlib import ExitStack
from datetime import timedelta
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.progress import BarColumn, Progress, ProgressColumn, Task, TextColumn, TimeElapsedColumn
from rich.text import Text

from isthmus.cli.simulate_cmd import CANCELLED_HELP, fail
from isthmus.experiments.cluster import dask_executor
from isthmus.experiments.runner import PointFailedError, Sweep, SweepStatus, default_workers
from isthmus.experiments.store import POINTS_FILE, PointStore
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


class _RemainingColumn(ProgressColumn):
    """Time left from the jobs still to simulate at the jobs/second seen so far (not from points)."""

    def render(self, task: Task) -> Text:
        eta = task.fields.get("eta")
        if eta is None:
            return Text("eta -:--:--", style="progress.remaining")
        # Count down between finished points instead of freezing at the last estimate.
        left = max(0.0, eta - (time.monotonic() - task.fields.get("eta_at", time.monotonic())))
        return Text(f"eta {timedelta(seconds=round(left))}", style="progress.remaining")


def _progress(console: Console) -> Progress:
    return Progress(
        BarColumn(bar_width=12),
        TextColumn("{task.fields[counts]}"),
        TimeElapsedColumn(),
        _RemainingColumn(),
        console=console,
    )


def _status_fields(status: SweepStatus) -> dict[str, object]:
    rate = status.jobs_per_second
    reused = f" ({status.points_reused} saved)" if status.points_reused else ""
    return {
        "completed": status.jobs_done,
        "total": status.jobs_total,
        "counts": f"{status.points_done}/{status.points_total} points{reused}, "
        f"{status.jobs_done:,}/{status.jobs_total:,} jobs" + ("" if rate is None else f", {rate:,.0f}/s"),
        "eta": status.eta_seconds,
        "eta_at": time.monotonic(),
    }


def experiment_command(
    name: Annotated[
        str,
        typer.Argument(
            help="koala-c-limits | koala-c-sets | koala-c-multicluster | koala-c-multicloud | villegas-provisioning "
            "| villegas-allocation | villegas-short-long | villegas-pairs | villegas-fcbf"
        ),
    ],
    trace: Annotated[
        list[Path] | None, typer.Option("--trace", "-t", help="Trace file (repeat); default: the paper's traces found.")
    ] = None,
    out: Annotated[
        Path | None, typer.Option("--out", "-o", help="Output directory (default out/experiments/NAME).")
    ] = None,
    workers: Annotated[
        int | None,
        typer.Option(
            "--workers",
            "-j",
            help="Simulations at a time: 1 runs in this process, N > 1 starts a local Dask cluster of N worker "
            "processes (default: local cores).",
        ),
    ] = None,
    scheduler: Annotated[
        str | None,
        typer.Option(
            "--scheduler", help="Run on an existing Dask cluster: its scheduler's address, e.g. tcp://10.0.0.1:8786."
        ),
    ] = None,
    resume: Annotated[
        bool,
        typer.Option("--resume", help="Reuse the finished points saved in OUT/points.jsonl; compute only the rest."),
    ] = False,
    force: Annotated[
        bool, typer.Option("--force", help="Discard the points saved in OUT/points.jsonl and start over.")
    ] = False,
    chains: Annotated[str | None, typer.Option(help="Numbers of chains, e.g. '1-10' (limits, multicluster).")] = None,
    limits: Annotated[
        str | None, typer.Option(help="Runtime limits in minutes, e.g. '5-180/5' (limits, sets).")
    ] = None,
    seeds: Annotated[
        int | None,
        typer.Option(
            help="Workload seeds per point, 0..N-1 (villegas experiments on synthetic workloads; default 10)."
        ),
    ] = None,
    week: Annotated[int | None, typer.Option(help="Week of the trace, from 0 (villegas-fcbf; default 1).")] = None,
    cancelled: Annotated[str | None, typer.Option("--cancelled", help=CANCELLED_HELP)] = None,
    as_json: Annotated[
        bool, typer.Option("--json", help="Print every simulation's row and the files as JSON.")
    ] = False,
) -> None:
    """Run a seed's experiment and write CSV, PNG figures and a Markdown summary beside the seed's findings.

    KOALA-C (koala-c-*) and the Villegas dissertation (villegas-*). Every finished simulation is
    saved in OUT/points.jsonl as it completes; after an interruption the same command with
    --resume computes only the missing ones.
    """
    from isthmus.experiments.catalog import EXPERIMENTS

    spec = EXPERIMENTS.get(name)
    if spec is None:
        raise fail(f"unknown experiment {name!r}; valid: {', '.join(EXPERIMENTS)}")
    run = spec.run
    if scheduler is not None and workers is not None:
        raise fail("--scheduler and --workers exclude each other: the cluster behind the scheduler has its own workers")
    if workers is not None and workers < 1:
        raise fail(f"--workers must be at least 1, got {workers}")
    if resume and force:
        raise fail("--resume and --force exclude each other: resume reuses saved points, force discards them")
    paths: list[str] = []
    if spec.traces is None:
        if trace:
            raise fail(f"{name} runs the dissertation's synthetic workloads: it takes no --trace")
    elif trace:
        missing = [str(t) for t in trace if not t.exists()]
        if missing:
            raise fail(f"trace not found: {', '.join(missing)}")
        paths = [str(t) for t in trace]
    else:
        paths = [str(SHARED_TRACES / t) for t in spec.traces if (SHARED_TRACES / t).exists()]
        if not paths:
            raise fail(f"no --trace given and none of the seed's traces ({', '.join(spec.traces)}) in {SHARED_TRACES}")
    kwargs: dict[str, object] = {}
    given = {
        "cancelled": ("--cancelled", cancelled),
        "chains": ("--chains", _ints(chains, "--chains")),
        "limits_min": ("--limits", _ints(limits, "--limits")),
        "seeds": ("--seeds", seeds),
        "week": ("--week", week),
    }
    for key, (flag, value) in given.items():
        if value is None:
            continue
        if key not in spec.options:
            raise fail(f"{flag} does not apply to {name}")
        kwargs[key] = value
    if cancelled is not None and cancelled not in CANCELLED_CHOICES:
        raise fail(f"--cancelled: expected one of {', '.join(CANCELLED_CHOICES)}, got {cancelled!r}")
    if "cancelled" in spec.options:
        kwargs.setdefault("cancelled", RUN_CANCELLED)
    if seeds is not None:
        if seeds < 1:
            raise fail(f"--seeds must be at least 1, got {seeds}")
        kwargs["seeds"] = tuple(range(seeds))
    if week is not None and week < 0:
        raise fail(f"--week must be >= 0, got {week}")
    out_dir = out or Path("out/experiments") / name
    console = Console(stderr=as_json)
    try:
        store = PointStore.open(out_dir / POINTS_FILE, resume=resume, force=force)
    except (ValueError, OSError) as exc:
        raise fail(str(exc)) from None
    with store, ExitStack() as stack:
        for note in store.notes:
            console.print(f"[yellow]note:[/] {note}", highlight=False)
        local = workers if workers is not None else default_workers()
        executor = None
        where = "in this process"
        if scheduler is not None or local > 1:
            try:
                executor, info = stack.enter_context(
                    dask_executor(scheduler=scheduler, workers=None if scheduler else local)
                )
            except (ValueError, OSError, RuntimeError) as exc:
                raise fail(str(exc)) from None
            kind = "local Dask cluster" if info.local else "Dask cluster"
            where = f"on a {kind} at {info.address} with {info.workers} worker(s)"
            if info.workers == 0:
                console.print("[yellow]note:[/] the scheduler has no workers yet; points wait until one connects")
        what = f"{len(paths)} trace(s)" if spec.traces is not None else "synthetic workloads"
        console.print(f"[bold]{name}[/] on {what} {where} -> {out_dir}", highlight=False)
        if "cancelled" in kwargs:
            treatment = str(kwargs["cancelled"])
            console.print(
                f"Jobs cancelled before they started: --cancelled {treatment} ({CANCELLED_MEANINGS[treatment]})"
            )
        with _progress(console) as progress:
            task = progress.add_task("", total=None, counts="", eta=None)

            last: list[SweepStatus] = []

            def tick(status: SweepStatus) -> None:
                last[:] = [status]
                progress.update(task, **_status_fields(status))  # type: ignore[arg-type]

            sweep = Sweep(workers=1, executor=executor, progress=tick, store=store)
            try:
                result = run(paths, out_dir, sweep=sweep, **kwargs)
            except KeyboardInterrupt:
                progress.stop()
                console.print(
                    f"[yellow]interrupted:[/] {len(store.saved)} finished point(s) are saved in {store.path}; "
                    "run the same command with --resume to compute only the rest",
                    highlight=False,
                )
                raise typer.Exit(130) from None
            except PointFailedError as exc:
                progress.stop()
                raise fail(
                    f"{exc}; the {len(store.saved)} finished point(s) are saved in {store.path}, "
                    "rerun with --resume once fixed"
                ) from None
            except (ValueError, OSError) as exc:
                raise fail(str(exc)) from None
    if as_json:
        files = {k: str(v) for k, v in result.files.items()}
        typer.echo(json.dumps({"experiment": name, "rows": result.rows, "files": files}, indent=1, default=str))
        return
    reused = f" ({last[0].points_reused} reused from {store.path})" if last and last[0].points_reused else ""
    console.print(f"{len(result.rows)} simulations{reused}; summary: [bold]{result.files['summary']}[/]")
    for key, path in result.files.items():
        console.print(f"  {key}: {path}")


def register(app: typer.Typer) -> None:
    """Add `experiment` to the main command."""
    app.command("experiment")(experiment_command)
