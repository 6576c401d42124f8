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
import re
import time
from collections.abc import Callable, Mapping
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


DURATION_FORMS = "minutes, MM:SS, HH:MM:SS, D-HH, D-HH:MM, D-HH:MM:SS, or 90s, 5m, 2h, 1d"
"""The forms of a duration (sbatch's -t grammar, with units as an isthmus extension), for messages."""

TIME_FORMS = DURATION_FORMS.replace(", or", ", UNLIMITED, or")
"""The forms of a time limit: a duration, or no limit (UNLIMITED, INFINITE, 0)."""

_SLURM_TIME = re.compile(r"^(?:(\d+)-(\d+)(?::(\d+)(?::(\d+))?)?|(\d+)(?::(\d+)(?::(\d+))?)?)$")
_WITH_UNIT = re.compile(r"^(\d+(?:\.\d+)?)([smhd])$")
_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}


def parse_time_limit(text: str) -> float | None:
    """Seconds of a time limit in sbatch's grammar, None for no limit.

    Slurm's forms: "minutes", "MM:SS", "HH:MM:SS", "D-HH", "D-HH:MM", "D-HH:MM:SS"; 0,
    UNLIMITED and INFINITE mean no limit. isthmus also reads a number with a unit (90s, 5m,
    2h, 1d). Anything else (empty, negative, a fraction of a minute without a unit, text)
    raises ValueError naming the forms.
    """
    t = text.strip()
    if t.upper() in ("UNLIMITED", "INFINITE"):
        return None
    unit = _WITH_UNIT.fullmatch(t)
    if unit:
        seconds = float(unit.group(1)) * _UNITS[unit.group(2)]
        return seconds or None
    m = _SLURM_TIME.fullmatch(t)
    if m is None:
        raise ValueError(f"expected {TIME_FORMS}; got {text!r}")
    days, d_hours, d_minutes, d_seconds, minutes, m_seconds, h_seconds = m.groups()
    if days is not None:  # D-HH[:MM[:SS]]
        seconds = int(days) * 86400 + int(d_hours) * 3600 + int(d_minutes or 0) * 60 + int(d_seconds or 0)
    elif h_seconds is not None:  # HH:MM:SS
        seconds = int(minutes) * 3600 + int(m_seconds) * 60 + int(h_seconds)
    else:  # minutes[:SS]
        seconds = int(minutes) * 60 + int(m_seconds or 0)
    return float(seconds) or None  # sbatch: a time limit of zero is no limit


def parse_duration(text: str) -> float:
    """Seconds of a duration that must be one (a token's lifetime): the time limit grammar of
    `parse_time_limit` without its "no limit" values (0, UNLIMITED); ValueError otherwise."""
    seconds = parse_time_limit(text)
    if seconds is None:
        raise ValueError(f"expected a duration > 0: {DURATION_FORMS}; got {text!r}")
    return seconds


NOT_SUPPORTED: dict[tuple[str, ...], str] = {
    ("-p", "--partition"): "partitions are not supported yet",
    ("-d", "--dependency"): "job dependencies are not supported yet",
    ("-a", "--array"): "job arrays are not supported yet",
}
"""sbatch options isthmus refuses (never accepts and ignores), by their spellings: the one place
a `#SBATCH` directive and the `submit` command take their refusal from."""

REFUSED_DIRECTIVES = {name: why for names, why in NOT_SUPPORTED.items() for name in names}
"""`NOT_SUPPORTED` by each of its spellings, for `jobfiles.parse_directives`."""


def refused_option(*names: str) -> Any:
    """A hidden option spelled `names` (a key of `NOT_SUPPORTED`) that fails with exit code 2
    and the reason whenever it is given."""
    why = NOT_SUPPORTED[names]

    def refuse(value: str | None) -> None:
        if value is not None:
            raise typer.BadParameter(f"not supported by isthmus: {why}", param_hint="/".join(names))

    return typer.Option(None, *names, hidden=True, expose_value=False, callback=refuse)


_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
RESERVED_PREFIX = "ISTHMUS_"
"""Variables of this prefix are the manager's (job ids, tokens, the manager's URL): never exported."""


def _sendable(name: str, value: str) -> bool:
    """True when variable `name`=`value` may travel in a job's environment (a valid name, not an
    isthmus variable, a value the API takes: no null byte, encodable, at most 64 KiB)."""
    if not _ENV_NAME.fullmatch(name) or name.startswith(RESERVED_PREFIX) or "\x00" in value:
        return False
    try:
        return len(value.encode("utf-8")) <= 65536
    except UnicodeEncodeError:  # a lone surrogate (undecodable bytes in the environment)
        return False


def export_environment(text: str, source: Mapping[str, str]) -> dict[str, str]:
    """The variables `--export=text` sends with a job, taken from `source` (the submitter's
    environment), with sbatch's meaning: ALL every variable, NONE none, ``NAME[,NAME=value...]``
    only those (after ``ALL,``: all and those). From ALL, variables that cannot travel (ISTHMUS_*,
    names a shell cannot set, values the API refuses) are left out; naming one raises ValueError."""
    items = [i.strip() for i in text.split(",")]
    if not text.strip() or "" in items:
        raise ValueError(f"expected ALL, NONE or NAME[=value][,...]; got {text!r}")
    head = items[0].upper()
    if head == "NONE":
        if len(items) > 1:
            raise ValueError("NONE takes no variables (ALL,NAME=value adds to the whole environment)")
        return {}
    out: dict[str, str] = {}
    if head == "ALL":
        out = {k: v for k, v in source.items() if _sendable(k, v)}
        items = items[1:]
    for item in items:
        name, eq, value = item.partition("=")
        if not _ENV_NAME.fullmatch(name):
            raise ValueError(f"{name!r} is not a variable name")
        if name.startswith(RESERVED_PREFIX):
            raise ValueError(f"{name}: {RESERVED_PREFIX}* variables are set by the manager")
        if eq:
            out[name] = value
        elif name in source and _sendable(name, source[name]):
            out[name] = source[name]
    return out


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
