"""A live cluster site behind a batch system in direct mode: each run of an isthmus job is one
job of the site's local resource manager (Slurm or Grid Engine), so that its accounting sees
users' work.

The engine's bookkeeping stays the simulator's (`SiteBackend`: processors free and busy, runs);
this backend turns a start into a submission and a stop into a cancellation, both through the
site's `SiteWorker` off the event loop, and polls the system every `poll_interval` seconds in
one batch (`BatchSystem.status` of every run, plus `capacity`). Results come back on the loop:

- a submission refused by the system fails the run alone with the system's message;
- RUNNING marks the run running (the API and history show it); an end is the run's end, with
  the exit code the system reports; TIMEOUT at the system's limit is a failure (-9); NODE_FAIL
  or PREEMPTED lose the run (requeued as a recorded restart); a job cancelled outside isthmus
  ends as failed, saying so;
- capacity follows the system: processors on nodes down or drained go offline, processors
  other users' jobs hold or wait for are not free for isthmus; a system that does not answer
  makes the site unavailable with the reason (nothing is lost: runs are polled again).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

from isthmus.agent.accounts import create_for, own_dir
from isthmus.agent.jobenv import job_environment
from isthmus.backends.api import BatchSystem, Capacity, RemoteState, RunRequest
from isthmus.backends.errors import SiteError
from isthmus.backends.external import WorkerThread, cancel_quietly
from isthmus.backends.host import SiteHost
from isthmus.backends.jobfiles import run_files
from isthmus.engine.backend import SiteBackend
from isthmus.engine.state import JobEntry
from isthmus.model.site import Site
from isthmus.model.states import JobState
from isthmus.store.projector import RunRecord

log = logging.getLogger("isthmus.backends.batch_site")


class BatchCluster(WorkerThread, SiteBackend):
    """A cluster site whose runs are jobs of a batch system (see the module docstring)."""

    def __init__(
        self, index: int, site: Site, make: Callable[[str], BatchSystem], ctx: SiteHost, poll_interval: float
    ) -> None:
        super().__init__(index, site)
        self._make = make
        self.batch: BatchSystem | None = None
        self.ctx = ctx
        self.poll_interval = poll_interval
        self.online = self.free = site.nodes * site.cores_per_node  # until the first discovery
        self.external = 0  # processors other users hold or wait for
        self.waiting_local = 0  # processors local users' jobs wait for (last poll)
        self.provider: dict[tuple[int, int], str] = {}  # (job, run) -> provider id
        self.cancel_when_known: set[tuple[int, int]] = set()
        self.confirmed: set[tuple[int, int]] = set()
        self._reattach: dict[int, str] = {}  # job -> provider id recorded before a restart
        self._polling = False

    # ----------------------------------------------------------------------------- plumbing

    def begin(self, manager_id: str) -> None:
        """Connect to the system as manager `manager_id` (its jobs carry it) and start polling
        (the manager calls this once its loop runs)."""
        self.batch = self._make(manager_id)
        self.worker.call(self.system.find, done=self._found)

    def expect_reattach(self, job_id: int, slots: list[tuple[str, int]]) -> None:
        """A run recorded before a restart: its slot is the system's job id (if it was known)."""
        if slots:
            self._reattach[job_id] = slots[0][0]

    def _found(self, result: dict[str, RemoteState] | SiteError) -> None:
        """After a restart: adopt this manager's jobs the system still holds for current runs
        (whose submission answer was lost in the crash), cancel those of runs no longer current
        (so nothing runs twice), then start polling."""
        self.ctx.later(0.0, self.poll)
        if isinstance(result, SiteError):
            log.warning("site %s: cannot list its jobs at start (%s); recorded runs are polled", self.name, result)
            return
        known = set(self.provider.values())
        stale = []
        for pid, st in result.items():
            if pid in known or st.state.terminal:
                continue
            job, run = _parse_key(st.key)
            entry = self.ctx.engine.entries.get(job)
            if entry is not None and entry.run == run and job in self.running:
                self.provider[(job, run)] = pid
                log.info("job %s run %s: adopted %s job %s", job, run, self.name, pid)
            else:
                stale.append(pid)
        if stale:
            log.warning("site %s: cancelling %d job(s) of runs no longer current: %s", self.name, len(stale), stale)
            self.worker.call(self.system.cancel, stale, done=lambda r: None)

    def key(self, job: int, run: int) -> str:
        """The name of run `run` of job `job` in the system (in its comment)."""
        return f"j{job}r{run}"

    @property
    def system(self) -> BatchSystem:
        """The batch system (connected by `begin`)."""
        if self.batch is None:
            raise RuntimeError(f"site {self.name} is used before the manager started it")
        return self.batch

    def request(self, entry: JobEntry) -> RunRequest:
        """What to submit for the current run of `entry`."""
        job, run = entry.job.id, entry.run
        spec = self.ctx.intake.specs.get(job, {})
        spool = self.ctx.spool / str(job)
        spool.mkdir(parents=True, exist_ok=True)
        account = self.ctx.job_account(job)  # [users]: its spool and script are its account's
        if account is not None:
            own_dir(str(spool), account)
        stdout, stderr, _ = run_files(spec, job, spool, run)
        job_vars = {
            "ISTHMUS_JOB_ID": str(job),
            "ISTHMUS_RUN": str(run),
            "ISTHMUS_NPROCS": str(entry.job.size),
            "ISTHMUS_SITE": self.name,
        }
        if self.ctx.config.tag:
            job_vars["ISTHMUS_TAG"] = self.ctx.config.tag
        env = job_environment(spec.get("env") or {}, job_vars)  # explicit: never the manager's
        if account is not None:
            env.update(HOME=account.home, USER=account.name, LOGNAME=account.name)
        if spec.get("script") is not None:
            script = spool / "job.script"
            if account is not None:
                create_for(str(script), spec["script"].encode(), 0o700, account)
            else:
                script.write_text(spec["script"])
                script.chmod(0o700)
            command: tuple[str, ...] = (str(script), *spec.get("args", []))
            if not spec["script"].startswith("#!"):
                command = ("/bin/sh", *command)
        else:
            command = (spec.get("command", "true"), *[str(a) for a in spec.get("args") or []])
        return RunRequest(
            key=self.key(job, run),
            command=command,
            size=entry.job.size,
            walltime=entry.job.requested_runtime if self.ctx.engine.enforce_walltime else None,
            name=spec.get("name") or f"isthmus-{job}",
            cwd=spec.get("cwd") or str(spool),
            stdout=stdout,
            stderr=stderr,
            env=env,
            run_as=None if account is None else (account.name, account.gid),
        )

    # ---------------------------------------------------------------------- SiteBackend

    def start(self, entry: JobEntry, now: float) -> None:
        """Submit the run (its processors count as busy from now)."""
        self.free -= entry.job.size
        self._track_start(entry, now)
        job, run = entry.job.id, entry.run
        self.ctx.hub.records[(job, run)] = RunRecord((), entry.limit)
        if self.ctx.hub.recovering:  # re-attached: the job is already in the system
            pid = self._reattach.pop(job, None)
            if pid is not None:
                self.provider[(job, run)] = pid
                self.ctx.hub.records[(job, run)] = RunRecord(((pid, 0),), entry.limit)
            return
        try:
            req = self.request(entry)
        except (OSError, LookupError) as exc:  # LookupError: no account to run it as
            self.ctx.later(0.0, self._refused, job, run, f"cannot prepare the job: {exc}")
            return
        self.worker.call(self.system.submit, [req], done=lambda r: self._submitted(job, run, r))

    def stop(self, entry: JobEntry, now: float) -> None:
        """Cancel the run in the system and free its processors."""
        self.free += entry.job.size
        self._track_stop(entry)
        key = (entry.job.id, entry.run)
        pid = self.provider.pop(key, None)
        if pid is None:
            self.cancel_when_known.add(key)  # its submission has not answered yet
            return
        self.worker.call(self.system.cancel, [pid], done=lambda r: self._cancelled(pid, r))

    def finished(self, entry: JobEntry, now: float) -> None:
        """The run ended: free its processors."""
        self.free += entry.job.size
        self._track_stop(entry)
        self.provider.pop((entry.job.id, entry.run), None)

    def available(self, now: float) -> bool:
        """Not while the system does not answer."""
        return not self.unavailable and super().available(now)

    # ------------------------------------------------------------------- results (on the loop)

    def _submitted(self, job: int, run: int, result: list[str | SiteError] | SiteError) -> None:
        outcome = result if isinstance(result, SiteError) else result[0]
        if isinstance(outcome, SiteError):
            self._refused(job, run, f"{self.name} refused the job: {outcome}")
            return
        if (job, run) in self.cancel_when_known:
            self.cancel_when_known.discard((job, run))
            self.worker.call(self.system.cancel, [outcome], done=lambda r: self._cancelled(outcome, r))
            return
        self.provider[(job, run)] = outcome
        self.ctx.hub.records[(job, run)] = RunRecord(((outcome, 0),), self.ctx.hub.records[(job, run)].limit)
        try:  # where the run is: a restart re-attaches it by this id
            self.ctx.store.set_slots(job, run, [(outcome, 0)])
        except Exception as exc:  # the job is found again by its comment after a restart
            log.warning("job %s run %s: could not record %s job %s: %s", job, run, self.name, outcome, exc)
        log.info("job %s run %s is %s job %s", job, run, self.name, outcome)
        self.ctx.hub.history_note(job, run, f"{self.name} job {outcome}")

    def _refused(self, job: int, run: int, why: str) -> None:
        """The run could not be submitted: it fails alone, with the reason."""
        log.warning("job %s run %s: %s", job, run, why)
        with self.ctx.external():
            self.ctx.hub.ended[(job, run)] = {"error": why}
            self.ctx.engine.job_ended(job, run, 1)

    def _cancelled(self, pid: str, result: dict[str, SiteError | None] | SiteError) -> None:
        err = result if isinstance(result, SiteError) else result.get(pid)
        if err is not None:
            log.warning("%s: could not cancel job %s: %s", self.name, pid, err)

    def poll(self) -> None:
        """Ask the system for the state of every run and its capacity (one batch, off the loop)."""
        if self.ctx.stopping:
            return
        if self._polling:
            self.ctx.later(self.poll_interval, self.poll)
            return
        self._polling = True
        ids = dict(self.provider)
        self.worker.call(self._observe, list(ids.values()), done=lambda r: self._observed(ids, r))

    def _observe(self, provider_ids: list[str]) -> tuple[Capacity, dict[str, RemoteState]]:
        """In the worker thread: capacity and states in two calls."""
        return self.system.capacity(), self.system.status(provider_ids) if provider_ids else {}

    def _observed(
        self,
        ids: dict[tuple[int, int], str],
        result: tuple[Capacity, dict[str, RemoteState]] | SiteError,
    ) -> None:
        self._polling = False
        self.ctx.later(self.poll_interval, self.poll)
        with self.ctx.external():
            if isinstance(result, SiteError):
                if not self.unavailable:
                    log.warning("site %s unavailable: %s", self.name, result)
                self.unavailable = str(result)
                return
            was_unavailable, free_before = bool(self.unavailable), self.free
            if self.unavailable:
                log.warning("site %s answers again", self.name)
            self.unavailable = ""
            capacity, states = result
            self._capacity(capacity)
            if was_unavailable or self.free > free_before:  # room the queue may use: decide again
                self.ctx.engine.request_round(self.ctx.clock.now)
            for (job, run), pid in ids.items():
                if self.provider.get((job, run)) != pid:
                    continue  # ended or killed meanwhile
                st = states.get(pid)
                if st is None:
                    self._lose(job, run, f"{self.name} no longer knows its job {pid}")
                else:
                    self._follow(job, run, st)

    def _capacity(self, c: Capacity) -> None:
        """Online and free processors from what the system reports, bounded by the site's size."""
        limit = self.site.nodes * self.site.cores_per_node
        mine = sum(e.job.size for e in self.running.values())
        online = min(c.usable, limit)
        # what the system has busy beyond this manager's runs, plus what other users wait for
        external = max(0, c.usable - c.free - mine) + c.waiting_local
        self.online = online
        self.external = external
        self.waiting_local = c.waiting_local
        # processors kept for local users count as taken (KOALA-CS §3.2.1: local jobs first)
        keep = self.site.lrm.keep_free if self.site.lrm is not None else 0
        self.free = max(0, online - external - mine - keep)  # the next poll corrects what ends meanwhile
        if c.reason:
            log.info("site %s: %s", self.name, c.reason)

    def _follow(self, job: int, run: int, st: RemoteState) -> None:
        """Apply what the system says of one run."""
        engine = self.ctx.engine
        if st.state in (JobState.RUNNING, JobState.STARTING) and (job, run) not in self.confirmed:
            if st.state is JobState.RUNNING:
                self.confirmed.add((job, run))
                nodes = ",".join(st.nodes)
                self.ctx.hub.mark_running([(job, run, time.time(), f"{self.name} job {st.provider_id} on {nodes}")])
            return
        if not st.state.terminal and st.state is not JobState.LOST:
            return
        self.confirmed.discard((job, run))
        if st.state is JobState.COMPLETED:
            self.ctx.hub.ended[(job, run)] = {}
            engine.job_ended(job, run, 0)
        elif st.state is JobState.LOST:
            self._lose(job, run, f"{self.name} job {st.provider_id} {st.native}")
        elif st.state is JobState.CANCELLED:
            self.ctx.hub.ended[(job, run)] = {
                "error": f"{self.name} job {st.provider_id} was cancelled outside isthmus"
            }
            engine.job_ended(job, run, st.exit_code if st.exit_code else -15)
        else:
            code = st.exit_code if st.exit_code else (-9 if st.state is JobState.TIMEOUT else 1)
            why = f"{self.name} job {st.provider_id} {st.native}" + (f" ({st.reason})" if st.reason else "")
            self.ctx.hub.ended[(job, run)] = {"error": why}
            engine.job_ended(job, run, code)

    def cancel_all(self) -> None:
        """At a stop that kills jobs: cancel every run of this manager in the system (blocking)."""
        cancel_quietly(self.batch, list(self.provider.values()), self.name)

    def _lose(self, job: int, run: int, why: str) -> None:
        entry = self.ctx.engine.entries.get(job)
        pid = self.provider.pop((job, run), None)
        if pid is not None:  # killed means killed: what the system still runs of it ends first
            self.worker.call(self.system.cancel, [pid], done=lambda r: self._cancelled(pid, r))
        if entry is None or entry.run != run:
            return
        log.warning("job %s run %s lost: %s", job, run, why)
        self.ctx.hub.lost_reasons[(job, run)] = why
        self.ctx.engine.lost(job, run)

    def describe(self) -> dict[str, object]:
        """The site's figures (`SiteBackend.describe`) and its batch system: driver, mode, the
        processors kept free for local users and those local users' jobs wait for (last poll)."""
        d = super().describe()
        lrm = self.site.lrm
        assert lrm is not None
        d["lrm"] = {
            "driver": lrm.driver,
            "mode": lrm.mode,
            "keep_free": lrm.keep_free,
            "waiting_local": self.waiting_local,
        }
        return d


def _parse_key(key: str) -> tuple[int, int]:
    """(job, run) of a key `j<job>r<run>`; (-1, -1) for anything else."""
    job, sep, run = key.removeprefix("j").partition("r")
    return (int(job), int(run)) if sep and job.isdigit() and run.isdigit() else (-1, -1)
