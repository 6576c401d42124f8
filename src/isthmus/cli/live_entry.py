"""`python -m isthmus.cli.live_entry COMMAND`: the live commands without the rest of the CLI (tests, benchmarks)."""

import typer

from isthmus.cli.live import register

app = typer.Typer(add_completion=False, no_args_is_help=True, pretty_exceptions_enable=False)
register(app)

if __name__ == "__main__":
    app()
