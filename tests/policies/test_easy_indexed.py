"""EASY's backfilling through the queue's indexes (rounds whose cost does not grow
with the queue): a long queue is backfilled by visiting only the jobs that may start
(`_backfill_indexed`), with the decisions of a scan of the whole queue. The indexed path is
forced here (`SCAN_QUEUE_MAX = -1`) on hand-computed schedules, and compared with the plain
scan (`SCAN_QUEUE_MAX` huge) on random workloads, event log against event log."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from helpers import clusters, job, start_of
from isthmus.model.job import Job
from isthmus.policies.allocation import easy
from isthmus.sim.runner import SimulationResult, simulate


def run(jobs: list[Job], *procs: int, purity: bool = True) -> SimulationResult:
    return simulate(clusters(*procs), jobs, "easy", "none", check_purity=purity)


@pytest.fixture
def indexed(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Every backfill behind a blocked head goes through the indexes."""
    monkeypatch.setattr(easy, "SCAN_QUEUE_MAX", -1)
    yield


def test_a_size_may_start_any_job_then_only_those_ending_by_the_shadow_time(indexed: None) -> None:
    # 10 processors. Job 1 (4 procs, 100 s) runs from 0. At 1 head job 2 (8 procs) is reserved
    # at 100, when 10 are free: 2 left over ("extra"); 6 free now. Behind it, at 1:
    #   3: 1 proc, 500 s: does not end by 100, fits in the extra 2 -> starts (extra 1, free 5)
    #   4: 2 procs, 500 s: extra 1 < 2 -> waits; from here a 2-processor job starts only if it
    #      ends by 100 (the index switches size 2 to its jobs in order of estimate)
    #   5: 2 procs, 50 s: ends at 51 -> starts (free 3)
    #   6: 2 procs, 500 s: waits
    #   7: 1 proc, 500 s: fits in the extra 1 -> starts (extra 0, free 2); size 1 now only by 100
    #   8: 1 proc, 500 s: waits
    #   9: 2 procs, 99 s: ends at 100 exactly -> starts (free 0)
    #  10: 1 proc, 5 s: no free processor -> waits; at 51 (job 5 ends, 2 free, extra 0) it
    #      ends by 100 -> starts
    # At 100 jobs 1 and 9 end: job 2 starts (8 free); at 110 it ends: 4, 6 and 8 start.
    jobs = [job(1, 0, 4, 100, 100), job(2, 1, 8, 10, 10)]
    for jid, size, runtime in [(3, 1, 500), (4, 2, 500), (5, 2, 50), (6, 2, 500), (7, 1, 500)]:
        jobs.append(job(jid, 1, size, runtime, runtime))
    jobs += [job(8, 1, 1, 500, 500), job(9, 1, 2, 99, 99), job(10, 1, 1, 5, 5)]
    assert start_of(run(jobs, 10)) == {
        1: (0, 0),
        3: (1, 0),
        5: (1, 0),
        7: (1, 0),
        9: (1, 0),
        10: (51, 0),
        2: (100, 0),
        4: (110, 0),
        6: (110, 0),
        8: (110, 0),
    }


def test_hand_computed_easy_schedules_through_the_indexes(indexed: None) -> None:
    # the tie cases of tests/policies/test_allocation_schedules.py, indexed
    jobs = [job(1, 0, 4, 100, 100), job(2, 0, 4, 100, 100), job(3, 1, 6, 50, 50), job(4, 2, 2, 500, 500)]
    assert start_of(run(jobs, 10)) == {1: (0, 0), 2: (0, 0), 4: (2, 0), 3: (100, 0)}
    # requested runtimes, not actual: job 3 asks for 20 s (ends 21 > shadow 10) though it runs 3 s
    jobs = [job(1, 0, 2, 10, 10), job(2, 0, 4, 5, 5), job(3, 1, 2, 3, 20)]
    assert start_of(run(jobs, 4)) == {1: (0, 0), 2: (10, 0), 3: (15, 0)}
    # two sites (6 and 4): job 1 runs on s0 to 100, job 2 on s1 to 50; head job 3 (6) fits only
    # on s0, reserved there at 100 with nothing left over. Job 4 (3 procs, 500 s) fits on neither
    # at 2; at 50 s1 frees 4 and, not being the reservation's site, takes it whatever it runs
    jobs = [job(1, 0, 4, 100, 100), job(2, 0, 4, 50, 50), job(3, 1, 6, 10, 10), job(4, 2, 3, 500, 500)]
    assert start_of(run(jobs, 6, 4)) == {1: (0, 0), 2: (0, 1), 4: (50, 1), 3: (100, 0)}


def _scanned(jobs: list[Job], *procs: int) -> SimulationResult:
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(easy, "SCAN_QUEUE_MAX", 10**9)
        return run(jobs, *procs)


def _indexed(jobs: list[Job], *procs: int, longer_than: int = -1) -> SimulationResult:
    """Queues longer than `longer_than` jobs backfilled through the indexes (-1: every one). The
    engine builds them at their first read, from the queue as it is then: in the round that
    first needs them, behind a head and jobs started before it (the purity check, which would
    build them before every round, is off)."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(easy, "SCAN_QUEUE_MAX", longer_than)
        return run(jobs, *procs, purity=False)


@st.composite
def workloads(draw: st.DrawFn) -> tuple[list[int], list[Job]]:
    """1-3 clusters of 2-16 processors and 5-60 jobs arriving in bursts (equal submit times),
    with estimates equal to, above or missing for their runtimes (ties in estimated ends)."""
    procs = draw(st.lists(st.integers(2, 16), min_size=1, max_size=3))
    n = draw(st.integers(5, 60))
    t = 0.0
    jobs = []
    for jid in range(1, n + 1):
        t += draw(st.sampled_from([0, 0, 0, 1, 5, 20]))
        size = draw(st.integers(1, max(procs)))
        runtime = float(draw(st.sampled_from([1, 5, 10, 10, 50, 100, 300])))
        req = draw(st.sampled_from([None, runtime, runtime, runtime * 2, 100.0]))
        jobs.append(job(jid, t, size, runtime, None if req is None else max(req, runtime)))
    return procs, jobs


@settings(max_examples=150, deadline=None)
@given(workloads(), st.sampled_from([-1, 3, 8]))
def test_indexed_backfilling_decides_as_a_scan_of_the_whole_queue(
    case: tuple[list[int], list[Job]], longer_than: int
) -> None:
    procs, jobs = case
    scanned, indexed = _scanned(jobs, *procs), _indexed(jobs, *procs, longer_than=longer_than)
    a, b = scanned.log.columns(), indexed.log.columns()
    assert a.keys() == b.keys()
    for name in a:
        assert np.array_equal(a[name], b[name]), name
