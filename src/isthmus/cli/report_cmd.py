"""`isthmus report RUN_DIR`: one HTML page for a simulation's or an experiment's directory."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from isthmus.cli.simulate_cmd import fail


def register(app: typer.Typer) -> None:
    """Add the report command to `app`."""

    @app.command("report")
    def report(
        run_dir: Annotated[
            Path, typer.Argument(help="A directory written by `isthmus simulate --out` or `isthmus experiment`.")
        ],
        out: Annotated[
            Path | None, typer.Option("--out", help="Where to write the page (default RUN_DIR/report.html).")
        ] = None,
    ) -> None:
        """Write one HTML page with the command, configuration, tables and figures of a run."""
        from isthmus.experiments.report import ReportError, write_report

        try:
            path = write_report(run_dir, out)
        except (ReportError, OSError) as exc:
            raise fail(str(exc)) from None
        typer.echo(f"Report written to {path}")
