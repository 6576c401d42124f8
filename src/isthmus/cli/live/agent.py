"""`isthmus agent`: a pilot, the process that runs jobs on a node for the manager."""

from __future__ import annotations

from pathlib import Path

import typer

from isthmus.cli import bounds


def register(app: typer.Typer) -> None:
    """Add the `agent` command to `app`."""

    @app.command("agent", context_settings={"allow_extra_args": False})
    def agent(
        url: str = typer.Option(..., "--url", envvar="ISTHMUS_URL", help="Manager URL."),
        node: str = typer.Option(..., "--node", help="Node key this pilot serves (given by the manager)."),
        slots: int = typer.Option(1, "--slots", min=1, help="Jobs it runs at a time."),
        timeout: float = typer.Option(
            30.0, "--timeout", help="Exit when the manager is unreachable this long.", callback=bounds.positive
        ),
        lifetime: float | None = typer.Option(
            None, "--lifetime", help="Exit after this many seconds.", callback=bounds.positive
        ),
        token_file: Path | None = typer.Option(
            None, "--token-file", help="Pilot token file (else ISTHMUS_PILOT_TOKEN)."
        ),
        ca_file: Path | None = typer.Option(
            None, "--ca-file", help="Verify an https manager against this CA file (PEM); default: the system's CAs."
        ),
        insecure_http: bool = typer.Option(
            False, "--insecure-http", help="Allow an http:// manager URL outside loopback (its token goes in clear)."
        ),
    ) -> None:
        """Run a pilot: register with the manager, run the tasks it sends, report them."""
        from isthmus.agent.pilot import main

        argv = ["--url", url, "--node", node, "--slots", str(slots), "--timeout", str(timeout)]
        if lifetime is not None:
            argv += ["--lifetime", str(lifetime)]
        if token_file is not None:
            argv += ["--token-file", str(token_file)]
        if ca_file is not None:
            argv += ["--ca-file", str(ca_file)]
        if insecure_http:
            argv.append("--insecure-http")
        raise typer.Exit(main(argv))
