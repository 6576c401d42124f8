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

Bags hold processors only on sites whose backend says so (`SiteBackend.holds_bags`: the
simulated cluster); the processors are taken from the backend's `free` count, so the rigid jobs'
policies see them as busy. Everything is logged (BAG_SUBMIT, GROW, SHRINK, TASK_START, TASK_END,
TASK_PREEMPT, BAG_RELEASE, BAG_END with the task column), and bag metrics come from the log
(`isthmus.metrics.bags`). Task events never ask for a scheduling round; a change of holdings does.

The bag events are scheduled on the engine's clock under a target of their own, registered with
the first bag, so that an engine without bags schedules exactly what it did before.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import TYPE_CHECKING

from isthmus.engine.clock import PRIO_END, Schedule
from isthmus.model.events import EventKind
from isthmus.model.job import Job, JobKind
from isthmus.policies.api import SlotInfo

if TYPE_CHECKING:
    from isthmus.engine.engine import Engine

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
    """One processor held by a bag (a launcher): pulling a task, running one, or leaving."""

    __slots__ = ("id", "since", "site", "state", "task")

    def __init__(self, slot_id: int, site: int, now: float) -> None:
        self.id = slot_id
        self.site = site
        self.state = _PULLING
        self.task = -1
        self.since = now

    @property
    def leaving(self) -> bool:
        """True once preempted (until its preemption time has passed)."""
        return self.state == _LEAVING


class Bag:
    """A bag of tasks and what the engine knows of it now."""

    __slots__ = ("_held", "_leaving", "done", "job", "pulling", "queue", "running", "slots", "submitted")

    def __init__(self, job: Job, now: float) -> None:
        self.job = job
        self.submitted = now
        #: task ids waiting for a processor, in the order they will be pulled
        self.queue: deque[int] = deque(range(job.tasks))
        self.done = 0
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
        """True once every task completed."""
        return self.done >= self.job.tasks

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
            SlotInfo(s.id, s.site, s.task if s.state == _RUNNING else -1, s.since)
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

    def held(self, site: int) -> int:
        """Processors held on `site` by all bags, those being preempted included."""
        return self._book.held.get(site, 0)

    def leaving(self, site: int) -> int:
        """Processors of `site` being preempted (free once their preemption time has passed)."""
        return self._book.leaving.get(site, 0)


class BagBook:
    """The bags of one engine: their tasks, the processors they hold, their events."""

    def __init__(self, engine: Engine, settings: BagSettings | None = None) -> None:
        self.engine = engine
        self.settings = settings if settings is not None else BagSettings()
        #: bag id -> bag, in arrival order (finished bags stay until their processors are free)
        self.bags: dict[int, Bag] = {}
        #: site -> processors held by all bags (leaving ones included)
        self.held: dict[int, int] = {}
        #: site -> processors being preempted
        self.leaving: dict[int, int] = {}
        self.sites: tuple[int, ...] = tuple(b.index for b in engine.backends if b.holds_bags)
        self.view = BagsView(self)
        self._schedule: Schedule | None = None
        self._next_slot = 0

    def __len__(self) -> int:
        return len(self.bags)

    def get(self, job_id: int) -> Bag | None:
        """The bag `job_id`, None when there is none."""
        return self.bags.get(job_id)

    # ------------------------------------------------------------------------- arrivals

    def submit(self, job: Job) -> Bag:
        """Bag `job` arrives now: its tasks wait for processors a fair-share policy gives it."""
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
        now = self.engine.clock.now
        bag = self.bags[job.id] = Bag(job, now)
        self.engine.log.append(now, _BAG_SUBMIT, job.id, -1, -1, float(job.tasks))
        self.engine.request_round(now)
        return bag

    # ------------------------------------------------------------------- grow and shrink

    def grow(self, bag: Bag, site: int, count: int, policy: str) -> None:
        """Give `bag` `count` free processors of `site` (validated by the GrowBag kind)."""
        engine = self.engine
        now = engine.clock.now
        log = engine.log
        engine.backends[site].free -= count
        self.held[site] = self.held.get(site, 0) + count
        bag._held[site] = bag._held.get(site, 0) + count
        log.append(now, _GROW, bag.job.id, site, -1, float(count), -1, log.policy_index(policy))
        latency = self.settings.pull_latency
        for _ in range(count):
            slot = Slot(self._next_slot, site, now)
            self._next_slot += 1
            bag.slots[slot.id] = slot
            bag.pulling += 1
            if latency > 0:
                self._at(now + latency, EV_PULL, bag.job.id, slot.id)
            else:
                self._pull(bag, slot)

    def shrink(self, bag: Bag, site: int, slots: Sequence[Slot], policy: str, for_job: int = -1) -> None:
        """Preempt `slots` of `bag` on `site` (validated by the ShrinkBag kind) for rigid job
        `for_job` (-1: none): running tasks go back to the front of the queue; the processors are
        free after the preemption time."""
        engine = self.engine
        now = engine.clock.now
        log = engine.log
        policy_index = log.policy_index(policy)
        log.append(now, _SHRINK, bag.job.id, site, -1, float(len(slots)), -1, policy_index, task=for_job)
        for slot in slots:
            if slot.state == _RUNNING:
                log.append(now, _TASK_PREEMPT, bag.job.id, site, slot.id, now - slot.since, task=slot.task)
                bag.queue.appendleft(slot.task)
                bag.running -= 1
            else:
                bag.pulling -= 1
            slot.state = _LEAVING
            slot.task = -1
            slot.since = now
            bag._held[site] -= 1
            bag._leaving[site] = bag._leaving.get(site, 0) + 1
            self.leaving[site] = self.leaving.get(site, 0) + 1
        wait = self.settings.preemption_time
        for slot in slots:
            if wait > 0:
                self._at(now + wait, EV_FREED, bag.job.id, slot.id)
            else:
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
        """Processor `slot` asks for a task: it starts the next queued one, or is given back."""
        bag.pulling -= 1
        now = self.engine.clock.now
        if not bag.queue:
            self._free(bag, slot)
            return
        task = bag.queue.popleft()
        slot.state = _RUNNING
        slot.task = task
        slot.since = now
        bag.running += 1
        self.engine.log.append(now, _TASK_START, bag.job.id, slot.site, slot.id, 0.0, task=task)
        self._at(now + bag.job.runtime, EV_TASK_END, bag.job.id, slot.id)

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
        engine.backends[site].free += 1
        self.held[site] -= 1
        engine.log.append(now, _RELEASE, bag.job.id, site, slot.id, 1.0)
        if bag.finished and not bag.slots:
            del self.bags[bag.job.id]
        engine.request_round(now)
