"""A round due at the current instant is held aside by the one-engine clock loop instead of
going through the event heap (`SimClock.now_at_round_priority`): every schedule, round count
and end time must be the one the heap gives."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from helpers import cloud_env, clusters, job
from isthmus.engine.clock import PRIO_ROUND, SimClock
from isthmus.model import PolicyChoice
from isthmus.model.job import Job
from isthmus.sim.runner import SimulationResult, simulate

jobs_strategy = st.lists(
    st.tuples(
        st.integers(0, 40),  # submit
        st.integers(1, 4),  # size
        st.sampled_from([1.0, 3.0, 5.0, 10.0, 12.0, 30.0]),  # runtime (some at the limit)
        st.sampled_from([None, 2.0, 10.0, 40.0]),  # requested runtime
    ),
    min_size=1,
    max_size=40,
)


def _jobs(spec: list[tuple[int, int, float, float | None]]) -> list[Job]:
    ordered = sorted(spec, key=lambda x: x[0])
    return [job(i + 1, float(s), size, rt, req=req) for i, (s, size, rt, req) in enumerate(ordered)]


class HeapRoundsClock(SimClock):
    """The clock with every round through the heap, as before rounds were held aside (a
    subclass rather than a patch: compiled with mypyc, the engine's calls bypass a patch)."""

    def now_at_round_priority(self, target: int, kind: int, a: int = -1, b: int = -1) -> None:
        self.at(self.now, PRIO_ROUND, kind, a, b, target)


def _run(
    case: str, policy: str, interval: float | None, jobs: list[Job], clock: SimClock | None = None
) -> SimulationResult:
    if case == "clusters":
        env = clusters(4, 4, 3, 4, interval=interval)
        alloc = (
            PolicyChoice("tags-chain", {"limits": (10.0,), "dispatch": "rr", "seed": 0})
            if policy == "tags-chain"
            else PolicyChoice(policy, {})
        )
        return simulate(env, jobs, alloc, "none", clock=clock)
    # a paid cloud with boot times: VM events, billing boundaries after the round
    env = cloud_env(4, 3, boot=2.0, price=1.0, increment=10.0, idle=5.0, interval=interval)
    return simulate(env, jobs, PolicyChoice("fcfs" if policy == "tags-chain" else policy, {}), clock=clock)


@settings(max_examples=80, deadline=None)
@given(
    jobs_strategy,
    st.sampled_from(["clusters", "cloud"]),
    st.sampled_from(["fcfs", "easy", "ff", "tags-chain"]),
    st.sampled_from([None, 4.0]),
)
def test_held_rounds_give_the_schedule_of_rounds_through_the_heap(
    spec: list[tuple[int, int, float, float | None]], case: str, policy: str, interval: float | None
) -> None:
    jobs = _jobs(spec)
    held = _run(case, policy, interval, jobs)
    heap = _run(case, policy, interval, jobs, HeapRoundsClock())
    assert held.log.rows() == heap.log.rows()
    assert (held.rounds, held.end_time, held.unfinished) == (heap.rounds, heap.end_time, heap.unfinished)


def test_a_held_round_waits_for_the_events_of_its_instant_and_is_not_left_behind() -> None:
    # 4 processors: A (4, 10 s) at 0; B (2, 5 s) and C (2, 5 s) at 10, when A ends: the round
    # at 10 comes after A's end and both arrivals, and starts both (at 15 the queue is empty:
    # strict FCFS would be asked nothing, no round is held)
    jobs = [job(1, 0, 4, 10), job(2, 10, 2, 5), job(3, 10, 2, 5)]
    clock = SimClock()
    result = simulate(clusters(4), jobs, "fcfs", "none", clock=clock)
    assert [(e.time, e.job) for e in result.log if e.kind.name == "START"] == [(0.0, 1), (10.0, 2), (10.0, 3)]
    assert result.rounds == 2
    assert clock._due is None and not clock._holding and not clock.heap
