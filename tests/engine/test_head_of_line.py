"""Rounds a head-of-line allocation policy is not asked, and events a simulated cluster knows
are stale: the engine loop's savings, which must leave every schedule as it was."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import isthmus.engine.engine
from helpers import clusters, events, job
from isthmus.engine import runs
from isthmus.engine.engine import Engine
from isthmus.model import PolicyChoice
from isthmus.model.environment import Environment
from isthmus.model.events import EventKind
from isthmus.model.job import Job
from isthmus.model.site import Site
from isthmus.policies.allocation.fcfs import StrictFcfs
from isthmus.policies.allocation.tags import TagsChain
from isthmus.policies.provisioning.static import NoProvisioning
from isthmus.sim.runner import simulate


@contextmanager
def counting(cls: type, name: str) -> Iterator[list[float]]:
    """Record the clock time of every call of method `name` of `cls` (an engine's or a policy's)."""
    times: list[float] = []
    if cls is Engine and isthmus.engine.engine.__file__.endswith(".so"):
        # compiled with mypyc (setup.py, ISTHMUS_MYPYC=1): the engine calls its own methods
        # natively, past any patch; the pure-Python install (CI) runs these counts
        pytest.skip("counts calls of the engine's own methods: needs the pure-Python engine")
    original = getattr(cls, name)

    def wrapper(self: object, *args: object) -> object:
        view_or_engine = args[0] if cls is not Engine else self
        times.append(view_or_engine.now)  # type: ignore[attr-defined]
        return original(self, *args)

    setattr(cls, name, wrapper)
    try:
        yield times
    finally:
        setattr(cls, name, original)


@contextmanager
def counting_runs(name: str) -> Iterator[list[float]]:
    """Record the clock time of every call of `isthmus.engine.runs.<name>` (a run's end or limit,
    which the engine's event switch calls with the engine first)."""
    if isthmus.engine.engine.__file__.endswith(".so"):
        pytest.skip("counts calls from the compiled engine: needs the pure-Python engine")
    times: list[float] = []
    original = getattr(runs, name)

    def wrapper(ops: Engine, *args: object) -> object:
        times.append(ops.now)
        return original(ops, *args)

    setattr(runs, name, wrapper)
    try:
        yield times
    finally:
        setattr(runs, name, original)


def chain(limit: float = 10.0) -> PolicyChoice:
    return PolicyChoice("tags-chain", {"limits": (limit,), "dispatch": "rr", "seed": 0})


def test_fcfs_is_asked_only_when_the_head_may_fit() -> None:
    # 4 processors. A (4, 10 s) starts at 0; B (4, 10 s) arrives at 1 and waits for A's end;
    # C (1, 5 s) arrives at 2 behind B. B starts at 10 and C at 20, when B ends.
    jobs = [job(1, 0, 4, 10), job(2, 1, 4, 10), job(3, 2, 1, 5)]
    with counting(StrictFcfs, "decide") as asked:
        result = simulate(clusters(4), jobs, "fcfs", "none")
    starts = [(t, j) for t, kind, j, _ in events(result, EventKind.START)]
    assert starts == [(0.0, 1), (10.0, 2), (20.0, 3)]
    # rounds only at 0, 10 and 20: at 1 B is a new head that needs 4 of 0 free, at 2 the head
    # is unchanged and nothing was freed, at 25 C's end leaves an empty queue; FCFS being the
    # only deciding policy, no round is held at those instants at all
    assert result.rounds == 3
    assert asked == [0.0, 10.0, 20.0]
    with pytest.MonkeyPatch.context() as mp:  # another deciding policy: every instant has its round
        mp.setattr(NoProvisioning, "decides_nothing", False)
        assert simulate(clusters(4), jobs, "fcfs", "none").rounds == 6


def test_a_refused_start_makes_the_next_round_ask_again() -> None:
    # the site opens at 5: FCFS proposes A at 0 and 3 (its arrivals make rounds), refused
    # (outside the window) each time; the engine keeps asking until it is accepted
    env = Environment("window", (Site("s0", nodes=4, available_from=5.0),), round_interval=None)
    jobs = [job(1, 0, 2, 10), job(2, 3, 4, 1)]
    with counting(StrictFcfs, "decide") as asked:
        result = simulate(env, jobs, "fcfs", "none")
    refused = events(result, EventKind.DECISION)
    assert [t for t, *_ in refused] == [0.0, 3.0]
    assert asked[:2] == [0.0, 3.0]


def test_a_run_killed_at_its_limit_has_no_end_event_and_a_short_run_no_limit_event() -> None:
    # job 1 (25 s) is killed at the 10 s limit and ends at 35 on the next site; job 2 (5 s)
    # ends before the limit: no limit event for it, no end event for job 1's first run
    jobs = [job(1, 0, 1, 25), job(2, 1, 1, 5)]
    with counting_runs("ended") as ended, counting_runs("limit_reached") as limits:
        result = simulate(clusters(1, 1), jobs, chain(), "none", check_purity=True)
    assert events(result, EventKind.KILL, EventKind.END) == [
        (10.0, "KILL", 1, 0),
        (15.0, "END", 2, 0),
        (35.0, "END", 1, 1),
    ]
    assert ended == [15.0, 35.0]
    assert limits == [10.0]


def test_a_run_ending_exactly_at_its_limit_completes_without_a_limit_event() -> None:
    with counting_runs("limit_reached") as limits:
        result = simulate(clusters(1, 1), [job(1, 0, 1, 10)], chain(), "none")
    assert events(result, EventKind.KILL, EventKind.END) == [(10.0, "END", 1, 0)]
    assert limits == []


jobs_strategy = st.lists(
    st.tuples(
        st.integers(0, 40),  # submit
        st.integers(1, 4),  # size
        st.sampled_from([1.0, 3.0, 5.0, 10.0, 12.0, 30.0]),  # runtime (some at the limit)
    ),
    min_size=1,
    max_size=40,
)


def _jobs(spec: list[tuple[int, int, float]]) -> list[Job]:
    return [job(i + 1, float(s), size, rt) for i, (s, size, rt) in enumerate(sorted(spec, key=lambda x: x[0]))]


@settings(max_examples=60, deadline=None)
@given(jobs_strategy, st.sampled_from([None, 4.0]), st.sampled_from(["fcfs", "tags-chain"]))
def test_skipping_blocked_rounds_changes_no_schedule(
    spec: list[tuple[int, int, float]], interval: float | None, policy: str
) -> None:
    jobs = _jobs(spec)
    env = clusters(4, 4, 3, 4, interval=interval)
    alloc = chain(10.0) if policy == "tags-chain" else PolicyChoice("fcfs", {})
    cls = TagsChain if policy == "tags-chain" else StrictFcfs
    with counting(cls, "decide") as skipping:
        fast = simulate(env, jobs, alloc, "none")
    with pytest.MonkeyPatch.context() as mp, counting(cls, "decide") as every:
        mp.setattr(cls, "head_of_line", False)
        slow = simulate(env, jobs, alloc, "none")
    assert fast.log.rows() == slow.log.rows()
    # a round is held only when the policy is asked, where the plain policy has every round
    assert fast.rounds == len(skipping) <= slow.rounds == len(every)
