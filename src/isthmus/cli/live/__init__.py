"""The live manager's commands, one module a resource: server (and stop), agent, jobs (submit,
jobs, show, cancel, logs), bags (bags, results), sites (sites, vms), peers, budgets (budget),
accounting (accounting, forecast), tokens (the token group) and cloud (the cloud group);
`common` holds what they share.

Each module's `register(app)` adds its commands. The main command loads a module only when one
of its commands runs (`isthmus.cli.main.COMMANDS`); `register` here adds them all (for
``python -m isthmus.cli.live_entry``).
"""

from __future__ import annotations

import importlib

import typer

#: The command modules, in the order their commands are listed.
MODULES = ("server", "agent", "jobs", "bags", "sites", "peers", "budgets", "accounting", "tokens", "cloud")


def register(app: typer.Typer) -> None:
    """Add every live command to `app`."""
    for name in MODULES:
        importlib.import_module(f"isthmus.cli.live.{name}").register(app)
