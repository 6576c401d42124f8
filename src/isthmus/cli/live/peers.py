"""`isthmus peers`: the peer managers this manager forwards jobs to or receives them from."""

from __future__ import annotations

import json
import time

import typer

from isthmus.cli.live.common import CA_OPT, JSON_OPT, TOKEN_OPT, URL_OPT, api_call, print_table


def register(app: typer.Typer) -> None:
    """Add the `peers` command to `app`."""

    @app.command("peers")
    def peers(
        url: str | None = URL_OPT, _ca: str | None = CA_OPT, token: str | None = TOKEN_OPT, as_json: bool = JSON_OPT
    ) -> None:
        """Peer managers (docs/federation.md): role, up or down, last heard, their latest
        resource data (idle processors, capacity, queued jobs)."""
        rows = api_call(url, token, lambda c: c.peers())
        if as_json:
            typer.echo(json.dumps(rows, indent=1))
            return
        table = []
        for p in rows:
            data = p.get("resources")
            if data:
                idle = sum(s["idle"] for s in data["sites"] if s["available"])
                procs = sum(s["processors"] for s in data["sites"])
                res = f"{idle}/{procs} idle, {data['queued_jobs']} queued"
            else:
                res = "-"
            heard = "-" if p["last_heard"] is None else f"{max(0.0, time.time() - p['last_heard']):.1f}s ago"
            table.append(
                [
                    p["name"],
                    p["role"],
                    "up" if p["up"] else "down",
                    heard,
                    f"{p['distance'] * 1000:.1f}ms",
                    str(p["forwarded_open"]),
                    str(p["received_active"]),
                    res,
                    p["address"] + (f" ({p['error']})" if p["error"] and not p["up"] else ""),
                ]
            )
        print_table(["PEER", "ROLE", "STATE", "HEARD", "DISTANCE", "SENT", "RECEIVED", "RESOURCES", "ADDRESS"], table)
