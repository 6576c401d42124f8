"""The tasks of a bag as a user writes them: a task file, or a sweep template with parameters.

A task file has one shell command line per task; blank lines and lines starting with ``#`` are
skipped. A sweep is a template such as ``./sim --x {x} --y {y}`` with parameters ``x=1..1000``
(integers from 1 to 1000), ``y=a,b,c`` (a list) or ``z=0.5`` (one value); several parameters give
their cartesian product, the last one varying fastest. Every mistake is a `BagSpecError`
naming where it is (the file and line, the parameter, the template) and what was expected; the
CLI exits 2 with it and the API answers 422 naming the field.
"""

from __future__ import annotations

import itertools
import re
import string
from collections.abc import Sequence

MAX_TASKS = 100_000
"""Tasks a bag may have at most (the API refuses more; split larger sweeps into several bags)."""
MAX_COMMAND = 16_384
"""Characters a task's command line may have at most."""
MAX_PARAMS = 8
"""Parameters a sweep may have at most."""

_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,63}$")
_RANGE = re.compile(r"^(-?\d{1,18})\.\.(-?\d{1,18})$")


class BagSpecError(ValueError):
    """A task file, sweep template or parameter that is not valid; the message says where."""


def check_command(command: str, where: str) -> str:
    """`command` if it is a usable task command line, else BagSpecError naming `where`."""
    if not command.strip():
        raise BagSpecError(f"{where}: empty command line")
    if "\x00" in command:
        raise BagSpecError(f"{where}: the command line contains a null byte")
    if "\n" in command or "\r" in command:
        raise BagSpecError(f"{where}: a task is one line (found a line break)")
    if len(command) > MAX_COMMAND:
        raise BagSpecError(f"{where}: command line of {len(command)} characters; at most {MAX_COMMAND}")
    return command


def parse_task_file(text: str, name: str) -> list[str]:
    """The tasks of a task file's `text` (`name` names it in errors): one per command line."""
    tasks: list[str] = []
    for number, line in enumerate(text.splitlines(), start=1):
        stripped = line.strip()
        if not stripped or stripped.startswith("#"):
            continue
        check_command(stripped, f"{name}:{number}")
        tasks.append(stripped)
        if len(tasks) > MAX_TASKS:
            raise BagSpecError(f"{name}:{number}: more than {MAX_TASKS} tasks; split the file into several bags")
    if not tasks:
        raise BagSpecError(f"{name}: no task (every line is blank or a # comment)")
    return tasks


def parse_param(text: str) -> tuple[str, list[str]]:
    """One ``NAME=VALUES`` parameter: ``1..1000`` (integers, both ends included), ``a,b,c`` or
    a single value; returns the name and its values."""
    name, sep, values = text.partition("=")
    name = name.strip()
    if not sep:
        raise BagSpecError(f"parameter {text!r}: expected NAME=VALUES, e.g. x=1..100 or x=a,b,c")
    if not _NAME.fullmatch(name):
        raise BagSpecError(f"parameter {text!r}: the name must be letters, digits and _, not starting with a digit")
    if "\x00" in values:
        raise BagSpecError(f"parameter {name}: a value contains a null byte")
    m = _RANGE.fullmatch(values.strip())
    if m:
        lo, hi = int(m.group(1)), int(m.group(2))
        if hi < lo:
            raise BagSpecError(f"parameter {name}: range {lo}..{hi} is empty (the end is before the start)")
        if hi - lo + 1 > MAX_TASKS:
            raise BagSpecError(f"parameter {name}: range {lo}..{hi} has {hi - lo + 1} values; at most {MAX_TASKS}")
        return name, [str(v) for v in range(lo, hi + 1)]
    if ".." in values:
        raise BagSpecError(f"parameter {name}: {values!r} is not a range of integers like 1..100")
    items = [v.strip() for v in values.split(",")]
    if not values.strip() or any(not v for v in items):
        raise BagSpecError(f"parameter {name}: empty value in {values!r}")
    if len(items) > MAX_TASKS:
        raise BagSpecError(f"parameter {name}: {len(items)} values; at most {MAX_TASKS}")
    return name, items


def expand_sweep(template: str, params: Sequence[str]) -> list[str]:
    """The tasks of a sweep: `template` with each ``{name}`` replaced, for every combination of
    the parameters' values (the last parameter varies fastest). ``{{`` and ``}}`` are literal
    braces. Every placeholder must be a parameter and every parameter must be used."""
    if not params:
        raise BagSpecError("sweep: give at least one parameter (--param x=1..10)")
    if len(params) > MAX_PARAMS:
        raise BagSpecError(f"sweep: {len(params)} parameters; at most {MAX_PARAMS}")
    parsed = [parse_param(p) for p in params]
    names = [n for n, _ in parsed]
    dup = next((n for n in names if names.count(n) > 1), None)
    if dup is not None:
        raise BagSpecError(f"parameter {dup} is given twice")
    try:
        fields = [f for _, f, spec, conv in string.Formatter().parse(template) if f is not None or spec or conv]
    except ValueError as exc:
        raise BagSpecError(f"sweep template {template!r}: {exc} (write {{{{ and }}}} for literal braces)") from None
    used = set()
    for f in fields:
        if f is None or not _NAME.fullmatch(f):
            raise BagSpecError(f"sweep template {template!r}: placeholder {{{f or ''}}} must be a parameter name")
        if f not in names:
            raise BagSpecError(f"sweep template {template!r}: {{{f}}} is not a parameter (given: {', '.join(names)})")
        used.add(f)
    unused = [n for n in names if n not in used]
    if unused:
        raise BagSpecError(f"parameter {unused[0]} is not used in the sweep template {template!r}")
    total = 1
    for _, values in parsed:
        total *= len(values)
        if total > MAX_TASKS:
            raise BagSpecError(f"sweep: the parameters give more than {MAX_TASKS} tasks; split it into several bags")
    tasks: list[str] = []
    for combo in itertools.product(*(values for _, values in parsed)):
        command = template.format(**dict(zip(names, combo, strict=True)))
        tasks.append(check_command(command, f"sweep task {len(tasks)} ({', '.join(map(str, combo))})"))
    return tasks
