"""The seeded bootstrap of a trace's blocks that `simulate --repeat` runs over a trace."""

from __future__ import annotations

import itertools

from isthmus.model.job import Job
from isthmus.workloads.resample import DAY, WEEK, block_length, resample_blocks


def _trace(weeks: int) -> list[Job]:
    # week w holds w + 1 jobs, each submitted w * WEEK + 100 * k, lasting 10 * (w + 1) s
    jobs = []
    for w in range(weeks):
        for k in range(w + 1):
            jobs.append(Job(len(jobs) + 1, w * WEEK + 100.0 * k, 1, 10.0 * (w + 1), user=str(w)))
    return jobs


def test_blocks_are_weeks_drawn_with_replacement_and_laid_end_to_end() -> None:
    trace = _trace(4)
    assert block_length(trace) == WEEK
    got = resample_blocks(trace, seed=3)
    assert [j.id for j in got] == list(range(1, len(got) + 1))
    assert all(a.submit <= b.submit for a, b in itertools.pairwise(got))
    # every job keeps its offset inside its week and its block's jobs stay together
    placed: dict[int, set[str]] = {}
    for j in got:
        assert j.submit % WEEK == 100.0 * (j.submit % WEEK // 100.0)
        placed.setdefault(int(j.submit // WEEK), set()).add(j.user)
    assert all(len(users) == 1 for users in placed.values())  # one drawn week per place
    sizes = {w: sum(1 for j in got if int(j.submit // WEEK) == w) for w in placed}
    assert all(sizes[w] == int(next(iter(placed[w]))) + 1 for w in placed)  # whole weeks
    assert resample_blocks(trace, seed=3) == got  # the same seed, the same trace
    assert any(resample_blocks(trace, seed=s) != got for s in range(4, 10))


def test_a_short_trace_is_cut_in_days() -> None:
    jobs = [Job(i + 1, i * 3600.0, 1, 5.0) for i in range(72)]  # three days
    assert block_length(jobs) == DAY
    assert len(resample_blocks(jobs, seed=1)) == 72  # each day holds 24 jobs
    assert resample_blocks([], seed=1) == []


def test_a_trace_of_hours_is_cut_in_hours() -> None:
    from isthmus.workloads.resample import HOUR, block_count

    jobs = [Job(i + 1, i * 600.0, 1, 5.0) for i in range(30)]  # five hours
    assert block_length(jobs) == HOUR and block_count(jobs, HOUR) == 5
    assert block_count(jobs[:3], HOUR) == 1  # within one hour: nothing to resample
