"""Slurm as a `BatchSystem`: sbatch, scontrol, scancel and sinfo through the command runner.

Every job this manager submits carries `--comment=isthmus:<manager id>:<key>`, so that `find`
recognizes it after a restart (and nothing else is ever cancelled). Status is one
`scontrol show job -o` call per poll for all jobs (Slurm keeps ended jobs for its `MinJobAge`,
300 s by default); a job Slurm has forgotten is looked up with `sacct` when accounting is on,
else reported absent (lost). Capacity is one `sinfo` call (processors and memory per node);
waiting jobs of other users come from one `squeue` call, each with its nodes, processors and
memory per node (jobs whose comment names this manager, of any of its sites, are not others').
Native states are translated by `SLURM_STATES`.

`SLURM_CONF` may name the cluster's configuration (a private test Slurm, or a cluster whose
configuration is not in /etc/slurm); it is passed to every command.
"""

from __future__ import annotations

import logging
import math
import re
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Annotated

from pydantic import ConfigDict, Field, StringConstraints

from isthmus.agent.jobenv import default_environment
from isthmus.backends.api import Capacity, RemoteState, RunRequest, WaitingJob
from isthmus.backends.errors import (
    AuthenticationError,
    InvalidRequestError,
    QuotaError,
    SiteError,
    SiteTimeoutError,
    TransientError,
)
from isthmus.backends.runner import (
    LOCAL,
    CommandError,
    CommandFailedError,
    CommandNotFoundError,
    CommandTimeoutError,
    RemoteAccessError,
    RemoteAuthError,
    RemoteHostKeyError,
    Runner,
)
from isthmus.backends.ssh import LoginHostOptions
from isthmus.model.states import JobState, translate

log = logging.getLogger("isthmus.backends.slurm")

#: Slurm job states (squeue/scontrol long names) in the core's vocabulary.
SLURM_STATES: Mapping[str, JobState] = {
    "PENDING": JobState.QUEUED,
    "REQUEUED": JobState.QUEUED,
    "REQUEUE_HOLD": JobState.QUEUED,
    "REQUEUE_FED": JobState.QUEUED,
    "RESV_DEL_HOLD": JobState.QUEUED,
    "SUSPENDED": JobState.RUNNING,
    "STOPPED": JobState.RUNNING,
    "CONFIGURING": JobState.STARTING,
    "RUNNING": JobState.RUNNING,
    "COMPLETING": JobState.RUNNING,
    "RESIZING": JobState.RUNNING,
    "SIGNALING": JobState.RUNNING,
    "STAGE_OUT": JobState.RUNNING,
    "COMPLETED": JobState.COMPLETED,
    "FAILED": JobState.FAILED,
    "OUT_OF_MEMORY": JobState.FAILED,
    "BOOT_FAIL": JobState.FAILED,
    "SPECIAL_EXIT": JobState.FAILED,
    "TIMEOUT": JobState.TIMEOUT,
    "DEADLINE": JobState.TIMEOUT,
    "CANCELLED": JobState.CANCELLED,
    "REVOKED": JobState.CANCELLED,
    "NODE_FAIL": JobState.LOST,
    "PREEMPTED": JobState.LOST,
}

#: sinfo node states (short names, without the trailing flag characters) that cannot run jobs.
_UNUSABLE = {"down", "drain", "drng", "drained", "draining", "fail", "failg", "maint", "boot", "powered_down", "inval"}

_FIELD = {
    key: re.compile(rf"(?:^| ){key}=(\S*)")
    for key in ("JobId", "JobState", "ExitCode", "Comment", "NodeList", "UserId", "NumCPUs")
}
_REASON = re.compile(r"(?:^| )Reason=(.*?) Dependency=")


def _field(line: str, key: str) -> str:
    m = _FIELD[key].search(line)
    return m.group(1) if m else ""


_OPTION = Annotated[str, StringConstraints(min_length=1, max_length=256)]


class SlurmOptions(LoginHostOptions):
    """The options of a Slurm site's ``lrm`` table beside the keys every batch system shares."""

    model_config = ConfigDict(strict=True, extra="forbid", allow_inf_nan=False, frozen=True)

    partition: str | None = Field(None, min_length=1, max_length=128, description="Partition to submit to.")
    account: str | None = Field(None, min_length=1, max_length=128, description="Account to charge.")
    qos: str | None = Field(None, min_length=1, max_length=128, description="Quality of service.")
    config: str | None = Field(
        None, min_length=1, max_length=4096, description="Slurm's configuration file (SLURM_CONF) if not the default."
    )
    options: list[_OPTION] = Field(default_factory=list, description='Extra sbatch options, e.g. ["--exclusive"].')
    command_timeout: float = Field(
        30.0, gt=0, le=3600, description="Seconds a Slurm command may take before it counts as not answering."
    )


@dataclass
class SlurmBatch:
    """One Slurm partition driven through its commands (see the module docstring)."""

    name: str
    manager_id: str
    partition: str | None = None
    account: str | None = None
    qos: str | None = None
    extra_options: tuple[str, ...] = ()
    slurm_conf: str | None = None
    timeout: float = 30.0
    runner: Runner = LOCAL
    _env: dict[str, str] = field(default_factory=dict, init=False, repr=False)

    def __post_init__(self) -> None:
        if self.slurm_conf:
            self._env["SLURM_CONF"] = self.slurm_conf

    @classmethod
    def open(cls, name: str, manager_id: str, options: SlurmOptions, lrm: object = None) -> SlurmBatch:
        """The registry's factory: the Slurm system of site `name` for manager `manager_id`."""
        return cls(
            name,
            manager_id,
            partition=options.partition,
            account=options.account,
            qos=options.qos,
            extra_options=tuple(options.options),
            slurm_conf=options.config,
            timeout=options.command_timeout,
            runner=options.runner(),
        )

    # --------------------------------------------------------------------------- commands

    def _run(self, argv: Sequence[str], *, input_text: str | None = None, check: bool = True) -> str:
        """Run a Slurm command; its stdout, or the SiteError its failure means."""
        try:
            return self.runner.run(argv, timeout=self.timeout, env=self._env, input_text=input_text, check=check).stdout
        except (RemoteAuthError, RemoteHostKeyError) as exc:
            raise AuthenticationError(str(exc), site=self.name) from None
        except RemoteAccessError as exc:
            raise TransientError(str(exc), site=self.name) from None
        except CommandNotFoundError as exc:
            raise InvalidRequestError(
                f"{exc}: install Slurm's client commands (Debian: apt-get install slurm-client)", site=self.name
            ) from None
        except CommandTimeoutError as exc:
            raise SiteTimeoutError(f"Slurm does not answer: {exc}", site=self.name) from None
        except CommandFailedError as exc:
            raise _classify(exc, self.name) from None
        except CommandError as exc:
            raise TransientError(str(exc), site=self.name) from None

    def comment(self, key: str) -> str:
        """The comment that marks a job of this manager with `key`."""
        return f"isthmus:{self.manager_id}:{key}"

    def sbatch_args(self, r: RunRequest) -> list[str]:
        """The sbatch options for `r` (the script comes on stdin)."""
        # --no-requeue: after a node failure Slurm must not run the job again by itself; isthmus
        # decides (the run is lost and requeued by its policy, as a recorded restart)
        args = ["sbatch", "--parsable", "--no-requeue", f"--comment={self.comment(r.key)}", f"--ntasks={r.size}"]
        args.append(f"--job-name={_clean_name(r.name or r.key)}")
        if r.nodes is not None:
            args.append(f"--nodes={r.nodes}")
        if self.partition:
            args.append(f"--partition={self.partition}")
        if self.account:
            args.append(f"--account={self.account}")
        if self.qos:
            args.append(f"--qos={self.qos}")
        if r.walltime is not None:
            # Slurm counts whole minutes; the run itself is stopped at its exact walltime by the engine
            args.append(f"--time={max(1, math.ceil(r.walltime / 60))}")
        if r.run_as is not None:  # root submits it as the job's account (slurmd runs it as that)
            args += [f"--uid={r.run_as[0]}", f"--gid={r.run_as[1]}"]
        if r.cwd:
            args.append(f"--chdir={r.cwd}")
        args.append(f"--output={r.stdout or '/dev/null'}")
        args.append(f"--error={r.stderr or r.stdout or '/dev/null'}")
        # the documented defaults (PATH, HOME, ...), then the request's environment, and Slurm's
        # SLURM_* variables: never sbatch's own, which is the manager's with its secrets. Never
        # NONE either: its steps (srun) would start without PATH
        env = {**default_environment(), **r.env}
        args.append("--export=" + ",".join(f"{k}={v}" for k, v in sorted(env.items())))
        args.extend(self.extra_options)
        return args

    # ------------------------------------------------------------------------ BatchSystem

    def submit(self, requests: Sequence[RunRequest]) -> list[str | SiteError]:
        """Submit each request as one batch job; its Slurm job id, or why Slurm refused it."""
        out: list[str | SiteError] = []
        for r in requests:
            bad = [k for k, v in r.env.items() if "," in v or "\n" in v or "=" in k]
            if bad:
                out.append(InvalidRequestError(f"environment variables Slurm cannot pass: {bad}", site=self.name))
                continue
            script = "#!/bin/sh\nexec " + " ".join(shlex.quote(a) for a in r.command) + "\n"
            try:
                job_id = self._run(self.sbatch_args(r), input_text=script).strip().split(";")[0]
            except SiteError as exc:
                out.append(exc)
                continue
            if not job_id.isdigit():
                out.append(TransientError(f"sbatch answered {job_id!r} instead of a job id", site=self.name))
                continue
            out.append(job_id)
        return out

    def _jobs(self) -> dict[str, RemoteState]:
        """Every job Slurm still holds, by job id (one `scontrol show job -o`)."""
        text = self._run(["scontrol", "show", "job", "-o"], check=False)
        jobs: dict[str, RemoteState] = {}
        for line in text.splitlines():
            job_id = _field(line, "JobId")
            if not job_id:
                continue
            native = _field(line, "JobState")
            code, _, signal = _field(line, "ExitCode").partition(":")
            comment = _field(line, "Comment")
            reason = _REASON.search(line)
            nodes = _field(line, "NodeList")
            jobs[job_id] = RemoteState(
                provider_id=job_id,
                state=translate(SLURM_STATES, native, system=f"Slurm ({self.name})"),
                native=native,
                key=self._key_of(comment),
                exit_code=_exit_code(code, signal),
                reason="" if reason is None or reason.group(1) == "None" else reason.group(1),
                nodes=tuple(expand_nodelist(nodes)) if nodes and nodes != "(null)" else (),
            )
        return jobs

    def _key_of(self, comment: str) -> str:
        prefix = f"isthmus:{self.manager_id}:"
        return comment[len(prefix) :] if comment.startswith(prefix) else ""

    def status(self, provider_ids: Sequence[str]) -> dict[str, RemoteState]:
        """The state of each job (one scontrol call; sacct for those Slurm has forgotten)."""
        held = self._jobs()
        out = {pid: held[pid] for pid in provider_ids if pid in held}
        missing = [pid for pid in provider_ids if pid not in held]
        if missing:
            out.update(self._accounting(missing))
        return out

    def _accounting(self, provider_ids: Sequence[str]) -> dict[str, RemoteState]:
        """Ended jobs from `sacct` (absent when accounting is off or it does not know them)."""
        try:
            text = self.runner.run(
                ["sacct", "-X", "-n", "-P", "-j", ",".join(provider_ids), "-o", "JobID,State,ExitCode,Comment"],
                timeout=self.timeout,
                env=self._env,
                check=False,
            ).stdout
        except CommandError:
            return {}
        out: dict[str, RemoteState] = {}
        for line in text.splitlines():
            parts = line.split("|")
            if len(parts) < 4 or parts[0] not in provider_ids:
                continue
            native = parts[1].split()[0] if parts[1] else ""
            code, _, signal = parts[2].partition(":")
            out[parts[0]] = RemoteState(
                parts[0],
                translate(SLURM_STATES, native, system=f"Slurm ({self.name})"),
                native,
                key=self._key_of(parts[3]),
                exit_code=_exit_code(code, signal),
            )
        return out

    def cancel(self, provider_ids: Sequence[str]) -> dict[str, SiteError | None]:
        """scancel each job (one call); None for success."""
        if not provider_ids:
            return {}
        try:
            self._run(["scancel", *provider_ids])
        except InvalidRequestError as exc:  # some id unknown: cancel one by one to tell which
            if len(provider_ids) == 1:
                return {provider_ids[0]: exc}
            return {pid: self.cancel([pid])[pid] for pid in provider_ids}
        return dict.fromkeys(provider_ids)

    def capacity(self) -> Capacity:
        """Processors of the partition: total, on usable nodes, idle; and what other users'
        pending jobs ask for."""
        argv = ["sinfo", "-h", "-N", "-o", "%N|%c|%t|%C|%m"]
        if self.partition:
            argv += ["-p", self.partition]
        total = usable = free = 0
        down: list[str] = []
        seen: set[str] = set()
        memories: list[int] = []
        for line in self._run(argv).splitlines():
            parts = line.strip().split("|")
            if len(parts) not in (4, 5) or parts[0] in seen:
                continue
            seen.add(parts[0])
            cpus = int(parts[1]) if parts[1].isdigit() else 0
            state = parts[2].rstrip("*~#!%$@^-")
            total += cpus
            if state in _UNUSABLE:
                down.append(f"{parts[0]} {state}")
                continue
            usable += cpus
            if len(parts) == 5 and parts[4].strip().isdigit():
                memories.append(int(parts[4]))
            alloc_idle = parts[3].split("/")
            free += int(alloc_idle[1]) if len(alloc_idle) == 4 and alloc_idle[1].isdigit() else 0
        if not seen and self.partition:
            raise InvalidRequestError(f"partition {self.partition!r} has no node (sinfo lists none)", site=self.name)
        jobs = self._waiting_local()
        return Capacity(
            total,
            usable,
            free,
            sum(j.cpus for j in jobs),
            reason="; ".join(down),
            waiting_jobs=tuple(jobs),
            node_memory=min(memories, default=0),
        )

    def _waiting_local(self) -> list[WaitingJob]:
        """What each pending job this manager did not submit (of none of its sites: their comment)
        asks for: nodes (`%D`), processors (`%C`) and memory (`%m`, per node; per-CPU memory
        times the processors per node)."""
        argv = ["squeue", "-h", "-t", "PENDING", "-o", "%D|%C|%m|%k"]
        if self.partition:
            argv += ["-p", self.partition]
        mine = f"isthmus:{self.manager_id}:"
        jobs: list[WaitingJob] = []
        for line in self._run(argv, check=False).splitlines():
            parts = line.split("|", 3)
            if len(parts) != 4 or parts[3].startswith(mine) or not parts[1].strip().isdigit():
                continue
            nodes = int(parts[0]) if parts[0].strip().isdigit() else 1
            cpus = int(parts[1])
            jobs.append(WaitingJob(max(1, nodes), cpus, _memory_per_node(parts[2].strip(), cpus, max(1, nodes))))
        return jobs

    def find(self) -> dict[str, RemoteState]:
        """Every job Slurm holds that this manager submitted, by job id (with its key)."""
        return {pid: st for pid, st in self._jobs().items() if st.key}


def _memory_per_node(text: str, cpus: int, nodes: int) -> int:
    """MiB per node from squeue's `%m` (`4000M`, `2G`, or per CPU with a `c` suffix); 0 if none."""
    m = re.fullmatch(r"(\d+)([KMGT]?)(c?)", text)
    if not m or not int(m.group(1)):
        return 0
    scale = {"K": 1 / 1024, "": 1, "M": 1, "G": 1024, "T": 1024 * 1024}[m.group(2)]
    mib = math.ceil(int(m.group(1)) * scale)
    return mib * math.ceil(cpus / nodes) if m.group(3) else mib


def _exit_code(code: str, signal: str) -> int | None:
    if not code.isdigit():
        return None
    return -int(signal) if signal.isdigit() and int(signal) else int(code)


def _clean_name(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]", "_", name)[:64] or "isthmus"


def _classify(exc: CommandFailedError, site: str) -> SiteError:
    """The SiteError a failed Slurm command means, with Slurm's own message."""
    text = (exc.stderr or exc.stdout).strip()
    message = text.splitlines()[-1] if text else str(exc)
    low = text.lower()
    if "authentication" in low or "munge" in low or "access denied" in low:
        return AuthenticationError(message, site=site)
    if "unable to contact slurm controller" in low or "connection refused" in low or "timed out" in low:
        return SiteTimeoutError(message, site=site)
    if "qosmax" in low or ("assoc" in low and "limit" in low) or "max submit job limit" in low:
        return QuotaError(message, site=site)
    if "invalid" in low or "not available" in low or "requested node configuration" in low or "error:" in low:
        return InvalidRequestError(message, site=site)
    return TransientError(message, site=site)


def expand_nodelist(text: str) -> list[str]:
    """Slurm's compact node list (`n[1-3,5],login`) as names."""
    names: list[str] = []
    for part in re.findall(r"[^,\[]+(?:\[[^\]]*\])?", text):
        m = re.fullmatch(r"(.*)\[(.*)\]", part)
        if not m:
            names.append(part)
            continue
        prefix, ranges = m.groups()
        for r in ranges.split(","):
            lo, _, hi = r.partition("-")
            if hi:
                width = len(lo)
                names.extend(f"{prefix}{i:0{width}d}" for i in range(int(lo), int(hi) + 1))
            else:
                names.append(prefix + lo)
    return names
