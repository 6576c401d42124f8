"""What the live commands share: the options naming the manager and the token, the API call
that turns an API error into a message and an exit status (`exit_status`), and the table and
time formats.

Client commands find the manager through --url / ISTHMUS_URL (default http://127.0.0.1:8750),
verify an https manager against --ca-file / ISTHMUS_CA_FILE (default: the trusted CAs) and
authenticate with --token / ISTHMUS_TOKEN / ISTHMUS_TOKEN_FILE (or the admin token file of
--state-dir / ISTHMUS_STATE_DIR).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, NoReturn, TypeVar

import typer

from isthmus.live.client import ApiError, Client, default_token
from isthmus.model.states import TERMINAL_NAMES, TaskState

BAG_TASK_STATES = tuple(s.value for s in TaskState)
"""The states of a bag's task (the API's results index)."""

URL_OPT = typer.Option(None, "--url", envvar="ISTHMUS_URL", help="Manager URL (default http://127.0.0.1:8750).")
TOKEN_OPT = typer.Option(None, "--token", help="API token (default: ISTHMUS_TOKEN, ISTHMUS_TOKEN_FILE, admin.token).")
JSON_OPT = typer.Option(False, "--json", help="Print JSON instead of a table.")

_ca_file: list[str] = []  # the --ca-file of the running command, once given


def _remember_ca_file(value: str | None) -> None:
    _ca_file[:] = [value] if value else []


CA_OPT = typer.Option(
    None,
    "--ca-file",
    envvar="ISTHMUS_CA_FILE",
    expose_value=False,
    callback=_remember_ca_file,
    help="CA file (PEM) to verify an https manager against (default: the trusted CAs).",
)
"""`--ca-file`: read by `api_client`, so a command declares it (`_ca: None = CA_OPT`) and passes nothing on."""

#: exit status of a command that failed at run time (the manager unreachable, a server error)
EXIT_FAILURE = 1
#: exit status of a command refused: impossible options, or a request the manager refused (4xx)
EXIT_REFUSED = 2

TERMINAL = TERMINAL_NAMES
PRIORITIES = ("super-high", "high", "low", "super-low")


def parse_duration(text: str) -> float:
    """Seconds from '90', '90s', '5m', '2h', '1d', 'MM:SS', 'HH:MM:SS' or 'D-HH:MM:SS'."""
    t = text.strip().lower()
    if not t:
        raise ValueError("empty duration")
    units = {"s": 1, "m": 60, "h": 3600, "d": 86400}
    if t[-1] in units and t[:-1].replace(".", "", 1).isdigit():
        return float(t[:-1]) * units[t[-1]]
    days = 0.0
    if "-" in t:
        d, t = t.split("-", 1)
        days = float(d)
    parts = [float(p) for p in t.split(":")]
    if len(parts) > 3:
        raise ValueError(f"bad duration {text!r}")
    secs = 0.0
    for p in parts:
        secs = secs * 60 + p
    if len(parts) == 3 or days:
        pass
    return days * 86400 + secs


def fmt_dur(s: float | None) -> str:
    """A duration in seconds as [D-][HH:]MM:SS; a dash for None."""
    if s is None:
        return "-"
    s = max(0, round(s))
    d, rem = divmod(s, 86400)
    h, rem = divmod(rem, 3600)
    m, sec = divmod(rem, 60)
    core = f"{h:02d}:{m:02d}:{sec:02d}" if h or d else f"{m:d}:{sec:02d}"
    return f"{d}-{core}" if d else core


def fmt_time(t: float | None) -> str:
    """A Unix time as local ISO 8601 to the second; a dash for none."""
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(t)) if t else "-"


T = TypeVar("T")


def api_client(url: str | None, token: str | None) -> Client:
    """The API client of the manager at `url` with `token` (else the default token), verifying
    an https manager against the --ca-file given; a CA file that cannot be read exits with code 2."""
    try:
        return Client(url, token or default_token(), ca_file=_ca_file[0] if _ca_file else None)
    except ValueError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from None


def token_source(token: str | None) -> str | None:
    """Where the token a command sends comes from, in words; None when it has none."""
    if token:
        return "--token"
    if os.environ.get("ISTHMUS_TOKEN"):
        return "ISTHMUS_TOKEN"
    path = os.environ.get("ISTHMUS_TOKEN_FILE")
    if path and Path(path).is_file():
        return f"ISTHMUS_TOKEN_FILE ({path})"
    state = os.environ.get("ISTHMUS_STATE_DIR")
    if state and (Path(state) / "admin.token").is_file():
        return f"{Path(state) / 'admin.token'} (ISTHMUS_STATE_DIR)"
    return None


def exit_status(exc: ApiError) -> int:
    """The exit status of a command ended by `exc`: EXIT_REFUSED for a request the manager
    refused (4xx: invalid, not allowed, not found, conflicting), EXIT_FAILURE otherwise (no answer,
    5xx: the same command may work later)."""
    return EXIT_REFUSED if 400 <= exc.status < 500 else EXIT_FAILURE


def api_fail(exc: ApiError, token: str | None = None) -> NoReturn:
    """Print the API error (with where the token came from, on a 401) and exit with
    `exit_status(exc)`."""
    typer.echo(f"error: {exc}", err=True)
    if exc.status == 401:
        source = token_source(token)
        if source is None:
            typer.echo(
                "hint: no token was sent: set ISTHMUS_TOKEN=<token>, or ISTHMUS_TOKEN_FILE=<file>, or "
                "ISTHMUS_STATE_DIR=<the server's --state-dir> (its admin.token), or pass --token",
                err=True,
            )
        else:
            typer.echo(
                f"hint: the token sent came from {source}; set ISTHMUS_TOKEN (or ISTHMUS_TOKEN_FILE) "
                "to a token of this manager",
                err=True,
            )
    raise typer.Exit(exit_status(exc))


def api_call(url: str | None, token: str | None, request: Callable[[Client], T]) -> T:
    """Run one API request; an API error becomes a one-line message and `exit_status`."""
    with api_client(url, token) as c:
        try:
            return request(c)
        except ApiError as exc:
            api_fail(exc, token)


def parse_when(text: str, option: str) -> float:
    """Unix seconds from `text`: a number, or an ISO 8601 date or date-time (local time unless
    it names its zone)."""
    import datetime as dt

    try:
        return float(text) if text.replace(".", "", 1).isdigit() else dt.datetime.fromisoformat(text).timestamp()
    except ValueError:
        raise typer.BadParameter(
            f"{text!r}: expected Unix seconds or an ISO date/time such as 2026-11-22 or 2026-11-22T08:00",
            param_hint=option,
        ) from None


def print_table(headers: list[str], rows: list[list[str]]) -> None:
    """Print `rows` under `headers` in aligned columns (the first right-aligned)."""
    widths = [len(h) for h in headers]
    for r in rows:
        for i, c in enumerate(r):
            widths[i] = max(widths[i], len(c))
    typer.echo(
        "  ".join(
            h.rjust(w) if i == 0 else h.ljust(w) for i, (h, w) in enumerate(zip(headers, widths, strict=True))
        ).rstrip()
    )
    for r in rows:
        typer.echo(
            "  ".join(
                c.rjust(w) if i == 0 else c.ljust(w) for i, (c, w) in enumerate(zip(r, widths, strict=True))
            ).rstrip()
        )


def elapsed(j: dict[str, Any]) -> float | None:
    """How long job `j` has run (until its end once it ended); None before it started."""
    if j.get("start_time") is None:
        return None
    end = j.get("end_time") if j["state"] in TERMINAL else None
    return float((end or time.time()) - j["start_time"])
