"""Slurm's words for a job listing: the fields of ``squeue -o`` / ``sacct -o`` that `isthmus
jobs --format` prints, and the state names ``scancel -t`` takes.

A format is a comma-separated list of field names (any case), each optionally followed by
``%WIDTH`` as in sacct (``JobName%30``); an unknown name is refused naming it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from isthmus.cli.live.common import TERMINAL, elapsed, fmt_dur, fmt_time
from isthmus.model.states import JobState


def _exit_code(j: dict[str, Any]) -> str:
    """sacct's ExitCode, "code:signal": a negative isthmus exit code is the signal that ended the run."""
    code = j.get("exit_code")
    if code is None:
        return "0:0"
    return f"0:{-code}" if code < 0 else f"{code}:0"


def _state(j: dict[str, Any]) -> str:
    """The state in Slurm's words (QUEUED is PENDING), with isthmus's own states as they are."""
    return SLURM_STATE_NAMES.get(j["state"], str(j["state"]).upper())


def _time_limit(j: dict[str, Any]) -> str:
    """The requested runtime as Slurm shows a time limit; UNLIMITED for none."""
    return fmt_dur(j["requested_runtime"]) if j["requested_runtime"] else "UNLIMITED"


@dataclass(frozen=True, slots=True)
class Field:
    """One column of `--format`: its header and how a job row (the API's JobInfo) shows in it."""

    header: str
    value: Callable[[dict[str, Any]], str]


FIELDS: dict[str, Field] = {
    "jobid": Field("JOBID", lambda j: str(j["id"])),
    "jobname": Field("NAME", lambda j: j["name"]),
    "name": Field("NAME", lambda j: j["name"]),
    "user": Field("USER", lambda j: j["user"]),
    "state": Field("STATE", _state),
    "reason": Field("REASON", lambda j: j.get("reason") or "None"),
    "ntasks": Field("NTASKS", lambda j: str(j["size"])),
    "ncpus": Field("NCPUS", lambda j: str(j["size"])),
    "priority": Field("PRIORITY", lambda j: j["priority"]),
    "timelimit": Field(
        "TIMELIMIT", lambda j: fmt_dur(j["requested_runtime"]) if j["requested_runtime"] else "UNLIMITED"
    ),
    "elapsed": Field("ELAPSED", lambda j: fmt_dur(elapsed(j)) if j.get("start_time") else "0:00"),
    "exitcode": Field("EXITCODE", _exit_code),
    "submit": Field("SUBMIT", lambda j: fmt_time(j["submit_time"])),
    "start": Field("START", lambda j: fmt_time(j["start_time"])),
    "end": Field("END", lambda j: fmt_time(j["end_time"] if j["state"] in TERMINAL else None)),
    "nodelist": Field("NODELIST", lambda j: ",".join(str(k) for k, _ in j.get("slots") or []) or "-"),
    "cluster": Field("CLUSTER", lambda j: j["site"] or "-"),
    "restarts": Field("RESTARTS", lambda j: str(j["restarts"])),
    "workdir": Field("WORKDIR", lambda j: (j.get("spec") or {}).get("cwd") or "-"),
}
"""The fields `--format` takes, by lower-case Slurm name. ``Cluster`` is the site the job runs
on (isthmus's sites are Slurm's clusters); ``NTasks``/``NCPUS`` its processors."""

SLURM_STATE_NAMES = {
    JobState.QUEUED.value: "PENDING",
    JobState.STARTING.value: "CONFIGURING",
    JobState.RUNNING.value: "RUNNING",
    JobState.COMPLETED.value: "COMPLETED",
    JobState.FAILED.value: "FAILED",
    JobState.TIMEOUT.value: "TIMEOUT",
    JobState.CANCELLED.value: "CANCELLED",
}
"""isthmus's job states in Slurm's words, where Slurm has one (the others show as they are)."""


def parse_format(text: str) -> list[tuple[Field, int | None]]:
    """The columns of format `text` ("JobID,JobName%30,State"), each with its width (None: as
    wide as its widest value); ValueError naming an unknown field or a bad width."""
    columns: list[tuple[Field, int | None]] = []
    for item in text.split(","):
        name, pct, width = item.strip().partition("%")
        field = FIELDS.get(name.lower())
        if field is None:
            raise ValueError(f"unknown field {name!r}; valid: {', '.join(sorted({f.header for f in FIELDS.values()}))}")
        if pct and not (width.isdigit() and int(width) > 0):
            raise ValueError(f"{item.strip()!r}: expected NAME%WIDTH with a width > 0")
        columns.append((field, int(width) if pct else None))
    return columns


def render(columns: list[tuple[Field, int | None]], rows: list[dict[str, Any]]) -> list[str]:
    """The lines of a listing of `rows` in `columns` (a value longer than its width is cut)."""
    cells = [[f.value(j) for f, _ in columns] for j in rows]
    widths = [
        w if w is not None else max([len(f.header), *(len(r[i]) for r in cells)]) for i, (f, w) in enumerate(columns)
    ]
    lines = [" ".join(f.header[:w].ljust(w) for (f, _), w in zip(columns, widths, strict=True)).rstrip()]
    lines += [" ".join(c[:w].ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in cells]
    return lines


def cancel_states(names: list[str]) -> set[str]:
    """The isthmus states of `scancel -t` names (PENDING, RUNNING, or isthmus's own: queued,
    starting, running); ValueError naming one that is not an active state."""
    active = {JobState.QUEUED.value, JobState.STARTING.value, JobState.RUNNING.value}
    slurm = {"PENDING": {JobState.QUEUED.value}, "RUNNING": {JobState.STARTING.value, JobState.RUNNING.value}}
    out: set[str] = set()
    for name in names:
        for part in name.split(","):
            if part.upper() in slurm:
                out |= slurm[part.upper()]
            elif part.lower() in active:
                out.add(part.lower())
            else:
                raise ValueError(f"{part!r}: expected PENDING or RUNNING (or queued, starting, running)")
    return out
