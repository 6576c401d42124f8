"""`accounting` (what ended, per user, site or policy) and `forecast` (what is queued, and what if)."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import typer

from isthmus.cli import bounds
from isthmus.cli.live.common import CA_OPT, JSON_OPT, TOKEN_OPT, URL_OPT, api_call, fmt_time, parse_when, print_table
from isthmus.live.client import Client


def _what_if_files(env_spec: str | None, add_site: Path | None) -> tuple[str | None, str | None, str | None]:
    """The what-if environment as text and format (checked here first, so that errors name the
    file and line), and the text of the sites to add; exit 2 on a bad file."""
    from isthmus.config.errors import ConfigError
    from isthmus.config.loader import FILE_SUFFIXES, dump_environment, is_file_spec, load_environment

    if env_spec is not None and add_site is not None:
        typer.echo("error: --env and --add-site: give one of them", err=True)
        raise typer.Exit(2)
    try:
        if env_spec is not None:
            env = load_environment(env_spec)
            if is_file_spec(env_spec):
                path = Path(env_spec)
                return path.read_text(encoding="utf-8"), FILE_SUFFIXES[path.suffix.lower()], None
            return dump_environment(env, "toml"), "toml", None
        if add_site is not None:
            return None, None, add_site.read_text(encoding="utf-8")
    except ConfigError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from None
    except (OSError, UnicodeDecodeError) as exc:
        typer.echo(f"error: {add_site}: cannot read: {exc}", err=True)
        raise typer.Exit(2) from None
    return None, None, None


def register(app: typer.Typer) -> None:
    """Add the `accounting` and `forecast` commands to `app`."""

    @app.command("accounting")
    def accounting(
        by: str = typer.Option("user", "--by", help="Group by user, site or policy."),
        since: str = typer.Option("0", "--since", help="Window start: ISO date/time (local) or Unix seconds."),
        until: str | None = typer.Option(None, "--until", help="Window end (default now), as --since."),
        url: str | None = URL_OPT,
        _ca: str | None = CA_OPT,
        token: str | None = TOKEN_OPT,
        as_json: bool = JSON_OPT,
        as_csv: bool = typer.Option(False, "--csv", help="Print CSV instead of a table."),
    ) -> None:
        """Jobs, processor-hours, VM-hours, charged cost, wait and slowdown per user, site or policy
        for the jobs that ended (and VMs released) in the window; users see their own jobs."""
        if by not in ("user", "site", "policy"):
            raise typer.BadParameter(f"{by!r}: expected user, site or policy", param_hint="--by")
        start = parse_when(since, "--since")
        end = parse_when(until, "--until") if until is not None else None
        rows = api_call(url, token, lambda c: c.accounting(by, start, end))
        columns = [
            "key",
            "jobs",
            "completed",
            "processor_hours",
            "vm_hours",
            "charged_cost",
            "mean_wait",
            "mean_bounded_slowdown",
        ]
        if as_json:
            typer.echo(json.dumps(rows, indent=1))
            return
        if as_csv:
            import csv

            w = csv.DictWriter(sys.stdout, fieldnames=columns, lineterminator="\n")
            w.writeheader()
            w.writerows({k: ("" if r[k] is None else r[k]) for k in columns} for r in rows)
            return

        def num(x: float | None, fmt: str) -> str:
            return "-" if x is None else format(x, fmt)

        table = [
            [
                r["key"],
                str(r["jobs"]),
                str(r["completed"]),
                num(r["processor_hours"], ".3f"),
                num(r["vm_hours"], ".3f"),
                num(r["charged_cost"], ".4f"),
                num(r["mean_wait"], ".1f"),
                num(r["mean_bounded_slowdown"], ".2f"),
            ]
            for r in rows
        ]
        print_table([by.upper(), "JOBS", "DONE", "PROC-H", "VM-H", "CHARGED", "WAIT(S)", "BSLD"], table)

    @app.command("forecast")
    def forecast(
        allocation: str | None = typer.Option(None, "--allocation", help="What if this allocation policy ran."),
        provisioning: str | None = typer.Option(None, "--provisioning", help="What if this provisioning policy ran."),
        budget: float | None = typer.Option(None, "--budget", help="What if the budget cap were this ($).", min=0.0),
        no_budget: bool = typer.Option(False, "--no-budget", help="What if there were no budget cap."),
        horizon: float = typer.Option(
            7 * 86400.0, "--horizon", help="Seconds to simulate ahead at most.", callback=bounds.positive
        ),
        env_spec: str | None = typer.Option(
            None, "--env", help="What if the manager ran this environment (file or bundled name; its policies)."
        ),
        add_site: Path | None = typer.Option(
            None, "--add-site", help="What if the sites of this TOML file ([[sites]] tables) were added."
        ),
        url: str | None = URL_OPT,
        _ca: str | None = CA_OPT,
        token: str | None = TOKEN_OPT,
        as_json: bool = JSON_OPT,
    ) -> None:
        """When each queued job is expected to start and end, from a simulation of the live state
        with the live policies (like `squeue --start`); with --allocation, --provisioning,
        --budget, --no-budget, --env or --add-site, the same next to what would happen if that
        changed."""
        environment, env_format, sites_text = _what_if_files(env_spec, add_site)
        what_if = {
            "allocation": allocation,
            "provisioning": provisioning,
            "budget": budget,
            "no_budget": no_budget or None,
            "environment": environment,
            "environment_format": env_format,
            "add_sites": sites_text,
        }
        asked = any(v is not None for v in what_if.values())

        def both(c: Client) -> tuple[dict[str, Any], dict[str, Any] | None]:
            live = c.forecast(horizon=horizon)
            return live, (c.forecast(horizon=horizon, **what_if) if asked else None)

        live, other = api_call(url, token, both)
        if as_json:
            typer.echo(json.dumps({"live": live, "what_if": other} if asked else live, indent=1))
            return
        alt = {j["job"]: j for j in other["jobs"]} if other else {}

        def when(t: float | None) -> str:
            return fmt_time(t) if t is not None else "beyond horizon"

        rows = []
        for j in live["jobs"]:
            row = [str(j["job"]), j["user"], str(j["size"]), j["state"].upper(), when(j["start"]), when(j["end"])]
            if other:
                k = alt.get(j["job"], {})
                row += [when(k.get("start")), when(k.get("end"))]
            rows.append([*row, j["site"] or "-", j["runtime_basis"]])
        head = ["JOB", "USER", "SIZE", "STATE", "START", "END"]
        if other:
            head += ["START(WHAT-IF)", "END(WHAT-IF)"]
        print_table([*head, "SITE", "RUNTIME FROM"], rows)
        label = f"{live['allocation']} + {live['provisioning']}"
        spend = f"${live['spend']:.4f}"
        typer.echo(f"expected spend from now: {spend} ({label}); unfinished at horizon: {live['unfinished']}")
        if other:
            what = f"{other['allocation']} + {other['provisioning']}, budget {other['budget']}"
            typer.echo(f"what if ({what}): ${other['spend']:.4f}; unfinished at horizon: {other['unfinished']}")
