"""The `isthmus` command: one sub-command per concern."""

from __future__ import annotations

import typer

from isthmus import __version__
from isthmus.cli import (
    env_cmd,
    experiment_cmd,
    live_cmd,
    policies_cmd,
    report_cmd,
    simulate_cmd,
    validate_cmd,
    workload_cmd,
)

app = typer.Typer(
    name="isthmus",
    help="Join clusters and clouds into one pool of sites and allocate jobs to them by policy; "
    "simulate the same policies on workload traces.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
app.add_typer(env_cmd.app, name="env", help="List, show and check environments (sites, sets, policies).")
app.add_typer(workload_cmd.app, name="workload", help="Inspect, generate, convert, reduce and filter workloads.")
policies_cmd.register(app)
simulate_cmd.register(app)
experiment_cmd.register(app)
live_cmd.register(app)
validate_cmd.register(app)
report_cmd.register(app)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"isthmus {__version__}")
        raise typer.Exit()


@app.callback()
def main(
    version: bool = typer.Option(False, "--version", callback=_version, is_eager=True, help="Print the version."),
) -> None:
    """isthmus: resource manager and simulator for clusters and clouds."""
