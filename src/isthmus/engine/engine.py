"""The engine: one control loop (observe, decide, act) for both clocks.

It owns the state (queues, sites, jobs, event log), hands policies a read-only view each
round, validates their decisions and applies the accepted ones through the site backends,
recording a status (code, reason, deciding policy) for each refusal. Time is the clock's:
the engine reads `clock.now` and schedules its events on the clock, which alone moves time
(`isthmus.engine.clock`); the simulator and the live daemon drive the engine only through it.

Rounds run when something changed (a job arrived or ended, a VM came up) or a policy asked
for a wake-up: immediately after the events of an instant when `round_interval` is None, or
at the next multiple of `round_interval` (KOALA-C's periodic scheduler, §IV-A: every 30 s).
A round in which nothing changed would decide nothing new, so skipping it does not change
the schedule; this is the contract policies keep (time-dependent policies ask for WakeUp).

Decisions are dispatched on their class to a decision kind (`isthmus.engine.kinds`), one
module per kind holding its validation and its application.
"""

from __future__ import annotations

import bisect
import math
import time
from collections import OrderedDict, deque
from collections.abc import Callable, Sequence

from sortedcontainers import SortedList

from isthmus.engine.backend import VM_FIELDS, CloudBackend, SiteBackend
from isthmus.engine.bags import BagBook
from isthmus.engine.budgets import Ledger, guard_takeovers
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
    PRIO_BILLING,
    PRIO_LIMIT,
    PRIO_ROUND,
    PRIO_VM,
    Schedule,
    SimClock,
)
from isthmus.engine.columns import QueueColumns
from isthmus.engine.kinds import kinds
from isthmus.engine.matching import admission_refusal, matching_free
from isthmus.engine.peering import Federation
from isthmus.engine.state import ENTRY_FIELDS, JobEntry
from isthmus.engine.view import EngineView
from isthmus.model.decisions import StartJob
from isthmus.model.environment import Environment
from isthmus.model.events import EventKind, EventLog, KillCause
from isthmus.model.job import Job, JobKind
from isthmus.model.states import JobState, VmState
from isthmus.model.status import ACCEPTED, Refused, Status, StatusCode
from isthmus.policies.api import runtime_order
from isthmus.policies.build import PolicySet

_SUBMIT = int(EventKind.SUBMIT)
_START = int(EventKind.START)
_END = int(EventKind.END)
_KILL = int(EventKind.KILL)
_REQUEUE = int(EventKind.REQUEUE)
_DECISION = int(EventKind.DECISION)
_RUNNING = JobState.RUNNING
_QUEUED = JobState.QUEUED
_MALLEABLE = JobKind.MALLEABLE
#: a runtime-index group longer than this becomes a SortedList (see _enqueue)
_PLAIN_GROUP_MAX = 256

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
        if budget is not None and (budget < 0 or math.isnan(budget)):
            raise ValueError(f"budget must be a number >= 0, got {budget}")
        #: Cap on the charged cost of all leases ($); None: no cap.
        self.budget = budget
        #: Charged cost committed so far: every started billing increment of every lease.
        self.spent = 0.0
        #: the environment's budget caps and what each has charged (isthmus.engine.budgets)
        self.ledger = Ledger(
            env.budgets,
            {s.name: i for i, s in enumerate(env.sites)},
            frozenset(i for i, s in enumerate(env.sites) if s.is_cloud),
        )
        guard_takeovers(self)
        self.view = EngineView(self)
        allocation = self.allocation
        self.stage_sites: list[tuple[int, ...]] = allocation.stage_sites(env)
        self._arrival_stage = allocation.arrival_stage if len(self.stage_sites) > 1 else None
        # OrderedDict: O(1) removal anywhere and O(1) access to the head; a plain dict slows
        # iteration from the front once many jobs have left it.
        self.queues: list[OrderedDict[int, JobEntry]] = [OrderedDict() for _ in self.stage_sites]
        # The same queues split by job size (size -> jobs in queue order), so that policies can
        # visit only the jobs that fit in the processors left (queue_by_size in the view). Kept
        # only for allocation policies that declare they read it (it costs the others time), and
        # from its first read on (`indexes`): EASY reads it only once its queue grows long.
        self.index_declared: bool = allocation.uses_size_index
        self.size_index = False  # kept now
        self.buckets: list[dict[int, OrderedDict[int, JobEntry]]] = [{} for _ in self.stage_sites]
        # size -> (runtime key, seq, job id) sorted, per stage: kept for policies that declare `runtime_index`
        self.runtime_key = allocation.runtime_index
        if self.runtime_key is not None and not self.index_declared:
            raise ValueError(f"policy {allocation.name!r} declares runtime_index without uses_size_index")
        self.sorted_buckets: list[dict[int, list[tuple[float, int, int]] | SortedList]] = [{} for _ in self.stage_sites]
        # the queues as NumPy columns, for policies that declare `uses_queue_columns` (HSDF)
        self.columns: list[QueueColumns] | None = None
        if allocation.uses_queue_columns and not self.index_declared:
            raise ValueError(f"policy {allocation.name!r} declares uses_queue_columns without uses_size_index")
        self._seq = 0
        # VMs leased at the clock's current instant (`lease_churn`): leasing far more than the
        # clouds hold without time passing is a lease and release cycle that never ends
        self._lease_instant = -math.inf
        self._leases_now = 0
        self._lease_churn_limit = 10 * sum(s.max_vms for s in env.sites if s.is_cloud) + 100
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
        #: queued jobs not yet seen by the site-selection policy (kept only with a federation)
        self.unrouted: dict[int, JobEntry] = {}
        #: jobs forwarded from here and not yet ended, by id: (entry, peer index)
        self.forwarded: dict[int, tuple[JobEntry, int]] = {}
        #: unrouted jobs no local site can run, in no queue, by id: why they cannot run here
        self.outsized: dict[int, str] = {}
        #: jobs with VM requirements admitted so far (policies then place them VM by VM)
        self.vm_jobs = 0
        self._round_at = math.inf
        self._last_round = -math.inf
        self._stage_max = [
            max((self.backends[i].site.max_processors for i in sites), default=0) for sites in self.stage_sites
        ]
        #: the bags of tasks (malleable jobs), in no queue (isthmus.engine.bags)
        self.bags = BagBook(self)
        #: decisions refused so far, holds included (a round that refused one may decide it again)
        self.refused_total = 0
        # Rounds of a `head_of_line` allocation policy (strict FCFS, TAGS-chain) that cannot start
        # anything are not asked of it: after it decided, every queue's head waited for
        # processors; only a queue with a new head or a site of it with more free processors
        # since (`_stale`; every queue after any other change, `_stale_all`) may start one now.
        self._head_of_line: bool = allocation.head_of_line
        self._site_stages: list[tuple[int, ...]] = [
            tuple(q for q, sites in enumerate(self.stage_sites) if i in sites) for i in range(len(self.backends))
        ]
        self._stale: set[int] = set()
        self._stale_all = True
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
        now = self.clock.now
        for b in self.backends:
            start, end = b.site.available_from, b.site.available_until
            if start is not None and start > now:
                # a window opening changes what this manager offers its peers: a round looks
                # (provisioning leases, the resource data pushed shows the site)
                self.schedule(start, PRIO_VM, EV_WAKE, -1, -1)
            if end is not None:
                self.schedule(end, PRIO_VM, EV_WINDOW_END, b.index, -1)

    # ----------------------------------------------------------------- arrivals and events

    def submit(self, job: Job) -> JobEntry | None:
        """A job arrives now. Returns its entry, or None when it can never run here (or when it is
        a bag of tasks: bags wait in no queue, isthmus.engine.bags)."""
        if job.kind is _MALLEABLE:
            self.bags.submit(job)
            return None
        now = self.clock.now
        log = self.log
        if job.id in self.entries:
            raise ValueError(f"job {job.id} was already submitted")
        log.add(now, _SUBMIT, job.id, -1, job.size, -1, -1)
        return self._admit(job, now)

    def _admit(self, job: Job, now: float, chain: tuple[str, ...] = ()) -> JobEntry | None:
        stage = self._arrival_stage(job) if self._arrival_stage is not None else 0
        if job.size > self._stage_max[stage] or job.size <= 0:
            reason = self._too_large(job, stage)
            fed = self.federation
            if fed is not None and job.size > 0 and len(chain) < fed.max_hops:
                # no site here can run it, a peer may: offered to the selection policy this round,
                # in no local queue (where it would block the queue's head); rejected at the
                # round's end unless forwarded
                entry = JobEntry(job, now)
                entry.chain = chain
                entry.stage = -1
                self.entries[job.id] = entry
                self.unrouted[job.id] = entry
                self.outsized[job.id] = reason
                self._changed()
                return entry
            self.log.append(now, int(EventKind.REJECT), job.id)
            self.log.reasons[job.id] = reason
            return None
        if job.vm is not None:  # VM requirements no cloud of its queue can ever match
            why = admission_refusal(job, [self.backends[i].site for i in self.stage_sites[stage]])
            if why:
                self.log.append(now, int(EventKind.REJECT), job.id)
                self.log.reasons[job.id] = why
                return None
            self.vm_jobs += 1
        entry = JobEntry(job, now)
        entry.chain = chain
        if self.predictor is not None:
            entry.predicted = self.predictor.predict(self.view, job)
        self.entries[job.id] = entry
        self._enqueue(entry, stage)
        fed = self.federation
        if fed is not None and len(chain) < fed.max_hops:
            self.unrouted[job.id] = entry
        if self._round_at > now or self._per_event:  # `_round_soon`, inline: once per arrival
            self._request_round(now)
        return entry

    def _too_large(self, job: Job, stage: int) -> str:
        """Why `job` fits on no site of queue `stage`."""
        sites = self.stage_sites[stage]
        largest = max((self.backends[i] for i in sites), key=lambda b: b.site.max_processors)
        return (
            f"needs {job.size} processors; the largest site it may use ({largest.name}) offers at most "
            f"{largest.site.max_processors}"
        )

    def _enqueue(self, entry: JobEntry, stage: int) -> None:
        """Append `entry` to queue `stage` (and to its size bucket)."""
        entry.stage = stage
        job_id = entry.job.id
        queue = self.queues[stage]
        queue[job_id] = entry
        if len(queue) == 1:  # a new head
            self._stale.add(stage)
        if self.size_index:
            self._index(entry, stage)

    def indexes(self) -> None:
        """Build the queue indexes the allocation policy declares (size buckets, their runtime
        order, NumPy columns) from the queues as they are, on their first read; they are kept
        from then on. ValueError when the policy declares none."""
        if self.size_index:
            return
        if not self.index_declared:
            raise ValueError(f"policy {self.allocation.name!r} declares no queue index (uses_size_index)")
        self.size_index = True
        if self.allocation.uses_queue_columns:
            self.columns = [QueueColumns() for _ in self.stage_sites]
        for stage, queue in enumerate(self.queues):
            for entry in queue.values():
                self._index(entry, stage)

    def _index(self, entry: JobEntry, stage: int) -> None:
        """Give `entry`, the last job of queue `stage`, its queue sequence and its place in the indexes."""
        job_id = entry.job.id
        self._seq += 1
        entry.seq = self._seq
        bucket = self.buckets[stage].get(entry.job.size)
        if bucket is None:
            bucket = self.buckets[stage][entry.job.size] = OrderedDict()
        bucket[job_id] = entry
        if self.runtime_key is not None:
            groups = self.sorted_buckets[stage]
            group = groups.get(entry.job.size)
            item = self._runtime_item(entry)
            if group is None:
                groups[entry.job.size] = [item]
            elif isinstance(group, list):
                # a short group is a plain list kept sorted (C-level insort beats SortedList's
                # constant); a long one becomes a SortedList (insort would move O(n) items)
                bisect.insort(group, item)
                if len(group) > _PLAIN_GROUP_MAX:
                    groups[entry.job.size] = SortedList(group)
            else:
                group.add(item)
        if self.columns is not None:
            self.columns[stage].add(entry)

    def _runtime_item(self, entry: JobEntry) -> tuple[float, int, int]:
        """The job's place in the runtime index: (runtime, queue sequence, id)."""
        assert self.runtime_key is not None
        return (*runtime_order(entry, self.runtime_key), entry.job.id)

    def dequeue(self, entry: JobEntry) -> None:
        """Remove `entry` from its queue (and its size bucket); nothing for a job in no queue
        (one no local site can run, awaiting the selection policy)."""
        if entry.stage < 0:
            return
        job_id = entry.job.id
        del self.queues[entry.stage][job_id]
        self._stale.add(entry.stage)  # maybe a new head
        if not self.size_index:
            return
        buckets = self.buckets[entry.stage]
        bucket = buckets[entry.job.size]
        del bucket[job_id]
        if not bucket:
            del buckets[entry.job.size]
        if self.runtime_key is not None:
            # an emptied group stays (it costs more to make than to keep: sizes recur)
            group = self.sorted_buckets[entry.stage][entry.job.size]
            item = self._runtime_item(entry)
            if isinstance(group, list):
                i = bisect.bisect_left(group, item)
                if i == len(group) or group[i] != item:
                    raise AssertionError(f"job {entry.job.id} is missing from the runtime index")
                del group[i]
            else:
                group.remove(item)
        if self.columns is not None:
            self.columns[entry.stage].remove(job_id)

    def handle(self, kind: int, a: int, b: int) -> None:
        """Apply one clock event (already due at the clock's `now`)."""
        if kind == EV_END:
            self._run_ended(a, b)
        elif kind == EV_ROUND:
            if self.clock.now == self._round_at:
                self.run_round()
        elif kind == EV_LIMIT:
            self._limit_reached(a, b)
        elif kind == EV_TIMEOUT:
            self._walltime_reached(a, b)
        elif kind == EV_VM_READY:
            backend = self.cloud_backend(a)
            if backend.vm_ready(b, self.clock.now):
                self.log.append(self.clock.now, int(EventKind.VM_READY), -1, a, b)
                self._changed()
        elif kind == EV_VM_GONE:
            backend = self.cloud_backend(a)
            if backend.vm_gone(b, self.clock.now):
                self.log.append(self.clock.now, int(EventKind.VM_GONE), -1, a, b)
        elif kind == EV_WAKE:
            self._changed()
        elif kind == EV_BILLING:
            self.clock.background -= 1
            self._billing_boundary(a, b)
        elif kind == EV_WINDOW_END:
            self._window_ended()

    def job_ended(self, job_id: int, run: int, exit_code: int = 0) -> None:
        """Run number `run` of job `job_id` ended now with `exit_code` (0: completed, else failed).

        A live manager calls this when a site reports the end of a run; a report for a run that
        is no longer current (killed and restarted meanwhile) is ignored.
        """
        self._run_ended(job_id, run, exit_code)

    def vm_failed(self, site: int, vm_id: int, reason: str) -> bool:
        """VM `vm_id` of cloud site `site` failed now (boot timeout, error state): its runs are
        killed (cause LOST) and requeued, its billing stops and it is gone. Logged as VM_FAILED
        with `reason` in the notes, then VM_RELEASE (policy "vm-failed") and VM_GONE, so that
        leases, costs and capacity computed from the log end there. False when the VM is
        unknown or already being released."""
        backend = self.cloud_backend(site)
        vm = backend.vms.get(vm_id)
        if vm is None or vm.state not in (VmState.BOOTING, VmState.READY):
            return False
        for entry in [e for e in backend.running.values() if any(v == vm_id for v, _ in e.alloc)]:
            self.kill(entry, KillCause.LOST, requeue=True)
        now = self.clock.now
        log = self.log
        log.notes[log.append(now, int(EventKind.VM_FAILED), -1, site, vm_id)] = reason
        backend.fail_vm(vm_id, now)
        log.append(now, int(EventKind.VM_RELEASE), -1, site, vm_id, 0.0, -1, log.policy_index("vm-failed"))
        log.append(now, int(EventKind.VM_GONE), -1, site, vm_id)
        self._changed()
        return True

    def lost(self, job_id: int, run: int) -> bool:
        """Run `run` of `job_id` was lost (its pilot or node died): kill it (cause LOST) and requeue it.

        False when that run is no longer the current one.
        """
        entry = self.entries.get(job_id)
        if entry is None or entry.state is not _RUNNING or entry.run != run:
            return False
        self.kill(entry, KillCause.LOST, requeue=True)
        return True

    def restore(
        self, job: Job, *, stage: int = 0, run: int = 0, restarts: int = 0, queued_at: float | None = None
    ) -> JobEntry | None:
        """Re-enter a job recorded before a manager restart, queued in `stage` with its run counts.

        The clock is not rewound and no SUBMIT is logged again: the job keeps its recorded
        submit time (in `job.submit`) and `queued_at` (default: its submit time). A recorded
        running job is then re-attached by applying a StartJob for it. Returns None if the job
        can no longer run here.
        """
        if job.id in self.entries:
            raise ValueError(f"job {job.id} was already submitted")
        entry = self._admit(job, self.clock.now)
        if entry is None or entry.stage < 0:
            return entry
        entry.queued_at = job.submit if queued_at is None else queued_at
        if self.columns is not None:
            self.columns[entry.stage].set_queued_at(job.id, entry.queued_at)
        entry.run = run
        entry.restarts = restarts
        stage = min(max(stage, 0), len(self.queues) - 1)
        if stage != entry.stage:
            self.dequeue(entry)
            self._enqueue(entry, stage)
        return entry

    def reattach(self, job_id: int, site: int, *, run: int, started: float, limit: float | None) -> Status:
        """Re-attach run `run` of queued job `job_id`, recorded as started on `site` at `started`
        before a manager restart: the same validation as a StartJob, no START logged again (it is
        recorded), the limit counted from `started`."""
        d = StartJob(job_id, site, limit, by="recovery")
        kind = self._kinds[StartJob]
        try:
            entry, backend = kind.validate(self, d)
        except Refused as r:
            return self._refused(d, r, "recovery")
        self.dequeue(entry)
        entry.state = _RUNNING
        entry.site = site
        entry.started = started
        entry.run = run
        entry.limit = limit
        self.schedule_walltime(entry, started)
        backend.start(entry, started)
        if limit is not None:
            self.schedule(started + limit, PRIO_LIMIT, EV_LIMIT, job_id, run)
        return ACCEPTED

    def adopt_lease(self, site: int, vm_id: int, leased_at: float) -> None:
        """Count the billing of a VM leased at `leased_at` and restored after a restart: every
        increment started so far is charged, and the next boundary is scheduled (with a budget)."""
        backend = self.cloud_backend(site)
        if not backend.site.is_paid:
            return
        inc = backend.site.billing_increment
        started = max(1, math.ceil((self.clock.now - leased_at) / inc - 1e-9))
        user = self.ledger.vm_user.get((site, vm_id), "")
        price = backend.site.type_price_per_increment(backend.vms[vm_id].type)
        self.spent += self.ledger.replay(site, leased_at, self.clock.now, inc, price, user)
        if self.ledger.per_user or self.ledger.finishing:
            self.ledger.next_due[(site, vm_id)] = leased_at + started * inc
        if self.budget is not None or self.ledger.covering(site):
            self.schedule_billing(leased_at + started * inc, site, vm_id)

    def book_past_lease(
        self, site: int, leased_at: float, released_at: float, vm_type: int = 0, user: str = ""
    ) -> None:
        """Count the increments of a lease (of instance type index `vm_type`) that ended (or is
        ending) before a restart, charged to `user`: the budget and the caps keep what it cost."""
        backend = self.cloud_backend(site)
        if backend.site.is_paid:
            price = backend.site.type_price_per_increment(vm_type)
            inc = backend.site.billing_increment
            self.spent += self.ledger.replay(site, leased_at, released_at, inc, price, user)

    def _run_ended(self, job_id: int, run: int, exit_code: int = 0) -> None:
        entry = self.entries.get(job_id)
        if entry is None or entry.state is not _RUNNING or entry.run != run:
            return  # a completion of a run that was killed meanwhile
        now = self.clock.now
        backend = self.backends[entry.site]
        if backend.sharing:
            if not backend.end_due(entry, now):
                return  # an end moved later since: the run shares processors
            full = backend.full_speed_runtime(entry)
            if full is not None:  # its runtime alone, for the slowdown (metrics/records.py)
                self.log.append(now, int(EventKind.SHARED), job_id, entry.site, -1, full, run)
        backend.finished(entry, now)
        self._stale.update(self._site_stages[entry.site])  # free processors there: a head may fit
        if self.ledger.commits:
            self.ledger.stopped(job_id)
        if exit_code == 0:
            entry.state = JobState.COMPLETED
            self.log.add(now, _END, job_id, entry.site, 0, run, -1)
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
            self.log.append(now, int(EventKind.FAIL), job_id, entry.site, -1, exit_code, run)
        del self.entries[job_id]
        if self.why_not:
            self.why_not.pop(job_id, None)
        if entry.chain:
            self.notify_origin(entry)
        if self._round_at > now or self._per_event:  # `_round_soon`, inline: once per end
            self._request_round(now)

    def lease_churn(self, count: int, policy: str) -> None:
        """Count `count` VMs leased now; ValueError once the VMs leased at this one instant pass
        ten times what the clouds hold (and 100): VMs that boot and are released in no time (boot
        and idle release times of 0) let a provisioning policy lease and release them forever
        while the clock stands still."""
        now = self.clock.now
        if now != self._lease_instant:
            self._lease_instant, self._leases_now = now, 0
        self._leases_now += count
        if self._leases_now > self._lease_churn_limit:
            instant = [b.name for b in self.clouds if b.site.boot_time == 0 and b.site.idle_release_time == 0]
            why = f" (boot and idle release times of 0 on {', '.join(instant)})" if instant else ""
            raise ValueError(
                f"at time {now} {policy or 'a policy'} has leased {self._leases_now} VMs without the clock "
                f"moving on, as many released at once{why}: the simulation cannot advance; give the clouds "
                "a boot time or an idle release time above 0"
            )

    def schedule_walltime(self, entry: JobEntry, started: float) -> None:
        """With `enforce_walltime`, schedule the end of the current run of `entry` at its job's
        requested runtime after `started` (nothing when it has none)."""
        if self.enforce_walltime and entry.job.requested_runtime is not None:
            self.schedule(started + entry.job.requested_runtime, PRIO_LIMIT, EV_TIMEOUT, entry.job.id, entry.run)

    def _walltime_reached(self, job_id: int, run: int) -> None:
        entry = self.entries.get(job_id)
        if entry is None or entry.state is not _RUNNING or entry.run != run:
            return
        self.kill(entry, KillCause.TIMEOUT, requeue=False)

    def _limit_reached(self, job_id: int, run: int) -> None:
        entry = self.entries.get(job_id)
        if entry is None or entry.state is not _RUNNING or entry.run != run:
            return
        self.kill(entry, KillCause.LIMIT, requeue=True, next_stage=True)

    def kill(self, entry: JobEntry, cause: KillCause, *, requeue: bool, next_stage: bool = False) -> None:
        """Kill the current run of `entry` for `cause`; requeue it (in the next stage after a
        limit) or end it as failed."""
        now = self.clock.now
        site = entry.site
        run = entry.run
        self.backends[site].stop(entry, now)
        self._stale.update(self._site_stages[site])  # free processors there: a head may fit
        if self.ledger.commits:
            self.ledger.stopped(entry.job.id)
        self.log.add(now, _KILL, entry.job.id, site, int(cause), run, -1)
        if requeue:
            entry.restarts += 1
            if next_stage:
                entry.stage = min(self.allocation.next_stage(entry.stage), len(self.queues) - 1)
            entry.site = -1
            if entry.job.size > self._stage_max[entry.stage]:
                entry.state = JobState.REJECTED
                self.log.append(now, int(EventKind.REJECT), entry.job.id, -1, -1, 0.0, run)
                self.log.reasons[entry.job.id] = (
                    f"killed at the runtime limit; needs {entry.job.size} processors, more than any site "
                    f"of queue {entry.stage} offers"
                )
                del self.entries[entry.job.id]
                self._round_soon()
                return
            entry.state = _QUEUED
            entry.queued_at = now
            self._enqueue(entry, entry.stage)
            self.log.add(now, _REQUEUE, entry.job.id, -1, entry.stage, run, -1)
        else:
            # the run's end: FAIL with the status of a process killed by SIGKILL; a FAIL right
            # after a KILL with cause TIMEOUT is the end of a job that timed out
            entry.state = JobState.TIMEOUT if cause is KillCause.TIMEOUT else JobState.FAILED
            self.log.append(now, int(EventKind.FAIL), entry.job.id, site, -1, -9, run)
            del self.entries[entry.job.id]
            if entry.chain:
                self.notify_origin(entry)
        self._round_soon()

    def cancel(self, job_id: int) -> bool:
        """Cancel a queued or running job or a bag of tasks; False if it is unknown or already ended."""
        entry = self.entries.get(job_id)
        if entry is None:
            bag = self.bags.get(job_id)
            if bag is None or bag.finished:
                return False
            self.bags.cancel(bag)
            return True
        now = self.clock.now
        if entry.state is _RUNNING:
            self.backends[entry.site].stop(entry, now)
            if self.ledger.commits:
                self.ledger.stopped(job_id)
            self.log.append(now, _KILL, job_id, entry.site, -1, int(KillCause.CANCEL), entry.run)
        else:
            self.dequeue(entry)
            self.unrouted.pop(job_id, None)
            if self.reserving:
                self.drop_reservations(job_id)
        entry.state = JobState.CANCELLED
        self.log.append(now, int(EventKind.CANCEL), job_id, -1, -1, 0.0, entry.run)
        del self.entries[job_id]
        self.why_not.pop(job_id, None)
        if entry.chain:
            self.notify_origin(entry)
        self._changed()
        return True

    # ------------------------------------------------------------------------ forwarding

    def receive(self, job: Job, chain: tuple[str, ...]) -> JobEntry | None:
        """A job forwarded by a peer arrives now (submitJob), after visiting the managers in
        `chain` (its origin first). Logged as SUBMIT with the origin named; None when it can
        never run here (REJECT, and its origin is told) or arrived after every site of its
        queue closed (RETURN: handed back to the sender at once, IBM seed §4.2.2)."""
        if not chain:
            raise ValueError("a received job needs the chain of managers it came through")
        now = self.clock.now
        log = self.log
        if job.id in self.entries:
            raise ValueError(f"job {job.id} was already submitted")
        log.append(now, _SUBMIT, job.id, -1, -1, job.size, origin=log.origin_index(chain[0]))
        entry = self._admit(job, now, chain)
        if entry is not None and entry.stage >= 0 and self._closed_stages(now)[entry.stage]:
            # it arrived after every site of its queue closed (sent on resource data older
            # than the close): it fails back at once, as if it had waited at the close
            self._hand_back([entry], now)
            return None
        if entry is None and self.federation is not None:
            gone = JobEntry(job, now)
            gone.chain = chain
            gone.state = JobState.REJECTED
            self.federation.notify(self, gone, JobState.REJECTED)
        return entry

    def forward(self, entry: JobEntry, peer: int, policy: str) -> None:
        """Take queued `entry` out of this manager and send it to peer `peer` (applied by the
        ForwardJob kind after validation)."""
        assert self.federation is not None
        target = self.federation.peers[peer]
        self.federation.send(self, entry, target)
        now = self.clock.now
        self.dequeue(entry)
        self.unrouted.pop(entry.job.id, None)
        if self.reserving:
            self.drop_reservations(entry.job.id)
        del self.entries[entry.job.id]
        self.why_not.pop(entry.job.id, None)
        log = self.log
        log.append(
            now,
            int(EventKind.FORWARD),
            entry.job.id,
            -1,
            -1,
            peer,
            entry.run,
            log.policy_index(policy),
            origin=log.origin_index(target.name),
        )
        log.reasons[entry.job.id] = f"forwarded to peer {target.name}"
        if entry.chain:
            self.notify_origin(entry)  # a job passing through: its origin learns where it went
        else:
            self.forwarded[entry.job.id] = (entry, peer)
        self._changed()

    def returned(self, job_id: int, peer: str) -> bool:
        """Peer `peer` handed job `job_id`, forwarded from here, back unstarted (IBM: FAILED):
        it is queued here again, offered to the selection policy with `peer` among the failed
        resources. False when the job is not one forwarded from here."""
        item = self.forwarded.pop(job_id, None)
        if item is None:
            return False
        entry = item[0]
        now = self.clock.now
        entry.failed = (*entry.failed, peer)
        entry.state = _QUEUED
        entry.site = -1
        entry.queued_at = now
        self.entries[job_id] = entry
        self.log.reasons.pop(job_id, None)
        stage = self._arrival_stage(entry.job) if self._arrival_stage is not None else 0
        self.log.append(now, _REQUEUE, job_id, -1, -1, stage, entry.run, origin=self.log.origin_index(peer))
        fed = self.federation
        hops_left = fed is not None and len(entry.chain) < fed.max_hops
        if entry.job.size > self._stage_max[stage]:
            # no site here can run it (it was forwarded for that): another peer may take it this
            # round, else it is rejected at the round's end; it never waits in a local queue
            reason = f"{self._too_large(entry.job, stage)}; handed back by {peer}"
            if hops_left:
                entry.stage = -1
                self.unrouted[job_id] = entry
                self.outsized[job_id] = reason
                self._changed()
            else:
                del self.entries[job_id]
                entry.state = JobState.REJECTED
                self.log.append(now, int(EventKind.REJECT), job_id)
                self.log.reasons[job_id] = reason
            return True
        self._enqueue(entry, stage)
        if hops_left:
            self.unrouted[job_id] = entry
        self._changed()
        return True

    def remote_ended(self, job_id: int, state: JobState) -> bool:
        """A job forwarded from here reached terminal `state` where it ran (notifyJob): it is
        no longer tracked here. False when it is not one forwarded from here."""
        if not state.terminal:
            return job_id in self.forwarded
        return self.forwarded.pop(job_id, None) is not None

    def _reject_outsized(self) -> None:
        """Reject the jobs no local site can run that the selection policy did not forward."""
        now = self.clock.now
        for job_id, reason in self.outsized.items():
            entry = self.entries.pop(job_id, None)
            if entry is None:  # forwarded or cancelled meanwhile
                continue
            self.why_not.pop(job_id, None)
            self.log.append(now, int(EventKind.REJECT), job_id)
            self.log.reasons[job_id] = f"{reason}, and no peer took it"
            entry.state = JobState.REJECTED
            if entry.chain:
                self.notify_origin(entry)
        self.outsized.clear()

    def notify_origin(self, entry: JobEntry) -> None:
        """Tell the origin of a job received from a peer its state here (notifyJob)."""
        if self.federation is not None:
            self.federation.notify(self, entry, entry.state)

    def _window_ended(self) -> None:
        """A site's availability window closed: jobs received from peers that no site of their
        queue can start any more go back to the manager they came from (IBM seed §4.2.2: "those
        jobs that do not execute yet shall be reported as FAILED ... and be re-scheduled")."""
        if self.federation is None:
            return
        now = self.clock.now
        closed = self._closed_stages(now)
        if not any(closed):
            return
        self._hand_back([e for q, c in zip(self.queues, closed, strict=True) if c for e in q.values() if e.chain], now)

    def _closed_stages(self, now: float) -> list[bool]:
        """Per queue: True when every site it may use has closed its availability window."""
        return [
            all((u := self.backends[i].site.available_until) is not None and u <= now for i in sites)
            for sites in self.stage_sites
        ]

    def _hand_back(self, back: list[JobEntry], now: float) -> None:
        """Send the queued jobs `back`, received from peers, back to the managers they came from."""
        fed = self.federation
        assert fed is not None
        for entry in back:
            self.dequeue(entry)
            self.unrouted.pop(entry.job.id, None)
            if self.reserving:
                self.drop_reservations(entry.job.id)
            del self.entries[entry.job.id]
            self.why_not.pop(entry.job.id, None)
            log = self.log
            log.append(
                now,
                int(EventKind.RETURN),
                entry.job.id,
                -1,
                -1,
                0.0,
                entry.run,
                origin=log.origin_index(entry.chain[-1]),
            )
            log.reasons[entry.job.id] = f"handed back to {entry.chain[-1]}: its sites here closed"
            fed.send_back(self, entry)
        self._changed()

    def drop_reservations(self, job_id: int) -> None:
        """A queued job left its queue (started, cancelled): end what is reserved for it
        anywhere, logging each VM given back (RESERVE, value 0) and each cluster hold ended
        (HOLD, value 0)."""
        now = self.clock.now
        for b in self.backends:
            if b.reserved_cores:
                for vm_id in b.drop_reservation(job_id):
                    self.log.append(now, int(EventKind.RESERVE), job_id, b.index, vm_id, 0.0)
        if self.bags.hold_keys or self.bags.declined:  # holds on clusters (isthmus.engine.bags)
            self.bags.drop_holds(job_id)

    # ------------------------------------------------------------------ used by decision kinds

    def cloud_backend(self, index: int) -> CloudBackend:
        """The cloud backend at `index`; Refused (UNKNOWN_TARGET / INVALID) otherwise."""
        if not 0 <= index < len(self._clouds):
            raise Refused(StatusCode.UNKNOWN_TARGET, f"site index {index} does not exist")
        backend = self._clouds[index]
        if backend is None:
            raise Refused(StatusCode.INVALID, f"site {self.backends[index].name} is not a cloud")
        return backend

    def schedule_billing(self, time: float, site: int, vm_id: int) -> None:
        """Schedule the next billing boundary of a paid VM (a background event on the clock)."""
        self.clock.background += 1
        self.schedule(time, PRIO_BILLING, EV_BILLING, site, vm_id)

    # ----------------------------------------------------------------------------- rounds

    def _changed(self) -> None:
        """Something changed now: make sure a round follows, in which every queue's head is
        looked at again (see `_heads_blocked`)."""
        self._stale_all = True
        self._round_soon()

    def _round_soon(self) -> None:
        """Make sure a round follows now (the change marked the queues it concerns `_stale`)."""
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
        self._stale_all = True
        self._request_round(t)

    def _request_round(self, t: float) -> None:
        if self._quiet_rounds and t <= self.clock.now and self.federation is None and self._heads_blocked():
            return  # the round would find every queue's head blocked (and clear `_stale` as this did)
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
            self._stale_all = True  # every head looked at again next round
            for policy in self._deciders:
                before = self.fingerprint()
                decisions = list(policy.decide(view))
                if self.fingerprint() != before:
                    raise AssertionError(f"policy {policy.name!r} changed the engine state while deciding")
                for d in decisions:
                    self.apply(d, policy.name)
                if self.bags.unsettled:
                    self.bags.settle(policy.name)
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
                    self._allocation_decided(self.refused_total == refused)
        if self.bags.hold_keys:
            self.bags.after_round()
        if self.federation is not None:
            if self.outsized:
                self._reject_outsized()
            self.unrouted.clear()
            self.federation.changed(self)
        if observe is not None:
            observe(time.perf_counter() - began)

    def _heads_blocked(self) -> bool:
        """True when no queue's head can fit on a site of its queue now: since the head-of-line
        allocation policy last decided (or was found idle), only arrivals, ends and kills
        happened (any other change makes every queue `_stale`), and each queue they gave a new
        head or more free processors on one of its sites (`_stale`) still has a head larger than
        the free processors of every site of its queue. With bags of tasks or VM reservations
        (processors held for waiting jobs, given back by bags) always False."""
        if self.reserving or self.bags.bags:
            return False
        backends = self.backends
        queues = self.queues
        stage_sites = self.stage_sites
        for stage in range(len(queues)) if self._stale_all else self._stale:
            queue = queues[stage]
            if queue:
                size = next(iter(queue.values())).job.size
                for i in stage_sites[stage]:
                    if backends[i].free >= size:
                        return False
        self._stale.clear()  # `_allocation_decided(True)`, inline: once per round
        self._stale_all = False
        return True

    def _allocation_decided(self, all_accepted: bool) -> None:
        """The head-of-line allocation policy decided (or was found idle): every queue's head now
        waits for processors, unless one of its decisions was refused (it may decide it again)."""
        self._stale.clear()
        self._stale_all = not all_accepted

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

    def _billing_boundary(self, site: int, vm_id: int) -> None:
        """A paid VM reached the end of a billing increment: pay the next one or release it."""
        backend = self.cloud_backend(site)
        vm = backend.vms.get(vm_id)
        if vm is None or vm.state not in (VmState.BOOTING, VmState.READY):
            return  # released meanwhile
        price = backend.price_of(vm)
        now = self.clock.now
        ledger = self.ledger
        if self.budget is None or self.spent + price <= self.budget + 1e-9:
            cap = ledger.pay_boundary(site, vm_id, price, now, backend.site.billing_increment)
            if cap is None:
                self.spent += price
                if (
                    self.budget is None
                    and ledger.per_user
                    and not ledger.bills(site, ledger.vm_user.get((site, vm_id), ""))
                ):
                    ledger.unbilled.add((site, vm_id))  # no cap covers its user: not followed
                else:
                    self.schedule_billing(now + backend.site.billing_increment, site, vm_id)
                return
            cap.released_vms += 1
            who = f" for {u}" if (u := ledger.vm_user.get((site, vm_id), "")) and cap.users else ""
            why = f"its VM on {backend.name} was released: budget {cap.cap.name} cannot pay its next increment{who}"
        else:
            why = f"its VM on {backend.name} was released: the budget is spent"
        for entry in [e for e in backend.running.values() if any(v == vm_id for v, _ in e.alloc)]:
            self.kill(entry, KillCause.BUDGET, requeue=True)
            self.why_not[entry.job.id] = Status(StatusCode.OVER_BUDGET, why, "budget")
        ledger.released(site, vm_id)
        if vm.state is VmState.BOOTING:
            backend.booting -= 1
            vm.state = VmState.READY  # release() expects a ready VM; it never became usable
            backend.online += vm.cores
            backend.free += vm.cores
        backend.release((vm_id,), now)
        self.log.append(now, int(EventKind.VM_RELEASE), -1, site, vm_id, 0.0, -1, self.log.policy_index("budget"))
        self._changed()

    # ------------------------------------------------------------------------- answers

    def status(self, job_id: int) -> Status | None:
        """The latest refusal or hold status of queued job `job_id` (None if there is none)."""
        return self.why_not.get(job_id)

    def why(self, job_id: int) -> str:
        """Why job `job_id` is where it is, in words (see `why_status`)."""
        return self.why_status(job_id).reason

    def why_status(self, job_id: int) -> Status:
        """Why job `job_id` is where it is, as a status: for a queued job, the last refusal of a
        decision about it (its code and deciding policy) or, when none was refused, the allocation
        policy's own explanation (HELD) or the queue position (NO_CAPACITY when it fits on none
        of its sites now, HELD when it waits its turn); ACCEPTED for a running job."""
        entry = self.entries.get(job_id)
        if entry is None:
            reason = self.log.reasons.get(job_id)
            return Status(
                StatusCode.WRONG_STATE, reason if reason is not None else f"job {job_id} is not in the system"
            )
        if entry.state is _RUNNING:
            where = self.backends[entry.site].name
            return Status(StatusCode.ACCEPTED, f"running on {where} since {entry.started:g}", self.allocation.name)
        explicit = self.why_not.get(job_id)
        if explicit is not None:
            return explicit
        text = self.allocation.explain(self.view, entry)
        if text:
            return Status(StatusCode.HELD, text, self.allocation.name)
        queue = self.queues[entry.stage]
        ahead = 0
        for other in queue:
            if other == job_id:
                break
            ahead += 1
        sites = self.stage_sites[entry.stage]
        most_free, where = matching_free([self.backends[i] for i in sites], entry.job)
        code = StatusCode.NO_CAPACITY if entry.job.size > most_free else StatusCode.HELD
        return Status(
            code,
            f"waiting in queue {entry.stage} behind {ahead} jobs; needs {entry.job.size} processors, "
            f"the most free on its sites is {most_free}{where}",
            self.allocation.name,
        )

    def fingerprint(self) -> tuple[object, ...]:
        """Everything a policy could change if it broke its contract (for the purity check)."""
        if self.index_declared:
            self.indexes()  # built now rather than by the policy's first read while it decides
        return (
            tuple(tuple(q) for q in self.queues),
            tuple(tuple(b) for stage in self.buckets for b in stage.values()),
            tuple(tuple(getattr(e, f) for f in ENTRY_FIELDS) for e in self.entries.values()),
            tuple(
                (b.free, b.online, len(b.running), tuple(b.by_estimated_end), tuple(b.running)) for b in self.backends
            ),
            tuple(tuple(tuple(getattr(v, f) for f in VM_FIELDS) for v in b.vms.values()) for b in self.clouds),
            tuple((u, tuple(h)) for u, h in self.history.items()),
            (self.spent, self.runtime_sum, self.runtime_count, len(self.log)),
        )
