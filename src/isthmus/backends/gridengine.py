"""Grid Engine (Son of Grid Engine, Univa/Altair-compatible commands) as a `BatchSystem`.

qsub, qstat, qacct and qdel through the command runner. Every job this manager submits is
named `isthmus.<manager id>.<key>` (a "/" of the key becomes "_", which keys never contain), so
that `find` recognizes it after a restart and nothing else is ever deleted. Status is one
`qstat -u '*' -xml` call per poll for all jobs (which also shows other users' pending jobs);
Grid Engine forgets a job as soon as it ends, so an ended job is looked up with `qacct -j`, one
call per job that ended. Accounting records arrive after the scheduler's `flush_time`: a job
neither listed nor accounted yet is reported as still ending for `ACCOUNTING_GRACE` seconds,
then absent (lost). Capacity is one `qstat -f -xml` call (queue instances in an unusable state
are offline). Native states are translated by `GRID_ENGINE_STATES`.

Multi-slot jobs ask for `slots` of the configured parallel environment (default `smp`, whose
`$pe_slots` allocation keeps them on one host, as pilots need).
"""

from __future__ import annotations

import math
import shlex
import time
import xml.etree.ElementTree as ET
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Annotated

from pydantic import ConfigDict, Field, StringConstraints

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

#: qstat job states in the core's vocabulary ("d": being deleted, "E": error, "h": hold,
#: "R": restarted, "s"/"S"/"T": suspended, "t": transferring to the exec host).
GRID_ENGINE_STATES: Mapping[str, JobState] = {
    **dict.fromkeys(("qw", "hqw", "hRwq", "Rq", "hRq", "Rqw", "hr"), JobState.QUEUED),
    **dict.fromkeys(("t", "Rt"), JobState.STARTING),
    **dict.fromkeys(
        ("r", "Rr", "s", "ts", "S", "tS", "T", "tT", "Rs", "RS", "RT", "Rts", "RtS", "RtT"), JobState.RUNNING
    ),
    **dict.fromkeys(
        ("dr", "dt", "dRr", "dqw", "dhqw", "ds", "dS", "dT", "dRs", "dRS", "dRT", "dRt"), JobState.CANCELLED
    ),
    **dict.fromkeys(("Eqw", "Ehqw", "EhRqw"), JobState.FAILED),
}

#: queue-instance state letters that make its slots unusable: alarm, unknown (exec host not
#: reporting), Error, disabled, calendar-Disabled, suspended, Subordinate, Calendar-suspended,
#: orphaned, configuration ambiguous
_UNUSABLE = set("aAuEdDsSCoc")

ACCOUNTING_GRACE = 30.0
"""Seconds a job gone from qstat may wait for its accounting record before it counts as absent."""

#: qacct "failed" codes: 37 is the qmaster enforcing h_rt; 100 with signal 9 is qdel
_FAILED_TIMEOUT = "37"


_OPTION = Annotated[str, StringConstraints(min_length=1, max_length=256)]


class GridEngineOptions(LoginHostOptions):
    """The options of a Grid Engine site's ``lrm`` table beside the keys every batch system shares."""

    model_config = ConfigDict(strict=True, extra="forbid", allow_inf_nan=False, frozen=True)

    queue: str | None = Field(None, min_length=1, max_length=128, description="Queue to submit to.")
    parallel_environment: str | None = Field(
        None, min_length=1, max_length=128, description='Parallel environment of multi-slot jobs (default "smp").'
    )
    options: list[_OPTION] = Field(default_factory=list, description='Extra qsub options, e.g. ["-l h_vmem=2G"].')
    command_timeout: float = Field(
        30.0, gt=0, le=3600, description="Seconds a Grid Engine command may take before it counts as not answering."
    )


@dataclass
class GridEngineBatch:
    """One Grid Engine queue driven through its commands (see the module docstring)."""

    name: str
    manager_id: str
    queue: str | None = None
    parallel_environment: str = "smp"
    extra_options: tuple[str, ...] = ()
    timeout: float = 30.0
    runner: Runner = LOCAL
    _missing_since: dict[str, float] = field(default_factory=dict, init=False, repr=False)

    @classmethod
    def open(cls, name: str, manager_id: str, options: GridEngineOptions, lrm: object = None) -> GridEngineBatch:
        """The registry's factory: the Grid Engine system of site `name` for manager `manager_id`."""
        return cls(
            name,
            manager_id,
            queue=options.queue,
            parallel_environment=options.parallel_environment or "smp",
            extra_options=tuple(options.options),
            timeout=options.command_timeout,
            runner=options.runner(),
        )

    # --------------------------------------------------------------------------- commands

    def _run(self, argv: Sequence[str], *, input_text: str | None = None, check: bool = True) -> str:
        """Run a Grid Engine command; its stdout, or the SiteError its failure means."""
        try:
            return self.runner.run(argv, timeout=self.timeout, input_text=input_text, check=check).stdout
        except (RemoteAuthError, RemoteHostKeyError) as exc:
            raise AuthenticationError(str(exc), site=self.name) from None
        except RemoteAccessError as exc:
            raise TransientError(str(exc), site=self.name) from None
        except CommandNotFoundError as exc:
            raise InvalidRequestError(
                f"{exc}: install Grid Engine's client commands (Debian: apt-get install gridengine-client)",
                site=self.name,
            ) from None
        except CommandTimeoutError as exc:
            raise SiteTimeoutError(f"Grid Engine does not answer: {exc}", site=self.name) from None
        except CommandFailedError as exc:
            raise _classify(exc, self.name) from None
        except CommandError as exc:
            raise TransientError(str(exc), site=self.name) from None

    @property
    def prefix(self) -> str:
        """The start of the names of this manager's jobs."""
        return f"isthmus.{self.manager_id}."

    def job_name(self, key: str) -> str:
        """The Grid Engine job name that marks a job of this manager with `key`."""
        return self.prefix + key.replace("/", "_")

    def _key_of(self, name: str) -> str:
        return name[len(self.prefix) :].replace("_", "/") if name.startswith(self.prefix) else ""

    def qsub_args(self, r: RunRequest) -> list[str]:
        """The qsub options for `r` (the script comes on stdin)."""
        args = ["qsub", "-terse", "-N", self.job_name(r.key), "-S", "/bin/sh"]
        if r.size > 1:
            args += ["-pe", self.parallel_environment, str(r.size)]
        if self.queue:
            args += ["-q", self.queue]
        if r.walltime is not None:
            args += ["-l", f"h_rt={max(1, math.ceil(r.walltime))}"]
        args += ["-wd", r.cwd or "/tmp"]
        args += ["-o", r.stdout or "/dev/null"]
        if r.stderr and r.stderr != r.stdout:
            args += ["-e", r.stderr]
        else:
            args += ["-j", "y"]
        if r.env:
            args += ["-v", ",".join(f"{k}={v}" for k, v in sorted(r.env.items()))]
        args.extend(self.extra_options)
        return args

    # ------------------------------------------------------------------------ BatchSystem

    def submit(self, requests: Sequence[RunRequest]) -> list[str | SiteError]:
        """Submit each request as one job; its Grid Engine job id, or why Grid Engine refused it."""
        out: list[str | SiteError] = []
        for r in requests:
            bad = [k for k, v in r.env.items() if "," in v or "\n" in v or "=" in k]
            if bad:
                out.append(InvalidRequestError(f"environment variables qsub cannot pass: {bad}", site=self.name))
                continue
            if r.run_as is not None:
                out.append(InvalidRequestError("qsub cannot submit a job as another user", site=self.name))
                continue
            if r.nodes not in (None, 1):
                out.append(InvalidRequestError(f"{r.nodes} nodes: only one host per job is asked", site=self.name))
                continue
            script = "#!/bin/sh\nexec " + " ".join(shlex.quote(a) for a in r.command) + "\n"
            try:
                job_id = self._run(self.qsub_args(r), input_text=script).strip()
            except SiteError as exc:
                out.append(exc)
                continue
            if not job_id.isdigit():
                out.append(TransientError(f"qsub answered {job_id!r} instead of a job id", site=self.name))
                continue
            out.append(job_id)
        return out

    def _listing(self) -> ET.Element:
        """`qstat -u '*' -xml`: every job Grid Engine holds, running and pending, of every user."""
        text = self._run(["qstat", "-u", "*", "-xml"])
        try:
            return ET.fromstring(text)
        except ET.ParseError as exc:
            raise TransientError(f"qstat answered unreadable XML: {exc}", site=self.name) from None

    def _jobs(self, root: ET.Element | None = None) -> dict[str, RemoteState]:
        """This manager's jobs Grid Engine holds, by job id."""
        root = self._listing() if root is None else root
        jobs: dict[str, RemoteState] = {}
        for j in root.iter("job_list"):
            job_id = j.findtext("JB_job_number", "")
            key = self._key_of(j.findtext("JB_name", ""))
            if not job_id or not key:
                continue
            native = j.findtext("state", "")
            queue = j.findtext("queue_name", "") or ""
            jobs[job_id] = RemoteState(
                provider_id=job_id,
                state=translate(GRID_ENGINE_STATES, native, system=f"Grid Engine ({self.name})"),
                native=native,
                key=key,
                reason="in error state (qstat -j tells why)" if native.startswith("E") else "",
                nodes=(queue.partition("@")[2],) if "@" in queue else (),
            )
        return jobs

    def status(self, provider_ids: Sequence[str]) -> dict[str, RemoteState]:
        """The state of each job (one qstat call; qacct for those that ended)."""
        held = self._jobs()
        out = {pid: held[pid] for pid in provider_ids if pid in held}
        now = time.monotonic()
        for pid in provider_ids:
            if pid in held:
                self._missing_since.pop(pid, None)
                continue
            st = self._accounting(pid)
            if st is not None:
                self._missing_since.pop(pid, None)
                out[pid] = st
                continue
            since = self._missing_since.setdefault(pid, now)
            if now - since < ACCOUNTING_GRACE:  # ended; its record is not written yet
                out[pid] = RemoteState(pid, JobState.RUNNING, "ended (accounting pending)")
        return out

    def _accounting(self, pid: str) -> RemoteState | None:
        """An ended job from `qacct -j` (None when it has no record, yet or at all)."""
        try:
            text = self.runner.run(["qacct", "-j", pid], timeout=self.timeout, check=False).stdout
        except CommandError:
            return None
        fields: dict[str, str] = {}
        for line in text.splitlines():
            k, _, v = line.partition(" ")
            if k in ("jobnumber", "jobname", "failed", "exit_status") and k not in fields:
                fields[k] = v.strip()
        if fields.get("jobnumber") != pid or "exit_status" not in fields:
            return None
        failed = fields.get("failed", "0").split()[0] if fields.get("failed") else "0"
        status = fields["exit_status"].split()[0]
        code = int(status) if status.isdigit() else None
        if failed == "0":
            state, native = (JobState.COMPLETED, "done") if code == 0 else (JobState.FAILED, "exited")
            reason = ""
        elif failed == _FAILED_TIMEOUT:
            state, native, reason = JobState.TIMEOUT, "h_rt exceeded", fields["failed"]
        elif failed == "100" and code == 137:
            state, native, reason = JobState.CANCELLED, "deleted", fields["failed"]
        else:
            state, native, reason = JobState.FAILED, f"failed {failed}", fields["failed"]
        return RemoteState(
            pid, state, native, key=self._key_of(fields.get("jobname", "")), exit_code=code, reason=reason
        )

    def cancel(self, provider_ids: Sequence[str]) -> dict[str, SiteError | None]:
        """qdel each job (one call); None for success."""
        if not provider_ids:
            return {}
        try:
            self._run(["qdel", *provider_ids])
        except InvalidRequestError as exc:  # some id unknown: delete one by one to tell which
            if len(provider_ids) == 1:
                return {provider_ids[0]: exc}
            return {pid: self.cancel([pid])[pid] for pid in provider_ids}
        return dict.fromkeys(provider_ids)

    def capacity(self) -> Capacity:
        """Slots of the queue's instances: total, usable (not in an unusable state), free; and
        what other users' pending jobs ask for."""
        argv = ["qstat", "-f", "-xml"]
        if self.queue:
            argv += ["-q", self.queue]
        try:
            root = ET.fromstring(self._run(argv))
        except ET.ParseError as exc:
            raise TransientError(f"qstat answered unreadable XML: {exc}", site=self.name) from None
        total = usable = free = 0
        down: list[str] = []
        instances = list(root.iter("Queue-List"))
        if not instances and self.queue:
            raise InvalidRequestError(f"queue {self.queue!r} has no instance (qstat -f lists none)", site=self.name)
        for q in instances:
            slots = _int(q.findtext("slots_total"))
            total += slots
            state = q.findtext("state", "") or ""
            if _UNUSABLE & set(state):
                down.append(f"{q.findtext('name', '')} {state}")
                continue
            usable += slots
            free += max(0, slots - _int(q.findtext("slots_used")) - _int(q.findtext("slots_resv")))
        # qstat -xml lists a pending job's slots, not how its parallel environment spreads them
        # nor its memory (h_vmem is only in `qstat -r`/`-j`): each job is reported as its slots
        # on at least one host, memory unknown
        jobs = [
            WaitingJob(1, _int(j.findtext("slots")) or 1)
            for j in self._listing().iter("job_list")
            if j.get("state") == "pending" and not self._key_of(j.findtext("JB_name", ""))
        ]
        return Capacity(
            total, usable, free, sum(j.cpus for j in jobs), reason="; ".join(down), waiting_jobs=tuple(jobs)
        )

    def find(self) -> dict[str, RemoteState]:
        """Every job Grid Engine holds that this manager submitted, by job id (with its key)."""
        return self._jobs()


def _int(text: str | None) -> int:
    return int(text) if text and text.strip().isdigit() else 0


def _classify(exc: CommandFailedError, site: str) -> SiteError:
    """The SiteError a failed Grid Engine command means, with its own message."""
    text = (exc.stderr or exc.stdout).strip()
    lines = [line for line in text.splitlines() if line.strip() and line.strip() != "Exiting."]
    message = lines[-1] if lines else str(exc)
    low = text.lower()
    if "unable to contact qmaster" in low or "commlib error" in low or "can't connect" in low or "timeout" in low:
        return SiteTimeoutError(message, site=site)
    if "permission denied" in low or "access denied" in low or "not allowed" in low:
        return AuthenticationError(message, site=site)
    if "max_u_jobs" in low or "max_jobs" in low or "limit" in low:
        return QuotaError(message, site=site)
    if "rejected" in low or "unknown" in low or "does not exist" in low or "invalid" in low or "denied" in low:
        return InvalidRequestError(message, site=site)
    return TransientError(message, site=site)
