"""`isthmus validate`: one reduced workload as sleep jobs, live and simulated, side by side.

KOALA-C Fig. 7 / dissertation §6.6. The logic is in `isthmus.live.validate`; this module parses
options and prints the Rich table (and JSON).
"""

from __future__ import annotations

import dataclasses
import json
import signal
import sys
from pathlib import Path
from typing import Annotated, Any, cast

import typer
from rich.console import Console
from rich.table import Table

from isthmus.cli import bounds
from isthmus.cli.simulate_cmd import CANCELLED_HELP
from isthmus.workloads.conversion import RUN_CANCELLED, Cancelled
from isthmus.workloads.seeds import DEFAULT_SEED

err = Console(stderr=True)

_LABELS = {
    "wait_mean": "mean wait (s)",
    "slowdown_mean": "mean slowdown",
    "bounded_slowdown_mean": "mean bounded slowdown",
    "makespan": "makespan (s)",
    "utilization": "utilization",
    "cost_charged": "charged cost ($)",
}


def _fmt(v: Any, pct: bool = False) -> str:
    if v is None:
        return "-"
    if pct:
        return f"{v * 100:+.1f}%"
    if isinstance(v, float):
        return "0" if v == 0 else f"{v:.4g}"
    return str(v)


def validation_table(entry: dict[str, Any]) -> Table:
    """A Rich table of one policy: figure, simulated, live, live − sim, (live − sim) / sim."""
    live = entry["live"]
    title = (
        f"{entry['policy']}: {live['jobs_completed']}/{live['jobs_total']} jobs completed live; "
        f"live run overhead {_fmt(live['run_overhead_mean'])} s mean, {_fmt(live['run_overhead_max'])} s max"
    )
    t = Table(title=title, title_justify="left", padding=(0, 1))
    repeated = any("repeated" in r for r in entry["comparison"])
    heads = ["figure", "simulated", "live", "live - sim", "relative"]
    if repeated:
        heads += ["sim runs: mean ± 95%", "range", "live inside"]
    for h in heads:
        t.add_column(h, justify="left" if h == "figure" else "right", no_wrap=True)
    for r in entry["comparison"]:
        cells = [
            _LABELS.get(r["metric"], r["metric"]),
            _fmt(r["simulated"]),
            _fmt(r["live"]),
            "-" if r["abs_diff"] is None else f"{r['abs_diff']:+.4g}",
            _fmt(r["rel_diff"], pct=True),
        ]
        if repeated:
            rep = r.get("repeated") or {}
            where = ("95% CI" if r.get("live_in_ci95") else "range") if r.get("live_in_range") else "no"
            cells += [
                f"{_fmt(rep.get('mean'))} ± {_fmt(rep.get('ci95'))} (n={rep.get('n', 0)})",
                f"{_fmt(rep.get('min'))}-{_fmt(rep.get('max'))}",
                where,
            ]
        t.add_row(*cells)
    return t


def validate_command(
    env: Annotated[
        str, typer.Option("--env", "-e", help="Bundled environment NAME[:k=v] or a TOML/YAML file.")
    ] = "local",
    workload: Annotated[
        str,
        typer.Option("--workload", "-w", help="SWF/GWF file or model spec (e.g. lublin:jobs=40,procs=6,max_size=4)."),
    ] = "lublin:jobs=25,procs=6,max_size=4,load=0.9",
    scale: Annotated[
        float,
        typer.Option(
            "--scale", help="Time scale of submit times and runtimes (0.01: 10 min -> 6 s).", callback=bounds.positive
        ),
    ] = 0.01,
    jobs: Annotated[int | None, typer.Option("--jobs", "-n", help="Keep the first N jobs.", min=1)] = None,
    policy: Annotated[
        list[str] | None,
        typer.Option("--policy", "-p", help="Allocation policy NAME[:k=v,...]; repeat for several (default: env's)."),
    ] = None,
    provisioning: Annotated[
        str | None, typer.Option(help="Provisioning policy NAME[:k=v,...] (default: the environment's).")
    ] = None,
    min_runtime: Annotated[float, typer.Option("--min-runtime", help="Floor of the scaled runtimes (s).", min=0)] = 2.5,
    max_runtime: Annotated[
        float | None, typer.Option("--max-runtime", help="Cap of the scaled runtimes (s).", min=0)
    ] = None,
    seed: Annotated[int, typer.Option(help="Seed for generated workloads.", min=0)] = DEFAULT_SEED,
    repeat: Annotated[
        int,
        typer.Option(
            "--repeat",
            help="Also simulate the workload model drawn with seeds SEED..SEED+N-1 and place the live figures "
            "among those runs (mean, 95% interval, range; dissertation §6.6). Model workloads only.",
            min=1,
        ),
    ] = 1,
    scale_env: Annotated[
        bool,
        typer.Option(
            "--scale-environment",
            help="Multiply the environment's times (rounds, boot, shutdown, idle release, billing) by --scale "
            "too, and divide its prices by it (for environments made for real time, e.g. villegas-fiu).",
        ),
    ] = False,
    out: Annotated[Path, typer.Option("--out", "-o", help="Directory for validation.json and per-job records.")] = Path(
        "out/validate"
    ),
    timeout: Annotated[
        float | None,
        typer.Option(
            "--timeout", help="Give up on the live run this many seconds after it starts.", callback=bounds.positive
        ),
    ] = None,
    cancelled: Annotated[str, typer.Option("--cancelled", help=CANCELLED_HELP)] = RUN_CANCELLED,
    vm: Annotated[
        list[str] | None,
        typer.Option(
            "--vm",
            help="VM requirements of the jobs, '[user=U:]key=value,...' as in `isthmus simulate --vm`; both sides "
            "run them (live: the API's vm object).",
        ),
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the report as JSON.")] = False,
) -> None:
    """Run a time-scaled, reduced workload as sleep jobs live and in simulation; compare them side by side."""
    from isthmus.cli.specs import parse_policy
    from isthmus.config import ConfigError, load_environment
    from isthmus.live.validate import ValidationCase, prepare_case, scale_environment, validate
    from isthmus.policies.registry import PolicyError, check_policy, info
    from isthmus.workloads import (
        SwfConversion,
        Workload,
        WorkloadError,
        cancelled_report,
        describe_cancelled,
        resolve_workload,
    )
    from isthmus.workloads.resolve import looks_like_path
    from isthmus.workloads.vm_requirements import apply_vm_rules, parse_vm_rule

    def fail(message: str) -> typer.Exit:
        err.print(f"[bold red]error:[/] {message}", highlight=False, soft_wrap=True)
        return typer.Exit(2)

    try:
        environment = load_environment(env)
    except (ConfigError, ValueError, KeyError) as exc:
        raise fail(str(exc)) from None
    try:
        choices = [parse_policy(p) for p in policy] if policy else [environment.allocation]
        prov = parse_policy(provisioning) if provisioning else environment.provisioning
        for c in choices:
            check_policy("allocation", c.name, c.params)
            if info("allocation", c.name).cls.needs_true_runtimes:
                raise ValueError(f"{c.name} knows actual runtimes: it exists in simulation only")
        check_policy("provisioning", prov.name, prov.params)
    except (PolicyError, ValueError) as exc:
        raise fail(str(exc)) from None
    try:
        rules = [parse_vm_rule(text) for text in vm or ()]
    except ValueError as exc:
        raise fail(f"--vm: {exc}") from None
    try:
        conversion = SwfConversion(cancelled=cast(Cancelled, cancelled))
    except ValueError as exc:
        raise fail(f"--cancelled: {exc}") from None
    if scale_env:
        try:
            environment = scale_environment(environment, scale)
        except ValueError as exc:
            raise fail(str(exc)) from None
    try:
        wl = resolve_workload(workload, seed=seed, conversion=conversion)
        if repeat > 1 and looks_like_path(workload):
            raise ValueError(
                f"--repeat draws the workload model again with other seeds; {workload!r} is a file: "
                "always the same jobs"
            )

        def case_of(w: Workload) -> ValidationCase:
            c = prepare_case(
                environment, w, scale=scale, jobs=jobs, min_runtime=min_runtime, max_runtime=max_runtime, name=workload
            )
            return dataclasses.replace(c, jobs=tuple(apply_vm_rules(c.jobs, rules))) if rules else c

        case = case_of(wl)
        repeats = [case_of(resolve_workload(workload, seed=seed + i)) for i in range(repeat)] if repeat > 1 else []
    except (WorkloadError, ValueError, OSError) as exc:
        raise fail(str(exc)) from None
    console = Console(stderr=as_json)
    if not console.is_terminal:
        console.width = max(console.width, 100)
    d = case.describe()
    console.print(
        f"[bold]isthmus validate[/]: {d['jobs']} jobs of [cyan]{workload}[/] x {scale:g} "
        f"on [cyan]{environment.name}[/]: "
        f"submissions over {d['submit_span']:.1f} s, {d['total_runtime']:.0f} s of sleep; runtimes floored to "
        f"{min_runtime:g} s: {case.floored}"
        + (f", capped to {max_runtime:g} s: {case.capped}" if max_runtime is not None else ""),
        highlight=False,
    )
    cancelled_info = cancelled_report(wl.conversion)
    console.print(describe_cancelled(cancelled_info), highlight=False, markup=False)
    if case.dropped:
        console.print(
            f"[yellow]dropped {len(case.dropped)} jobs larger than the largest site "
            f"({environment.max_processors} processors)[/]: ids {', '.join(map(str, case.dropped[:10]))}"
            + (" ..." if len(case.dropped) > 10 else ""),
            highlight=False,
        )
    # a SIGTERM ends the command like Ctrl-C, so the managers, pilots and jobs it started are stopped
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    try:
        report = validate(
            case,
            choices,
            prov,
            out=out,
            timeout=timeout,
            progress=lambda m: console.print(f"  {m}", highlight=False),
            repeats=repeats,
        )
    except (RuntimeError, TimeoutError, ValueError) as exc:
        raise fail(str(exc)) from None
    doc = report.to_dict()
    doc["cancelled_before_start"] = cancelled_info
    doc["repeat"] = {"runs": repeat, "seeds": [seed, seed + repeat - 1]} if repeat > 1 else None
    doc["environment_scaled"] = scale_env
    (out / "validation.json").write_text(json.dumps(doc, indent=2, default=str) + "\n")
    if as_json:
        typer.echo(json.dumps(doc, indent=2, default=str))
        return
    for entry in doc["policies"]:
        console.print(validation_table(entry))
        for note in entry["live"]["notes"]:
            console.print(f"[yellow]live: {note}[/]")
    console.print(f"Report and per-job records (.sim / .live) in [bold]{out}[/]")


def register(app: typer.Typer) -> None:
    """Add `validate` to the main command."""
    app.command("validate")(validate_command)
