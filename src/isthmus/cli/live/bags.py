"""Bags of tasks: `bags` (their progress) and `results` (a bag's results index)."""

from __future__ import annotations

import json

import typer

from isthmus.cli.live.common import (
    BAG_TASK_STATES,
    CA_OPT,
    JSON_OPT,
    TOKEN_OPT,
    URL_OPT,
    api_call,
    fmt_dur,
    print_table,
)


def register(app: typer.Typer) -> None:
    """Add the `bags` and `results` commands to `app`."""

    @app.command("bags")
    def bags_cmd(
        all_: bool = typer.Option(False, "-a", "--all", help="Include finished bags."),
        url: str | None = URL_OPT,
        _ca: str | None = CA_OPT,
        token: str | None = TOKEN_OPT,
        as_json: bool = JSON_OPT,
    ) -> None:
        """Bags of tasks with their progress (docs/bags.md)."""
        rows = api_call(url, token, lambda c: c.bags(all_=all_))
        if as_json:
            typer.echo(json.dumps(rows, indent=1))
            return
        table = []
        for b in rows:
            p = b["progress"]
            rate = f"{p['throughput']:.3g}/s" if p["throughput"] is not None else "-"
            table.append(
                [
                    str(b["id"]),
                    b["user"],
                    b["name"][:20],
                    b["state"].upper(),
                    str(p["tasks"]),
                    str(p["done"]),
                    str(p["running"]),
                    str(p["failed"]),
                    str(p["queued"]),
                    rate,
                    ",".join(f"{s}:{n}" for s, n in p["held"].items()) or "-",
                ]
            )
        print_table(["BAGID", "USER", "NAME", "STATE", "TASKS", "DONE", "RUN", "FAIL", "QUEUED", "RATE", "HELD"], table)

    @app.command("results")
    def results(
        bag_id: int = typer.Argument(..., help="The bag's job id.", min=1),
        state: list[str] = typer.Option([], "--state", "-s", help="Only tasks in these states (done, failed, ...)."),
        url: str | None = URL_OPT,
        _ca: str | None = CA_OPT,
        token: str | None = TOKEN_OPT,
        as_json: bool = JSON_OPT,
    ) -> None:
        """A bag's results index: each task's command line, exit code and output file (§3.5.4)."""
        bad_state = [s for s in state if s not in BAG_TASK_STATES]
        if bad_state:
            typer.echo(f"error: --state {bad_state[0]!r}: expected one of {', '.join(BAG_TASK_STATES)}", err=True)
            raise typer.Exit(2)
        rows = api_call(url, token, lambda c: c.results(bag_id, state or None))
        if as_json:
            typer.echo(json.dumps(rows, indent=1))
            return
        table = [
            [
                str(r["task"]),
                r["state"].upper(),
                "-" if r["exit_code"] is None else str(r["exit_code"]),
                str(r["attempts"]),
                fmt_dur(r["runtime"]),
                r["output"],
                r["command"][:60],
            ]
            for r in rows
        ]
        print_table(["TASK", "STATE", "EXIT", "RUNS", "TIME", "OUTPUT", "COMMAND"], table)
