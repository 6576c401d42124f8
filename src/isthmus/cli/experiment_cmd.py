"""`isthmus experiment`: regenerate a seed's evaluation (CSV, PNG figures, Markdown summary)."""

from __future__ import annotations

import json
import signal
import sys
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
from isthmus.experiments.cluster import dask_executor, process_pool
from isthmus.experiments.runner import PointFailedError, Sweep, SweepStatus, default_workers
from isthmus.experiments.store import POINTS_FILE, PointStore
from isthmus.workloads.conversion import CANCELLED_CHOICES, CANCELLED_MEANINGS, RUN_CANCELLED

LOCAL_SCHEDULER = "local"  # --scheduler local: a Dask cluster started on this machine for the sweep
SHARED_TRACES = Path(__file__).resolve().parents[3].parent / "shared" / "traces"


def _start_day(text: str | None) -> float | None:
    """--window-start for ibm-cloud: a time in the trace ('86.5d', '7200') as days."""
    if text is None:
        return None
    from isthmus.cli.workload_cmd import parse_time
    from isthmus.workloads import WorkloadError

    try:
        seconds = parse_time(text, "--window-start")
    except (WorkloadError, ValueError) as exc:
        raise fail(str(exc)) from None
    if seconds is None or seconds < 0:
        raise fail(f"--window-start must be a time >= 0 in the trace, got {text!r}")
    return seconds / 86400.0


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
    ctx: typer.Context,
    name: Annotated[
        str,
        typer.Argument(
            help="koala-c-limits | koala-c-sets | koala-c-multicluster | koala-c-multicloud | koala-c-realworld "
            "| villegas-provisioning | villegas-allocation | villegas-short-long | villegas-pairs | villegas-fcbf "
            "| villegas-forwarding | ibm-cloud | koala-cs-launcher | koala-cs-unobtrusive | koala-cs-fairness"
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
            help="Simulations at a time: 1 runs in this process, N > 1 starts N local worker processes "
            "(default: local cores); with --scheduler local, the local Dask cluster's workers.",
        ),
    ] = None,
    scheduler: Annotated[
        str | None,
        typer.Option(
            "--scheduler",
            help="Run on an existing Dask cluster: its scheduler's address, e.g. tcp://10.0.0.1:8786; "
            "'local' starts a local Dask cluster (of --workers processes) for the sweep.",
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
            help="Workload seeds per point, 0..N-1 (villegas experiments on synthetic workloads; default 10; "
            "koala-cs-unobtrusive: 3, koala-cs-fairness: 5)."
        ),
    ] = None,
    week: Annotated[int | None, typer.Option(help="Week of the trace, from 0 (villegas-fcbf; default 1).")] = None,
    weeks: Annotated[
        str | None, typer.Option(help="Weeks of the trace, from 0, e.g. '1-10' (villegas-forwarding; default 1-10).")
    ] = None,
    cancelled: Annotated[str | None, typer.Option("--cancelled", help=CANCELLED_HELP)] = None,
    env: Annotated[
        str | None,
        typer.Option(
            "--env",
            "-e",
            help="koala-c-realworld: the live environment (fs1, fs2, a private and a public cloud, TAGS-sets' sets; "
            "a TOML file with the real sites' lrm and provider tables, or a bundled name). Default: koala-c-realworld "
            "(local pilots and local clouds).",
        ),
    ] = None,
    scale: Annotated[
        str | None, typer.Option(help="koala-c-realworld: time scale, e.g. 1/120 (12 hours in 6 minutes; default).")
    ] = None,
    repeat: Annotated[
        int | None, typer.Option(help="koala-c-realworld: live runs per policy (default 3; error bars need 2).")
    ] = None,
    jobs: Annotated[
        int | None, typer.Option("--jobs", help="koala-c-realworld: only the first N jobs of the window (quick runs).")
    ] = None,
    window_start: Annotated[
        str | None,
        typer.Option(
            help="koala-c-realworld: start of the 12-hour window in the trace (e.g. 168d); default: the window of "
            "load closest to 70%. ibm-cloud: start of the reduced week (default 86.5d)."
        ),
    ] = None,
    as_json: Annotated[
        bool, typer.Option("--json", help="Print every simulation's row and the files as JSON.")
    ] = False,
    check: Annotated[
        Path | None,
        typer.Option(
            "--check",
            help="Check a results directory written before (e.g. docs/experiments/NAME) instead of writing one: "
            "simulate the lightest point of each trace again, with the same options, and compare its row with "
            "DIR/NAME.csv; exit 1 on a difference.",
        ),
    ] = None,
) -> None:
    """Run a seed's experiment and write CSV, PNG figures and a Markdown summary beside the seed's findings.

    KOALA-C (koala-c-*), the Villegas dissertation (villegas-*), the IBM report (ibm-cloud) and the
    KOALA-CS thesis (koala-cs-*, bags of tasks). Every finished simulation is
    saved in OUT/points.jsonl as it completes; after an interruption the same command with
    --resume computes only the missing ones.
    """
    from isthmus.experiments.catalog import EXPERIMENTS

    live_options: dict[str, object] = {"--env": env, "--scale": scale, "--repeat": repeat, "--jobs": jobs}
    if name != "ibm-cloud":
        live_options["--window-start"] = window_start
    if name == "koala-c-realworld":
        sweep_options = {
            "--workers": workers,
            "--scheduler": scheduler,
            "--chains": chains,
            "--limits": limits,
            "--seeds": seeds,
            "--week": week,
            "--weeks": weeks,
        }
        for option, given_value in sweep_options.items():
            if given_value is not None:
                raise fail(f"{option} does not apply to {name}: it runs live, one run at a time")
        if trace and len(trace) > 1:
            raise fail(f"{name} runs one trace (the paper's: CTC-SP2), got {len(trace)}")
        _realworld(trace[0] if trace else None, out, env, scale, repeat, jobs, window_start, cancelled, resume, force)
        return
    spec = EXPERIMENTS.get(name)
    if spec is None:
        raise fail(f"unknown experiment {name!r}; valid: {', '.join([*EXPERIMENTS, 'koala-c-realworld'])}")
    for option, live_value in live_options.items():
        if live_value is not None:
            raise fail(f"{option} does not apply to {name}: only koala-c-realworld runs live")
    run = spec.run
    local_dask = scheduler == LOCAL_SCHEDULER
    if scheduler is not None and not local_dask and workers is not None:
        raise fail(
            "--scheduler ADDRESS and --workers exclude each other: the cluster behind the scheduler has its own "
            f"workers (--workers goes with --scheduler {LOCAL_SCHEDULER} only)"
        )
    if workers is not None and workers < 1:
        raise fail(f"--workers must be at least 1, got {workers}")
    if resume and force:
        raise fail("--resume and --force exclude each other: resume reuses saved points, force discards them")
    paths: list[str] = []
    if spec.traces is None:
        if trace:
            raise fail(f"{name} runs its seed's synthetic workloads: it takes no --trace")
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
        "weeks": ("--weeks", _ints(weeks, "--weeks")),
        "start_day": ("--window-start", _start_day(window_start)),
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
    if check is not None:
        _check(
            name,
            check,
            paths,
            kwargs,
            {
                "--out": out,
                "--workers": workers,
                "--scheduler": scheduler,
                "--resume": resume or None,
                "--force": force or None,
                "--json": as_json or None,
            },
        )
        return
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
                if scheduler is None:
                    executor, info = stack.enter_context(
                        process_pool(local, notice=lambda m: console.print(f"[yellow]note:[/] {m}", highlight=False))
                    )
                else:
                    executor, info = stack.enter_context(
                        dask_executor(
                            scheduler=None if local_dask else scheduler, workers=local if local_dask else None
                        )
                    )
            except (ValueError, OSError, RuntimeError) as exc:
                raise fail(str(exc)) from None
            if scheduler is None:
                where = f"in {info.workers} local worker processes"
            else:
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
    from isthmus.cli.provenance import write_provenance
    from isthmus.cli.simulate_cmd import command_line

    result.files["provenance"] = write_provenance(
        out_dir / "provenance.json",
        command=command_line(ctx),
        command_with_defaults=command_line(ctx, defaults=True),
        options={**kwargs, "traces": [str(p) for p in paths]},
    )
    if as_json:
        files = {k: str(v) for k, v in result.files.items()}
        typer.echo(json.dumps({"experiment": name, "rows": result.rows, "files": files}, indent=1, default=str))
        return
    reused = f" ({last[0].points_reused} reused from {store.path})" if last and last[0].points_reused else ""
    console.print(f"{len(result.rows)} simulations{reused}; summary: [bold]{result.files['summary']}[/]")
    for key, path in result.files.items():
        console.print(f"  {key}: {path}")


def _realworld(
    trace: Path | None,
    out: Path | None,
    env: str | None,
    scale: str | None,
    repeat: int | None,
    jobs: int | None,
    window_start: str | None,
    cancelled: str | None,
    resume: bool,
    force: bool,
) -> None:
    """`isthmus experiment koala-c-realworld`: KOALA-C §V-D live and simulated (experiments.koala_c_realworld)."""
    from isthmus.cli.workload_cmd import parse_factor, parse_time
    from isthmus.config import ConfigError, load_environment
    from isthmus.experiments import koala_c_realworld as rw
    from isthmus.workloads import WorkloadError

    path = trace or SHARED_TRACES / rw.DEFAULT_TRACES[0]
    if not path.exists():
        raise fail(f"trace not found: {path}" + ("" if trace else " (give one with --trace)"))
    if cancelled is not None and cancelled not in CANCELLED_CHOICES:
        raise fail(f"--cancelled: expected one of {', '.join(CANCELLED_CHOICES)}, got {cancelled!r}")
    if repeat is not None and repeat < 1:
        raise fail(f"--repeat must be at least 1, got {repeat}")
    if jobs is not None and jobs < 1:
        raise fail(f"--jobs must be at least 1, got {jobs}")
    try:
        factor = parse_factor(scale, "--scale") if scale is not None else rw.DEFAULT_SCALE
        start = parse_time(window_start, "--window-start")
        environment = load_environment(env or "koala-c-realworld")
    except (WorkloadError, ConfigError, ValueError, KeyError) as exc:
        raise fail(str(exc)) from None
    if factor > 1:
        raise fail(f"--scale must be at most 1 (a time compression), got {scale}")
    console = Console()
    out_dir = out or Path("out/experiments") / rw.NAME
    # a SIGTERM ends the experiment like Ctrl-C: the live manager and its pilots are stopped
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    console.print(f"[bold]{rw.NAME}[/] on {environment.name} -> {out_dir}", highlight=False)
    try:
        result = rw.koala_c_realworld(
            environment,
            str(path),
            out_dir,
            repeat=repeat if repeat is not None else rw.DEFAULT_REPEAT,
            scale=factor,
            jobs=jobs,
            window_start=start,
            cancelled=cancelled or RUN_CANCELLED,
            resume=resume,
            force=force,
            progress=lambda m: console.print(f"  {m}", highlight=False),
        )
    except KeyboardInterrupt:
        console.print(
            f"[yellow]interrupted:[/] finished runs are saved in {out_dir / rw.RUNS_FILE}; "
            "run the same command with --resume to do only the rest",
            highlight=False,
        )
        raise typer.Exit(130) from None
    except (ValueError, OSError, TimeoutError, WorkloadError) as exc:
        raise fail(str(exc)) from None
    console.print(f"{len(result.rows)} runs; summary: [bold]{result.files['summary']}[/]")
    for key, file in result.files.items():
        console.print(f"  {key}: {file}")


def register(app: typer.Typer) -> None:
    """Add `experiment` to the main command."""
    app.command("experiment")(experiment_command)


def _check(
    name: str, directory: Path, paths: list[str], options: dict[str, object], excluded: dict[str, object]
) -> None:
    """`--check DIR`: recheck DIR/NAME.csv (isthmus.experiments.recheck) and print the verdict."""
    from isthmus.experiments.recheck import recheck

    for flag, value in excluded.items():
        if value is not None:
            raise fail(f"{flag} does not apply with --check: it writes nothing and runs its sample in this process")
    published = directory / f"{name}.csv"
    if not published.is_file():
        raise fail(f"--check: no {published} (the CSV `isthmus experiment {name} -o {directory}` writes)")
    console = Console(soft_wrap=True)  # a difference on one line, whatever the terminal's width
    console.print(
        f"[bold]{name}[/]: checking {published} on the lightest point of each trace and part", highlight=False
    )
    try:
        result = recheck(name, published, traces=paths, options=options)
    except (ValueError, OSError) as exc:
        raise fail(str(exc)) from None
    if not result.sampled:
        raise fail(f"--check: {name} has no simulation to run with these options; nothing was compared")
    for labels in result.sampled:
        console.print("  simulated " + ", ".join(f"{k}={v}" for k, v in labels), highlight=False)
    if result.unpublished:
        console.print(
            f"  not in {published.name}, not compared (written by a version with fewer columns): "
            + ", ".join(result.unpublished),
            highlight=False,
        )
    if result.differences:
        for d in result.differences:
            console.print(f"  [red]differs:[/] {d}", highlight=False)
        console.print(
            f"[red]{published} is not what this version computes[/]: regenerate it with "
            f"`isthmus experiment {name} -o {directory}` (and the options it was made with)",
            highlight=False,
        )
        raise typer.Exit(1)
    console.print(
        f"[green]agrees[/]: {len(result.sampled)} simulation(s), {result.compared} values, all equal", highlight=False
    )
