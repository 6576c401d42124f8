"""Where a job's output goes, and the batch scripts `isthmus submit` runs (as sbatch does).

Output templates: ``-o/--output`` and ``-e/--error`` name files in which ``%j`` becomes the
job id and ``%%`` a literal ``%``; any other ``%`` sequence is refused (never silently kept).
Without ``--error``, stderr goes to the ``--output`` file (sbatch's rule); without either, to
``run<N>.out`` / ``run<N>.err`` in the job's spool directory.

Scripts: a file whose first line is a shebang (or whose name ends in ``.sh``) is submitted by
content, so editing it later does not change the job. Directive lines ``#ISTHMUS --size 4``
at its top (after the shebang, among comments and blank lines, before the first command) set
options; the command line overrides them.
"""

from __future__ import annotations

import shlex
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

DIRECTIVE = "#ISTHMUS"


class OutputTemplateError(ValueError):
    """An output path with a `%` sequence other than `%j` or `%%`."""


def check_template(template: str) -> str:
    """`template` unchanged if its `%` sequences are only `%j` and `%%`; else OutputTemplateError."""
    i = 0
    while i < len(template):
        if template[i] == "%":
            nxt = template[i + 1 : i + 2]
            if nxt not in ("j", "%"):
                shown = "%" + nxt if nxt else "a trailing %"
                raise OutputTemplateError(
                    f"{template!r}: unknown pattern {shown!r}; use %j for the job id and %% for a literal %"
                )
            i += 2
        else:
            i += 1
    return template


def expand(template: str, job_id: int) -> str:
    """`template` with `%j` replaced by `job_id` and `%%` by `%`."""
    out: list[str] = []
    i = 0
    while i < len(template):
        ch = template[i]
        if ch == "%" and i + 1 < len(template):
            out.append(str(job_id) if template[i + 1] == "j" else template[i + 1])
            i += 2
        else:
            out.append(ch)
            i += 1
    return "".join(out)


def run_files(spec: Mapping[str, Any], job_id: int, spool: str | Path, run: int) -> tuple[str, str, bool]:
    """(stdout path, stderr path, custom) of run `run` of a job with submission `spec`.

    `custom` is true when the user chose at least one of the files (they are then appended
    to from the second run on, so a restart does not erase the first run's output).
    """
    spool = Path(spool)
    out_t, err_t = spec.get("output"), spec.get("error")
    stdout = expand(out_t, job_id) if out_t else str(spool / f"run{run}.out")
    if err_t:
        stderr = expand(err_t, job_id)
    elif out_t:
        stderr = stdout
    else:
        stderr = str(spool / f"run{run}.err")
    return stdout, stderr, bool(out_t or err_t)


# ------------------------------------------------------------------------------------ scripts


class ScriptError(ValueError):
    """A script that cannot be submitted: the message names the file and line."""


def is_script(path: str) -> bool:
    """True when `path` is an existing file starting with '#!' or named '*.sh'."""
    p = Path(path)
    if not p.is_file():
        return False
    if p.suffix == ".sh":
        return True
    try:
        with open(p, "rb") as f:
            return f.read(2) == b"#!"
    except OSError:
        return False


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise ValueError(f"expected a positive integer, got {text!r}") from None
    if value < 1:
        raise ValueError(f"expected a positive integer, got {text!r}")
    return value


def _positive_number(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise ValueError(f"expected a number > 0, got {text!r}") from None
    if not value > 0 or value == float("inf"):
        raise ValueError(f"expected a number > 0, got {text!r}")
    return value


def vm_options(options: Mapping[str, Any]) -> dict[str, Any]:
    """The VM requirements among parsed directive options, as the REST API's `vm` object."""
    return {k.removeprefix("vm."): v for k, v in options.items() if k.startswith("vm.")}


def _text(text: str) -> str:
    if not text:
        raise ValueError("expected a value, got an empty string")
    return text


@dataclass(frozen=True, slots=True)
class _Option:
    key: str
    names: tuple[str, ...]
    convert: Callable[[str], Any]


def directive_options(parse_time: Callable[[str], float], priorities: tuple[str, ...]) -> list[_Option]:
    """The options a directive may set; `parse_time` reads durations, `priorities` the classes."""

    def duration(text: str) -> float:
        try:
            value = parse_time(text)
        except ValueError:
            raise ValueError(f"expected a duration (90, 5m, 10:00, 1:30:00), got {text!r}") from None
        if value <= 0:
            raise ValueError(f"expected a duration > 0, got {text!r}")
        return value

    def priority(text: str) -> str:
        if text not in priorities:
            raise ValueError(f"expected one of {', '.join(priorities)}, got {text!r}")
        return text

    def template(text: str) -> str:
        try:
            return check_template(_text(text))
        except OutputTemplateError as exc:
            raise ValueError(str(exc)) from None

    return [
        _Option("size", ("-n", "--size"), _positive_int),
        _Option("time", ("-t", "--time"), duration),
        _Option("name", ("-J", "--name"), _text),
        _Option("output", ("-o", "--output"), template),
        _Option("error", ("-e", "--error"), template),
        _Option("priority", ("-p", "--priority"), priority),
        _Option("chdir", ("-D", "--chdir"), _text),
        # VM requirements (Cloud Scheduler, Appendix I: VMType, VMAMI, VMCPUArch, VMCPUCores,
        # VMMem, VMStorage, VMNetwork), keys "vm.<field of the REST API's vm object>"
        _Option("vm.vm_type", ("--vm-type",), _text),
        _Option("vm.image", ("--vm-image",), _text),
        _Option("vm.cpu_arch", ("--vm-arch",), _text),
        _Option("vm.cores", ("--vm-cores",), _positive_int),
        _Option("vm.memory_mb", ("--vm-memory",), _positive_int),
        _Option("vm.storage_gb", ("--vm-storage",), _positive_number),
        _Option("vm.network", ("--vm-network",), _text),
    ]


def parse_directives(text: str, file: str, options: list[_Option]) -> dict[str, Any]:
    """The options set by the `#ISTHMUS` lines at the top of script `text` (a later line wins).

    Directives are read up to the first line that is neither blank nor a comment. A bad one
    raises ScriptError naming `file`, the line and what was expected.
    """
    by_name = {n: o for o in options for n in o.names}
    valid = ", ".join(o.names[-1] for o in options)
    found: dict[str, Any] = {}
    for number, line in enumerate(text.splitlines(), start=1):
        stripped = line.strip()
        if number == 1 and stripped.startswith("#!"):
            continue
        if stripped and not stripped.startswith("#"):
            break
        if not (stripped.startswith(DIRECTIVE) and stripped[len(DIRECTIVE) : len(DIRECTIVE) + 1] in (" ", "\t")):
            continue
        where = f"{file}:{number}"
        try:
            words = shlex.split(stripped[len(DIRECTIVE) :], comments=True)
        except ValueError as exc:
            raise ScriptError(f"{where}: {DIRECTIVE} line cannot be read: {exc}") from None
        i = 0
        while i < len(words):
            word = words[i]
            name, eq, value = word.partition("=") if word.startswith("--") else (word, "", "")
            option = by_name.get(name)
            if option is None:
                raise ScriptError(f"{where}: unknown {DIRECTIVE} option {name!r}; valid: {valid}")
            if not eq:
                if i + 1 >= len(words):
                    raise ScriptError(f"{where}: {DIRECTIVE} {name} needs a value")
                value = words[i + 1]
                i += 1
            try:
                found[option.key] = option.convert(value)
            except ValueError as exc:
                raise ScriptError(f"{where}: {DIRECTIVE} {name}: {exc}") from None
            i += 1
    return found
