"""``isthmus env``: list, show and check environments (sites, sets of sites, policies).

Exit codes: 0 success; 2 bad input: an invalid environment file (``check``, ``show``), an
unknown name, bad parameters, a missing file or conflicting options (README's promise for
every bad input).
Errors go to stderr as one line per problem, never as a traceback.
"""

from __future__ import annotations

import json
from enum import StrEnum
from typing import Annotated, Any, NoReturn

import typer
from rich.console import Console
from rich.table import Table

from isthmus.config import (
    ConfigError,
    bundled,
    bundled_document,
    bundled_names,
    dump_environment,
    environment_to_dict,
    load_environment,
    sites_summary,
)
from isthmus.model.environment import Environment, PolicyChoice
from isthmus.model.site import Site

app = typer.Typer(
    no_args_is_help=True,
    help="List, show and check environments (sites, sets of sites, policies).",
)


class OutputFormat(StrEnum):
    """File formats `show` can print."""

    TOML = "toml"
    YAML = "yaml"


def _fail(message: str, code: int = 2) -> NoReturn:
    typer.echo(f"error: {message}", err=True)
    raise typer.Exit(code)


def _fail_config(exc: ConfigError, code: int) -> NoReturn:
    typer.echo(f"error: {exc}", err=True)
    raise typer.Exit(code)


# ----------------------------------------------------------------------------------------------
# list


def _listing() -> list[dict[str, Any]]:
    rows = []
    for name in bundled_names():
        entry = bundled(name)
        doc = bundled_document(entry.example_spec)
        rows.append(
            {
                "name": name,
                "summary": entry.summary,
                "description": doc.get("description", ""),
                "sites": sites_summary(doc),
                "source": entry.source,
                "example": entry.example_spec,
                "parameters": [
                    {"name": p.name, "type": p.type_name, "default": p.default, "help": p.help}
                    for p in entry.parameters
                ],
            }
        )
    return rows


@app.command("list")
def list_environments(
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON instead of a table.")] = False,
) -> None:
    """List the bundled environments with their parameters and sites."""
    rows = _listing()
    if as_json:
        typer.echo(json.dumps(rows, indent=2))
        return
    table = Table(title="Bundled environments (use NAME or NAME:key=value,...)", title_justify="left", show_lines=True)
    table.add_column("name and description", ratio=3)
    table.add_column("sites", ratio=2)
    table.add_column("parameters (defaults)", no_wrap=True)
    for row, name in zip(rows, bundled_names(), strict=True):
        params = "\n".join(p.describe() for p in bundled(name).parameters) or "-"
        table.add_row(f"[bold]{row['name']}[/bold]\n{row['summary']}", row["sites"], params)
    Console().print(table)


# ----------------------------------------------------------------------------------------------
# show


def _seconds(value: float | None) -> str:
    if value is None:
        return "-"
    return f"{int(value)} s" if float(value).is_integer() else f"{value:g} s"


def _policy(choice: PolicyChoice) -> str:
    if not choice.params:
        return choice.name
    params = ", ".join(f"{k}={v!r}" for k, v in choice.params.items())
    return f"{choice.name} ({params})"


def _window(site: Site) -> str:
    if site.available_from is None and site.available_until is None:
        return "always"
    start = _seconds(site.available_from) if site.available_from is not None else "start"
    end = _seconds(site.available_until) if site.available_until is not None else "end"
    return f"{start} - {end}"


def _print_environment(env: Environment) -> None:
    console = Console()
    console.print(f"[bold]{env.name}[/bold]" + (f": {env.description}" if env.description else ""))
    rounds = "event-triggered" if env.round_interval is None else f"every {_seconds(env.round_interval)}"
    console.print(f"rounds: {rounds}; allocation: {_policy(env.allocation)}; provisioning: {_policy(env.provisioning)}")
    table = Table(title=f"sites: {sites_summary(env)}", title_justify="left")
    table.add_column("name", no_wrap=True)
    table.add_column("kind", no_wrap=True)
    table.add_column("nodes/VMs", no_wrap=True)
    table.add_column("cores/node", no_wrap=True)
    table.add_column("details")
    for s in env.sites:
        details: list[str] = []
        if s.is_cloud:
            if s.min_vms == s.max_vms:
                units = f"{s.max_vms} VMs"
            else:
                units = f"{s.min_vms}-{s.max_vms} VMs" if s.min_vms else f"<={s.max_vms} VMs"
            details.append(f"boot {_seconds(s.boot_time)}, shutdown {_seconds(s.shutdown_time)}")
            if s.is_paid:
                details.append(f"${s.price_per_hour:g}/VM-hour per {_seconds(s.billing_increment)}")
            else:
                details.append(f"free, idle release {_seconds(s.idle_release_time)}")
        else:
            units = f"{s.nodes} nodes"
        if s.available_from is not None or s.available_until is not None:
            details.append(f"available {_window(s)}")
        table.add_row(s.name, s.kind.value, units, str(s.cores_per_node), "; ".join(details) or "-")
    console.print(table)
    if env.sets:
        sets = Table(title="sets of sites", title_justify="left")
        sets.add_column("name", no_wrap=True)
        sets.add_column("sites")
        sets.add_column("runtime limit")
        for st in env.sets:
            limit = "unlimited" if st.runtime_limit is None else _seconds(st.runtime_limit)
            sets.add_row(st.name, ", ".join(st.sites), limit)
        console.print(sets)


def _load_or_exit(spec: str) -> Environment:
    try:
        return load_environment(spec)
    except ConfigError as exc:
        _fail_config(exc, 2)


@app.command("show")
def show_environment(
    spec: Annotated[str, typer.Argument(metavar="NAME|FILE", help="Bundled name (NAME:key=value,...) or file.")],
    as_json: Annotated[bool, typer.Option("--json", help="Print the normalized environment as JSON.")] = False,
    fmt: Annotated[
        OutputFormat | None,
        typer.Option("--format", "-f", help="Print the environment as a file in this format."),
    ] = None,
) -> None:
    """Show an environment, validated and normalized (as a table, JSON, TOML or YAML)."""
    if as_json and fmt is not None:
        _fail("--json and --format cannot be used together")
    env = _load_or_exit(spec)
    if as_json:
        typer.echo(json.dumps(environment_to_dict(env), indent=2))
    elif fmt is not None:
        typer.echo(dump_environment(env, fmt.value), nl=False)
    else:
        _print_environment(env)


# ----------------------------------------------------------------------------------------------
# check


@app.command("check")
def check_environments(
    files: Annotated[
        list[str],
        typer.Argument(metavar="FILE...", help="Environment files (.toml, .yaml, .yml) or bundled names."),
    ],
    as_json: Annotated[bool, typer.Option("--json", help="Print the results as JSON.")] = False,
) -> None:
    """Validate environment files: OK per file, or every problem with its key path.

    Exits with 2 when any file is invalid (each problem names the file, line and key).
    """
    results: list[dict[str, Any]] = []
    for spec in files:
        try:
            env = load_environment(spec)
        except ConfigError as exc:
            results.append({"file": spec, "ok": False, "problems": [p.to_dict() for p in exc.problems], "error": exc})
        else:
            results.append({"file": spec, "ok": True, "name": env.name, "sites": len(env.sites), "sets": len(env.sets)})
    invalid = sum(1 for r in results if not r["ok"])
    if as_json:
        typer.echo(json.dumps([{k: v for k, v in r.items() if k != "error"} for r in results], indent=2))
    else:
        for r in results:
            if r["ok"]:
                typer.echo(f"OK       {r['file']} ({r['name']}: {r['sites']} sites, {r['sets']} sets)")
            else:
                error: ConfigError = r["error"]
                for p in error.problems:
                    at = f"{error.file}:{p.line}" if p.line is not None else f"{error.file}"
                    typer.echo(f"INVALID  {at}: {p.describe()}")
        if len(results) > 1:
            typer.echo(f"{len(results)} checked, {invalid} invalid")
    if invalid:
        raise typer.Exit(2)
