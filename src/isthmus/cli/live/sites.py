"""The pool: `sites` (capacity and status of each site), `nodes` (each pilot position, as sinfo -N)
and `vms` (VM leases)."""

from __future__ import annotations

import json
from typing import Any

import typer

from isthmus.cli.live.common import CA_OPT, JSON_OPT, TOKEN_OPT, URL_OPT, api_call, fmt_dur, fmt_time, print_table


def _site_status(s: dict[str, Any]) -> str:
    """A site's STATUS cell: up or why not, its batch system and its pilots by state."""
    out = f"unavailable: {s['unavailable']}" if s.get("unavailable") else "up"
    lrm = s.get("lrm")
    if lrm:
        out += f"; {lrm['driver']} {lrm['mode']}"
        if lrm.get("keep_free"):
            out += f"; {lrm['keep_free']} kept free"
        if lrm.get("waiting_local"):
            out += f"; local jobs wait for {lrm['waiting_local']}"
    if s.get("pilots"):
        out += "; pilots " + ", ".join(f"{n} {state}" for state, n in sorted(s["pilots"].items()))
    return out


def register(app: typer.Typer) -> None:
    """Add the `sites`, `nodes` and `vms` commands to `app`."""

    @app.command("sites")
    def sites(
        url: str | None = URL_OPT, _ca: str | None = CA_OPT, token: str | None = TOKEN_OPT, as_json: bool = JSON_OPT
    ) -> None:
        """Sites and their capacity now (like sinfo)."""
        rows = api_call(url, token, lambda c: c.sites())
        if as_json:
            typer.echo(json.dumps(rows, indent=1))
            return
        table = []
        for s in rows:
            vms = f"{s['leased']}/{s['max_vms']} ({s['booting']} booting)" if s["kind"] == "cloud" else "-"
            table.append(
                [
                    str(s["index"]),
                    s["name"],
                    s["kind"],
                    str(s["online"]),
                    str(s["free"]),
                    str(s["running"]),
                    str(s["max_processors"]),
                    vms,
                    _site_status(s),
                ]
            )
        print_table(["#", "SITE", "KIND", "ONLINE", "FREE", "JOBS", "MAXPROC", "VMS", "STATUS"], table)

    @app.command("nodes")
    def nodes(
        url: str | None = URL_OPT,
        _ca: str | None = CA_OPT,
        token: str | None = TOKEN_OPT,
        as_json: bool = JSON_OPT,
    ) -> None:
        """Each node a pilot serves (local and pilot-job sites) and each VM, as sinfo -N: site,
        state (idle, mixed, allocated; booting, queued, starting, draining, down), host and processors
        allocated/idle/total (CPUS(A/I/T))."""
        rows = api_call(url, token, lambda c: c.request("GET", "/nodes"))
        if as_json:
            typer.echo(json.dumps(rows, indent=1))
            return
        table = [
            [r["node"], r["site"], r["state"], r["host"] or "-",
             f"{r['cpus_allocated']}/{r['cpus_idle']}/{r['cpus_total']}"]
            for r in rows
        ]  # fmt: skip
        print_table(["NODE", "SITE", "STATE", "HOST", "CPUS(A/I/T)"], table)

    @app.command("vms")
    def vms(
        all_: bool = typer.Option(False, "-a", "--all", help="Include released VMs."),
        url: str | None = URL_OPT,
        _ca: str | None = CA_OPT,
        token: str | None = TOKEN_OPT,
        as_json: bool = JSON_OPT,
    ) -> None:
        """VM leases: instance type, the user each serves (vm-share: the user it was leased for;
        otherwise the users of the jobs running on it), lease time and charged cost."""
        rows = api_call(url, token, lambda c: c.vms(all_))
        if as_json:
            typer.echo(json.dumps(rows, indent=1))
            return
        table = [
            [
                str(v["vm"]),
                v["site_name"],
                v["state"].upper() + (" (RETIRING)" if v.get("retiring") else ""),
                v.get("type_name") or "-",
                str(v["cores"]),
                v.get("user") or "-",
                fmt_time(v["leased_at"]),
                fmt_dur(v["lease_seconds"]),
                f"{v['charged_cost']:.4f}",
            ]
            for v in rows
        ]
        print_table(["VM", "SITE", "STATE", "TYPE", "CORES", "USER", "LEASED", "LEASE", "CHARGED"], table)
