"""`isthmus budget`: the budget caps, and changing a cap's limit (admin)."""

from __future__ import annotations

import json

import typer

from isthmus.cli.live.common import CA_OPT, JSON_OPT, TOKEN_OPT, URL_OPT, api_call, print_table


def register(app: typer.Typer) -> None:
    """Add the `budget` command to `app`."""

    @app.command("budget")
    def budget(
        name: str | None = typer.Argument(None, help="A budget to change (admin), with LIMIT."),
        limit: float | None = typer.Argument(None, min=0.0, help="Its new limit in dollars."),
        url: str | None = URL_OPT,
        _ca: str | None = CA_OPT,
        token: str | None = TOKEN_OPT,
        as_json: bool = JSON_OPT,
    ) -> None:
        """Budget caps: what each covers (sites, users), its limit, and in its current period
        spent (charged increments), committed (reserved for running jobs by finish caps) and
        left, the leases it refused and the VMs it released; `isthmus budget NAME LIMIT` changes a limit."""
        if (name is None) != (limit is None):
            raise typer.BadParameter("give both NAME and LIMIT to change a budget, or neither to list them")
        if name is not None and limit is not None:
            api_call(url, token, lambda c: c.set_budget(name, limit))
        rows = api_call(url, token, lambda c: c.budgets())
        if as_json:
            typer.echo(json.dumps(rows, indent=1))
            return
        table = [
            [r["name"], ",".join(r["sites"]), ",".join(r.get("users", [])) or "all", r["current"] or "total",
             r.get("on_limit", "requeue"), f"{r['limit']:.2f}", f"{r['spent']:.4f}", f"{r.get('committed', 0.0):.4f}",
             f"{r['left']:.4f}", str(r.get("refused_leases", 0)), str(r.get("released_vms", 0))]
            for r in rows
        ]  # fmt: skip
        print_table(
            ["BUDGET", "SITES", "USERS", "PERIOD", "ON-LIMIT", "LIMIT", "SPENT", "COMMITTED", "LEFT", "REFUSED",
             "RELEASED"],
            table,
        )  # fmt: skip
