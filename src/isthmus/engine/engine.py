"""The engine: one control loop (observe, decide, act) for both clocks.

It owns the state (jobs, sites, event log), hands policies a read-only view each round,
validates their decisions and applies the accepted ones through the site backends, recording
a status (code, reason, deciding policy) for each refusal. Time is the clock's: the engine reads
`clock.now` and schedules its events on the clock, which alone moves time
(`isthmus.engine.clock`); the simulator and the live daemon drive the engine only through it.

Rounds run when something changed (a job arrived or ended, a VM came up) or a policy asked
for a wake-up: immediately after the events of an instant when `round_interval` is None, or
at the next multiple of `round_interval` (KOALA-C's periodic scheduler, §IV-A: every 30 s).
A round in which nothing changed would decide nothing new, so skipping it does not change
the schedule; this is the contract policies keep (time-dependent policies ask for WakeUp).

This module keeps rounds, the clock events' switch and the application of decisions (dispatched
on the decision's class to a kind, `isthmus.decisions`). The rest lives in parts of its own,
each reaching the engine through a narrow protocol of `isthmus.engine.ops` that the engine
implements: `queues` (queues, their lazy indexes, admission), `runs` (run ends, kills, cancels),
`forwarding` (jobs crossing this manager between peers), `billing` (budget, billing boundaries,
lease churn), `recovery` (re-entering what was recorded before a restart) and `answers` (why a
job waits, the purity fingerprint).
"""

from __future__ import annotations

import math
import time
from collections import OrderedDict, deque
from collections.abc import Callable, Sequence

from isthmus.decisions import kinds
from isthmus.engine import answers, recovery, runs
from isthmus.engine.backend import CloudBackend, SiteBackend
from isthmus.engine.bags import BagBook
from isthmus.engine.billing import Billing
from isthmus.engine.budgets import CapState, Ledger, guard_takeovers, lease_users
from isthmus.engine.clock import (
    EV_BILLING,
    EV_END,
    EV_LIMIT,
    EV_ROUND,
    EV_TIMEOUT,
    EV_VM_GONE,
    EV_VM_READY,
    EV_WAKE,
    EV_WINDOW_END,
    PRIO_LIMIT,
    PRIO_ROUND,
    Schedule,
    SimClock,
)
from isthmus.engine.forwarding import Forwarding
from isthmus.engine.peering import Federation
from isthmus.engine.queues import QueueBook, admit
from isthmus.engine.state import JobEntry
from isthmus.engine.view import EngineView
from isthmus.model.environment import Environment
from isthmus.model.events import EventKind, EventLog, KillCause
from isthmus.model.job import Job, JobKind
from isthmus.model.states import JobState
from isthmus.model.status import ACCEPTED, Refused, Status, StatusCode
from isthmus.policies.build import PolicySet

_SUBMIT = int(EventKind.SUBMIT)
_END = int(EventKind.END)
_DECISION = int(EventKind.DECISION)
_MALLEABLE = JobKind.MALLEABLE

ROUND_RULES: tuple[str, ...] = ("batch", "per-event")
"""How events at one instant lead to rounds (docs/simulation.md, "Same-instant rules")."""

BackendFactory = Callable[[Schedule], Sequence[SiteBackend]]
"""Builds an engine's site backends, given the function that schedules events for that engine."""


class Engine:
    """State, rounds, validation and application of decisions."""

    def __init__(
        self,
        env: Environment,
        policies: PolicySet,
        clock: SimClock,
        backends: BackendFactory,
        *,
        round_interval: float | None = None,
        log: EventLog | None = None,
        check_purity: bool = False,
        budget: float | None = None,
        enforce_walltime: bool = False,
        rounds: str = "batch",
    ) -> None:
        if rounds not in ROUND_RULES:
            raise ValueError(f"rounds {rounds!r}: expected one of {', '.join(ROUND_RULES)}")
        if rounds == "per-event" and round_interval:
            raise ValueError("per-event rounds need event-triggered rounds (round_interval event), not periodic ones")
        #: "batch": completions, then arrivals, then one round per instant; "per-event": a round
        #: after each event (arrivals, fed first, before completions at equal times)
        self.round_rule = rounds
        self._per_event = rounds == "per-event"
        self._round_due = False
        self.env = env
        self.policies = policies
        self.allocation = policies.allocation
        self.predictor = policies.predictor
        # the policies consulted each round: not one that declares it decides nothing
        self._deciders = tuple(p for p in policies.deciders if not getattr(p, "decides_nothing", False))
        self.clock = clock
        #: this engine's target number on the clock (several engines may share one clock)
        self.target = clock.register(self.handle if rounds == "batch" else self._handle_then_round)
        self.schedule: Schedule = clock.scheduler(self.target)
        self.backends: list[SiteBackend] = list(backends(self.schedule))
        #: the cloud backend at each site index, None for a cluster (no ABC isinstance per call)
        self._clouds: list[CloudBackend | None] = [b if isinstance(b, CloudBackend) else None for b in self.backends]
        #: the cloud backends alone, in site order
        self.clouds: tuple[CloudBackend, ...] = tuple(b for b in self._clouds if b is not None)
        self.round_interval = round_interval
        self.log = log if log is not None else EventLog()
        self.check_purity = check_purity
        #: Kill a run that reaches its job's requested runtime; the job ends TIMEOUT (a batch
        #: system's walltime). Off in trace simulation: traces record runtimes that the original
        #: system allowed, some past the request.
        self.enforce_walltime = enforce_walltime
        #: no round decides anything while set (a live manager draining before it stops)
        self.paused = False
        #: the budget and the billing of paid VMs (isthmus.engine.billing)
        self.billing = Billing(self, budget, 10 * sum(s.max_vms for s in env.sites if s.is_cloud) + 100)
        #: the environment's budget caps and what each has charged (isthmus.engine.budgets)
        self.ledger = Ledger(
            env.budgets,
            {s.name: i for i, s in enumerate(env.sites)},
            frozenset(i for i, s in enumerate(env.sites) if s.is_cloud),
        )
        guard_takeovers(self)
        self.view = EngineView(self)
        allocation = self.allocation
        #: the queues and their indexes (isthmus.engine.queues); the lists below are the book's
        book = self.queue_book = QueueBook(allocation, allocation.stage_sites(env), self.backends)
        self.stage_sites: list[tuple[int, ...]] = book.stage_sites
        self.queues: list[OrderedDict[int, JobEntry]] = book.queues
        self.entries: dict[int, JobEntry] = {}
        self.history: dict[str, deque[float]] = {}
        self.runtime_sum = 0.0
        self.runtime_count = 0
        #: latest refusal or hold status of each queued job (its answer to "why")
        self.why_not: dict[int, Status] = {}
        #: refusals per status code (holds included), for a run's summary
        self.refusals: dict[StatusCode, int] = {}
        self.rounds = 0
        #: called with each round's duration in wall seconds (the live manager's /metrics)
        self.round_observer: Callable[[float], None] | None = None
        #: the policy whose decisions are being applied (named in the log when a decision does not)
        self.deciding = ""
        #: True once a ReserveVms was applied (only then do starts and cancels look for holds)
        self.reserving = False
        self._kinds = kinds()
        #: this manager's name among its peers (the environment's name unless set)
        self.name = env.name
        #: the peer managers this engine forwards to and receives from (None: no peers)
        self.federation: Federation | None = None
        #: the jobs crossing this manager between peers (isthmus.engine.forwarding); the dicts
        #: below are its: jobs not yet seen by the site-selection policy, jobs forwarded from here
        self.forwarding = Forwarding(self)
        self.unrouted: dict[int, JobEntry] = self.forwarding.unrouted
        self.forwarded: dict[int, tuple[JobEntry, int]] = self.forwarding.forwarded
        #: jobs with VM requirements admitted so far (policies then place them VM by VM)
        self.vm_jobs = 0
        self._round_at = math.inf
        self._last_round = -math.inf
        #: the bags of tasks (malleable jobs), in no queue (isthmus.engine.bags)
        self.bags = BagBook(self)
        #: decisions refused so far, holds included (a round that refused one may decide it again)
        self.refused_total = 0
        # Rounds of a `head_of_line` allocation policy (strict FCFS, TAGS-chain) that cannot start
        # anything are not asked of it: after it decided, every queue's head waited for
        # processors; only a queue with a new head or a site of it with more free processors
        # since (the queue book's `stale`; every queue after any other change) may start one now.
        self._head_of_line: bool = allocation.head_of_line
        # When such a policy is the only one deciding, a round is not even held after an event
        # that leaves every queue's head blocked (`_request_round`): it would ask nobody.
        self._quiet_rounds = self._head_of_line and len(self._deciders) == 1 and self._deciders[0] is allocation

    @property
    def now(self) -> float:
        """The clock's time (read-only: only the clock moves time)."""
        return self.clock.now

    @property
    def rejected_decisions(self) -> int:
        """Decisions refused so far (holds not counted)."""
        return sum(n for code, n in self.refusals.items() if code is not StatusCode.HELD)

    def idle(self) -> bool:
        """True when no job runs here nor is forwarded from here and not yet ended: once only
        background events (billing boundaries) remain, the jobs still queued wait for ever, and
        a run that went on would only pay boundaries of VMs kept for them (Startup keeps every
        VM; a daily cap may pay it for ever) without an end."""
        if self.forwarded:
            return False
        return not self.entries or not any(b.running for b in self.backends)

    def attach(self, federation: Federation) -> None:
        """Take part in forwarding through `federation`: new jobs are offered to the selection
        policy, a round runs when a site's availability window opens, and its end hands back the
        jobs received from peers that can no longer start here."""
        self.federation = federation
        self.forwarding.attached()

    @property
    def budget(self) -> float | None:
        """Cap on the charged cost of all leases ($); None: no cap."""
        return self.billing.budget

    @property
    def spent(self) -> float:
        """Charged cost committed so far: every started billing increment of every lease."""
        return self.billing.spent

    @spent.setter
    def spent(self, value: float) -> None:
        """Set what was charged so far (a live manager's recorded figure, after a restart)."""
        self.billing.spent = value

    # ----------------------------------------------------------------- arrivals and events

    def submit(self, job: Job) -> JobEntry | None:
        """A job arrives now. Returns its entry, or None when it can never run here (or when it is
        a bag of tasks: bags wait in no queue, isthmus.engine.bags)."""
        if job.kind is _MALLEABLE:
            self.bags.submit(job)
            return None
        now = self.clock.now
        if job.id in self.entries:
            raise ValueError(f"job {job.id} was already submitted")
        self.log.add(now, _SUBMIT, job.id, -1, job.size, -1, -1)
        return admit(self, job, now)

    def handle(self, kind: int, a: int, b: int) -> None:
        """Apply one clock event (already due at the clock's `now`)."""
        if kind == EV_END:
            runs.ended(self, a, b)
        elif kind == EV_ROUND:
            if self.clock.now == self._round_at:
                self.run_round()
        elif kind == EV_LIMIT:
            runs.limit_reached(self, a, b)
        elif kind == EV_TIMEOUT:
            runs.walltime_reached(self, a, b)
        elif kind == EV_VM_READY:
            backend = self.cloud_backend(a)
            if backend.vm_ready(b, self.clock.now):
                self.log.append(self.clock.now, int(EventKind.VM_READY), -1, a, b)
                self.changed()
        elif kind == EV_VM_GONE:
            backend = self.cloud_backend(a)
            if backend.vm_gone(b, self.clock.now):
                self.log.append(self.clock.now, int(EventKind.VM_GONE), -1, a, b)
        elif kind == EV_WAKE:
            self.changed()
        elif kind == EV_BILLING:
            self.billing.boundary(a, b)
        elif kind == EV_WINDOW_END:
            self.forwarding.window_ended()

    def job_ended(self, job_id: int, run: int, exit_code: int = 0) -> None:
        """Run number `run` of job `job_id` ended now with `exit_code` (0: completed, else failed).

        A live manager calls this when a site reports the end of a run; a report for a run that
        is no longer current (killed and restarted meanwhile) is ignored.
        """
        runs.ended(self, job_id, run, exit_code)

    def cloud_backend(self, index: int) -> CloudBackend:
        """The cloud backend at `index`; Refused (UNKNOWN_TARGET / INVALID) otherwise."""
        if not 0 <= index < len(self._clouds):
            raise Refused(StatusCode.UNKNOWN_TARGET, f"site index {index} does not exist")
        backend = self._clouds[index]
        if backend is None:
            raise Refused(StatusCode.INVALID, f"site {self.backends[index].name} is not a cloud")
        return backend

    def cloud_at(self, index: int) -> CloudBackend | None:
        """The cloud backend at existing site index `index`, None for a cluster."""
        return self._clouds[index]

    def schedule_limit(self, entry: JobEntry, at: float) -> None:
        """End the current run of `entry` at `at` for its runtime limit (requeued in the next stage)."""
        self.schedule(at, PRIO_LIMIT, EV_LIMIT, entry.job.id, entry.run)

    def schedule_walltime(self, entry: JobEntry, started: float) -> None:
        """End the current run of `entry` at its job's requested runtime after `started`
        (`isthmus.engine.runs.schedule_walltime`)."""
        runs.schedule_walltime(self, entry, started)

    def charge_start(self, job_id: int, site: int) -> None:
        """Job `job_id` started now on VMs of cloud `site`: book it with the budget caps
        (`isthmus.engine.budgets.Ledger.started`) and follow the billing boundaries that now
        have a user to charge."""
        for vm_id, at in self.ledger.started(self, job_id, site):
            self.billing.schedule(at, site, vm_id)

    def lease_users(self, site: int, count: int, price: float, cores: int) -> tuple[list[str], CapState | None]:
        """The users `count` VMs leased now on cloud `site` are for, and the cap that refused the
        rest (`isthmus.engine.budgets.lease_users`)."""
        return lease_users(self, site, count, price, cores)

    # ----------------------------------------------------------------------------- rounds

    def changed(self) -> None:
        """Something changed now: make sure a round follows, in which every queue's head is
        looked at again (see `_heads_blocked`)."""
        self.queue_book.stale_all = True
        self.round_soon()

    def round_soon(self) -> None:
        """Make sure a round follows now (the change marked the queues it concerns stale)."""
        now = self.clock.now
        if self._round_at <= now and not self._per_event:
            return  # a round is already due now (request_round would schedule nothing)
        self._request_round(now)

    def _handle_then_round(self, kind: int, a: int, b: int) -> None:
        """Per-event rounds: one clock event, then the round it asked for, at once."""
        self.handle(kind, a, b)
        self.run_due_round()

    def submit_then_round(self, job: Job) -> JobEntry | None:
        """Per-event rounds: an arrival, then its round, at once."""
        entry = self.submit(job)
        self.run_due_round()
        return entry

    def run_due_round(self) -> None:
        """Per-event rounds: run the rounds asked for now (a round may ask for another)."""
        while self._round_due:
            self._round_due = False
            self.run_round()

    def request_round(self, t: float) -> None:
        """Make sure a round runs at `t` (at the next period boundary with periodic rounds), in
        which every queue's head is looked at again (a site reported free processors, ...)."""
        self.queue_book.stale_all = True
        self._request_round(t)

    def _request_round(self, t: float) -> None:
        if self._quiet_rounds and t <= self.clock.now and self.federation is None and self._heads_blocked():
            return  # the round would find every queue's head blocked (and clear the stale marks as this did)
        if self._per_event and t <= self.clock.now:
            self._round_due = True
            return
        interval = self.round_interval
        if interval:
            t = math.ceil(t / interval - 1e-9) * interval
            if t <= self._last_round:
                t = self._last_round + interval
        elif t < self._last_round:
            t = self._last_round
        if t < self._round_at:
            self._round_at = t
            if t == self.clock.now:
                self.clock.now_at_round_priority(self.target, EV_ROUND)
            else:
                self.schedule(t, PRIO_ROUND, EV_ROUND, -1, -1)

    def run_round(self) -> None:
        """Ask the deciding policies (in their families' order) for decisions and apply them
        (nothing while `paused`: a live manager draining)."""
        if self.paused:
            return
        self._round_at = math.inf
        self._last_round = self.clock.now
        self.rounds += 1
        view = self.view
        observe = self.round_observer
        began = time.perf_counter() if observe is not None else 0.0
        if self.check_purity:
            answers.checked_round(self, self._deciders)
        else:
            apply = self.apply
            allocation = self.allocation
            head_of_line = self._head_of_line
            for policy in self._deciders:
                if policy is allocation and head_of_line:
                    if self._heads_blocked():
                        continue  # a head-of-line policy is asked only when some queue's head may fit
                    refused = self.refused_total
                decided = policy.decide(view)
                if not isinstance(decided, list):
                    decided = list(decided)  # a generator: decide fully before anything is applied
                if decided:
                    name = policy.name
                    for d in decided:
                        apply(d, name)
                    if self.bags.unsettled:  # holds made by this policy's shrinks
                        self.bags.settle(name)
                if policy is allocation and head_of_line:
                    self.queue_book.decided(self.refused_total == refused)
        if self.bags.hold_keys:
            self.bags.after_round()
        if self.federation is not None:
            self.forwarding.round_ended()
        if observe is not None:
            observe(time.perf_counter() - began)

    def _heads_blocked(self) -> bool:
        """True when no queue's head can fit on a site of its queue now (`QueueBook.heads_blocked`);
        with bags of tasks or VM reservations (processors held for waiting jobs, given back by
        bags) always False."""
        if self.reserving or self.bags.bags:
            return False
        return self.queue_book.heads_blocked()

    def apply(self, d: object, policy: str = "") -> Status:
        """Validate and apply one decision; return its status (ACCEPTED, or a refusal with its
        code and reason, recorded in the event log and as the job's answer to "why").

        `policy` names the deciding policy when the decision does not (its `by` is empty).
        """
        kind = self._kinds.get(type(d))
        self.deciding = policy
        try:
            if kind is None:
                raise Refused(StatusCode.INVALID, f"unknown decision {d!r}")
            kind.apply(self, d, kind.validate(self, d))
        except Refused as r:
            return self._refused(d, r, getattr(d, "by", "") or policy)
        return ACCEPTED

    def refuse(self, d: object, r: Refused, by: str = "") -> Status:
        """Record decision `d` as refused for `r` (a decision kind refusing part of what it was
        asked while applying the rest); `by` defaults to the deciding policy."""
        return self._refused(d, r, by or self.deciding)

    def _refused(self, d: object, r: Refused, by: str) -> Status:
        status = Status(r.code, r.reason, by)
        self.refused_total += 1
        self.refusals[r.code] = self.refusals.get(r.code, 0) + 1
        job_id = getattr(d, "job_id", -1)
        site = getattr(d, "site", -1)
        log = self.log
        i = log.append(self.clock.now, _DECISION, job_id, site, -1, int(r.code), -1, log.policy_index(by))
        log.notes[i] = r.reason
        if job_id in self.entries:
            self.why_not[job_id] = status
        return status

    # -------------------------------------------------- the parts' entry points, for callers outside

    def receive(self, job: Job, chain: tuple[str, ...]) -> JobEntry | None:
        """A job forwarded by a peer arrives now (`Forwarding.receive`)."""
        return self.forwarding.receive(job, chain)

    def returned(self, job_id: int, peer: str) -> bool:
        """Peer `peer` handed job `job_id` back unstarted (`Forwarding.returned`)."""
        return self.forwarding.returned(job_id, peer)

    def remote_ended(self, job_id: int, state: JobState) -> bool:
        """A job forwarded from here reached `state` where it ran (`Forwarding.remote_ended`)."""
        return self.forwarding.remote_ended(job_id, state)

    def kill(self, entry: JobEntry, cause: KillCause, *, requeue: bool, next_stage: bool = False) -> None:
        """Kill the current run of `entry` for `cause`; requeue it or end it (`isthmus.engine.runs.kill`)."""
        runs.kill(self, entry, cause, requeue=requeue, next_stage=next_stage)

    def cancel(self, job_id: int) -> bool:
        """Cancel a queued or running job or a bag of tasks (`isthmus.engine.runs.cancel`)."""
        return runs.cancel(self, job_id)

    def lost(self, job_id: int, run: int) -> bool:
        """Run `run` of `job_id` was lost: killed and requeued (`isthmus.engine.runs.lost`)."""
        return runs.lost(self, job_id, run)

    def vm_failed(self, site: int, vm_id: int, reason: str) -> bool:
        """VM `vm_id` of cloud site `site` failed now (`isthmus.engine.runs.vm_failed`)."""
        return runs.vm_failed(self, site, vm_id, reason)

    def drop_reservations(self, job_id: int) -> None:
        """End what is reserved for queued job `job_id` (`isthmus.engine.runs.drop_reservations`)."""
        runs.drop_reservations(self, job_id)

    def restore(
        self, job: Job, *, stage: int = 0, run: int = 0, restarts: int = 0, queued_at: float | None = None
    ) -> JobEntry | None:
        """Re-enter a job recorded before a restart (`isthmus.engine.recovery.restore`)."""
        return recovery.restore(self, job, stage=stage, run=run, restarts=restarts, queued_at=queued_at)

    def reattach(self, job_id: int, site: int, *, run: int, started: float, limit: float | None) -> Status:
        """Re-attach a run recorded before a restart (`isthmus.engine.recovery.reattach`)."""
        return recovery.reattach(self, job_id, site, run=run, started=started, limit=limit)

    def adopt_lease(self, site: int, vm_id: int, leased_at: float) -> None:
        """Count the billing of a VM restored after a restart (`isthmus.engine.recovery.adopt_lease`)."""
        recovery.adopt_lease(self, site, vm_id, leased_at)

    def book_past_lease(
        self, site: int, leased_at: float, released_at: float, vm_type: int = 0, user: str = ""
    ) -> None:
        """Count a lease ended before a restart (`isthmus.engine.recovery.book_past_lease`)."""
        recovery.book_past_lease(self, site, leased_at, released_at, vm_type, user)

    def dequeue(self, entry: JobEntry) -> None:
        """Remove `entry` from its queue (`QueueBook.dequeue`)."""
        self.queue_book.dequeue(entry)

    def indexes(self) -> None:
        """Build the queue indexes the allocation policy declares (`QueueBook.indexes`)."""
        self.queue_book.indexes()

    def status(self, job_id: int) -> Status | None:
        """The latest refusal or hold status of queued job `job_id` (None if there is none)."""
        return self.why_not.get(job_id)

    def why(self, job_id: int) -> str:
        """Why job `job_id` is where it is, in words (see `why_status`)."""
        return answers.why_status(self, job_id).reason

    def why_status(self, job_id: int) -> Status:
        """Why job `job_id` is where it is, as a status (`isthmus.engine.answers.why_status`)."""
        return answers.why_status(self, job_id)

    def fingerprint(self) -> tuple[object, ...]:
        """Everything a policy could change if it broke its contract (for the purity check)."""
        return answers.fingerprint(self)
