"""Running a batch system's commands on a cluster's login host over one kept SSH connection.

A Slurm or Grid Engine site may name a login host (``ssh = "user@host"``): every LRM command
then runs there through OpenSSH's connection multiplexing. The runner starts one master
connection (``ssh -o ControlMaster=yes`` holding an idle remote ``cat``, a child of the
manager) and runs each command as a session over its control socket, so a poll costs a
session, not a TCP connection and a key exchange. A master that has died (killed, network
dropped) is started again before the next command; a command caught in the middle gets a
`RemoteUnreachableError` and is not repeated (an `sbatch` may have run).

Safety: the host key is checked strictly against the configured known-hosts file (the runner
refuses to start without one; fill it with ``ssh-keyscan -p PORT HOST > FILE`` and compare the
fingerprints with the cluster's published ones). Commands never fall back to a connection of
their own. The ssh client runs with a minimal environment (no agent socket, none of the
manager's variables) and ignores the user's ssh configuration; the remote command is
``env K=V ... argv`` quoted with `shlex.join`, where the variables are the site's ``remote_env``
and the backend's own (e.g. ``SLURM_CONF``), never the manager's. A remote command that itself
exits with 255 is taken for ssh's own failure (Slurm's and Grid Engine's commands do not).
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import tempfile
import threading
import time
import weakref
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Self

from pydantic import BaseModel, Field, field_validator, model_validator

from isthmus.backends.runner import (
    LOCAL,
    CommandError,
    CommandFailedError,
    CommandNotFoundError,
    CommandResult,
    CommandTimeoutError,
    RemoteAccessError,
    RemoteAuthError,
    RemoteHostKeyError,
    RemoteUnreachableError,
    Runner,
)

_DESTINATION = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]*@[A-Za-z0-9_.:-]+")
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")

SSH_EXIT = 255
"""The exit status ssh itself uses for its own failures (a remote command's status is passed through)."""


class LoginHostOptions(BaseModel):
    """The keys of a cluster site whose batch system is reached on a login host over SSH."""

    ssh: str | None = Field(
        None, max_length=300, description='Login host as "user@host" (the LRM commands run there), or none.'
    )
    ssh_port: int = Field(22, ge=1, le=65535, description="The login host's SSH port.")
    ssh_key: str | None = Field(None, min_length=1, max_length=4096, description="Private key file for the login.")
    known_hosts: str | None = Field(
        None, min_length=1, max_length=4096, description="Known-hosts file holding the login host's key (required)."
    )
    remote_env: dict[str, str] = Field(
        default_factory=dict, description='Environment of the commands on the login host, e.g. {SLURM_CONF = "..."}.'
    )
    ssh_connect_timeout: float = Field(
        15.0, gt=0, le=600, description="Seconds to open the SSH connection before the host counts as unreachable."
    )

    @field_validator("ssh")
    @classmethod
    def _destination(cls, value: str | None) -> str | None:
        if value is not None and not _DESTINATION.fullmatch(value):
            raise ValueError(f'expected "user@host" (letters, digits, "._-"), got {value!r}')
        return value

    @field_validator("remote_env")
    @classmethod
    def _env_names(cls, value: dict[str, str]) -> dict[str, str]:
        bad = [k for k in value if not _ENV_NAME.fullmatch(k)]
        if bad:
            raise ValueError(f"not environment variable names: {bad}")
        nul = [k for k, v in value.items() if "\0" in v]
        if nul:
            raise ValueError(f"values with a NUL byte: {nul}")
        return value

    @model_validator(mode="after")
    def _login_keys_need_ssh(self) -> Self:
        if self.ssh is None:
            given = [k for k in ("ssh_key", "known_hosts") if getattr(self, k) is not None]
            given += ["remote_env"] if self.remote_env else []
            given += ["ssh_port"] if self.ssh_port != 22 else []
            if given:
                raise ValueError(f"{', '.join(given)} given without ssh (the login host)")
        elif self.known_hosts is None:
            raise ValueError(
                "ssh needs known_hosts: a file with the login host's key (ssh-keyscan -p PORT HOST > FILE)"
            )
        return self

    def runner(self) -> Runner:
        """The runner of this site's commands: on the login host when ``ssh`` is set, else here."""
        if self.ssh is None:
            return LOCAL
        assert self.known_hosts is not None  # the validator requires it with ssh
        return SshRunner(
            self.ssh,
            known_hosts=self.known_hosts,
            port=self.ssh_port,
            key=self.ssh_key,
            remote_env=dict(self.remote_env),
            connect_timeout=self.ssh_connect_timeout,
        )


def classify_ssh_failure(stderr: str, message: str, result: CommandResult | None) -> RemoteAccessError:
    """The typed error ssh's own failure (exit 255) means, from what it printed."""
    low = stderr.lower()
    if "host key verification failed" in low or "remote host identification has changed" in low:
        return RemoteHostKeyError(f"{message}: host key not accepted ({_last(stderr)})", result)
    if "permission denied" in low or "too many authentication failures" in low or "no more authentication" in low:
        return RemoteAuthError(f"{message}: login refused ({_last(stderr)})", result)
    return RemoteUnreachableError(f"{message}: {_last(stderr) or 'connection failed'}", result)


def _last(text: str) -> str:
    lines = [line for line in text.strip().splitlines() if line.strip()]
    return lines[-1].strip() if lines else ""


def _stop(proc: subprocess.Popen[bytes], log: object, own_dir: str | None = None) -> None:
    if proc.stdin is not None:
        proc.stdin.close()
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    if hasattr(log, "close"):
        log.close()
    if own_dir is not None:
        shutil.rmtree(own_dir, ignore_errors=True)


@dataclass
class SshRunner:
    """Runs commands on `destination` (``user@host``) over one kept OpenSSH master connection."""

    destination: str
    known_hosts: str
    port: int = 22
    key: str | None = None
    remote_env: Mapping[str, str] = field(default_factory=dict)
    connect_timeout: float = 15.0
    ssh_program: str = "ssh"
    control_dir: str | None = None
    _master: subprocess.Popen[bytes] | None = field(default=None, init=False, repr=False)
    _log: object = field(default=None, init=False, repr=False)
    _finalizer: Callable[[], object] | None = field(default=None, init=False, repr=False)
    _dir: str | None = field(default=None, init=False, repr=False)
    masters_started: int = field(default=0, init=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, init=False, repr=False)

    # ------------------------------------------------------------------------ the master

    @property
    def control_path(self) -> str:
        """The master's control socket (a private directory made on first use)."""
        if self._dir is None:
            self._dir = self.control_dir or tempfile.mkdtemp(prefix="isthmus-ssh-")
            os.chmod(self._dir, 0o700)
        return os.path.join(self._dir, "master")

    def ssh_options(self) -> list[str]:
        """The options every ssh call of this runner shares (host key, key, port, no user config)."""
        opts = [
            "-F",
            "none",
            "-p",
            str(self.port),
            "-o",
            "BatchMode=yes",
            "-o",
            "StrictHostKeyChecking=yes",
            "-o",
            f"UserKnownHostsFile={self.known_hosts}",
            "-o",
            "GlobalKnownHostsFile=/dev/null",
            "-o",
            "UpdateHostKeys=no",
            "-o",
            "IdentityAgent=none",
            "-o",
            "ForwardAgent=no",
            "-o",
            "ClearAllForwardings=yes",
            "-o",
            f"ControlPath={self.control_path}",
        ]
        if self.key:
            opts += ["-o", "IdentitiesOnly=yes", "-i", self.key]
        return opts

    def _environment(self) -> dict[str, str]:
        """The ssh client's own environment: only what it needs, none of the manager's secrets."""
        return {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LC_ALL": "C"}

    def master_alive(self) -> bool:
        """Whether the master connection is up (its process runs and its socket exists)."""
        return self._master is not None and self._master.poll() is None and os.path.exists(self.control_path)

    @property
    def master_pid(self) -> int | None:
        """The master ssh process's id while it runs."""
        return self._master.pid if self._master is not None and self._master.poll() is None else None

    def _start_master(self) -> None:
        """Start the master connection and wait until its socket answers; a `RemoteAccessError` if not."""
        self.close()
        if not os.path.isfile(self.known_hosts):
            raise RemoteHostKeyError(
                f"known_hosts file {self.known_hosts} does not exist: fill it with "
                f"'ssh-keyscan -p {self.port} HOST > {self.known_hosts}' and check the fingerprints",
                argv=(self.ssh_program, self.destination),
            )
        if shutil.which(self.ssh_program) is None:
            raise CommandNotFoundError(
                f"{self.ssh_program}: not on PATH (Debian: apt-get install openssh-client)", argv=(self.ssh_program,)
            )
        path = self.control_path
        if os.path.exists(path):
            os.unlink(path)  # the stale socket of a master that died
        argv = [
            self.ssh_program,
            *self.ssh_options(),
            "-o",
            f"ConnectTimeout={max(1, round(self.connect_timeout))}",
            "-o",
            "ServerAliveInterval=10",
            "-o",
            "ServerAliveCountMax=3",
            "-o",
            "ControlMaster=yes",
            "-o",
            "ControlPersist=no",  # (not -M as well: -M on top of ControlMaster=yes means "ask")
            "-T",
            self.destination,
            # a master started with -N refuses multiplexed sessions: it holds an idle remote
            # command instead, reading a pipe the runner keeps open; it ends when that pipe
            # closes: the connection dropped (nothing is left behind on the login host) or the
            # manager gone (and the master with it)
            "--",
            "exec cat >/dev/null",
        ]
        log = tempfile.TemporaryFile(dir=self._dir)  # noqa: SIM115 (the master's stderr for its lifetime)
        proc = subprocess.Popen(
            argv,
            stdin=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
            stderr=log,
            env=self._environment(),
            start_new_session=True,  # the manager's ^C is not the master's
        )
        deadline = time.monotonic() + self.connect_timeout + 5
        while proc.poll() is None and not os.path.exists(path) and time.monotonic() < deadline:
            time.sleep(0.02)
        if proc.poll() is not None or not os.path.exists(path):
            _stop(proc, None)
            log.seek(0)
            stderr = log.read().decode("utf-8", "replace")
            log.close()
            if self.control_dir is None and self._dir is not None:
                shutil.rmtree(self._dir, ignore_errors=True)
                self._dir = None
            result = CommandResult(tuple(argv), proc.returncode, "", stderr, 0.0)
            raise classify_ssh_failure(stderr, f"ssh {self.destination} port {self.port}", result)
        self._master, self._log = proc, log
        self.masters_started += 1
        own = self._dir if self.control_dir is None else None  # a directory this runner made goes with it
        self._finalizer = weakref.finalize(self, _stop, proc, log, own)

    def close(self) -> None:
        """Stop the master connection (the next command starts a new one)."""
        if self._finalizer is not None:
            self._finalizer()
            self._finalizer = None
            if self.control_dir is None:
                self._dir = None
        self._master = None

    # ------------------------------------------------------------------------ commands

    def remote_command(self, argv: Sequence[str], env: Mapping[str, str] | None = None) -> str:
        """The command line the login host's shell runs for `argv` with the site's and `env`'s variables."""
        variables = {**self.remote_env, **(env or {})}
        bad = [k for k in variables if not _ENV_NAME.fullmatch(k)]
        if bad:
            raise CommandError(f"not environment variable names: {bad}", argv=argv)
        prefix = ["env", *(f"{k}={v}" for k, v in variables.items())] if variables else []
        return shlex.join([*prefix, *argv])

    def run(
        self,
        argv: Sequence[str],
        *,
        timeout: float,
        env: Mapping[str, str] | None = None,
        input_text: str | None = None,
        check: bool = True,
    ) -> CommandResult:
        """Run `argv` on the login host over the master connection (started or restarted first
        when it is down). ssh's own failures raise a `RemoteAccessError`; the command's own, the
        errors of `run_command`."""
        if not argv:
            raise CommandError("empty command")
        with self._lock:  # two threads finding the master down start one, not two
            if not self.master_alive():
                self._start_master()
        ssh = [
            self.ssh_program,
            *self.ssh_options(),
            "-o",
            "ControlMaster=no",
            # never a connection of its own: without the master this fails instead of logging in
            "-o",
            "ProxyCommand=false",
            "-T",
            *([] if input_text is not None else ["-n"]),
            self.destination,
            "--",
            self.remote_command(argv, env),
        ]
        t0 = time.monotonic()
        try:
            proc = subprocess.run(
                ssh,
                input=input_text,
                capture_output=True,
                text=True,
                errors="replace",
                timeout=timeout,
                env=self._environment(),
                stdin=None if input_text is not None else subprocess.DEVNULL,
                check=False,
            )
        except subprocess.TimeoutExpired as exc:
            out = exc.stdout.decode("utf-8", "replace") if isinstance(exc.stdout, bytes) else exc.stdout or ""
            result = CommandResult(tuple(argv), -1, out, "", time.monotonic() - t0)
            raise CommandTimeoutError(
                f"{shlex.join(argv)} on {self.destination}: no answer within {timeout:g} s", result
            ) from None
        result = CommandResult(tuple(argv), proc.returncode, proc.stdout, proc.stderr, time.monotonic() - t0)
        where = f"{shlex.join(argv)} on {self.destination}"
        if proc.returncode == SSH_EXIT:
            if not self.master_alive():
                self.close()
                raise RemoteUnreachableError(f"{where}: the SSH connection dropped", result)
            raise classify_ssh_failure(proc.stderr, where, result)
        if proc.returncode == 127 and "not found" in proc.stderr:
            raise CommandNotFoundError(f"{argv[0]}: command not found on {self.destination}", result)
        if check and proc.returncode != 0:
            detail = (proc.stderr or proc.stdout).strip().splitlines()
            raise CommandFailedError(
                f"{where}: exit status {proc.returncode}" + (f": {detail[-1]}" if detail else ""), result
            )
        return result
