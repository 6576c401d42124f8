"""`isthmus deploy`: files for running the manager as a service (docs/deploy.md)."""

from __future__ import annotations

import typer

app = typer.Typer(no_args_is_help=True, add_completion=False)


@app.command("systemd-unit")
def systemd_unit() -> None:
    """Print the systemd unit of `isthmus server` shipped with isthmus (root, /etc/isthmus/pool.toml,
    /var/lib/isthmus, TLS; SIGTERM detaches): redirect it to /etc/systemd/system/isthmus-server.service."""
    from isthmus.deploy import systemd_unit as text

    typer.echo(text(), nl=False)
