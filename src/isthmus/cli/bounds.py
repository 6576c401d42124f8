"""The bounds every command puts on its numeric options, checked when the command line is parsed.

Inclusive bounds are Typer's own (`min=`, `max=` on the option); the two kinds Typer cannot say
are the callbacks here: a number of seconds that must be greater than 0, and a round interval
that is such a number or 'event'. Either way an impossible value ends the command before it does
anything, with exit status 2 and one line naming the option (docs/live.md, "Exit status").
"""

from __future__ import annotations

import math

import typer

#: the words that mean event-triggered rounds (no fixed interval)
EVENT_WORDS = ("event", "none")


def positive(value: float | None) -> float | None:
    """A number of seconds (or gigabytes) that must be greater than 0 and finite; None passes."""
    if value is not None and not (value > 0 and math.isfinite(value)):
        raise typer.BadParameter(f"{value} is not a positive number")
    return value


def round_interval(value: str | None) -> str | None:
    """Seconds between scheduling rounds (a positive number) or 'event'; None passes."""
    if value is None:
        return None
    if value.strip().lower() in EVENT_WORDS:
        return "event"
    try:
        seconds = float(value)
    except ValueError:
        raise typer.BadParameter(f"{value!r} is neither a number of seconds nor 'event'") from None
    if not (seconds > 0 and math.isfinite(seconds)):
        raise typer.BadParameter(f"{value} is not a positive number of seconds (or 'event')")
    return value
