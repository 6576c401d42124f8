"""The `isthmus` command: one sub-command per concern.

Sub-commands are loaded on first use: `isthmus simulate` imports the simulator, metrics and
records, not the HTTP client, the live manager or the experiments (start-up time and memory
count in the whole command). `COMMANDS` names the module that registers each
sub-command; `isthmus --help` loads them all to list them.
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import typer
from typer.core import TyperGroup

from isthmus import __version__
from isthmus.cli.memory import end_startup_gc, start_program_gc
from isthmus.numpy_threads import import_numpy_single_threaded

if TYPE_CHECKING:  # typer carries its own copy of click
    from typer._click import Command, Context

# Arrow's own allocator (mimalloc) keeps the memory it frees; the system allocator gives it back,
# which keeps the peak of writing records 30 MB lower for 100k jobs (set before pyarrow loads;
# a value already in the environment wins)
os.environ.setdefault("ARROW_DEFAULT_MEMORY_POOL", "system")

#: The live commands: name -> module of `isthmus.cli.live` that registers it (`token` is a group).
LIVE_COMMANDS = {
    "server": "server",
    "stop": "server",
    "agent": "agent",
    "submit": "jobs",
    "bags": "bags",
    "results": "bags",
    "jobs": "jobs",
    "show": "jobs",
    "cancel": "jobs",
    "logs": "jobs",
    "sites": "sites",
    "peers": "peers",
    "vms": "sites",
    "nodes": "sites",
    "budget": "budgets",
    "accounting": "accounting",
    "forecast": "accounting",
}

#: Sub-command name -> module of `isthmus.cli` that registers it, in the order `--help` lists them.
COMMANDS: dict[str, str] = {
    "policies": "policies_cmd",
    "simulate": "simulate_cmd",
    "compare": "compare_cmd",
    "experiment": "experiment_cmd",
    **{name: f"live.{module}" for name, module in LIVE_COMMANDS.items()},
    "validate": "validate_cmd",
    "report": "report_cmd",
    "env": "env_cmd",
    "workload": "workload_cmd",
    "token": "live.tokens",
    "cloud": "live.cloud",
    "tls": "tls_cmd",
    "deploy": "deploy_cmd",
}

#: Help of the sub-command groups that are Typer apps of their own (`module.app`).
_GROUP_HELP = {
    "env": "List, show and check environments (sites, sets, policies).",
    "workload": "Inspect, generate, convert, reduce and filter workloads.",
    "tls": "TLS material for the manager: a self-signed certificate and key for a trial.",
    "deploy": "Files for running the manager as a service: its systemd unit.",
}


def load_commands(module_name: str) -> dict[str, Command]:
    """The click commands that module `isthmus.cli.<module_name>` adds to the main command."""
    module = importlib.import_module(f"isthmus.cli.{module_name}")
    sub = typer.Typer()
    groups = [name for name, mod in COMMANDS.items() if mod == module_name and name in _GROUP_HELP]
    if groups:
        for name in groups:
            sub.add_typer(module.app, name=name, help=_GROUP_HELP[name])
    else:
        module.register(sub)
    sub.callback()(lambda: None)  # a group, even for a module adding one command
    group = typer.main.get_group(sub)
    return dict(group.commands)


class LazyGroup(TyperGroup):
    """The main command's group: imports a sub-command's module only when that command runs
    (or when the help lists every command)."""

    def list_commands(self, ctx: Context) -> list[str]:
        """Every sub-command name, in `COMMANDS` order."""
        return list(COMMANDS)

    def resolve_command(self, ctx: Context, args: list[str]) -> tuple[str | None, Command | None, list[str]]:
        """Resolve as Typer does; for a name that is no command, every command is loaded first so
        that the error suggests the closest names ("Did you mean 'simulate'?")."""
        if args and args[0] not in COMMANDS:
            for name in COMMANDS:
                self.get_command(ctx, name)
        return super().resolve_command(ctx, args)

    def get_command(self, ctx: Context, cmd_name: str) -> Command | None:
        """The command `cmd_name`, registering its module's commands on first use."""
        if cmd_name not in self.commands and cmd_name in COMMANDS:
            if not COMMANDS[cmd_name].startswith("live."):
                import_numpy_single_threaded()  # a computing command: NumPy's BLAS on one thread
            for name, command in load_commands(COMMANDS[cmd_name]).items():
                self.commands.setdefault(name, command)
            end_startup_gc()  # the command's imports are done: the cyclic collector skips them
        return super().get_command(ctx, cmd_name)

    def main(self, args: Sequence[str] | None = None, *rest: Any, **options: Any) -> Any:
        """Run the command line; without `args` it is the program's own (``sys.argv``): start-up
        then runs without cyclic garbage collection (isthmus.cli.memory)."""
        if args is None:
            start_program_gc()
        return super().main(args, *rest, **options)


app = typer.Typer(
    name="isthmus",
    cls=LazyGroup,
    help="Join clusters and clouds into one pool of sites and allocate jobs to them by policy; "
    "simulate the same policies on workload traces.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"isthmus {__version__}")
        raise typer.Exit()


@app.callback()
def main(
    version: bool = typer.Option(False, "--version", callback=_version, is_eager=True, help="Print the version."),
) -> None:
    """isthmus: resource manager and simulator for clusters and clouds."""
