"""The two same-instant rules, on hand-computed schedules.

"batch" (the default): at one instant every completion is handled, then every arrival, then one
scheduling round. "per-event" (`--rounds per-event`, as simulators that schedule after every
single event): arrivals before completions at equal times, and a round after each event."""

from __future__ import annotations

import pytest

from helpers import clusters, job, starts
from isthmus.sim.runner import simulate


def test_ff_sees_two_completions_together_or_one_at_a_time() -> None:
    # 4 processors: A and B (2 each) end together at 10; C (4) and D (2, 100 s) wait since t=1
    jobs = [job(1, 0, 2, 10), job(2, 0, 2, 10), job(3, 1, 4, 10), job(4, 1, 2, 100)]
    batch = simulate(clusters(4), jobs, "ff", "none")
    assert sorted((j, t) for j, t, _ in starts(batch)) == [(1, 0.0), (2, 0.0), (3, 10.0), (4, 20.0)]
    # per event: after A's end 2 processors are free: C does not fit, D does and starts
    per_event = simulate(clusters(4), jobs, "ff", "none", rounds="per-event")
    assert sorted((j, t) for j, t, _ in starts(per_event)) == [(1, 0.0), (2, 0.0), (3, 110.0), (4, 10.0)]


def test_arrivals_come_before_completions_per_event() -> None:
    # 2 processors: A (2, 10 s) ends at 10 when B (2, 5 s) arrives; per event, B's arrival is
    # handled first (nothing free: it waits), then A's end (B starts); the same start either way
    jobs = [job(1, 0, 2, 10), job(2, 10, 2, 5)]
    for rounds in ("batch", "per-event"):
        result = simulate(clusters(2), jobs, "fcfs", "none", rounds=rounds)
        assert sorted((j, t) for j, t, _ in starts(result)) == [(1, 0.0), (2, 10.0)], rounds


def test_easy_with_tied_ends_backfills_under_both_rules() -> None:
    # runs sharing an estimated end: 10 processors; jobs 1 and 2 end together at 100, job 3 (6) is
    # reserved at 100 with 4 processors to spare: job 4 (2, 500 s) backfills at 2
    jobs = [job(1, 0, 4, 100, 100), job(2, 0, 4, 100, 100), job(3, 1, 6, 50, 50), job(4, 2, 2, 500, 500)]
    for rounds in ("batch", "per-event"):
        result = simulate(clusters(10), jobs, "easy", "none", rounds=rounds)
        assert {j: t for j, t, _ in starts(result)} == {1: 0.0, 2: 0.0, 3: 100.0, 4: 2.0}, rounds


def test_per_event_rounds_need_event_triggered_rounds() -> None:
    with pytest.raises(ValueError, match="per-event rounds need event-triggered rounds"):
        simulate(clusters(4, interval=30.0), [job(1, 0, 1, 1)], "ff", "none", rounds="per-event")
    with pytest.raises(ValueError, match="rounds"):
        simulate(clusters(4), [job(1, 0, 1, 1)], "ff", "none", rounds="sometimes")
