"""`isthmus simulate`: run policies side by side on one environment and workload."""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path
from typing import Annotated, cast

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TaskID, TextColumn, TimeElapsedColumn
from rich.table import Table

from isthmus.cli.specs import parse_policy
from isthmus.metrics.records import JobRecords, JobStatus
from isthmus.model.environment import Environment, policy_label
from isthmus.workloads.conversion import CANCELLED_MEANINGS, RUN_CANCELLED, Cancelled

DEFAULT_POLICIES = ("ff", "rr", "sjf", "hsdf")
CLUSTER_POLICIES = ("fcfs", "easy")

err = Console(stderr=True)


def command_line(ctx: typer.Context) -> str:
    """The command that reproduces this invocation: every option given, with its value."""
    parts = ["isthmus", *ctx.command_path.split()[1:]]
    for p in ctx.command.params:
        if p.name is None:
            continue
        source = ctx.get_parameter_source(p.name)
        if source is None or source.name == "DEFAULT":
            continue
        value = ctx.params.get(p.name)
        if p.param_type_name == "argument":
            parts.append(str(value))
            continue
        opt = max(p.opts, key=len)
        if getattr(p, "is_flag", False):
            secondary = getattr(p, "secondary_opts", [])
            if value:
                parts.append(opt)
            elif secondary:
                parts.append(max(secondary, key=len))
        elif p.multiple:
            for v in value or ():
                parts += [opt, str(v)]
        else:
            parts += [opt, str(value)]
    return shlex.join(parts)


def fail(message: str, code: int = 2) -> typer.Exit:
    """Print a one-line error and return the exit to raise."""
    err.print(f"[bold red]error:[/] {message}", highlight=False, soft_wrap=True)
    return typer.Exit(code)


def _fmt(value: object) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        if value == 0:
            return "0"
        if abs(value) >= 1e5:
            return f"{value:.3g}".replace("e+0", "e").replace("e+", "e")
        if abs(value) >= 100:
            return f"{value:,.0f}"
        return f"{value:.3g}"
    return str(value)


COLUMNS = (
    ("policy", "policy"),
    ("jobs_completed", "done"),
    ("jobs_unfinished", "left"),
    ("wait_mean", "wait s"),
    ("slowdown_mean", "sld"),
    ("bounded_slowdown_mean", "bsld"),
    ("awrt", "AWRT s"),
    ("delay_p95", "p95 s"),
    ("utilization", "util"),
    ("cost_charged", "cost $"),
    ("restarts", "kills"),
)


def comparison_table(rows: list[dict[str, object]], title: str) -> Table:
    """A Rich table of the key figures, one row per policy (sld: mean slowdown, bsld: bounded)."""
    table = Table(title=title, title_justify="left", padding=(0, 1), collapse_padding=True)
    for _, header in COLUMNS:
        table.add_column(header, justify="left" if header == "policy" else "right", no_wrap=True)
    for row in rows:
        table.add_row(*(_fmt(row.get(key)) for key, _ in COLUMNS))
    return table


def default_workload(env: Environment) -> str:
    """The embedded default: Lublin-Feitelson jobs at 90% offered load on the cluster processors.

    Jobs are at most as large as the largest cluster (KOALA-C keeps jobs of at most 32 nodes);
    what the clusters cannot take goes to the clouds. Without clusters, the clouds' maximum counts.
    """
    clusters = [s.max_processors for s in env.sites if not s.is_cloud]
    sizes = clusters or [s.max_processors for s in env.sites]
    procs = sum(sizes)
    return f"lublin:procs={procs},max_size={max(sizes)},load=0.9"


CANCELLED_HELP = (
    "Jobs cancelled before they started (SWF status 5, no processors or runtime): "
    + "; ".join(f"{k} = {v}" for k, v in CANCELLED_MEANINGS.items())
    + "."
)
_TOO_LARGE = re.compile(r"^needs \d+ processors; the largest site it may use \((.*)\) offers at most (\d+)$")
_NEEDS = re.compile(r"needs \d+ processors")


def _reason_key(text: object) -> str:
    """An engine reason without the job's own size, so equal causes group together."""
    if not text:
        return "no reason recorded"
    match = _TOO_LARGE.match(str(text))
    if match:
        return f"larger than the largest site it may use ({match.group(1)}, {match.group(2)} processors)"
    return _NEEDS.sub("needs more processors", str(text))


def rejected_jobs(records: JobRecords) -> dict[str, object]:
    """The jobs the engine rejected (REJECT events: they can never run in the environment).

    Returns {"count": n, "reasons": {reason: jobs}, "sizes": [smallest, largest] or None}.
    Reasons are the engine's texts (``EventLog.reasons``) with the job's own size left out,
    so that e.g. every job too large for the largest site counts under one reason.
    """
    mask = records.status == int(JobStatus.REJECTED)
    reasons: dict[str, int] = {}
    for text in records.reason[mask]:
        key = _reason_key(text)
        reasons[key] = reasons.get(key, 0) + 1
    sizes = records.size[mask]
    return {
        "count": int(mask.sum()),
        "reasons": reasons,
        "sizes": [int(sizes.min()), int(sizes.max())] if sizes.size else None,
    }


def _safe(label: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.=-]+", "_", label)


def simulate_command(
    ctx: typer.Context,
    env: Annotated[
        str | None, typer.Option("--env", "-e", help="Bundled environment NAME[:k=v] or a TOML/YAML file.")
    ] = None,
    workload: Annotated[
        str | None,
        typer.Option(
            "--workload",
            "-w",
            help="SWF/GWF file or a model spec (e.g. lublin:jobs=5000). Default: the Lublin-Feitelson model "
            "at 90% offered load on the environment's cluster processors.",
        ),
    ] = None,
    policy: Annotated[
        list[str] | None,
        typer.Option("--policy", "-p", help="Allocation policy NAME[:k=v,...]; repeat to compare."),
    ] = None,
    provisioning: Annotated[
        str | None, typer.Option(help="Provisioning policy NAME[:k=v,...] (default: the environment's).")
    ] = None,
    max_size: Annotated[
        int | None,
        typer.Option("--max-size", help="Drop jobs larger than N processors (KOALA-C keeps <= 32)."),
    ] = None,
    jobs: Annotated[int | None, typer.Option("--jobs", "-n", help="Use only the first N jobs.")] = None,
    seed: Annotated[int, typer.Option(help="Seed for generated workloads.")] = 1,
    out: Annotated[
        Path, typer.Option("--out", "-o", help="Directory for per-job records, summaries and plots.")
    ] = Path("out/simulate"),
    cluster: Annotated[
        int | None,
        typer.Option("--cluster", help="Shorthand: one cluster of P processors (event-triggered rounds)."),
    ] = None,
    round_interval: Annotated[
        str | None, typer.Option("--round-interval", help="Seconds between scheduling rounds, or 'event'.")
    ] = None,
    rounds: Annotated[
        str,
        typer.Option(
            "--rounds",
            help="Same-instant rule: 'batch' (completions, then arrivals, then one round) or 'per-event' "
            "(arrivals first, a round after each event, as simulators that schedule per event; needs event "
            "rounds).",
        ),
    ] = "batch",
    budget: Annotated[
        float | None, typer.Option("--budget", help="Cap on the charged cost of cloud leases ($).", min=0)
    ] = None,
    walltime: Annotated[
        bool,
        typer.Option(
            "--kill-at-walltime/--no-kill-at-walltime",
            help="Kill runs at their requested runtime (they end TIMEOUT), as the live manager does.",
        ),
    ] = False,
    plots: Annotated[bool, typer.Option("--plots/--no-plots", help="Write PNG plots.")] = True,
    skip_invalid: Annotated[
        bool, typer.Option("--skip-invalid", help="Skip malformed workload lines (counted and reported).")
    ] = False,
    cancelled: Annotated[str, typer.Option("--cancelled", help=CANCELLED_HELP)] = RUN_CANCELLED,
    as_json: Annotated[bool, typer.Option("--json", help="Print the comparison as JSON.")] = False,
) -> None:
    """Simulate allocation policies side by side and compare wait, slowdown, utilization and cost."""
    from isthmus.config import ConfigError, load_environment, single_cluster
    from isthmus.metrics.plots import plot_all
    from isthmus.metrics.run import compare_table, compute_run_metrics, write_run
    from isthmus.policies.registry import PolicyError, check_policy
    from isthmus.sim.runner import simulate
    from isthmus.workloads import SwfConversion, WorkloadError, cancelled_report, describe_cancelled, resolve_workload

    if cluster is not None and env is not None:
        raise fail("give either --env or --cluster, not both")
    try:
        environment: Environment = (
            single_cluster(cluster) if cluster is not None else load_environment(env or "koala-c-multicloud")
        )
    except (ConfigError, ValueError, KeyError) as exc:
        raise fail(str(exc)) from None
    names = policy or list(CLUSTER_POLICIES if cluster is not None else DEFAULT_POLICIES)
    try:
        choices = [parse_policy(p) for p in names]
        prov = parse_policy(provisioning) if provisioning else environment.provisioning
        for c in choices:
            check_policy("allocation", c.name, c.params)
        check_policy("provisioning", prov.name, prov.params)
    except (PolicyError, ValueError) as exc:
        raise fail(str(exc)) from None
    interval: float | object | None
    if round_interval is None:
        interval = environment.round_interval
    elif round_interval == "event":
        interval = None
    else:
        try:
            interval = float(round_interval)
        except ValueError:
            raise fail(f"--round-interval: expected seconds or 'event', got {round_interval!r}") from None
    if rounds not in ("batch", "per-event"):
        raise fail(f"--rounds: expected batch or per-event, got {rounds!r}")
    if rounds == "per-event" and interval:
        raise fail("--rounds per-event needs event-triggered rounds: add --round-interval event")
    if workload is None:
        workload = default_workload(environment)
    try:
        conversion = SwfConversion(cancelled=cast(Cancelled, cancelled))
    except ValueError as exc:
        raise fail(f"--cancelled: {exc}") from None
    try:
        wl = resolve_workload(workload, seed=seed, skip_invalid=skip_invalid, conversion=conversion)
    except (WorkloadError, ValueError, OSError) as exc:
        raise fail(str(exc)) from None
    job_list = wl.jobs
    dropped_max_size = 0
    if max_size is not None:
        job_list = [j for j in job_list if j.size <= max_size]
        dropped_max_size = len(wl.jobs) - len(job_list)
    if jobs is not None:
        job_list = job_list[:jobs]
    cancelled_info = cancelled_report(wl.conversion)
    preparation: dict[str, object] = {
        "jobs_read": len(wl.jobs),
        "cancelled_before_start": cancelled_info,
        "dropped_max_size": dropped_max_size,
        "max_size": max_size,
        "first": jobs,
        "skipped_invalid_lines": wl.skipped.count,
    }
    if not job_list:
        raise fail(f"workload {workload!r} has no jobs left after filtering")

    console = Console(stderr=as_json)
    if not console.is_terminal:
        console.width = max(console.width, 110)  # logs and pipes: do not truncate the table
    console.print(
        f"[bold]isthmus simulate[/]: {len(job_list):,} jobs of [cyan]{workload}[/] on [cyan]{environment.name}[/] "
        f"({len(environment.sites)} sites), provisioning [cyan]{policy_label(prov)}[/]",
        highlight=False,
    )
    console.print(describe_cancelled(cancelled_info), highlight=False, markup=False)
    if dropped_max_size:
        console.print(f"--max-size {max_size}: dropped {dropped_max_size:,} larger jobs", highlight=False)
    runs = {}
    results = {}
    with Progress(
        TextColumn("{task.description:<22}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=console,
        transient=False,
    ) as progress:
        for choice in choices:
            label = policy_label(choice)
            task = progress.add_task(label, total=len(job_list))

            def tick(done: int, task: TaskID = task) -> None:
                progress.update(task, completed=done)

            try:
                result = simulate(
                    environment,
                    job_list,
                    choice,
                    prov,
                    round_interval=interval,
                    label=label,
                    budget=budget,
                    enforce_walltime=walltime,
                    progress=tick,
                    rounds=rounds,
                )
            except (PolicyError, ValueError) as exc:
                raise fail(f"{label}: {exc}") from None
            results[label] = result
            runs[label] = compute_run_metrics(result.log, result.jobs, environment, result.end_time)
    rejected = {label: rejected_jobs(metrics.records) for label, metrics in runs.items()}
    out.mkdir(parents=True, exist_ok=True)
    written = {}
    for label, metrics in runs.items():
        metrics.summary["workload_preparation"] = preparation
        metrics.summary["rejected"] = rejected[label]
        written[label] = {k: str(v) for k, v in write_run(metrics, out, _safe(label)).items()}
    plot_paths = {k: str(v) for k, v in plot_all(runs, out).items()} if plots else {}
    rows = compare_table(runs)
    for row in rows:
        r = results[str(row["policy"])]
        row["simulated_seconds_per_run"] = round(r.wall_seconds, 3)
        row["rejected"] = rejected[str(row["policy"])]
        if r.budgets:
            row["budgets"] = r.budgets
    report = {
        "environment": environment.name,
        "workload": wl.name,
        "workload_spec": workload,
        "command": command_line(ctx),
        "jobs": len(job_list),
        "workload_preparation": preparation,
        "provisioning": policy_label(prov),
        "policies": rows,
        "files": written,
        "plots": plot_paths,
    }
    (out / "comparison.json").write_text(json.dumps(report, indent=2, default=str) + "\n")
    if as_json:
        typer.echo(json.dumps(report, indent=2, default=str))
        return
    console.print(comparison_table(rows, f"{wl.name} on {environment.name}"))
    for label, info in rejected.items():
        count = info["count"]
        if not count:
            continue
        reasons = info["reasons"]
        assert isinstance(reasons, dict) and isinstance(count, int)
        why = "; ".join(f"{n:,}: {text}" for text, n in reasons.items())
        console.print(
            f"[yellow]{label}: {count:,} of {len(job_list):,} jobs rejected, never run[/] ({why})",
            highlight=False,
        )
    for label, r in results.items():
        for b in r.budgets:
            users = f" users {','.join(b['users'])}" if b["users"] else ""  # type: ignore[arg-type]
            charged = b["charged"]
            assert isinstance(charged, dict)
            worst = max(charged.values(), default=0.0)
            per = f" per {b['period']}" if b["period"] else ""
            console.print(
                f"{label}: budget {b['name']}{users} (${b['limit']:.2f}{per},"
                f" {b['on_limit']}): spent ${sum(charged.values()):.4f} (most in a period ${worst:.4f}),"
                f" {b['refused_leases']} VM leases refused, {b['released_vms']} VMs released at a boundary",
                highlight=False,
                markup=False,
            )
        if r.unfinished:
            first = next(iter(r.unfinished.items()))
            console.print(f"[yellow]{label}: {len(r.unfinished)} jobs unfinished[/] (e.g. job {first[0]}: {first[1]})")
    console.print("sld: mean slowdown; bsld: mean bounded slowdown (10 s); p95: 95th percentile of delay")
    console.print(f"Jobs {describe_cancelled(cancelled_info)}", highlight=False, markup=False)
    console.print(f"Per-job records, summaries and plots in [bold]{out}[/]")


def register(app: typer.Typer) -> None:
    """Add `simulate` to the main command."""
    app.command("simulate")(simulate_command)
