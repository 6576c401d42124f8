"""Where a job's output goes, and the batch scripts `isthmus submit` runs (as sbatch does).

Output templates: ``-o/--output`` and ``-e/--error`` name files with sbatch's patterns
(`PATTERNS`: ``%j`` the job id, ``%x`` the job name, ``%u`` the user, ``%A``/``%a`` the array
ids, ``%%`` a literal ``%``); any other ``%`` sequence is refused (never silently kept).
Without ``--error``, stderr goes to the ``--output`` file (sbatch's rule); without either, to
``run<N>.out`` / ``run<N>.err`` in the job's spool directory.

Scripts: a file whose first line is a shebang (or whose name ends in ``.sh``) is submitted by
content, so editing it later does not change the job. Directive lines ``#ISTHMUS --size 4``
(or sbatch's ``#SBATCH --ntasks=4``)
at its top (after the shebang, among comments and blank lines, before the first command) set
options; the command line overrides them.
"""

from __future__ import annotations

import errno
import os
import shlex
import stat
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from isthmus.agent.accounts import Account, write_problem

DIRECTIVE = "#ISTHMUS"

DIRECTIVES = (DIRECTIVE, "#SBATCH")
"""The directive prefixes read: isthmus's own, and sbatch's (a script written for sbatch runs unchanged
where its options are supported)."""


class OutputTemplateError(ValueError):
    """An output path with a `%` sequence that is not one of `PATTERNS`."""


NO_ARRAY_TASK = "4294967294"
"""What `%a` (the array task id) becomes for a job that is not part of an array, as in Slurm
(its NO_VAL)."""

PATTERNS = {
    "j": "the job id",
    "x": "the job name",
    "u": "the user name",
    "A": "the array's job id (a job not in an array: its own id)",
    "a": f"the array task id (a job not in an array: {NO_ARRAY_TASK})",
    "%": "a literal %",
}
"""The `%` sequences of an output template (sbatch's filename patterns), and what each becomes."""

_NOT_YET = {"N": "the node's host name is not known where the file is named"}


def check_template(template: str) -> str:
    """`template` unchanged if its `%` sequences are all `PATTERNS`; else OutputTemplateError."""
    i = 0
    while i < len(template):
        if template[i] == "%":
            nxt = template[i + 1 : i + 2]
            if nxt not in PATTERNS:
                shown = "%" + nxt if nxt else "a trailing %"
                why = f" ({_NOT_YET[nxt]})" if nxt in _NOT_YET else ""
                known = ", ".join(f"%{k} {v}" for k, v in PATTERNS.items())
                raise OutputTemplateError(f"{template!r}: unknown pattern {shown!r}{why}; use {known}")
            i += 2
        else:
            i += 1
    return template


def fill(template: str, fields: Mapping[str, str]) -> str:
    """`template` with the `%` sequences of `fields` (letter: text) replaced, every other one
    (``%%`` included) kept for `expand`; a `%` in a replacement is doubled so it stays literal."""
    out: list[str] = []
    i = 0
    while i < len(template):
        ch = template[i]
        if ch == "%" and i + 1 < len(template):
            key = template[i + 1]
            out.append(fields[key].replace("%", "%%") if key in fields else template[i : i + 2])
            i += 2
        else:
            out.append(ch)
            i += 1
    return "".join(out)


def expand(template: str, job_id: int) -> str:
    """`template` with `%j` and `%A` replaced by `job_id`, `%a` by `NO_ARRAY_TASK` and `%%` by
    `%` (`%x` and `%u` were filled in at submission, see `fill`)."""
    out: list[str] = []
    i = 0
    while i < len(template):
        ch = template[i]
        if ch == "%" and i + 1 < len(template):
            key = template[i + 1]
            out.append(str(job_id) if key in "jA" else NO_ARRAY_TASK if key == "a" else key)
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


def directive_options(parse_time: Callable[[str], float | None], priorities: tuple[str, ...]) -> list[_Option]:
    """The options a directive may set; `parse_time` reads time limits (None: no limit),
    `priorities` the classes. Slurm's spelling of an option means what it means to sbatch."""

    def duration(text: str) -> float | None:
        return parse_time(text)  # its ValueError names the forms; None is no limit

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
        _Option("size", ("-n", "--ntasks", "--size"), _positive_int),
        _Option("time", ("-t", "--time"), duration),
        _Option("name", ("-J", "--job-name", "--name"), _text),
        _Option("output", ("-o", "--output"), template),
        _Option("error", ("-e", "--error"), template),
        _Option("priority", ("--priority",), priority),
        _Option("chdir", ("-D", "--chdir"), _text),
        _Option("export", ("--export",), _text),
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


def parse_directives(
    text: str, file: str, options: list[_Option], refused: Mapping[str, str] | None = None
) -> dict[str, Any]:
    """The options set by the `#ISTHMUS` and `#SBATCH` lines at the top of script `text` (a later
    line wins).

    Directives are read up to the first line that is neither blank nor a comment. A bad one, or
    an option of `refused` (name: why isthmus does not take it), raises ScriptError naming
    `file`, the line and what was expected.
    """
    by_name = {n: o for o in options for n in o.names}
    refused = refused or {}
    valid = ", ".join(o.names[-1] for o in options)
    found: dict[str, Any] = {}
    for number, line in enumerate(text.splitlines(), start=1):
        stripped = line.strip()
        if number == 1 and stripped.startswith("#!"):
            continue
        if stripped and not stripped.startswith("#"):
            break
        prefix = next((d for d in DIRECTIVES if stripped.startswith(d)), None)
        if prefix is None or stripped[len(prefix) : len(prefix) + 1] not in (" ", "\t"):
            continue
        where = f"{file}:{number}"
        try:
            words = shlex.split(stripped[len(prefix) :], comments=True)
        except ValueError as exc:
            raise ScriptError(f"{where}: {prefix} line cannot be read: {exc}") from None
        i = 0
        while i < len(words):
            word = words[i]
            name, eq, value = word.partition("=") if word.startswith("--") else (word, "", "")
            if not eq and not word.startswith("--") and len(word) > 2 and word[:2] in by_name.keys() | refused:
                name, eq, value = word[:2], "=", word[2:]  # a short option with its value attached: -n4
            if name in refused:
                raise ScriptError(f"{where}: {prefix} {name}: not supported by isthmus ({refused[name]})")
            option = by_name.get(name)
            if option is None:
                raise ScriptError(f"{where}: unknown {prefix} option {name!r}; valid: {valid}")
            if not eq:
                if i + 1 >= len(words):
                    raise ScriptError(f"{where}: {prefix} {name} needs a value")
                value = words[i + 1]
                i += 1
            try:
                found[option.key] = option.convert(value)
            except ValueError as exc:
                raise ScriptError(f"{where}: {prefix} {name}: {exc}") from None
            i += 1
    return found


# ------------------------------------------------------------------------- output files

NAME_MAX = 255
"""Bytes in one path component (Linux's NAME_MAX: a longer one is ENAMETOOLONG)."""

PATH_MAX = 4095
"""Bytes in a whole path (Linux's PATH_MAX less its terminating NUL)."""


def output_path_problem(template: str, job_id: int) -> str | None:
    """Why output template `template` of job `job_id` cannot be a run's output file, or None:
    a component or the whole path longer than the OS takes (ENAMETOOLONG), or an existing path
    that is not a regular file (a FIFO, a device, a directory; only /dev/null, which discards,
    is taken)."""
    path = expand(template, job_id)
    if len(path.encode("utf-8", "surrogateescape")) > PATH_MAX:
        return f"the path is longer than {PATH_MAX} bytes"
    for part in path.split("/"):
        if len(part.encode("utf-8", "surrogateescape")) > NAME_MAX:
            return f"a component of the path is longer than {NAME_MAX} bytes: {part[:40]!r}..."
    if path == "/dev/null":
        return None
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        return None  # made by the run
    except OSError as exc:  # not a directory on the way, a loop, no permission: the run says so
        return None if exc.errno in (errno.EACCES, errno.EPERM) else f"{path}: {exc.strerror or exc}"
    if not stat.S_ISREG(mode):
        return f"{path} is {_kind(mode)}, not a regular file"
    return None


def _kind(mode: int) -> str:
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    if stat.S_ISDIR(mode):
        return "a directory"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "a special file"


def check_outputs(spec: Mapping[str, Any], job_id: int, account: Account | None = None) -> None:
    """OutputPathError naming the field (`output` or `error`) when one of a submission's output
    files cannot be one (see `output_path_problem`), or when `account`, the Unix account the job
    runs as, may not write it (see `isthmus.agent.accounts.write_problem`)."""
    for field in ("output", "error"):
        template = spec.get(field)
        if template:
            problem = output_path_problem(str(template), job_id)
            if problem is None and account is not None:
                problem = write_problem(expand(str(template), job_id), account)
            if problem is not None:
                raise OutputPathError(field, problem)


class OutputPathError(ValueError):
    """A submission's output or error path that cannot be a run's output file."""

    def __init__(self, field: str, problem: str) -> None:
        super().__init__(f"{field}: {problem}")
        self.field = field


class OutputUnreadable(Exception):  # noqa: N818
    """A run's output that cannot be answered; `status` is the HTTP status to answer with."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


MAX_READ = 16 * 1024 * 1024
"""Bytes answered at most per output request."""


def read_run_output(
    spec: Mapping[str, Any],
    job_id: int,
    spool: str,
    run: int,
    *,
    stream: str,
    offset: int,
    starting: bool,
    owner: int | None = None,
) -> bytes:
    """Up to MAX_READ bytes from `offset` of the `stream` ("stdout" or "stderr") of run `run`.

    Read from the job's --output/--error file when it is a regular file, else from the run's
    file in the spool (where the pilot wrote why the user's file could not be opened). Never
    blocks (a FIFO in the path's place is not opened) and never fails with the OS's error:
    OutputUnreadable (410) when neither file is there while the run has begun (`starting`
    false: its file was made, so someone removed it). With `owner` (the uid of the Unix account
    the job runs as), a file that account does not own is not read: the job could have put a
    link to another's file in its place.
    """
    stdout, stderr, _custom = run_files(spec, job_id, spool, run)
    chosen = stdout if stream == "stdout" else stderr
    spooled = os.path.join(spool, f"run{run}.{'out' if stream == 'stdout' else 'err'}")
    for path in (chosen, spooled):
        data = read_regular(path, offset, owner)
        if data is not None:
            return data
    if starting:
        return b""
    raise OutputUnreadable(410, f"the {stream} of run {run} is gone: {chosen} was removed or is not a regular file")


def read_regular(path: str, offset: int, owner: int | None = None) -> bytes | None:
    """The bytes of regular file `path` from `offset`, or None when it is not one, is not owned
    by uid `owner` (when given), or cannot be read."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC | os.O_NOCTTY)
    except (OSError, ValueError):
        return None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or (owner is not None and st.st_uid != owner):
            return None
        os.lseek(fd, offset, os.SEEK_SET)
        chunks: list[bytes] = []
        left = MAX_READ
        while left > 0:
            chunk = os.read(fd, min(left, 1024 * 1024))
            if not chunk:
                break
            chunks.append(chunk)
            left -= len(chunk)
        return b"".join(chunks)
    except OSError:
        return None
    finally:
        os.close(fd)
