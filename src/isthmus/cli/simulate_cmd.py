"""`isthmus simulate`: run policies side by side on one environment and workload."""

from __future__ import annotations

import gc
import json
import re
import shlex
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, NamedTuple, cast

import typer
from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TaskID, TextColumn, TimeElapsedColumn
from rich.table import Table

from isthmus.cli import bounds
from isthmus.cli.simulate_repeat import safe_name, write_report
from isthmus.cli.specs import parse_policy
from isthmus.metrics.records import JobColumns, JobRecords, JobStatus
from isthmus.metrics.style import FIGURE_FORMAT_HELP, figure_formats
from isthmus.model.environment import Environment, PolicyChoice, policy_label
from isthmus.model.job import Job
from isthmus.model.jobtable import JobTable
from isthmus.workloads.conversion import CANCELLED_MEANINGS, RUN_CANCELLED, Cancelled
from isthmus.workloads.seeds import DEFAULT_SEED

DEFAULT_POLICIES = ("ff", "rr", "sjf", "hsdf")
CLUSTER_POLICIES = ("fcfs", "easy")

if TYPE_CHECKING:
    from isthmus.engine.bags import BagSettings
    from isthmus.metrics.run import WrittenRun
    from isthmus.sim.runner import SimulationResult

err = Console(stderr=True)


def command_line(ctx: typer.Context, *, defaults: bool = False, resolved: dict[str, object] | None = None) -> str:
    """The command that reproduces this invocation: every option given, with its value; with
    `defaults`, every option that has a value, defaults spelled out (so that the command means
    the same under a later version whose defaults changed), an option left unset taking its
    value from `resolved` (what the run resolved it to: the environment, the workload, ...)."""
    parts = ["isthmus", *ctx.command_path.split()[1:]]
    for p in ctx.command.params:
        if p.name is None:
            continue
        source = ctx.get_parameter_source(p.name)
        given = source is not None and source.name != "DEFAULT"
        value = ctx.params.get(p.name)
        unset = value is None or (isinstance(value, list | tuple) and not value)
        if defaults and not given and unset and resolved:
            value = resolved.get(p.name)
            unset = value is None
        if not given and not (defaults and not unset and p.name != "as_json"):
            continue
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


#: How a column of the comparison table shows its numbers: one format for every row, so that
#: figures of one column line up and compare at a glance (no 3.54e5 beside 6,890).
COLUMN_FORMATS: dict[str, str] = {
    "count": "{:,.0f}",  # jobs, kills
    "seconds": "{:,.0f}",  # waits, response times, delays, makespans
    "ratio": "{:,.2f}",  # slowdowns
    "fraction": "{:.3f}",  # utilization
    "dollars": "{:,.2f}",
}

COLUMNS = (
    ("policy", "policy", ""),
    ("jobs_completed", "done", "count"),
    ("jobs_unfinished", "left", "count"),
    ("wait_mean", "wait s", "seconds"),
    ("slowdown_mean", "sld", "ratio"),
    ("bounded_slowdown_mean", "bsld", "ratio"),
    ("awrt", "AWRT s", "seconds"),
    ("delay_p95", "p95 s", "seconds"),
    ("utilization", "util", "fraction"),
    ("cost_charged", "cost $", "dollars"),
    ("restarts", "kills", "count"),
)


def column_value(value: object, kind: str) -> str:
    """`value` in its column's format (`COLUMN_FORMATS`); '-' when unknown; text as it is."""
    if value is None:
        return "-"
    if kind and isinstance(value, int | float) and not isinstance(value, bool):
        return COLUMN_FORMATS[kind].format(value)
    return str(value)


def comparison_table(rows: list[dict[str, object]], title: str) -> Table:
    """A Rich table of the key figures, one row per policy (sld: mean slowdown, bsld: bounded).

    A row of repeated runs holds, for a figure, {"mean", "ci95", ...} (`isthmus.metrics.stats.interval`):
    its cell shows the mean ± the half-width of the 95% confidence interval."""
    table = Table(title=title, title_justify="left", padding=(0, 1), collapse_padding=True)
    for _, header, _kind in COLUMNS:
        table.add_column(header, justify="left" if header == "policy" else "right", no_wrap=True)
    for row in rows:
        cells = []
        for key, _, kind in COLUMNS:
            value = row.get(key)
            if isinstance(value, dict):
                half = value.get("ci95")
                text = column_value(value.get("mean"), kind)
                cells.append(text if half is None else f"{text} ± {column_value(half, kind)}")
            else:
                cells.append(column_value(value, kind))
        # a label such as sjf[predictor=requested] is text, not Rich markup
        table.add_row(*(escape(c) for c in cells))
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


class RejectedJobs:
    """The jobs the engine rejected (REJECT events: they can never run in the environment),
    counted over records that may come in chunks (`add` each, in job order)."""

    def __init__(self) -> None:
        self.count = 0
        self.reasons: dict[str, int] = {}
        self.sizes: list[int] | None = None

    def add(self, records: JobRecords) -> None:
        """Count the rejected jobs of `records`."""
        mask = records.status == int(JobStatus.REJECTED)
        for text in records.reason[mask]:
            key = _reason_key(text)
            self.reasons[key] = self.reasons.get(key, 0) + 1
        sizes = records.size[mask]
        self.count += int(mask.sum())
        if sizes.size:
            lo, hi = int(sizes.min()), int(sizes.max())
            self.sizes = [lo, hi] if self.sizes is None else [min(self.sizes[0], lo), max(self.sizes[1], hi)]

    def report(self) -> dict[str, object]:
        """{"count": n, "reasons": {reason: jobs}, "sizes": [smallest, largest] or None}.

        Reasons are the engine's texts (``EventLog.reasons``) with the job's own size left out,
        so that e.g. every job too large for the largest site counts under one reason.
        """
        return {"count": self.count, "reasons": dict(self.reasons), "sizes": self.sizes}


class RunOutcome(NamedTuple):
    """What the report needs of a simulation besides its metrics."""

    wall_seconds: float
    budgets: list[dict[str, object]]
    unfinished: dict[int, str]


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
        typer.Option("--max-size", help="Drop jobs larger than N processors (KOALA-C keeps <= 32).", min=1),
    ] = None,
    jobs: Annotated[int | None, typer.Option("--jobs", "-n", help="Use only the first N jobs.", min=1)] = None,
    seed: Annotated[int, typer.Option(help="Seed for generated workloads.", min=0)] = DEFAULT_SEED,
    out: Annotated[
        Path, typer.Option("--out", "-o", help="Directory for per-job records, summaries and plots.")
    ] = Path("out/simulate"),
    cluster: Annotated[
        int | None,
        typer.Option("--cluster", help="Shorthand: one cluster of P processors (event-triggered rounds).", min=1),
    ] = None,
    round_interval: Annotated[
        str | None,
        typer.Option(
            "--round-interval", help="Seconds between scheduling rounds, or 'event'.", callback=bounds.round_interval
        ),
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
    vm: Annotated[
        list[str] | None,
        typer.Option(
            "--vm",
            help="VM requirements for jobs, '[user=U:]key=value,...' (keys vm_type, image, cpu_arch, cores, "
            "memory_mb, storage_gb, network); repeatable, the last matching rule wins. Jobs no cloud can match "
            "are rejected with the reason.",
        ),
    ] = None,
    fairshare: Annotated[
        str | None,
        typer.Option(
            "--fairshare",
            help="Fair-share policy. With --bag/--bags: the one growing and shrinking the bags, 'sep' (default) or "
            "'gep'. Otherwise: how cloud VMs are split among users, e.g. 'vm-share' or 'vm-share:mode=kill' "
            "(default: the environment's).",
        ),
    ] = None,
    plots: Annotated[bool, typer.Option("--plots/--no-plots", help="Write the figures.")] = True,
    figure_format: Annotated[
        str, typer.Option("--figure-format", help=FIGURE_FORMAT_HELP, callback=figure_formats)
    ] = "png,pdf",
    skip_invalid: Annotated[
        bool, typer.Option("--skip-invalid", help="Skip malformed workload lines (counted and reported).")
    ] = False,
    cancelled: Annotated[str, typer.Option("--cancelled", help=CANCELLED_HELP)] = RUN_CANCELLED,
    as_json: Annotated[bool, typer.Option("--json", help="Print the comparison as JSON.")] = False,
    bag: Annotated[
        list[str] | None,
        typer.Option(
            "--bag",
            help="A bag of tasks beside the workload: 'tasks=N,runtime=S[,user=U][,submit=T][,id=I]' (repeatable). "
            "Each policy then also runs with the bags; the report gives each bag's makespan and the delay added "
            "to the other jobs.",
        ),
    ] = None,
    bags_file: Annotated[
        list[Path] | None, typer.Option("--bags", help="A file of bag specs, one a line ('#' comments).")
    ] = None,
    preemption_time: Annotated[
        float | None,
        typer.Option(
            "--preemption-time", help="Seconds from a bag's shrink until the processor is free (default 10).", min=0
        ),
    ] = None,
    pull_latency: Annotated[
        float | None,
        typer.Option("--pull-latency", help="Seconds for a bag's processor to get its next task (default 0).", min=0),
    ] = None,
    repeat: Annotated[
        int,
        typer.Option(
            "--repeat",
            help="Run every policy on N workloads (seeds S, S+1, ... from --seed): a model drawn again with each "
            "seed, a trace resampled (bootstrap of its weekly blocks); report each figure's mean and 95% "
            "confidence interval.",
            min=1,
        ),
    ] = 1,
    seeds: Annotated[
        str | None,
        typer.Option("--seeds", help="Repeat with these seeds, e.g. 1,2,3 (instead of --seed and --repeat)."),
    ] = None,
) -> None:
    """Simulate allocation policies side by side and compare wait, slowdown, utilization and cost."""
    from isthmus.cli.memory import end_startup_gc, fix_mmap_threshold, release_free_memory
    from isthmus.cli.provenance import run_provenance, workload_statistics

    fix_mmap_threshold()  # large NumPy columns go back to the system when freed
    from isthmus.config import ConfigError, single_cluster
    from isthmus.metrics.run import compare_table, stream_run
    from isthmus.metrics.summary import write_summary
    from isthmus.policies.registry import PolicyError, check_policy
    from isthmus.sim.runner import simulate
    from isthmus.workloads import SwfConversion, WorkloadError, cancelled_report, describe_cancelled, resolve_workload

    end_startup_gc()  # the run's modules are loaded: the cyclic collector skips them from now on
    if cluster is not None and env is not None:
        raise fail("give either --env or --cluster, not both")
    try:
        if cluster is not None:
            environment: Environment = single_cluster(cluster)
        else:
            from isthmus.config import load_environment  # files and bundled names: the schema, YAML

            environment = load_environment(env or "koala-c-multicloud")
    except (ConfigError, ValueError, KeyError) as exc:
        raise fail(str(exc)) from None
    names = policy or list(CLUSTER_POLICIES if cluster is not None else DEFAULT_POLICIES)
    try:
        choices = [parse_policy(p) for p in names]
        prov = parse_policy(provisioning) if provisioning else environment.provisioning
        for c in choices:
            check_policy("allocation", c.name, c.params)
        check_policy("provisioning", prov.name, prov.params)
        given = parse_policy(fairshare) if fairshare else None
        if given is not None:
            check_policy("fairshare", given.name, given.params)
        # a bags policy given here grows the bags (see _bag_options); any other is the run's own
        fair = given if given is not None and not _shares_bags(given) else environment.fairshare
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
    if seeds is not None or repeat > 1:
        _repeated(
            ctx,
            environment,
            workload,
            choices,
            prov,
            fair,
            conversion,
            seeds,
            repeat,
            seed,
            out=out,
            plots=plots,
            figure_format=figure_format,
            as_json=as_json,
            max_size=max_size,
            first=jobs,
            vm=tuple(vm or ()),
            skip_invalid=skip_invalid,
            bags_given=bool(bag or bags_file),
            interval=interval,
            run=lambda jobs, choice, label: simulate(
                environment,
                jobs,
                choice,
                prov,
                round_interval=interval,
                label=label,
                budget=budget,
                enforce_walltime=walltime,
                rounds=rounds,
                fairshare=fair,
            ),
        )
        return
    try:
        # a trace's jobs stay columns (a JobTable): each Job is built when it arrives
        wl = resolve_workload(workload, seed=seed, skip_invalid=skip_invalid, conversion=conversion, lazy=True)
    except (WorkloadError, ValueError, OSError) as exc:
        raise fail(str(exc)) from None
    job_list: Sequence[Job] = wl.jobs
    dropped_max_size = 0
    if max_size is not None:
        if isinstance(job_list, JobTable):
            job_list = job_list.select(job_list.cols.size <= max_size)
        else:
            job_list = [j for j in job_list if j.size <= max_size]
        dropped_max_size = len(wl.jobs) - len(job_list)
    if jobs is not None:
        job_list = job_list[:jobs]
    if vm:
        from isthmus.workloads.vm_requirements import apply_vm_rules, parse_vm_rule

        try:
            job_list = apply_vm_rules(job_list, [parse_vm_rule(text) for text in vm])
        except ValueError as exc:
            raise fail(f"--vm: {exc}") from None
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
    workload_name, n_jobs = wl.name, len(job_list)
    workload_stats = workload_statistics(job_list)
    resolved = _resolved(environment, cluster, workload, choices, prov, interval)
    # what the records need of the jobs, shared by every run; a trace's jobs are a JobTable whose
    # Job objects exist from arrival to end only (a generated workload's list of Job objects goes
    # before the last run's metrics)
    columns = JobColumns.from_table(job_list) if isinstance(job_list, JobTable) else JobColumns.from_jobs(job_list)
    del wl
    release_free_memory()  # what reading the trace used
    bag_list, share, settings = _bag_options(
        bag, bags_file, fairshare, preemption_time, pull_latency, columns.ids.tolist() if bag or bags_file else []
    )

    console = Console(stderr=as_json)
    if not console.is_terminal:
        console.width = max(console.width, 110)  # logs and pipes: do not truncate the table
    console.print(
        f"[bold]isthmus simulate[/]: {n_jobs:,} jobs of [cyan]{workload}[/] on [cyan]{environment.name}[/] "
        f"({len(environment.sites)} sites), provisioning [cyan]{policy_label(prov)}[/]",
        highlight=False,
    )
    console.print(describe_cancelled(cancelled_info), highlight=False, markup=False)
    if dropped_max_size:
        console.print(f"--max-size {max_size}: dropped {dropped_max_size:,} larger jobs", highlight=False)
    if bag_list:
        assert share is not None and settings is not None
        console.print(
            f"with {len(bag_list)} bag(s) of tasks ({sum(b.tasks for b in bag_list):,} tasks), fair share "
            f"[cyan]{policy_label(share)}[/], preemption time {settings.preemption_time:g} s, "
            f"pull latency {settings.pull_latency:g} s",
            highlight=False,
        )
    runs: dict[str, WrittenRun] = {}
    rejected: dict[str, dict[str, object]] = {}
    outcomes: dict[str, RunOutcome] = {}
    results: dict[str, SimulationResult] = {}  # runs the bags' report reads (with bags only)
    runs_left = len(choices) * (2 if bag_list else 1)
    bag_runs: dict[str, tuple[str, str]] = {}
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
            task = progress.add_task(label, total=n_jobs + len(bag_list))

            def tick(done: int, task: TaskID = task) -> None:
                progress.update(task, completed=done)

            variants: list[tuple[str, list[Job]]] = [(label, [])]
            if bag_list:
                variants.append((f"{label} + bags", bag_list))
                bag_runs[f"{label} + bags"] = (label, f"{label} + bags")
            for name, with_bags in variants:
                try:
                    result = simulate(
                        environment,
                        job_list,
                        choice,
                        prov,
                        round_interval=interval,
                        label=name,
                        budget=budget,
                        enforce_walltime=walltime,
                        progress=tick,
                        rounds=rounds,
                        bags=with_bags,
                        fairshare=share if with_bags else fair,
                        bag_settings=settings if with_bags else None,
                    )
                except (PolicyError, ValueError) as exc:
                    raise fail(f"{name}: {exc}") from None
                outcomes[name] = RunOutcome(result.wall_seconds, result.budgets, result.unfinished)
                if bag_list:
                    results[name] = result
                runs_left -= 1
                log, end_time = result.log, result.end_time
                if not runs_left and not bag_list:  # the last run: no Job object is needed any more
                    del result
                    job_list = []
                    # the engine's reference cycles (its arrival feed) still hold the trace's
                    # table: 18 MB at 300k jobs that would stay to the end, plots included
                    gc.collect()
                release_free_memory()  # what the engine used besides its log
                # the run is over: its log is read in place, not copied; the records go to
                # their files as they are computed (never the whole run's records in memory)
                counter = RejectedJobs()
                base = out / safe_name(name)
                runs[name] = stream_run(
                    log,
                    columns,
                    environment,
                    end_time,
                    f"{base}.jobs.csv",
                    f"{base}.jobs.parquet",
                    series=plots,
                    observe=counter.add,
                    consume_log=not bag_list,  # with bags, the bags' report reads the logs
                    between=release_free_memory,
                )
                rejected[name] = counter.report()
                del log
                release_free_memory()  # the log of a finished run, the metrics' temporaries
    del columns  # (every run's records are written: the plots do not need the jobs)
    release_free_memory()
    written = {}
    for label, metrics in runs.items():
        metrics.summary["workload_preparation"] = preparation
        metrics.summary["rejected"] = rejected[label]
        summary_path = write_summary(metrics.summary, out / f"{safe_name(label)}.summary.json")
        written[label] = {k: str(v) for k, v in {**metrics.files, "summary": summary_path}.items()}
    plot_paths: dict[str, str] = {}
    if plots:  # matplotlib is imported only for them
        from isthmus.metrics.plots import plot_all

        drawn = plot_all(runs, out, formats=figure_format, workload=workload_name, environment=environment)
        plot_paths = {k: str(v) for k, v in drawn.items()}
    rows = compare_table(runs)
    for row in rows:
        r = outcomes[str(row["policy"])]
        row["simulated_seconds_per_run"] = round(r.wall_seconds, 3)
        row["rejected"] = rejected[str(row["policy"])]
        if r.budgets:
            row["budgets"] = r.budgets
    bag_report = {
        name: bag_summary(results[without], results[name], settings) for name, (without, _) in bag_runs.items()
    }
    report = {
        "environment": environment.name,
        "workload": workload_name,
        "workload_spec": workload,
        **run_provenance(
            command=command_line(ctx),
            command_with_defaults=command_line(ctx, defaults=True, resolved=resolved),
            seed=seed,
            env=environment,
            workload_statistics=workload_stats,
        ),
        "jobs": n_jobs,
        "workload_preparation": preparation,
        "provisioning": policy_label(prov),
        "fairshare": policy_label(fair) if fair is not None else None,
        "policies": rows,
        "files": written,
        "plots": plot_paths,
    }
    if bag_report:
        report["bags"] = bag_report
    write_report(out / "comparison.json", report)
    if as_json:
        typer.echo(json.dumps(report, indent=2, default=str))
        return
    console.print(comparison_table(rows, f"{workload_name} on {environment.name}"))
    for label, info in rejected.items():
        count = info["count"]
        if not count:
            continue
        reasons = info["reasons"]
        assert isinstance(reasons, dict) and isinstance(count, int)
        why = "; ".join(f"{n:,}: {text}" for text, n in reasons.items())
        console.print(
            f"[yellow]{label}: {count:,} of {n_jobs:,} jobs rejected, never run[/] ({why})",
            highlight=False,
        )
    for label, metrics in runs.items():
        hours = metrics.summary.get("vm_hours_by_user")
        if hours:  # VMs serving one user each (vm-share)
            spread = metrics.summary.get("vm_share_spread", {})
            users = ", ".join(f"{u} {h:.2f}" for u, h in hours.items())
            shares = ", ".join(f"{site} mean {v['mean']:.2f} max {v['max']:g}" for site, v in spread.items())
            console.print(f"{label}: VM-hours per user: {users}; spread of shares (VMs): {shares}", highlight=False)
    for label, o in outcomes.items():
        for b in o.budgets:
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
        if o.unfinished:
            first = next(iter(o.unfinished.items()))
            console.print(f"[yellow]{label}: {len(o.unfinished)} jobs unfinished[/] (e.g. job {first[0]}: {first[1]})")
    for name, info in bag_report.items():
        print_bags(console, name, info)
    console.print("sld: mean slowdown; bsld: mean bounded slowdown (10 s); p95: 95th percentile of delay")
    console.print(f"Jobs {describe_cancelled(cancelled_info)}", highlight=False, markup=False)
    console.print(f"Per-job records, summaries and plots in [bold]{out}[/]")


def _resolved(
    environment: Environment,
    cluster: int | None,
    workload: str,
    choices: list[PolicyChoice],
    prov: PolicyChoice,
    interval: object,
) -> dict[str, object]:
    """The values options left unset resolved to, for the command with defaults spelled out."""
    out: dict[str, object] = {"workload": workload, "provisioning": _spec(prov), "policy": [_spec(c) for c in choices]}
    if cluster is None:
        out["env"] = environment.name
    out["round_interval"] = "event" if interval is None else f"{float(interval):g}"  # type: ignore[arg-type]
    return out


def _spec(choice: PolicyChoice) -> str:
    """A policy as the command line writes it: NAME[:k=v,...]."""
    params = ",".join(
        f"{k}={';'.join(map(str, v)) if isinstance(v, list | tuple) else v}" for k, v in choice.params.items()
    )
    return f"{choice.name}:{params}" if params else choice.name


def _repeated(
    ctx: typer.Context,
    environment: Environment,
    workload: str,
    choices: list[PolicyChoice],
    prov: PolicyChoice,
    fair: PolicyChoice | None,
    conversion: object,
    seeds: str | None,
    repeat: int,
    seed: int,
    *,
    out: Path,
    plots: bool,
    figure_format: str,
    as_json: bool,
    max_size: int | None,
    first: int | None,
    vm: tuple[str, ...],
    skip_invalid: bool,
    bags_given: bool,
    interval: object,
    run: Callable[[list[Job], PolicyChoice, str], Any],
) -> None:
    """`simulate --repeat N` / `--seeds`: every policy on each drawn workload; the table, JSON and
    comparison.json give each figure's mean and 95% confidence interval (`simulate_repeat`)."""
    from isthmus.cli.provenance import run_provenance, workload_statistics
    from isthmus.cli.simulate_repeat import (
        RepeatPlan,
        parse_seeds,
        plot_intervals,
        run_repeated,
        workload_title,
        workloads,
    )
    from isthmus.policies.registry import PolicyError
    from isthmus.workloads import WorkloadError

    if bags_given:
        raise fail("--repeat and --seeds do not combine with bags of tasks (--bag, --bags)")
    try:
        chosen = parse_seeds(seeds) if seeds is not None else tuple(range(seed, seed + repeat))
    except ValueError as exc:
        raise fail(str(exc)) from None
    if seeds is not None and repeat > 1 and repeat != len(chosen):
        raise fail(f"--repeat {repeat} and --seeds ({len(chosen)} seeds) disagree: give one of them")
    plan = RepeatPlan(workload, chosen, max_size, first, vm, skip_invalid)
    resolved = _resolved(environment, ctx.params.get("cluster"), workload, choices, prov, interval)
    try:
        how, drawn = workloads(plan, conversion)
    except (WorkloadError, ValueError, OSError) as exc:
        raise fail(str(exc)) from None
    for s, jobs in drawn:
        if not jobs:
            raise fail(f"workload {workload!r} with seed {s} has no jobs left after filtering")
    console = Console(stderr=as_json)
    if not console.is_terminal:
        console.width = max(console.width, 200)  # mean ± CI cells are wide: do not truncate them
    console.print(
        f"[bold]isthmus simulate[/]: {len(chosen)} repetitions ({how}; seeds {', '.join(map(str, chosen))}) of "
        f"[cyan]{escape(workload)}[/] on [cyan]{environment.name}[/], provisioning [cyan]{policy_label(prov)}[/]",
        highlight=False,
    )
    try:
        rows, repetitions = run_repeated(
            environment,
            drawn,
            choices,
            out,
            plots=plots,
            simulate_one=run,
            formats=figure_format,
            workload=workload_title(workload),
        )
    except (PolicyError, ValueError) as exc:
        raise fail(str(exc)) from None
    figures = (
        plot_intervals(
            environment, rows, out, runs=len(chosen), formats=figure_format, workload=workload_title(workload)
        )
        if plots
        else {}
    )
    report = {
        "environment": environment.name,
        "workload_spec": workload,
        **run_provenance(
            command=command_line(ctx),
            command_with_defaults=command_line(ctx, defaults=True, resolved=resolved),
            seed=seed,
            env=environment,
            workload_statistics=workload_statistics(drawn[0][1]),
        ),
        "provisioning": policy_label(prov),
        "fairshare": policy_label(fair) if fair is not None else None,
        "repeat": {"count": len(chosen), "seeds": list(chosen), "resampling": how, "interval": "95% Student's t"},
        "policies": rows,
        "repetitions": repetitions,
        "plots": {kind: str(path) for kind, path in figures.items()},
    }
    write_report(out / "comparison.json", report)
    if as_json:
        typer.echo(json.dumps(report, indent=2, default=str))
        return
    console.print(comparison_table(rows, f"{workload} on {environment.name}: mean ± 95% CI over {len(chosen)} runs"))
    console.print("sld: mean slowdown; bsld: mean bounded slowdown (10 s); p95: 95th percentile of delay")
    if figures:
        names = ", ".join(p.name for p in figures.values())
        console.print(f"Figures (mean ± 95% CI per policy) in [bold]{out}[/]: {names}")
    console.print(f"Per-repetition records, summaries and plots in [bold]{out}[/]/seed-S")


def _shares_bags(choice: PolicyChoice) -> bool:
    """Whether fair-share policy `choice` grows and shrinks bags of tasks (else it splits VMs)."""
    from isthmus.policies.registry import create

    return bool(create("fairshare", choice.name, choice.params).shares == "bags")


def _bag_options(
    specs: list[str] | None,
    files: list[Path] | None,
    fairshare: str | None,
    preemption_time: float | None,
    pull_latency: float | None,
    job_ids: list[int],
) -> tuple[list[Job], PolicyChoice | None, BagSettings | None]:
    """The bags, fair-share policy and launcher settings of the options (exit 2 naming the bad
    option or field; an option for bags given without a bag is an error, not ignored)."""
    from isthmus.engine.bags import BagSettings
    from isthmus.policies.registry import PolicyError, check_policy
    from isthmus.workloads import WorkloadError
    from isthmus.workloads.bags import build_bags

    try:
        bags = build_bags(specs or [], files or [], job_ids)
    except WorkloadError as exc:
        raise fail(str(exc)) from None
    try:
        share = parse_policy(fairshare or "sep")
        check_policy("fairshare", share.name, share.params)
    except (PolicyError, ValueError) as exc:
        raise fail(f"--fairshare: {exc}") from None
    if not bags:
        for given, option in (
            (fairshare if _shares_bags(share) else None, "--fairshare"),
            (preemption_time, "--preemption-time"),
            (pull_latency, "--pull-latency"),
        ):
            if given is not None:
                raise fail(f"{option} applies to bags of tasks: add --bag or --bags")
        return [], None, None
    if not _shares_bags(share):
        from isthmus.policies.registry import with_capability

        growing = " or ".join(repr(n) for n in with_capability("fairshare", "shares", "bags"))
        raise fail(f"--fairshare: {share.name!r} does not grow bags of tasks: with bags give {growing}")
    defaults = BagSettings()
    settings = BagSettings(
        defaults.preemption_time if preemption_time is None else preemption_time,
        defaults.pull_latency if pull_latency is None else pull_latency,
    )
    return bags, share, settings


def bag_summary(without: SimulationResult, with_bags: SimulationResult, settings: BagSettings | None) -> dict[str, Any]:
    """What the bags did in run `with_bags` (from its log) and the delay they added to the rigid
    jobs compared with run `without` (the same jobs and policies without the bags)."""
    from isthmus.metrics.bags import bag_records, rigid_delay, shrink_waits

    records = bag_records(with_bags.log, with_bags.bags, with_bags.end_time)
    assert with_bags.fairshare is not None and settings is not None
    return {
        "fairshare": policy_label(with_bags.fairshare),
        "preemption_time": settings.preemption_time,
        "pull_latency": settings.pull_latency,
        "bags": [r.to_dict() for r in records],
        "rigid_delay": rigid_delay(without.log, with_bags.log, with_bags.jobs),
        "shrink_waits": shrink_waits(with_bags.log),
    }


def print_bags(console: Console, label: str, info: dict[str, Any]) -> None:
    """The bags of one run as a table, and the delay they added to the other jobs in a line."""
    table = Table(
        title=f"{label}: bags of tasks, fair share {info['fairshare']}",
        title_justify="left",
        padding=(0, 1),
        collapse_padding=True,
    )
    headers = ("bag", "user", "tasks", "done", "makespan s", "tasks/s", "preempted", "lost s", "max procs")
    for h in headers:
        table.add_column(h, justify="left" if h in ("bag", "user") else "right", no_wrap=True)
    for r in info["bags"]:
        table.add_row(
            str(r["bag"]),
            r["user"],
            f"{r['tasks']:,}",
            f"{r['done']:,}",
            _fmt(r["makespan"]),
            _fmt(r["throughput"]),
            f"{r['preemptions']:,}",
            _fmt(r["wasted_seconds"]),
            str(r["peak_processors"]),
        )
    console.print(table)
    d = info["rigid_delay"]
    if d["jobs"]:
        console.print(
            f"{label}: other jobs' mean wait {_fmt(d['wait_mean_without_bags'])} s without bags, "
            f"{_fmt(d['wait_mean_with_bags'])} s with; delay added per job: mean {_fmt(d['delay_mean'])} s, "
            f"p95 {_fmt(d['delay_p95'])} s, max {_fmt(d['delay_max'])} s ({d['jobs_delayed']:,} of {d['jobs']:,} "
            f"jobs delayed; preemption time {info['preemption_time']:g} s)",
            highlight=False,
        )
    w = info["shrink_waits"]
    if w["jobs"]:
        console.print(
            f"{label}: bags gave processors back for {w['jobs']:,} jobs; from the shrink to the job's start: mean "
            f"{_fmt(w['wait_mean'])} s, max {_fmt(w['wait_max'])} s",
            highlight=False,
        )
    if d["not_started_with_bags"]:
        console.print(
            f"[yellow]{label}: {len(d['not_started_with_bags'])} jobs started without bags but not with them[/]",
            highlight=False,
        )


def register(app: typer.Typer) -> None:
    """Add `simulate` to the main command."""
    app.command("simulate")(simulate_command)
