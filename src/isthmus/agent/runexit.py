"""A run records its own exit status, so that a run that ends while its pilot is dead still counts.

A SIGKILLed pilot leaves its runs alive in their own sessions; one may end before the manager
notices that the pilot is gone (a restart takes seconds), and then nobody reports its end: the
manager would declare it lost and run its body again. So each run is started under a small
shell wrapper that writes the command's exit status to the run's *exit file* in its spool
directory (``run<N>.exit``, written whole then renamed) before it exits. When the manager
declares a run lost it reads that file first: a run that ended by itself records that end
(isthmus.live.pilots) instead of being requeued; one killed by a signal (status 129-192, as a
shell reports it) died with its pilot and is lost, as the pilot itself would judge it.
"""

from __future__ import annotations

import errno
import os
import shutil
import stat

WRAPPER = 'f=$1; shift; "$@"; s=$?; { echo "$s" > "$f.tmp" && mv -f "$f.tmp" "$f"; } 2>/dev/null; exit "$s"'
"""The wrapper's script: ``sh -c WRAPPER isthmus-run EXIT_FILE COMMAND ARGS...`` (a spool removed
meanwhile only loses the record: nothing is written to the job's error file)."""


SWITCHED = (
    "x=$1 o=$2 e=$3 m=$4 d=$5; shift 5; "
    'if [ "$m" = a ]; then true >>"$o" || { echo output >&2; exit 1; }; '
    '[ "$e" = "$o" ] || true >>"$e" || { echo error >&2; exit 1; }; '
    'else true >"$o" || { echo output >&2; exit 1; }; '
    '[ "$e" = "$o" ] || true >"$e" || { echo error >&2; exit 1; }; fi; '
    'cd -- "$d" || { echo cwd >&2; exit 126; }; '
    'exec >>"$o" 2>>"$e"; '
    '"$@"; s=$?; [ -z "$x" ] || { echo "$s" > "$x.tmp" && mv -f "$x.tmp" "$x"; } 2>/dev/null; exit "$s"'
)
"""The wrapper of a run whose pilot switched to the job's account: ``sh -c SWITCHED isthmus-run
EXIT_FILE STDOUT STDERR a|w CWD COMMAND ARGS...``. It opens the output and error files (``a``:
appending, ``w``: truncated) and enters the working directory as the job's user, so a path that
user may not use fails as that user; then runs the command and records its exit status like
`WRAPPER` (no record when EXIT_FILE is empty). What fails before the command starts is written
to the wrapper's own stderr (a pipe the pilot reads): the shell's message, then a last line
naming the step (``output``, ``error`` or ``cwd``)."""

STEPS = {"output": "the output file", "error": "the error file", "cwd": "the working directory"}
"""The steps `SWITCHED` names, in words."""


def switched(argv: list[str], exit_path: str, stdout: str, stderr: str, *, append: bool, cwd: str) -> list[str]:
    """`argv` run under `SWITCHED` (`exit_path` empty: its exit status is not recorded)."""
    return ["/bin/sh", "-c", SWITCHED, "isthmus-run", exit_path, stdout, stderr, "a" if append else "w", cwd, *argv]


def switch_failure(said: bytes, *, account: str, stdout: str, stderr: str, cwd: str) -> str | None:
    """Why a run under `SWITCHED` did not start, from what its wrapper wrote to its stderr
    (`said`), or None when it did start."""
    lines = said.decode("utf-8", "backslashreplace").strip().splitlines()
    if not lines or lines[-1] not in STEPS:
        return None
    step = lines[-1]
    path = {"output": stdout, "error": stderr, "cwd": cwd}[step]
    shell = "; ".join(line.split(": ", 2)[-1] for line in lines[:-1])  # drop "sh: 1: "
    return f"cannot open {STEPS[step]} {path} as {account}: {shell or 'refused'}"


def exit_file(job_spool: str, run: int) -> str:
    """The exit file of run `run` of the job whose spool directory is `job_spool`."""
    return os.path.join(job_spool, f"run{run}.exit")


def wrapped(argv: list[str], job_spool: str, run: int) -> list[str]:
    """`argv` run under the wrapper that records its exit status."""
    return ["/bin/sh", "-c", WRAPPER, "isthmus-run", exit_file(job_spool, run), *argv]


def recorded_exit(job_spool: str, run: int) -> int | None:
    """The exit status run `run` recorded, or None when it has not ended (or recorded nothing)."""
    try:  # the spool may belong to the job's user: never follow a link, never block on a FIFO
        fd = os.open(exit_file(job_spool, run), os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        return int(os.read(fd, 64).decode().strip())
    except (OSError, ValueError):
        return None
    finally:
        os.close(fd)


def check_startable(program: str, cwd: str, path: str) -> None:
    """Raise what starting `program` directly would (FileNotFoundError, PermissionError) when it
    cannot be run, so that a run that cannot start still fails at once with the reason, as
    without the wrapper; `cwd` resolves a relative path, `path` is the run's PATH."""
    if os.sep in program:
        full = os.path.join(cwd, program)
        if not os.path.exists(full):
            raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), program)
        if os.path.isdir(full) or not os.access(full, os.X_OK):
            raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), program)
        return
    if shutil.which(program, path=path) is None:
        raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), program)
