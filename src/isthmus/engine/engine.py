"""The engine: one control loop (observe, decide, act) for both clocks.

It owns the state (queues, sites, jobs, event log), hands policies a read-only view each
round, validates their decisions and applies the accepted ones through the site backends.
Time comes in as data (`now`), set by whoever drives the engine: the simulation runner from
its event heap, the live manager from the wall clock.

Rounds run when something changed (a job arrived or ended, a VM came up) or a policy asked
for a wake-up: immediately after the events of an instant when `round_interval` is None, or
at the next multiple of `round_interval` (KOALA-C's periodic scheduler, §IV-A: every 30 s).
A round in which nothing changed would decide nothing new, so skipping it does not change
the schedule; this is the contract policies keep (time-dependent policies ask for WakeUp).
"""

from __future__ import annotations

import math
from collections import OrderedDict, deque
from collections.abc import Callable, Sequence
from typing import Any

from isthmus.engine.backend import CloudBackend, SiteBackend, Vm, VmState
from isthmus.engine.clock import (
    EV_BILLING,
    EV_END,
    EV_LIMIT,
    EV_ROUND,
    EV_VM_GONE,
    EV_VM_READY,
    EV_WAKE,
    PRIO_BILLING,
    PRIO_LIMIT,
    PRIO_ROUND,
)
from isthmus.engine.state import JobEntry, JobState
from isthmus.engine.view import EngineView
from isthmus.model.decisions import HoldJob, KillJob, LeaseVms, ReleaseVms, StartJob, WakeUp
from isthmus.model.environment import Environment
from isthmus.model.events import EventKind, EventLog, KillCause
from isthmus.model.job import Job

Schedule = Callable[[float, int, int, int, int], None]

_SUBMIT = int(EventKind.SUBMIT)
_START = int(EventKind.START)
_END = int(EventKind.END)
_KILL = int(EventKind.KILL)
_REQUEUE = int(EventKind.REQUEUE)


class DecisionRefusedError(Exception):
    """A decision the engine refused; the message says why."""


class Engine:
    """State, rounds, validation and application of decisions."""

    def __init__(
        self,
        env: Environment,
        allocation: Any,
        provisioning: Any,
        predictor: Any | None,
        backends: Sequence[SiteBackend],
        schedule: Schedule,
        *,
        round_interval: float | None = None,
        log: EventLog | None = None,
        check_purity: bool = False,
        budget: float | None = None,
    ) -> None:
        self.env = env
        self.allocation = allocation
        self.provisioning = provisioning
        self.predictor = predictor
        self.backends = list(backends)
        self._at = schedule
        self.round_interval = round_interval
        self.log = log if log is not None else EventLog()
        self.check_purity = check_purity
        if budget is not None and budget < 0:
            raise ValueError(f"budget must be >= 0, got {budget}")
        #: Cap on the charged cost of all leases ($); None: no cap.
        self.budget = budget
        #: Charged cost committed so far: every started billing increment of every lease.
        self.spent = 0.0
        #: Billing-boundary events in the clock (only kept when there is a budget).
        self.billing_pending = 0
        self.now = 0.0
        self.view = EngineView(self)
        self.stage_sites: list[tuple[int, ...]] = allocation.stage_sites(env)
        self._arrival_stage = getattr(allocation, "arrival_stage", None)
        self._next_stage = getattr(allocation, "next_stage", None)
        # OrderedDict: O(1) removal anywhere and O(1) access to the head; a plain dict slows
        # iteration from the front once many jobs have left it.
        self.queues: list[OrderedDict[int, JobEntry]] = [OrderedDict() for _ in self.stage_sites]
        # The same queues split by job size (size -> jobs in queue order), so that policies can
        # visit only the jobs that fit in the processors left (queue_by_size in the view). Kept
        # only for allocation policies that declare they read it: it costs the others time.
        self.size_index: bool = getattr(allocation, "uses_size_index", False)
        self.buckets: list[dict[int, OrderedDict[int, JobEntry]]] = [{} for _ in self.stage_sites]
        self._seq = 0
        self.entries: dict[int, JobEntry] = {}
        self.history: dict[str, deque[float]] = {}
        self.runtime_sum = 0.0
        self.runtime_count = 0
        self.why_not: dict[int, str] = {}
        self.rejected_decisions = 0
        self.rounds = 0
        self._round_at = math.inf
        self._last_round = -math.inf
        self._stage_max = [
            max((self.backends[i].site.max_processors for i in sites), default=0)
            for sites in self.stage_sites
        ]

    # ----------------------------------------------------------------- arrivals and events

    def submit(self, job: Job) -> JobEntry | None:
        """A job arrives now. Returns its entry, or None when it can never run here."""
        now = self.now
        log = self.log
        if job.id in self.entries:
            raise ValueError(f"job {job.id} was already submitted")
        log.append(now, _SUBMIT, job.id, -1, -1, job.size)
        stage = self._arrival_stage(job) if self._arrival_stage is not None else 0
        if job.size > self._stage_max[stage] or job.size <= 0:
            sites = self.stage_sites[stage]
            largest = max((self.backends[i] for i in sites), key=lambda b: b.site.max_processors)
            log.append(now, int(EventKind.REJECT), job.id)
            log.reasons[job.id] = (
                f"needs {job.size} processors; the largest site it may use ({largest.name}) offers at most "
                f"{largest.site.max_processors}"
            )
            return None
        entry = JobEntry(job, now)
        if self.predictor is not None:
            entry.predicted = self.predictor.predict(self.view, job)
        self.entries[job.id] = entry
        self._enqueue(entry, stage)
        self._changed()
        return entry

    def _enqueue(self, entry: JobEntry, stage: int) -> None:
        """Append `entry` to queue `stage` (and to its size bucket)."""
        entry.stage = stage
        job_id = entry.job.id
        self.queues[stage][job_id] = entry
        if not self.size_index:
            return
        self._seq += 1
        entry.seq = self._seq
        bucket = self.buckets[stage].get(entry.job.size)
        if bucket is None:
            bucket = self.buckets[stage][entry.job.size] = OrderedDict()
        bucket[job_id] = entry

    def _dequeue(self, entry: JobEntry) -> None:
        """Remove `entry` from its queue (and its size bucket)."""
        job_id = entry.job.id
        del self.queues[entry.stage][job_id]
        if not self.size_index:
            return
        buckets = self.buckets[entry.stage]
        bucket = buckets[entry.job.size]
        del bucket[job_id]
        if not bucket:
            del buckets[entry.job.size]

    def handle(self, kind: int, a: int, b: int) -> None:
        """Apply one clock event (already due at `now`)."""
        if kind == EV_END:
            self._run_ended(a, b)
        elif kind == EV_ROUND:
            if self.now == self._round_at:
                self.run_round()
        elif kind == EV_LIMIT:
            self._limit_reached(a, b)
        elif kind == EV_VM_READY:
            backend = self.backends[a]
            assert isinstance(backend, CloudBackend)
            if backend.vm_ready(b, self.now):
                self.log.append(self.now, int(EventKind.VM_READY), -1, a, b)
                self._changed()
        elif kind == EV_VM_GONE:
            backend = self.backends[a]
            assert isinstance(backend, CloudBackend)
            if backend.vm_gone(b, self.now):
                self.log.append(self.now, int(EventKind.VM_GONE), -1, a, b)
        elif kind == EV_WAKE:
            self._changed()
        elif kind == EV_BILLING:
            self.billing_pending -= 1
            self._billing_boundary(a, b)

    def job_ended(self, job_id: int, run: int, exit_code: int = 0) -> None:
        """Run number `run` of job `job_id` ended now with `exit_code` (0: completed, else failed).

        Live backends call this when a pilot reports; a report for a run that is no longer
        current (killed and restarted meanwhile) is ignored.
        """
        self._run_ended(job_id, run, exit_code)

    def lost(self, job_id: int, run: int) -> bool:
        """Run `run` of `job_id` was lost (its pilot or node died): kill it (cause LOST) and requeue it.

        False when that run is no longer the current one.
        """
        entry = self.entries.get(job_id)
        if entry is None or entry.state is not JobState.RUNNING or entry.run != run:
            return False
        self._kill(entry, KillCause.LOST, requeue=True)
        return True

    def restore(self, job: Job, *, stage: int = 0, run: int = 0, restarts: int = 0) -> JobEntry | None:
        """Re-enter a job recorded before a manager restart, queued in `stage` with its run counts.

        Call with `now` at the job's submit time; a recorded running job is then re-attached by
        applying a StartJob for it. Returns None if the job can no longer run here.
        """
        entry = self.submit(job)
        if entry is None:
            return None
        entry.run = run
        entry.restarts = restarts
        stage = min(max(stage, 0), len(self.queues) - 1)
        if stage != entry.stage:
            self._dequeue(entry)
            self._enqueue(entry, stage)
        return entry

    def _run_ended(self, job_id: int, run: int, exit_code: int = 0) -> None:
        entry = self.entries.get(job_id)
        if entry is None or entry.state is not JobState.RUNNING or entry.run != run:
            return  # a completion of a run that was killed meanwhile
        now = self.now
        backend = self.backends[entry.site]
        backend.finished(entry, now)
        if exit_code == 0:
            entry.state = JobState.DONE
            self.log.append(now, _END, job_id, entry.site, -1, 0)
            runtime = now - entry.started
            user = entry.job.user
            hist = self.history.get(user)
            if hist is None:
                hist = self.history[user] = deque(maxlen=2)
            hist.append(runtime)
            self.runtime_sum += runtime
            self.runtime_count += 1
        else:
            entry.state = JobState.FAILED
            self.log.append(now, int(EventKind.FAIL), job_id, entry.site, -1, exit_code)
        del self.entries[job_id]
        self.why_not.pop(job_id, None)
        self._changed()

    def _limit_reached(self, job_id: int, run: int) -> None:
        entry = self.entries.get(job_id)
        if entry is None or entry.state is not JobState.RUNNING or entry.run != run:
            return
        self._kill(entry, KillCause.LIMIT, requeue=True, next_stage=True)

    def _kill(self, entry: JobEntry, cause: KillCause, *, requeue: bool, next_stage: bool = False) -> None:
        now = self.now
        site = entry.site
        self.backends[site].stop(entry, now)
        self.log.append(now, _KILL, entry.job.id, site, -1, int(cause))
        if requeue:
            entry.restarts += 1
            if next_stage:
                if self._next_stage is not None:
                    entry.stage = self._next_stage(entry.stage)
                elif entry.stage + 1 < len(self.queues):
                    entry.stage += 1
            entry.site = -1
            if entry.job.size > self._stage_max[entry.stage]:
                entry.state = JobState.REJECTED
                self.log.append(now, int(EventKind.REJECT), entry.job.id)
                self.log.reasons[entry.job.id] = (
                    f"killed at the runtime limit; needs {entry.job.size} processors, more than any site "
                    f"of queue {entry.stage} offers"
                )
                del self.entries[entry.job.id]
                self._changed()
                return
            entry.state = JobState.QUEUED
            entry.queued_at = now
            self._enqueue(entry, entry.stage)
            self.log.append(now, _REQUEUE, entry.job.id, -1, -1, entry.stage)
        else:
            entry.state = JobState.FAILED
            self.log.append(now, int(EventKind.FAIL), entry.job.id, site, -1, -9)
            del self.entries[entry.job.id]
        self._changed()

    def cancel(self, job_id: int) -> bool:
        """Cancel a queued or running job; False if it is unknown or already ended."""
        entry = self.entries.get(job_id)
        if entry is None:
            return False
        if entry.state is JobState.RUNNING:
            self.backends[entry.site].stop(entry, self.now)
            self.log.append(self.now, _KILL, job_id, entry.site, -1, int(KillCause.CANCEL))
        else:
            self._dequeue(entry)
        entry.state = JobState.CANCELLED
        self.log.append(self.now, int(EventKind.CANCEL), job_id)
        del self.entries[job_id]
        self._changed()
        return True

    # ----------------------------------------------------------------------------- rounds

    def _changed(self) -> None:
        """Something changed now: make sure a round follows."""
        self._request_round(self.now)

    def _request_round(self, t: float) -> None:
        interval = self.round_interval
        if interval:
            t = math.ceil(t / interval - 1e-9) * interval
            if t <= self._last_round:
                t = self._last_round + interval
        elif t < self._last_round:
            t = self._last_round
        if t < self._round_at:
            self._round_at = t
            self._at(t, PRIO_ROUND, EV_ROUND, -1, -1)

    def run_round(self) -> None:
        """Ask the policies for decisions and apply them."""
        self._round_at = math.inf
        self._last_round = self.now
        self.rounds += 1
        view = self.view
        for policy in (self.provisioning, self.allocation):
            before = self._fingerprint() if self.check_purity else None
            decisions = list(policy.decide(view))
            if before is not None and self._fingerprint() != before:
                raise AssertionError(f"policy {policy.name!r} changed the engine state while deciding")
            for d in decisions:
                self.apply(d)

    def apply(self, d: object) -> str | None:
        """Validate and apply one decision; return None if applied, else the reason it was refused."""
        try:
            if type(d) is StartJob:
                self._start(d)
            elif type(d) is LeaseVms:
                self._lease(d)
            elif type(d) is ReleaseVms:
                self._release(d)
            elif type(d) is WakeUp:
                if d.time > self.now:
                    self._request_round(d.time)
            elif type(d) is HoldJob:
                self.why_not[d.job_id] = d.reason
            elif type(d) is KillJob:
                entry = self.entries.get(d.job_id)
                if entry is None or entry.state is not JobState.RUNNING:
                    raise DecisionRefusedError(f"job {d.job_id} is not running")
                self._kill(entry, KillCause.POLICY, requeue=d.requeue)
            else:
                raise DecisionRefusedError(f"unknown decision {d!r}")
        except DecisionRefusedError as exc:
            self.rejected_decisions += 1
            job_id = getattr(d, "job_id", None)
            if job_id is not None:
                self.why_not[job_id] = str(exc)
            return str(exc)
        return None

    def _start(self, d: StartJob) -> None:
        entry = self.entries.get(d.job_id)
        if entry is None or entry.state is not JobState.QUEUED:
            raise DecisionRefusedError(f"job {d.job_id} is not queued")
        if not 0 <= d.site < len(self.backends):
            raise DecisionRefusedError(f"site index {d.site} does not exist")
        backend = self.backends[d.site]
        if d.site not in self.stage_sites[entry.stage]:
            raise DecisionRefusedError(f"site {backend.name} is not among the sites of queue {entry.stage}")
        size = entry.job.size
        if size > backend.free:
            raise DecisionRefusedError(
                f"needs {size} processors; site {backend.name} has {backend.free} free"
            )
        now = self.now
        if not backend.available(now):
            raise DecisionRefusedError(f"site {backend.name} is not available now")
        self._dequeue(entry)
        entry.state = JobState.RUNNING
        entry.site = d.site
        entry.started = now
        entry.run += 1
        entry.limit = d.limit
        backend.start(entry, now)
        self.log.append(now, _START, entry.job.id, d.site, -1, size)
        if d.limit is not None:
            self._at(now + d.limit, PRIO_LIMIT, EV_LIMIT, entry.job.id, entry.run)
        if self.why_not:
            self.why_not.pop(entry.job.id, None)

    def _cloud(self, index: int) -> CloudBackend:
        if not 0 <= index < len(self.backends):
            raise DecisionRefusedError(f"site index {index} does not exist")
        backend = self.backends[index]
        if not isinstance(backend, CloudBackend):
            raise DecisionRefusedError(f"site {backend.name} is not a cloud")
        return backend

    def _lease(self, d: LeaseVms) -> None:
        backend = self._cloud(d.site)
        if d.count <= 0:
            raise DecisionRefusedError(f"lease of {d.count} VMs")
        room = backend.site.max_vms - backend.leased
        if d.count > room:
            raise DecisionRefusedError(
                f"lease of {d.count} VMs on {backend.name} exceeds its maximum ({backend.site.max_vms}, "
                f"{backend.leased} leased)"
            )
        if not backend.available(self.now):
            raise DecisionRefusedError(f"site {backend.name} is not available now")
        price = backend.site.price_per_increment if backend.site.is_paid else 0.0
        if self.budget is not None and self.spent + d.count * price > self.budget + 1e-9:
            raise DecisionRefusedError(
                f"lease of {d.count} VMs on {backend.name} (${d.count * price:.4f} for the first increment) "
                f"exceeds the budget: ${self.spent:.4f} of ${self.budget:.4f} committed"
            )
        for vm_id in backend.lease(d.count, self.now):
            self.log.append(self.now, int(EventKind.VM_LEASE), -1, d.site, vm_id)
            self.spent += price
            if price and self.budget is not None:
                self.billing_pending += 1
                self._at(self.now + backend.site.billing_increment, PRIO_BILLING, EV_BILLING, d.site, vm_id)

    def _release(self, d: ReleaseVms) -> None:
        backend = self._cloud(d.site)
        ids = tuple(dict.fromkeys(d.vm_ids))
        for vm_id in ids:
            vm = backend.vms.get(vm_id)
            if vm is None or vm.state is not VmState.READY:
                raise DecisionRefusedError(f"VM {vm_id} of {backend.name} is not a ready VM")
            if vm.free != vm.cores:
                raise DecisionRefusedError(f"VM {vm_id} of {backend.name} is running a job")
        if backend.leased - len(ids) < backend.site.min_vms:
            raise DecisionRefusedError(
                f"releasing {len(ids)} VMs would leave {backend.name} below its minimum of "
                f"{backend.site.min_vms}"
            )
        backend.release(ids, self.now)
        for vm_id in ids:
            self.log.append(self.now, int(EventKind.VM_RELEASE), -1, d.site, vm_id)

    def _billing_boundary(self, site: int, vm_id: int) -> None:
        """A paid VM reached the end of a billing increment: pay the next one or release it."""
        backend = self.backends[site]
        assert isinstance(backend, CloudBackend)
        vm = backend.vms.get(vm_id)
        if vm is None or vm.state not in (VmState.BOOTING, VmState.READY):
            return  # released meanwhile
        price = backend.site.price_per_increment
        assert self.budget is not None
        if self.spent + price <= self.budget + 1e-9:
            self.spent += price
            self.billing_pending += 1
            self._at(self.now + backend.site.billing_increment, PRIO_BILLING, EV_BILLING, site, vm_id)
            return
        for entry in [e for e in backend.running.values() if any(v == vm_id for v, _ in e.alloc)]:
            self._kill(entry, KillCause.BUDGET, requeue=True)
            self.why_not[entry.job.id] = f"its VM on {backend.name} was released: the budget is spent"
        if vm.state is VmState.BOOTING:
            backend.booting -= 1
            vm.state = VmState.READY  # release() expects a ready VM; it never became usable
            backend.online += vm.cores
            backend.free += vm.cores
        backend.release((vm_id,), self.now)
        self.log.append(self.now, int(EventKind.VM_RELEASE), -1, site, vm_id)
        self._changed()

    # ------------------------------------------------------------------------- answers

    def why(self, job_id: int) -> str:
        """Why job `job_id` is where it is (for queued jobs: why it is still waiting)."""
        entry = self.entries.get(job_id)
        if entry is None:
            reason = self.log.reasons.get(job_id)
            return reason if reason is not None else f"job {job_id} is not in the system"
        if entry.state is JobState.RUNNING:
            return f"running on {self.backends[entry.site].name} since {entry.started:g}"
        explicit = self.why_not.get(job_id)
        if explicit:
            return explicit
        explain = getattr(self.allocation, "explain", None)
        if explain is not None:
            text: str = explain(self.view, entry)
            if text:
                return text
        queue = self.queues[entry.stage]
        ahead = 0
        for other in queue:
            if other == job_id:
                break
            ahead += 1
        sites = self.stage_sites[entry.stage]
        most_free = max((self.backends[i].free for i in sites), default=0)
        return (
            f"waiting in queue {entry.stage} behind {ahead} jobs; needs {entry.job.size} processors, "
            f"the most free on its sites is {most_free}"
        )

    def _fingerprint(self) -> tuple[object, ...]:
        return (
            tuple(tuple(q) for q in self.queues),
            tuple(tuple(getattr(e, f) for f in JobEntry.__slots__) for e in self.entries.values()),
            tuple((b.free, b.online, len(b.running)) for b in self.backends),
            tuple(
                tuple(tuple(getattr(v, f) for f in Vm.__slots__) for v in b.vms.values())
                for b in self.backends
                if isinstance(b, CloudBackend)
            ),
        )
