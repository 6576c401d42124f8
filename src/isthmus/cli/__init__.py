"""The `isthmus` command line (Typer + Rich)."""

from __future__ import annotations

import sys


def run() -> None:
    """The `isthmus` program (the installed command's entry point): the command line, where a
    Ctrl-C during its start-up (importing the command line before any command can handle it) or
    escaping a command ends the program as an interrupted command does, with exit status 130
    and no Python traceback."""
    try:
        from isthmus.cli.main import app

        app()
    except KeyboardInterrupt:
        sys.exit(130)
