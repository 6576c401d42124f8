"""One runner for every external command a backend runs (sbatch, squeue, qsub, ...).

Each command runs with a timeout, no standard input and a clean locale; a failure comes back as
a typed error carrying the command, return code, stdout and stderr, so that a backend can turn
it into a `SiteError` with the system's own message. Backends never call `subprocess` directly.

A backend holds a `Runner`: `LOCAL` runs commands on the manager's host; an SSH runner
(`isthmus.backends.ssh.SshRunner`) runs them on a cluster's login host over one kept connection,
and reports its own failures (the connection, not the command) as `RemoteAccessError`.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol


@dataclass(frozen=True)
class CommandResult:
    """A finished command: its return code, output and how long it took."""

    argv: tuple[str, ...]
    returncode: int
    stdout: str
    stderr: str
    seconds: float


class CommandError(Exception):
    """A command that could not be run or did not succeed."""

    def __init__(self, message: str, result: CommandResult | None = None, argv: Sequence[str] = ()) -> None:
        super().__init__(message)
        self.result = result
        self.argv = tuple(argv) if not result else result.argv

    @property
    def returncode(self) -> int | None:
        """The command's exit status (None when it never ran or timed out)."""
        return self.result.returncode if self.result else None

    @property
    def stdout(self) -> str:
        """What the command printed on stdout (may be partial after a timeout)."""
        return self.result.stdout if self.result else ""

    @property
    def stderr(self) -> str:
        """What the command printed on stderr."""
        return self.result.stderr if self.result else ""


class CommandNotFoundError(CommandError):
    """The program is not on PATH (e.g. `sbatch` on a machine without Slurm's client)."""


class CommandTimeoutError(CommandError):
    """The command did not finish within its timeout; it was killed."""


class CommandFailedError(CommandError):
    """The command exited with a non-zero status."""


class RemoteAccessError(CommandError):
    """The command could not reach the host it must run on (the SSH connection failed): the
    command itself did not run, or its outcome is unknown."""


class RemoteUnreachableError(RemoteAccessError):
    """The login host does not answer (refused, unreachable, timed out, connection dropped): may go away."""


class RemoteAuthError(RemoteAccessError):
    """The login host refused the key: an operator must fix the account or key."""


class RemoteHostKeyError(RemoteAccessError):
    """The login host's key is not the one in the known-hosts file (or that file is missing)."""


class Runner(Protocol):
    """Where a backend's commands run: on this host, or on a cluster's login host."""

    def run(
        self,
        argv: Sequence[str],
        *,
        timeout: float,
        env: Mapping[str, str] | None = None,
        input_text: str | None = None,
        check: bool = True,
    ) -> CommandResult:
        """Run `argv` with `env` added to the environment; the errors of `run_command`."""
        ...


@dataclass(frozen=True)
class LocalRunner:
    """Runs commands on the manager's own host with `run_command`."""

    def run(
        self,
        argv: Sequence[str],
        *,
        timeout: float,
        env: Mapping[str, str] | None = None,
        input_text: str | None = None,
        check: bool = True,
    ) -> CommandResult:
        """Run `argv` here (see `run_command`)."""
        return run_command(argv, timeout=timeout, env=env, input_text=input_text, check=check)


LOCAL = LocalRunner()
"""The runner of sites whose batch system's commands are on the manager's host."""


def _text(data: bytes | str | None) -> str:
    if data is None:
        return ""
    return data.decode("utf-8", "replace") if isinstance(data, bytes) else data


def run_command(
    argv: Sequence[str],
    *,
    timeout: float,
    env: Mapping[str, str] | None = None,
    input_text: str | None = None,
    check: bool = True,
    cwd: str | None = None,
) -> CommandResult:
    """Run `argv` (no shell) and return its result; raise CommandNotFoundError, CommandTimeoutError,
    or (with `check`) CommandFailedError for a non-zero exit."""
    if not argv:
        raise CommandError("empty command")
    program = argv[0]
    if os.sep not in program and shutil.which(program, path=(env or os.environ).get("PATH")) is None:
        raise CommandNotFoundError(f"{program}: command not found on PATH", argv=argv)
    full_env = dict(os.environ)
    full_env.update(env or {})
    full_env.setdefault("LC_ALL", "C")
    t0 = time.monotonic()
    try:
        proc = subprocess.run(
            list(argv),
            input=input_text,
            capture_output=True,
            text=True,
            errors="replace",
            timeout=timeout,
            env=full_env,
            cwd=cwd,
            stdin=None if input_text is not None else subprocess.DEVNULL,
            check=False,
            umask=0o022,  # not the manager's 077: batch systems give the jobs submitted the submitter's
        )
    except subprocess.TimeoutExpired as exc:
        result = CommandResult(tuple(argv), -1, _text(exc.stdout), _text(exc.stderr), time.monotonic() - t0)
        raise CommandTimeoutError(f"{' '.join(argv)}: no answer within {timeout:g} s", result) from None
    except FileNotFoundError:
        raise CommandNotFoundError(f"{program}: no such program", argv=argv) from None
    except OSError as exc:
        raise CommandError(f"{program}: {exc}", argv=argv) from None
    result = CommandResult(tuple(argv), proc.returncode, proc.stdout, proc.stderr, time.monotonic() - t0)
    if check and proc.returncode != 0:
        detail = (proc.stderr or proc.stdout).strip().splitlines()
        raise CommandFailedError(
            f"{' '.join(argv)}: exit status {proc.returncode}" + (f": {detail[-1]}" if detail else ""), result
        )
    return result
