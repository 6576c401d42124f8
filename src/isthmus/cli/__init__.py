"""The `isthmus` command line (Typer + Rich)."""
