"""The bag book's live path: task ends reported by a launcher (the live manager's pilots), not
scheduled after a task runtime. Driven here on a simulated clock with a recording launcher, so
every hand-out, preemption and report is checked against a hand-computed schedule."""

from __future__ import annotations

from collections.abc import Sequence

from hypothesis import given, settings
from hypothesis import strategies as st

from helpers import clusters, job
from isthmus.engine.bags import Bag, BagSettings, Slot
from isthmus.engine.clock import SimClock
from isthmus.engine.engine import Engine
from isthmus.model.environment import PolicyChoice
from isthmus.model.events import EventKind
from isthmus.model.job import Job, JobKind, PriorityClass
from isthmus.policies.build import DEFAULT_PREDICTOR, build_policies
from isthmus.sim.runner import build_backends


class Recorder:
    """A BagLauncher that records what the engine asks of it."""

    def __init__(self, prefetch: int) -> None:
        self.prefetch = prefetch
        self.calls: list[tuple[str, int, tuple[int, ...]]] = []

    def open(self, bag: Bag, slot: Slot) -> None:
        self.calls.append(("open", slot.id, ()))

    def tasks(self, bag: Bag, slot: Slot, tasks: Sequence[int]) -> None:
        self.calls.append(("tasks", slot.id, tuple(tasks)))

    def preempt(self, bag: Bag, slot: Slot) -> None:
        self.calls.append(("preempt", slot.id, ()))

    def drop(self, bag: Bag, slot: Slot, task: int) -> None:
        self.calls.append(("drop", slot.id, (task,)))

    def close(self, bag: Bag, slot: Slot) -> None:
        self.calls.append(("close", slot.id, ()))


def live_engine(processors: int, prefetch: int = 1, preemption: float = 5.0) -> tuple[Engine, SimClock, Recorder]:
    """An engine on one cluster with SEP and a recording launcher (the live configuration)."""
    clock = SimClock()
    env = clusters(processors)
    policies = build_policies(
        PolicyChoice("fcfs"),
        PolicyChoice("none"),
        DEFAULT_PREDICTOR,
        {"fairshare": PolicyChoice("sep")},
        true_runtimes_known=False,
    )
    engine = Engine(env, policies, clock, lambda schedule: build_backends(env, schedule))
    recorder = Recorder(prefetch)
    engine.bags.launcher = recorder
    engine.bags.settings = BagSettings(preemption_time=preemption, pull_latency=0.0)
    return engine, clock, recorder


def a_bag(jid: int, tasks: int, retries: int = 0) -> Job:
    """A live bag: task runtimes unknown (0), reported by the launcher."""
    return Job(jid, 0.0, 1, 0.0, kind=JobKind.MALLEABLE, tasks=tasks, retries=retries, priority=PriorityClass.SUPER_LOW)


def rows(engine: Engine) -> list[tuple[float, str, int, float, int]]:
    """(time, kind, slot, value, task) of the bag events."""
    return [(e.time, e.kind.name, e.vm, e.value, e.task) for e in engine.log if e.kind >= EventKind.GROW]


def test_reported_ends_prefetch_retries_and_a_rigid_job_freed_by_the_launchers_confirmation() -> None:
    # 2 processors, a bag of 5 tasks with 1 retry, prefetch 1. At 0 SEP grows it by 2: processor
    # 0 runs task 0 with task 1 in its list, processor 1 runs task 2 with task 3; 4 stays queued.
    engine, clock, rec = live_engine(2)
    engine.submit(a_bag(10, 5, retries=1))
    clock.run()
    assert rec.calls == [("open", 0, ()), ("tasks", 0, (0, 1)), ("open", 1, ()), ("tasks", 1, (2, 3))]
    bag = engine.bags.get(10)
    assert bag is not None and list(bag.queue) == [4]
    # at 3 task 0 completes: the launcher went on with task 1; its list is topped up with task 4
    clock.now = 3.0
    assert engine.bags.task_ended(10, 0, 0, 0)
    # at 4 task 2 exits 7: a retry (back at the end of the queue); processor 1 goes on with task 3
    clock.now = 4.0
    assert engine.bags.task_ended(10, 1, 2, 7)
    assert rec.calls[4:] == [("tasks", 0, (4,)), ("tasks", 1, (2,))]
    assert list(bag.queue) == []
    # a report on a task the processor does not run is stale: refused, nothing counted twice
    assert not engine.bags.task_ended(10, 1, 0, 0)
    assert bag.done == 1
    # at 5 a rigid job of 1 processor arrives: SEP preempts one processor; its running task and
    # its list go back to the front of the queue, in order
    clock.now = 5.0
    engine.submit(job(1, 5.0, 1, 10.0))
    clock.step()  # the round
    (preempt,) = [c for c in rec.calls if c[0] == "preempt"]
    gone = preempt[1]
    assert list(bag.queue) == ([1, 4] if gone == 0 else [3, 2])
    assert engine.entries[1].state.name == "QUEUED"  # the processor is still held
    # at 5.5 the launcher confirms: the processor is free at once (not at 5 + 5) and the job starts
    clock.now = 5.5
    engine.bags.freed(10, gone)
    clock.run(until=5.5)
    assert engine.entries[1].state.name == "RUNNING" and engine.entries[1].started == 5.5
    assert ("close", gone, ()) in rec.calls
    assert rows(engine)[:8] == [
        (0.0, "GROW", -1, 2.0, -1),
        (0.0, "TASK_START", 0, 0.0, 0),
        (0.0, "TASK_START", 1, 0.0, 2),
        (3.0, "TASK_END", 0, 3.0, 0),
        (3.0, "TASK_START", 0, 0.0, 1),
        (4.0, "TASK_RETRY", 1, 7.0, 2),
        (4.0, "TASK_START", 1, 0.0, 3),
        (5.0, "SHRINK", -1, 1.0, 1),
    ]


def test_a_task_failing_past_its_retries_fails_the_bag_once_every_task_reported() -> None:
    engine, clock, rec = live_engine(1, prefetch=0)
    engine.submit(a_bag(10, 2, retries=1))
    clock.run()
    assert rec.calls == [("open", 0, ()), ("tasks", 0, (0,))]
    for t, (task, code) in enumerate([(0, 1), (1, 0), (0, 2)], start=1):
        clock.now = float(t)
        assert engine.bags.task_ended(10, 0, task, code)
    kinds = [(k, task) for _, k, _, _, task in rows(engine) if k.startswith(("TASK", "BAG"))]
    assert kinds == [
        ("TASK_START", 0),
        ("TASK_RETRY", 0),
        ("TASK_START", 1),
        ("TASK_END", 1),
        ("TASK_START", 0),
        ("TASK_FAIL", 0),
        ("BAG_END", -1),
        ("BAG_RELEASE", -1),
    ]
    assert engine.bags.get(10) is None


def test_a_preempted_task_that_completed_as_it_was_preempted_is_not_run_again() -> None:
    engine, clock, _ = live_engine(1, prefetch=0, preemption=5.0)
    engine.submit(a_bag(10, 3))
    clock.run()
    bag = engine.bags.get(10)
    assert bag is not None
    engine.submit(job(1, 0.0, 1, 10.0))  # needs the processor: task 0 is preempted
    clock.step()
    assert list(bag.queue) == [0, 1, 2]
    clock.now = 0.5
    assert not engine.bags.task_ended(10, 0, 0, 0)  # its end raced the preemption: it stands
    assert list(bag.queue) == [1, 2] and bag.done == 1


def test_a_late_result_takes_its_task_off_another_launchers_list_with_drop() -> None:
    engine, clock, rec = live_engine(2)
    engine.submit(a_bag(10, 6))
    clock.run()
    bag = engine.bags.get(10)
    assert bag is not None
    engine.submit(job(1, 0.0, 1, 10.0))
    clock.step()  # one launcher preempted: its task and list back at the front of the queue
    (gone,) = [c[1] for c in rec.calls if c[0] == "preempt"]
    other = 1 - gone
    lost = 2 * gone  # the task it ran (0 on processor 0, 2 on processor 1)
    assert list(bag.queue)[:2] == [lost, lost + 1]
    clock.now = 1.0
    current = bag.slots[other].task
    assert engine.bags.task_ended(10, other, current, 0)  # goes on with its list, prefetches `lost`
    assert bag.slots[other].ahead[-1] == lost
    n = len(rec.calls)
    assert not engine.bags.task_ended(10, gone, lost, 0)  # the preempted run had completed
    assert rec.calls[n] == ("drop", other, (lost,))
    assert lost not in bag.slots[other].ahead and lost not in bag.queue
    ends = [e.task for e in engine.log if e.kind is EventKind.TASK_END]
    assert ends == [current, lost]


def test_cancelling_a_live_bag_preempts_its_launchers_and_drops_its_queue() -> None:
    engine, clock, rec = live_engine(2)
    engine.submit(a_bag(10, 9))
    clock.run()
    assert engine.cancel(10)
    assert sorted(c[1] for c in rec.calls if c[0] == "preempt") == [0, 1]
    bag = engine.bags.get(10)
    assert bag is not None and bag.finished and not bag.queue
    assert not engine.cancel(10)
    for slot in (0, 1):
        engine.bags.freed(10, slot)
    assert engine.bags.get(10) is None
    assert engine.backends[0].free == 2


@settings(max_examples=60, deadline=None)
@given(
    tasks=st.integers(1, 12),
    processors=st.integers(1, 3),
    prefetch=st.integers(0, 2),
    retries=st.integers(0, 2),
    codes=st.lists(st.integers(0, 2), min_size=1, max_size=200),
    picks=st.lists(st.integers(0, 10), min_size=1, max_size=200),
)
def test_every_task_completes_once_or_fails_after_its_retries(
    tasks: int, processors: int, prefetch: int, retries: int, codes: list[int], picks: list[int]
) -> None:
    engine, clock, _ = live_engine(processors, prefetch=prefetch)
    engine.submit(a_bag(10, tasks, retries=retries))
    clock.run()
    step = 0
    while (bag := engine.bags.get(10)) is not None and not bag.finished:
        running = [s for s in bag.slots.values() if s.running]
        assert running, "an active bag with queued tasks holds a running processor"
        slot = running[picks[step % len(picks)] % len(running)]
        step += 1
        clock.now = float(step)
        assert engine.bags.task_ended(10, slot.id, slot.task, codes[step % len(codes)])
        clock.run(until=clock.now)
    ends = [e.task for e in engine.log if e.kind is EventKind.TASK_END]
    fails = [e.task for e in engine.log if e.kind is EventKind.TASK_FAIL]
    retried = [e.task for e in engine.log if e.kind is EventKind.TASK_RETRY]
    assert sorted(ends + fails) == list(range(tasks))  # each task completed once or failed once
    for t in fails:
        assert retried.count(t) == retries
    for t in ends:
        assert retried.count(t) <= retries
    assert sum(e.kind is EventKind.BAG_END for e in engine.log) == 1
    assert engine.backends[0].free == processors
