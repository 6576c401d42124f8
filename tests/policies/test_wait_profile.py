"""The availability profile shared by EASY's reservation and HSDF's wait prediction."""

from __future__ import annotations

from dataclasses import dataclass, field
from itertools import pairwise
from types import SimpleNamespace

from hypothesis import given
from hypothesis import strategies as st

from isthmus.engine.state import JobEntry
from isthmus.model.job import Job
from isthmus.policies.prediction.wait import earliest_fit_on, profile_steps


@dataclass
class FakeSite:
    """Just what `profile_steps` reads of a site: running jobs and their estimated ends."""

    running: dict[int, JobEntry] = field(default_factory=dict)
    by_estimated_end: list[tuple[float, int]] = field(default_factory=list)


def site(*runs: tuple[float, int]) -> FakeSite:
    """A site running one job per (estimated end, size)."""
    s = FakeSite()
    for jid, (end, size) in enumerate(runs):
        # real entries: compiled with mypyc (setup.py), `earliest_fit_on` checks their types
        s.running[jid] = JobEntry(Job(jid, 0.0, size, 1.0), 0.0)
        s.by_estimated_end.append((end, jid))
    s.by_estimated_end.sort()
    return s


def test_runs_ending_together_are_one_step():
    steps = list(profile_steps(site((100, 4), (100, 4), (200, 1)), 2, 1.0))
    assert steps == [(1.0, 2), (100, 10), (200, 11)]
    # extra counts both runs ending at 100
    assert earliest_fit_on(site((100, 4), (100, 4), (200, 1)), 2, 1.0, 6) == (100, 4)


def test_runs_past_their_estimate_count_as_free_now():
    steps = list(profile_steps(site((5, 3), (10, 2), (50, 1)), 1, 10.0))
    assert steps == [(10.0, 6), (50, 7)]


def test_started_runs_merge_with_running_ones():
    steps = list(profile_steps(site((100, 4)), 0, 0.0, [(100, 4), (30, 2)]))
    assert steps == [(0.0, 0), (30, 2), (100, 10)]


@given(
    runs=st.lists(st.tuples(st.integers(0, 20), st.integers(1, 5)), max_size=12),
    started=st.lists(st.tuples(st.integers(0, 20), st.integers(1, 5)), max_size=4),
    free=st.integers(0, 5),
    now=st.integers(0, 10),
    size=st.integers(1, 40),
)
def test_profile_is_the_step_function_of_free_processors(runs, started, free, now, size):
    steps = list(profile_steps(site(*((float(e), s) for e, s in runs)), free, float(now), started))
    times = [t for t, _ in steps]
    assert times[0] == now and all(a < b for a, b in pairwise(times))
    everything = runs + started
    for t, f in steps:  # free at t = free now + every run estimated to end by t
        assert f == free + sum(s for e, s in everything if e <= t)
    fit, extra = earliest_fit_on(site(*((float(e), s) for e, s in runs)), free, float(now), size, started)
    total = free + sum(s for _, s in everything)
    if total < size:
        assert (fit, extra) == (float("inf"), 0)
    else:
        expected = min(t for t, f in steps if f >= size)
        assert fit == expected and extra == dict(steps)[fit] - size


@given(
    sites=st.lists(
        st.tuples(st.lists(st.tuples(st.integers(0, 20), st.integers(1, 5)), max_size=8), st.integers(0, 5)),
        min_size=1,
        max_size=4,
    ),
    now=st.integers(0, 10),
    sizes=st.sets(st.integers(1, 30), max_size=6),
)
def test_earliest_starts_are_the_profile_s_earliest_times(sites, now, sizes):
    """HSDF's one walk per site for every queued size gives what the whole profile gives: per
    size, the first step of any site's profile with that many free processors."""
    from isthmus.policies.prediction.wait import AvailabilityProfile, earliest_starts

    views = []
    for runs, free in sites:
        s = site(*((float(e), n) for e, n in runs))
        views.append(SimpleNamespace(running=s.running, by_estimated_end=s.by_estimated_end, free=free))
    view = SimpleNamespace(sites=views, now=float(now))
    order = list(range(len(views)))
    wanted = sorted(sizes)
    profile = AvailabilityProfile(view, order)  # type: ignore[arg-type]
    assert earliest_starts(view, order, wanted) == [profile.earliest_start(n) for n in wanted]  # type: ignore[arg-type]
