"""``isthmus policies``: every registered policy with its family, parameters, seed citation and the
package it comes from (isthmus, or another package through the `isthmus.policies` entry points)."""

from __future__ import annotations

import json
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.table import Table

from isthmus.policies import registry


def _value(value: Any) -> str:
    return "none" if value is None else json.dumps(value)


def _rows(family: str | None) -> list[dict[str, Any]]:
    rows = []
    for p in registry.all_policies():
        if family is not None and p.family != family:
            continue
        rows.append(
            {
                "family": p.family,
                "name": p.name,
                "summary": p.summary,
                "seed": p.seed,
                "source": p.source,
                "parameters": [q.to_dict() for q in p.parameters],
            }
        )
    return rows


def register(app: typer.Typer) -> None:
    """Add the `policies` command to `app`."""

    @app.command("policies")
    def policies(
        family: Annotated[
            str | None,
            typer.Option(
                "--family", "-f", help="Only this family: allocation, provisioning, selection, fairshare, prediction."
            ),
        ] = None,
        as_json: Annotated[bool, typer.Option("--json", help="Print JSON instead of a table.")] = False,
    ) -> None:
        """List every policy: family, name, parameters (type, default, constraint) and seed citation."""
        if family is not None and family not in registry.families():
            typer.echo(
                f"error: unknown policy family {family!r}; expected one of: {', '.join(registry.families())}", err=True
            )
            raise typer.Exit(2)
        try:
            rows = _rows(family)
        except registry.PolicyError as exc:  # a policy another package added cannot be loaded
            typer.echo(f"error: {exc}", err=True)
            raise typer.Exit(2) from None
        if as_json:
            typer.echo(json.dumps(rows, indent=2))
            return
        table = Table(title="Policies (use NAME or NAME:param=value,...)", title_justify="left", show_lines=True)
        table.add_column("family", no_wrap=True)
        table.add_column("name", no_wrap=True)
        table.add_column("parameters: type = default (constraint)")
        table.add_column("seed")
        for r in rows:
            params = []
            for q in r["parameters"]:
                text = f"{q['name']}: {q['type']}"
                text += " (required)" if q["required"] else f" = {_value(q['default'])}"
                if q["constraint"]:
                    text += f", {q['constraint']}"
                if q["help"]:
                    text += f"\n  {q['help']}"
                params.append(text)
            source = "" if r["source"] == registry.BUILTIN else f"\n(from {r['source']})"
            table.add_row(r["family"], r["name"] + source, "\n".join(params) or "-", f"{r['seed']}\n{r['summary']}")
        Console().print(table)
