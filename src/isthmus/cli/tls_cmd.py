"""`isthmus tls`: TLS material for the manager (docs/security.md)."""

from __future__ import annotations

from pathlib import Path

import typer

app = typer.Typer(no_args_is_help=True, add_completion=False)


@app.command("self-signed")
def self_signed(
    directory: Path = typer.Argument(..., help="Directory to write cert.pem and key.pem into."),
    name: list[str] = typer.Option(
        [], "--name", help="Host name or address the certificate names (repeatable); default: this machine's."
    ),
    days: int = typer.Option(365, "--days", min=1, max=3650, help="Days the certificate is valid."),
) -> None:
    """Make a self-signed certificate and its key (mode 600) for a trial: the certificate names
    this machine (or --name) and 127.0.0.1 and ::1, and is its own CA: clients, pilots and peers
    verify the manager with it as their CA file. An existing pair is never overwritten (exit 2)."""
    from isthmus.tls import make_self_signed

    try:
        cert, key = make_self_signed(directory, name, days=days)
    except (FileExistsError, OSError) as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from None
    typer.echo(f"certificate: {cert} (the CA file of clients, pilots and peers)")
    typer.echo(f"key:         {key} (mode 600)")
    typer.echo(f"serve with:  isthmus server --tls-cert {cert} --tls-key {key}")
