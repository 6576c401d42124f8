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

WRAPPER = 'f=$1; shift; "$@"; s=$?; { echo "$s" > "$f.tmp" && mv -f "$f.tmp" "$f"; } 2>/dev/null; exit "$s"'
"""The wrapper's script: ``sh -c WRAPPER isthmus-run EXIT_FILE COMMAND ARGS...`` (a spool removed
meanwhile only loses the record: nothing is written to the job's error file)."""


def exit_file(job_spool: str, run: int) -> str:
    """The exit file of run `run` of the job whose spool directory is `job_spool`."""
    return os.path.join(job_spool, f"run{run}.exit")


def wrapped(argv: list[str], job_spool: str, run: int) -> list[str]:
    """`argv` run under the wrapper that records its exit status."""
    return ["/bin/sh", "-c", WRAPPER, "isthmus-run", exit_file(job_spool, run), *argv]


def recorded_exit(job_spool: str, run: int) -> int | None:
    """The exit status run `run` recorded, or None when it has not ended (or recorded nothing)."""
    try:
        with open(exit_file(job_spool, run)) as f:
            return int(f.read().strip())
    except (OSError, ValueError):
        return None


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
