"""Bags of tasks in the engine: malleable jobs that hold processors and pull their tasks.

A bag (a `Job` of kind MALLEABLE: `tasks` independent tasks of `runtime` seconds each) enters no
queue: it waits in the lowest priority for processors that a fair-share policy gives it
(`GrowBag`) and takes back (`ShrinkBag`). Each processor the bag holds is a launcher (KOALA-CS
thesis §3.3): it pulls one task at a time from the bag's queue (after the task pull latency),
runs it, and pulls the next (§3.7.2, Single task Launcher Pull); a processor that finds the
queue empty is given back at once. A shrink preempts processors: a task running on one goes back
to the front of the bag's queue with its work lost, and the processor is free again once the
preemption time has passed (the time for the shrink to take effect, §3.5.3); until then it still
counts as held. Every task therefore completes exactly once.

Bags hold processors only on sites whose backend says so (`SiteBackend.holds_bags`: clusters,
and clouds, where each processor is a free core of one ready VM, `Slot.vm`); the processors are
taken from the backend's `free` count (`bag_take`, `bag_give`), so the rigid jobs' allocation
sees them as busy. On a cloud they scavenge VMs leased anyway: a VM only bags hold stays idle to
provisioning (`Vm.bagged` is not `Vm.load`), and a VM going away (released, failed, reserved)
preempts its launchers at once (`BagBook.evict`, no preemption time).
Everything is logged (BAG_SUBMIT, GROW, SHRINK, TASK_START, TASK_END,
TASK_PREEMPT, BAG_RELEASE, BAG_END with the task column), and bag metrics come from the log
(`isthmus.metrics.bags`). Task events never ask for a scheduling round; a change of holdings does.

The bag events are scheduled on the engine's clock under a target of their own, registered with
the first bag, so that an engine without bags schedules exactly what it did before.

Live bags (a `BagLauncher` attached, the live manager's pilots): the same book, grow, shrink
and policies, but task runtimes are unknown, so no task end is scheduled: the launcher is handed
each processor's tasks (the running one and up to `prefetch` more, the launcher's local list,
KOALA-CS thesis §3.3) and reports their ends (`task_ended`); a task that exits non-zero goes
back to the queue until its retries are spent (TASK_RETRY), then counts as failed (TASK_FAIL).
A preempted processor is free once its launcher confirms (`freed`) or, at the latest, once the
preemption time has passed.

Holds (KOALA-CS thesis §3.1, "unobtrusive": a bag never delays a rigid job by more than the
preemption time): a shrink for a waiting rigid job J (`ShrinkBag.for_job`) on a site makes the
engine hold processors there for J, up to J's size: the processors being preempted for it (as
they come free), then, once all the shrinks of the deciding policy are applied (`settle`), those
being preempted for no waiting job (as they come free) and free processors held for no one.
Held processors are part of the backend's `free` but counted in its `reserved_cores` (`holds`
per job): no other job starts on them and no bag grows on them (`free_for`), so an
allocation policy that skips J (First-Fit, EASY's backfilling) cannot start a later job on the
processors J waits for. A hold ends when J starts (anywhere) or leaves the queue
(`Engine.drop_reservations`); the processors it let go of (J started on another site, where the
fair-share walk expected it) go to the other holds on that site that still miss some (`_refill`):
the walk counted them for the next job, which bags gave back only the rest for. It ends also
after a round that did not start J once nothing more was coming to its hold (`after_round`): the
allocation policy chose not to start J (a job ahead of it blocks the queue, EASY's reservation
for another job), and the processors go back to all (under a head-of-line allocation, not while
a job ahead of J in its queue still has processors coming to its hold: strict FCFS starts J
right after it); such a job gets no second hold (a shrink
for it and a grow could otherwise repeat every preemption time).
Every change is logged (HOLD: the processors held for the job on the site now, 0 when it ends).
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import TYPE_CHECKING, Protocol

from isthmus.engine.backend import CloudBackend
from isthmus.engine.clock import PRIO_END, Schedule
from isthmus.model.events import EventKind
from isthmus.model.job import Job, JobKind
from isthmus.model.states import JobState
from isthmus.policies.api import SlotInfo

if TYPE_CHECKING:
    from isthmus.engine.backend import SiteBackend
    from isthmus.engine.ops import BagOps

EV_PULL = 0
EV_TASK_END = 1
EV_FREED = 2

_PULLING = 0
_RUNNING = 1
_LEAVING = 2

_BAG_SUBMIT = int(EventKind.BAG_SUBMIT)
_GROW = int(EventKind.GROW)
_SHRINK = int(EventKind.SHRINK)
_RELEASE = int(EventKind.BAG_RELEASE)
_TASK_START = int(EventKind.TASK_START)
_TASK_END = int(EventKind.TASK_END)
_TASK_PREEMPT = int(EventKind.TASK_PREEMPT)
_BAG_END = int(EventKind.BAG_END)
_TASK_RETRY = int(EventKind.TASK_RETRY)
_TASK_FAIL = int(EventKind.TASK_FAIL)
_CANCEL = int(EventKind.CANCEL)
_HOLD = int(EventKind.HOLD)


@dataclass(frozen=True, slots=True)
class BagSettings:
    """How the launchers of bags behave: `preemption_time` (s) from a shrink until the processor
    is free (KOALA-CS thesis §3.2.1 and §4.3: tens of seconds), and `pull_latency` (s) from a
    processor asking for a task until the task starts (the launcher's round trip)."""

    preemption_time: float = 10.0
    pull_latency: float = 0.0

    def __post_init__(self) -> None:
        for name in ("preemption_time", "pull_latency"):
            value = getattr(self, name)
            if not (value >= 0 and math.isfinite(value)):
                raise ValueError(f"{name} must be a number of seconds >= 0, got {value}")


class Slot:
    """One processor held by a bag (a launcher): pulling a task, running one, or leaving. A live
    launcher also holds `ahead`: the tasks it will run next, in order (its local list)."""

    __slots__ = ("ahead", "for_job", "id", "since", "site", "state", "task", "vm")

    def __init__(self, slot_id: int, site: int, now: float, vm: int = -1) -> None:
        self.id = slot_id
        self.site = site
        #: while leaving: the waiting rigid job its processor is held for once free (-1: none)
        self.for_job = -1
        #: the VM it is on (a cloud site's), -1 on a cluster
        self.vm = vm
        self.state = _PULLING
        self.task = -1
        self.since = now
        self.ahead: deque[int] = deque()

    @property
    def running(self) -> bool:
        """True while it runs a task."""
        return self.state == _RUNNING

    @property
    def leaving(self) -> bool:
        """True once preempted (until its preemption time has passed)."""
        return self.state == _LEAVING


class Bag:
    """A bag of tasks and what the engine knows of it now."""

    __slots__ = (
        "_held",
        "_leaving",
        "cancelled",
        "done",
        "failed",
        "failures",
        "job",
        "pulling",
        "queue",
        "running",
        "slots",
        "submitted",
    )

    def __init__(self, job: Job, now: float) -> None:
        self.job = job
        self.submitted = now
        #: task ids waiting for a processor, in the order they will be pulled
        self.queue: deque[int] = deque(range(job.tasks))
        self.done = 0
        #: tasks that failed with no retry left (live bags)
        self.failed = 0
        #: task id -> failed runs so far (live bags; tasks that never failed are absent)
        self.failures: dict[int, int] = {}
        #: True once its user cancelled it (it is then finished)
        self.cancelled = False
        self.running = 0
        #: processors pulling a task now (the tasks they will get are still queued)
        self.pulling = 0
        #: slot id -> slot, every processor held (leaving ones included)
        self.slots: dict[int, Slot] = {}
        self._held: dict[int, int] = {}
        self._leaving: dict[int, int] = {}

    # the read-only side (policies.api.BagInfo)

    @property
    def id(self) -> int:
        """The bag's job id."""
        return self.job.id

    @property
    def queued(self) -> int:
        """Tasks waiting for a processor (preempted ones included)."""
        return len(self.queue)

    @property
    def unclaimed(self) -> int:
        """Queued tasks no processor of the bag is about to pull."""
        return len(self.queue) - self.pulling

    @property
    def finished(self) -> bool:
        """True once every task completed or failed for good, or the bag was cancelled."""
        return self.done + self.failed >= self.job.tasks or self.cancelled

    @property
    def total_held(self) -> int:
        """Processors held and not being preempted, over all sites."""
        return sum(self._held.values())

    def held(self, site: int) -> int:
        """Processors held on `site` and not being preempted."""
        return self._held.get(site, 0)

    def held_sites(self) -> Mapping[int, int]:
        """Site -> processors held there and not being preempted (sites with none left out)."""
        return MappingProxyType({s: n for s, n in self._held.items() if n})

    def leaving(self, site: int) -> int:
        """Processors of `site` being preempted (still held until their preemption time has passed)."""
        return self._leaving.get(site, 0)

    def slots_on(self, site: int) -> Sequence[SlotInfo]:
        """The processors held on `site` and not being preempted, oldest first."""
        return tuple(
            SlotInfo(s.id, s.site, s.task if s.state == _RUNNING else -1, s.since, s.vm)
            for s in self.slots.values()
            if s.site == site and s.state != _LEAVING
        )


class BagView:
    """One bag as policies see it (policies.api.BagInfo): reads only."""

    __slots__ = ("_b",)

    def __init__(self, bag: Bag) -> None:
        self._b = bag

    @property
    def job(self) -> Job:
        """The bag's job (tasks, task runtime, user)."""
        return self._b.job

    @property
    def id(self) -> int:
        """The bag's job id."""
        return self._b.job.id

    @property
    def submitted(self) -> float:
        """When the bag arrived."""
        return self._b.submitted

    @property
    def done(self) -> int:
        """Tasks completed."""
        return self._b.done

    @property
    def running(self) -> int:
        """Tasks running now."""
        return self._b.running

    @property
    def failed(self) -> int:
        """Tasks that failed with no retry left (live bags)."""
        return self._b.failed

    @property
    def queued(self) -> int:
        """Tasks waiting for a processor."""
        return self._b.queued

    @property
    def unclaimed(self) -> int:
        """Queued tasks no processor of the bag is about to pull."""
        return self._b.unclaimed

    @property
    def total_held(self) -> int:
        """Processors held and not being preempted, over all sites."""
        return self._b.total_held

    def held(self, site: int) -> int:
        """Processors held on `site` and not being preempted."""
        return self._b.held(site)

    def held_sites(self) -> Mapping[int, int]:
        """Site -> processors held there and not being preempted."""
        return self._b.held_sites()

    def slots(self, site: int) -> Sequence[SlotInfo]:
        """The processors held on `site` and not being preempted, oldest first."""
        return self._b.slots_on(site)


class BagsView:
    """What policies may read of an engine's bags (policies.api.BagsInfo)."""

    __slots__ = ("_book",)

    def __init__(self, book: BagBook) -> None:
        self._book = book

    @property
    def active(self) -> Sequence[BagView]:
        """Bags not finished, in arrival order."""
        return tuple(BagView(b) for b in self._book.bags.values() if not b.finished)

    @property
    def sites(self) -> Sequence[int]:
        """Indices of the sites that may hold bag processors."""
        return self._book.sites

    @property
    def holding(self) -> bool:
        """True when bags hold processors on some site (a cheap test: no bag, no scan)."""
        held = self._book.held
        return bool(held) and any(held.values())

    def held(self, site: int) -> int:
        """Processors held on `site` by all bags, those being preempted included."""
        return self._book.held.get(site, 0)

    def leaving(self, site: int) -> int:
        """Processors of `site` being preempted (free once their preemption time has passed)."""
        return self._book.leaving.get(site, 0)

    @property
    def preemption_time(self) -> float:
        """Seconds from a shrink until its processors are free at the latest."""
        return self._book.settings.preemption_time

    def leaving_for(self, site: int, job_id: int) -> int:
        """Processors of `site` being preempted that are held for waiting job `job_id` once free
        (-1: those held for some waiting job)."""
        book = self._book
        if not book.hold_keys:
            return 0
        if job_id < 0:
            return book.pending_on.get(site, 0)
        return book.pending.get((site, job_id), 0)

    def coming_by(self, site: int, job_id: int) -> float:
        """When the processors of `site` being preempted for waiting job `job_id` (-1: for no
        job) are free at the latest: their preemption plus the preemption time (-inf: none)."""
        book = self._book
        if not book.leaving.get(site, 0):
            return -math.inf
        wait = book.settings.preemption_time
        return max(
            (
                s.since + wait
                for b in book.bags.values()
                for s in b.slots.values()
                if s.state == _LEAVING and s.site == site and s.for_job == job_id
            ),
            default=-math.inf,
        )


class BagLauncher(Protocol):
    """What runs the tasks of live bags (the live manager's pilots, isthmus.live.bag_tasks): the
    engine hands it each processor's tasks, and it reports their ends to `BagBook.task_ended`."""

    #: tasks a launcher keeps ahead of the one it runs (its local list, §3.3)
    prefetch: int

    def open(self, bag: Bag, slot: Slot) -> None:
        """Processor `slot` of `bag` was granted on `slot.site`: bind it to a pilot's slot."""
        ...

    def tasks(self, bag: Bag, slot: Slot, tasks: Sequence[int]) -> None:
        """Append `tasks` to the local list of the launcher of `slot` (TASKS)."""
        ...

    def preempt(self, bag: Bag, slot: Slot) -> None:
        """Preempt the launcher of `slot`: kill its task, drop its list (PREEMPT)."""
        ...

    def drop(self, bag: Bag, slot: Slot, task: int) -> None:
        """Take `task` off the local list of the launcher of `slot` (DROP)."""
        ...

    def close(self, bag: Bag, slot: Slot) -> None:
        """Processor `slot` is given back to its site."""
        ...


class BagBook:
    """The bags of one engine: their tasks, the processors they hold, their events."""

    def __init__(self, engine: BagOps, settings: BagSettings | None = None) -> None:
        self.engine = engine
        self.settings = settings if settings is not None else BagSettings()
        #: bag id -> bag, in arrival order (finished bags stay until their processors are free)
        self.bags: dict[int, Bag] = {}
        #: site -> processors held by all bags (leaving ones included)
        self.held: dict[int, int] = {}
        #: site -> processors being preempted
        self.leaving: dict[int, int] = {}
        self.sites: tuple[int, ...] = tuple(b.index for b in engine.backends if b.holds_bags)
        for b in engine.backends:
            if isinstance(b, CloudBackend):
                b.bag_evict = self._evictor(b.index)
        self.view = BagsView(self)
        self._schedule: Schedule | None = None
        self._next_slot = 0
        #: runs the tasks of live bags; None: task ends are simulated (after the task runtime)
        self.launcher: BagLauncher | None = None
        #: a live manager drains (`drain`): no launcher starts a new task
        self.draining = False
        #: (site, rigid job) -> processors being preempted there that are held for it once free
        self.pending: dict[tuple[int, int], int] = {}
        #: site -> processors being preempted there that are held for some job once free
        self.pending_on: dict[int, int] = {}
        #: (site, rigid job) of every hold (free processors held or being preempted for it)
        self.hold_keys: set[tuple[int, int]] = set()
        #: holds made by this policy's shrinks, topped up with free processors once all its
        #: decisions are applied (`settle`): a claim may be several shrinks, one per bag
        self.unsettled: list[tuple[int, int]] = []
        #: waiting jobs whose hold ended unused (the allocation did not start them): no new hold
        self.declined: set[int] = set()

    def __len__(self) -> int:
        return len(self.bags)

    def reserve_slot_ids(self, next_id: int) -> None:
        """Number new processors from `next_id` on (after a live restart: a launcher's id is
        never reused, so a late report of a launcher of before is never taken for a new one's)."""
        self._next_slot = max(self._next_slot, next_id)

    def get(self, job_id: int) -> Bag | None:
        """The bag `job_id`, None when there is none."""
        return self.bags.get(job_id)

    # ------------------------------------------------------------------------- arrivals

    def submit(self, job: Job) -> Bag:
        """Bag `job` arrives now: its tasks wait for processors a fair-share policy gives it."""
        bag = self._add(job)
        now = self.engine.clock.now
        self.engine.log.append(now, _BAG_SUBMIT, job.id, -1, -1, float(job.tasks))
        self.engine.request_round(now)
        return bag

    def restore(self, job: Job, submitted: float, queue: Sequence[int], done: int, failed: int) -> Bag:
        """A live bag recorded before a manager restart comes back (nothing is logged): `done`
        and `failed` tasks stay so, the tasks of `queue` wait for processors again."""
        bag = self._add(job)
        bag.submitted = submitted
        bag.queue = deque(queue)
        bag.done = done
        bag.failed = failed
        now = self.engine.clock.now
        if bag.finished:  # its last task reported; its end was not stored
            self.engine.log.append(now, _BAG_END, job.id, -1, -1, float(done))
            del self.bags[job.id]
        self.engine.request_round(now)
        return bag

    def _add(self, job: Job) -> Bag:
        if job.kind is not JobKind.MALLEABLE:
            raise ValueError(f"job {job.id} is not a bag of tasks")
        if job.tasks < 1:
            raise ValueError(f"bag {job.id}: tasks must be >= 1, got {job.tasks}")
        if not (job.runtime >= 0 and math.isfinite(job.runtime)):
            raise ValueError(f"bag {job.id}: task runtime must be a number of seconds >= 0, got {job.runtime}")
        if job.id in self.bags or job.id in self.engine.entries:
            raise ValueError(f"job {job.id} was already submitted")
        if self._schedule is None:
            clock = self.engine.clock
            self._schedule = clock.scheduler(clock.register(self._handle))
        bag = self.bags[job.id] = Bag(job, self.engine.clock.now)
        return bag

    def cancel(self, bag: Bag) -> None:
        """The user cancels `bag`: its queued tasks are dropped and its processors preempted."""
        now = self.engine.clock.now
        bag.cancelled = True
        bag.queue.clear()
        self.engine.log.append(now, _CANCEL, bag.job.id)
        by_site: dict[int, list[Slot]] = {}
        for slot in bag.slots.values():
            if slot.state != _LEAVING:
                by_site.setdefault(slot.site, []).append(slot)
        for site, slots in by_site.items():
            self.shrink(bag, site, slots, "cancel")
        if not bag.slots:
            self.bags.pop(bag.job.id, None)
        self.engine.request_round(now)

    # ------------------------------------------------------------------- grow and shrink

    def grow(self, bag: Bag, site: int, count: int, policy: str, avoid: tuple[int, ...] = ()) -> None:
        """Give `bag` `count` free processors of `site`, on a cloud none of the VMs `avoid`
        (validated by the GrowBag kind)."""
        engine = self.engine
        now = engine.clock.now
        log = engine.log
        vms = engine.backends[site].bag_take(bag.job, count, avoid)
        self.held[site] = self.held.get(site, 0) + count
        bag._held[site] = bag._held.get(site, 0) + count
        log.append(now, _GROW, bag.job.id, site, -1, float(count), -1, log.policy_index(policy))
        latency = self.settings.pull_latency
        for vm in vms:
            slot = Slot(self._next_slot, site, now, vm)
            self._next_slot += 1
            bag.slots[slot.id] = slot
            bag.pulling += 1
            if self.launcher is not None:
                self.launcher.open(bag, slot)
            if latency > 0:
                self._at(now + latency, EV_PULL, bag.job.id, slot.id)
            else:
                self._pull(bag, slot)

    def shrink(
        self, bag: Bag, site: int, slots: Sequence[Slot], policy: str, for_job: int = -1, at_once: bool = False
    ) -> None:
        """Preempt `slots` of `bag` on `site` (validated by the ShrinkBag kind) for rigid job
        `for_job` (-1: none): running tasks go back to the front of the queue; the processors are
        free after the preemption time, or now with `at_once` (their VM is going)."""
        engine = self.engine
        now = engine.clock.now
        log = engine.log
        policy_index = log.policy_index(policy)
        log.append(now, _SHRINK, bag.job.id, site, -1, float(len(slots)), -1, policy_index, task=for_job)
        launcher = self.launcher
        for slot in slots:
            if slot.ahead:  # the launcher's list goes back too, in order, behind its running task
                if not bag.cancelled:
                    bag.queue.extendleft(reversed(slot.ahead))
                slot.ahead.clear()
            if slot.state == _RUNNING:
                log.append(now, _TASK_PREEMPT, bag.job.id, site, slot.id, now - slot.since, task=slot.task)
                if not bag.cancelled:
                    bag.queue.appendleft(slot.task)
                bag.running -= 1
            else:
                bag.pulling -= 1
            if launcher is not None:
                launcher.preempt(bag, slot)
            slot.state = _LEAVING
            slot.task = -1
            slot.since = now
            bag._held[site] -= 1
            bag._leaving[site] = bag._leaving.get(site, 0) + 1
            self.leaving[site] = self.leaving.get(site, 0) + 1
        if for_job >= 0:
            self._hold(site, for_job, slots, policy_index)
        wait = 0.0 if at_once else self.settings.preemption_time
        for slot in slots:
            if wait > 0:
                self._at(now + wait, EV_FREED, bag.job.id, slot.id)
            else:
                self._free(bag, slot)

    def _evictor(self, site: int) -> Callable[[int, float], None]:
        def evict(vm: int, now: float) -> None:
            self.evict(site, vm)

        return evict

    def evict(self, site: int, vm: int) -> None:
        """VM `vm` of cloud `site` is going (released, failed, reserved for a job): the launchers
        of bags on it are preempted now, with no preemption time (SHRINK by "vm-release", their
        tasks back to the front of their bag's queue, as for any shrink), those already being
        preempted are free now too; their cores are free again on the VM."""
        for bag in list(self.bags.values()):
            mine = [s for s in bag.slots.values() if s.site == site and s.vm == vm]
            if not mine:
                continue
            active = [s for s in mine if s.state != _LEAVING]
            if active:
                self.shrink(bag, site, active, "vm-release", at_once=True)
            for slot in mine:
                if slot.id in bag.slots:
                    self._free(bag, slot)

    # ------------------------------------------------------------------------ events

    def _at(self, t: float, kind: int, bag_id: int, slot_id: int) -> None:
        assert self._schedule is not None
        self._schedule(t, PRIO_END, kind, bag_id, slot_id)

    def _handle(self, kind: int, bag_id: int, slot_id: int) -> None:
        bag = self.bags.get(bag_id)
        slot = bag.slots.get(slot_id) if bag is not None else None
        if bag is None or slot is None:
            return
        if kind == EV_TASK_END:
            if slot.state == _RUNNING:
                self._task_ended(bag, slot)
        elif kind == EV_PULL:
            if slot.state == _PULLING:
                self._pull(bag, slot)
        elif kind == EV_FREED and slot.state == _LEAVING:
            self._free(bag, slot)
        engine = self.engine
        if engine.round_rule == "per-event":
            engine.run_due_round()

    def _pull(self, bag: Bag, slot: Slot) -> None:
        """Processor `slot` asks for a task: it starts the next queued one, or is given back (no
        task left, or the manager drains)."""
        bag.pulling -= 1
        now = self.engine.clock.now
        if not bag.queue or self.draining:
            self._free(bag, slot)
            return
        task = bag.queue.popleft()
        slot.state = _RUNNING
        slot.task = task
        slot.since = now
        bag.running += 1
        self.engine.log.append(now, _TASK_START, bag.job.id, slot.site, slot.id, 0.0, task=task)
        launcher = self.launcher
        if launcher is None:
            self._at(now + bag.job.runtime, EV_TASK_END, bag.job.id, slot.id)
        else:
            launcher.tasks(bag, slot, [task, *self._prefetch(bag, slot)])

    def drain(self) -> None:
        """A live manager drains (`isthmus stop --drain`): launchers start no new task. The tasks
        on their local lists go back to the front of their bags' queues (DROP, in order), the
        running ones finish and report, and each launcher is then given back; the bags wait,
        with their queues, for the next start."""
        self.draining = True
        launcher = self.launcher
        for bag in self.bags.values():
            for slot in bag.slots.values():
                if not slot.ahead:
                    continue
                if launcher is not None:
                    for task in slot.ahead:
                        launcher.drop(bag, slot, task)
                if not bag.cancelled:
                    bag.queue.extendleft(reversed(slot.ahead))
                slot.ahead.clear()

    @property
    def running_tasks(self) -> int:
        """Tasks running now, over all bags."""
        return sum(bag.running for bag in self.bags.values())

    def _prefetch(self, bag: Bag, slot: Slot) -> list[int]:
        """Fill the local list of a live launcher up to `prefetch` tasks (none while draining);
        returns those added."""
        assert self.launcher is not None
        added: list[int] = []
        if self.draining:
            return added
        while len(slot.ahead) < self.launcher.prefetch and bag.queue:
            task = bag.queue.popleft()
            slot.ahead.append(task)
            added.append(task)
        return added

    # ------------------------------------------------------------------- live task reports

    def task_ended(self, bag_id: int, slot_id: int, task: int, code: int) -> bool:
        """A live launcher reports that task `task` of bag `bag_id` exited with `code` on slot
        `slot_id`; it has started the next task of its list already. False when the report is
        stale (its processor was preempted or the task was given to another since): such an end
        still counts when it is a success (`_late_result`)."""
        bag = self.bags.get(bag_id)
        if bag is None:
            return False
        slot = bag.slots.get(slot_id)
        if slot is None or slot.state != _RUNNING or slot.task != task:
            if code == 0 and not bag.finished:
                self._late_result(bag, -1 if slot is None else slot.site, slot_id, task)
            return False
        bag.running -= 1
        self._record_end(bag, slot.site, slot.id, task, code, self.engine.clock.now - slot.since)
        if slot.ahead:  # the launcher went on with the next task of its list at once
            self._run(bag, slot, slot.ahead.popleft())
            added = self._prefetch(bag, slot)
            if added:
                assert self.launcher is not None
                self.launcher.tasks(bag, slot, added)
            return True
        slot.state = _PULLING
        slot.task = -1
        bag.pulling += 1
        self._pull(bag, slot)
        return True

    def _late_result(self, bag: Bag, site: int, slot_id: int, task: int) -> None:
        """A task preempted as it completed reported success: its result stands and it is taken
        back from where it waits again, the bag's queue or another launcher's list (DROP). A task
        already running again elsewhere reports for itself."""
        if task in bag.queue:
            bag.queue.remove(task)
        else:
            holder = next((s for s in bag.slots.values() if task in s.ahead), None)
            if holder is None:
                return
            holder.ahead.remove(task)
            launcher = self.launcher
            assert launcher is not None
            launcher.drop(bag, holder, task)
            added = self._prefetch(bag, holder)
            if added:
                launcher.tasks(bag, holder, added)
        self._record_end(bag, site, slot_id, task, 0, 0.0)

    def freed(self, bag_id: int, slot_id: int) -> None:
        """A live launcher confirms its preemption: the processor is free now (not only once
        the preemption time has passed)."""
        bag = self.bags.get(bag_id)
        slot = bag.slots.get(slot_id) if bag is not None else None
        if bag is not None and slot is not None and slot.state == _LEAVING:
            self._free(bag, slot)

    def _run(self, bag: Bag, slot: Slot, task: int) -> None:
        now = self.engine.clock.now
        slot.state = _RUNNING
        slot.task = task
        slot.since = now
        bag.running += 1
        self.engine.log.append(now, _TASK_START, bag.job.id, slot.site, slot.id, 0.0, task=task)

    def _record_end(self, bag: Bag, site: int, slot_id: int, task: int, code: int, runtime: float) -> None:
        """Log a live task's end: completed, back in the queue for a retry, or failed for good."""
        now = self.engine.clock.now
        log = self.engine.log
        job = bag.job
        if code == 0:
            log.append(now, _TASK_END, job.id, site, slot_id, runtime, task=task)
            bag.done += 1
        else:
            failures = bag.failures[task] = bag.failures.get(task, 0) + 1
            if failures <= job.retries:
                log.append(now, _TASK_RETRY, job.id, site, slot_id, float(code), task=task)
                bag.queue.append(task)
            else:
                log.append(now, _TASK_FAIL, job.id, site, slot_id, float(code), task=task)
                bag.failed += 1
        if bag.finished:
            log.append(now, _BAG_END, job.id, -1, -1, float(bag.done))

    def _task_ended(self, bag: Bag, slot: Slot) -> None:
        engine = self.engine
        now = engine.clock.now
        log = engine.log
        log.append(now, _TASK_END, bag.job.id, slot.site, slot.id, now - slot.since, task=slot.task)
        bag.running -= 1
        bag.done += 1
        if bag.finished:
            log.append(now, _BAG_END, bag.job.id, -1, -1, float(bag.done))
            # the runner aborts its launchers once every task is done (§3.5.4): the processors
            # between two tasks are free at once, not after their pull (a finished bag is no
            # longer the fair-share policies' to shrink); those being preempted keep their time
            for idle in [s for s in bag.slots.values() if s.state == _PULLING]:
                bag.pulling -= 1
                self._free(bag, idle)
            self._free(bag, slot)
            return
        slot.state = _PULLING
        slot.task = -1
        slot.since = now
        bag.pulling += 1
        latency = self.settings.pull_latency
        if latency > 0:
            self._at(now + latency, EV_PULL, bag.job.id, slot.id)
        else:
            self._pull(bag, slot)

    # ------------------------------------------------------------------------- holds

    @property
    def holding(self) -> bool:
        """True while some site holds processors (or processors being preempted) for a waiting job."""
        return bool(self.hold_keys)

    def _hold(self, site: int, job_id: int, slots: Sequence[Slot], policy: int) -> None:
        """Bags on `site` gave back `slots` for waiting rigid job `job_id`: hold processors there
        for it, up to its size: these as they come free, then processors being preempted for no
        waiting job (as they come free), then free processors held for no job (at once)."""
        engine = self.engine
        entry = engine.entries.get(job_id)
        if entry is None or entry.state is not JobState.QUEUED or entry.stage < 0 or job_id in self.declined:
            return
        if isinstance(engine.backends[site], CloudBackend):
            # a cloud's freed cores are a VM's: its reservations are ReserveVms' (VM by VM), not
            # holds of processors
            return
        key = (site, job_id)
        for slot in slots:
            slot.for_job = job_id
        self._tag(key, len(slots))
        if key not in self.unsettled:
            self.unsettled.append(key)
        engine.reserving = True

    def release_room(self, site: int, job_id: int) -> tuple[int, int]:
        """(processors the hold for waiting job `job_id` on `site` misses of its size, processors
        of the site being preempted for no waiting job)."""
        backend = self.engine.backends[site]
        entry = self.engine.entries[job_id]
        missing = entry.job.size - backend.holds.get(job_id, 0) - self.pending.get((site, job_id), 0)
        return missing, self.leaving.get(site, 0) - self.pending_on.get(site, 0)

    def hold_release(self, site: int, job_id: int, policy: str) -> None:
        """Hold for waiting job `job_id` on `site` what bags give back there for no job and free
        processors held for no job, up to its size (validated by the HoldBagRelease kind: some
        processor is being given back for no job, so the hold has one coming and lasts until it
        is free); what it still misses may come from other holds there letting go (`_refill`)."""
        self._top_up((site, job_id), self.engine.log.policy_index(policy))
        self.engine.reserving = True

    def settle(self, policy: str) -> None:
        """After the decisions of the policy that shrank bags: fill each new hold up to its job's
        size with processors being preempted for no waiting job (held as they come free), then
        with free processors held for no job (at once)."""
        engine = self.engine
        index = engine.log.policy_index(policy)
        for key in self.unsettled:
            if key in self.hold_keys:
                self._top_up(key, index)
        self.unsettled.clear()

    def _top_up(self, key: tuple[int, int], policy: int) -> None:
        """Fill the hold `key` (site, job) up to its job's size: processors of the site being
        preempted for no waiting job (held as they come free), then free ones held for no job."""
        site, job_id = key
        engine = self.engine
        entry = engine.entries.get(job_id)
        if entry is None or entry.state is not JobState.QUEUED:
            return
        backend = engine.backends[site]
        need = entry.job.size - backend.holds.get(job_id, 0) - self.pending.get(key, 0)
        if need > 0 and self.leaving.get(site, 0) > self.pending_on.get(site, 0):
            for bag in self.bags.values():
                for slot in bag.slots.values():
                    if need and slot.site == site and slot.state == _LEAVING and slot.for_job < 0:
                        slot.for_job = job_id
                        self._tag(key, 1)
                        need -= 1
        if need > 0:
            self._add_hold(backend, job_id, min(need, backend.free - backend.reserved_cores), policy)

    def _tag(self, key: tuple[int, int], n: int) -> None:
        self.pending[key] = self.pending.get(key, 0) + n
        self.pending_on[key[0]] = self.pending_on.get(key[0], 0) + n
        self.hold_keys.add(key)

    def _untag(self, site: int, job_id: int) -> None:
        key = (site, job_id)
        left = self.pending[key] - 1
        if left:
            self.pending[key] = left
        else:
            del self.pending[key]
        self.pending_on[site] -= 1

    def _add_hold(self, backend: SiteBackend, job_id: int, n: int, policy: int) -> None:
        """Hold `n` more free processors of `backend` for `job_id` (logged: HOLD)."""
        if n <= 0:
            return
        held = backend.holds[job_id] = backend.holds.get(job_id, 0) + n
        backend.reserved_cores += n
        self.hold_keys.add((backend.index, job_id))
        engine = self.engine
        engine.log.append(engine.clock.now, _HOLD, job_id, backend.index, -1, float(held), -1, policy)

    def drop_holds(self, job_id: int, sites: Sequence[int] | None = None) -> None:
        """End the holds for `job_id` (on `sites`; None: everywhere, and it may be held for
        again): it started or left the queue, or the allocation did not start it. Its free
        processors go back to all (HOLD, value 0); its processors being preempted come free for all."""
        if sites is None:
            self.declined.discard(job_id)
        keys = [k for k in self.hold_keys if k[1] == job_id and (sites is None or k[0] in sites)]
        if not keys:
            return
        engine = self.engine
        now = engine.clock.now
        let_go: list[int] = []
        for site, _ in keys:
            self.hold_keys.discard((site, job_id))
            pending = self.pending.pop((site, job_id), 0)
            if pending:
                self.pending_on[site] -= pending
                for bag in self.bags.values():
                    for slot in bag.slots.values():
                        if slot.for_job == job_id and slot.site == site:
                            slot.for_job = -1
            backend = engine.backends[site]
            held = backend.holds.pop(job_id, 0)
            backend.reserved_cores -= held
            engine.log.append(now, _HOLD, job_id, site, -1, 0.0)
            if pending or held:
                let_go.append(site)
        for site in let_go:
            self._refill(site)

    def _refill(self, site: int) -> None:
        """Processors of `site` a hold let go of (its job started, elsewhere or on fewer than it
        held, or the allocation did not start it) go to the other holds there that still miss
        some, in queue order (submission, then id): a waiting job another job's hold kept
        processors from counted on them (the fair-share walk freed them to it), and the bags gave
        back nothing more for it."""
        engine = self.engine
        keys = [k for k in self.hold_keys if k[0] == site and k[1] in engine.entries]
        keys.sort(key=lambda k: (engine.entries[k[1]].job.submit, k[1]))
        for key in keys:
            self._top_up(key, -1)

    def after_round(self) -> None:
        """After a round: end the holds to which nothing more is coming (no processor being
        preempted for them) whose job the round did not start: the allocation policy chose not to
        start it on them (a job ahead blocks the queue, a reservation for another job). Under a
        head-of-line allocation (strict FCFS) a hold behind a job with processors still coming to
        its own hold is kept until they have come (`_behind_coming`)."""
        done: dict[int, list[int]] = {}
        for site, job_id in sorted(self.hold_keys):
            if (site, job_id) not in self.pending:
                done.setdefault(job_id, []).append(site)
        if done and self.pending and self.engine.allocation.head_of_line:
            for job_id in self._behind_coming(done):
                del done[job_id]
        for job_id, sites in done.items():
            self.drop_holds(job_id, sites)
            self.declined.add(job_id)
        if done:  # the processors are for all now: another round may start other jobs on them
            self.engine.request_round(self.engine.clock.now)

    def _behind_coming(self, jobs: Mapping[int, object]) -> list[int]:
        """Those of `jobs` behind, in their queue, a job with processors still coming to its hold
        (being preempted for it): a head-of-line allocation starts them after that job, which
        starts within the preemption time; ending their holds now would let that job (placed
        first-fit) take their processors, and they would wait for a shrink of their own."""
        engine = self.engine
        coming = {j for (_, j) in self.pending}
        out = []
        for stage, queue in enumerate(engine.queue_book.queues):
            wanted = {j for j in jobs if (e := engine.entries.get(j)) is not None and e.stage == stage}
            if not wanted:
                continue
            ahead = False
            for job_id in queue:
                if job_id in wanted and ahead:
                    out.append(job_id)
                ahead = ahead or job_id in coming
        return out

    def _free(self, bag: Bag, slot: Slot) -> None:
        """Give processor `slot` back to its site now (its bag no longer counts it as held)."""
        engine = self.engine
        now = engine.clock.now
        site = slot.site
        del bag.slots[slot.id]
        if slot.state == _LEAVING:
            bag._leaving[site] -= 1
            self.leaving[site] -= 1
        else:  # out of tasks: it was counted as held until now
            bag._held[site] -= 1
        backend = engine.backends[site]
        backend.bag_give(slot.vm)
        self.held[site] -= 1
        engine.log.append(now, _RELEASE, bag.job.id, site, slot.id, 1.0)
        job_id = slot.for_job
        if job_id >= 0:  # held for a waiting rigid job: its hold takes the processor (up to its size)
            slot.for_job = -1
            self._untag(site, job_id)
            entry = engine.entries.get(job_id)
            if entry is not None and backend.holds.get(job_id, 0) < entry.job.size:
                self._add_hold(backend, job_id, 1, -1)
        if self.launcher is not None:
            self.launcher.close(bag, slot)
        if bag.finished and not bag.slots:
            del self.bags[bag.job.id]
        engine.request_round(now)
