"""Hand-computed schedules for each allocation policy on tiny workloads."""

from __future__ import annotations

import pytest

from helpers import clusters, job, start_of, starts
from isthmus.model import PolicyChoice
from isthmus.sim.runner import simulate

# Four jobs on one 4-processor cluster: (id, submit, size, runtime)
JOBS = [job(1, 0, 2, 10), job(2, 0, 4, 5), job(3, 1, 2, 3), job(4, 2, 1, 100)]


def run(policy: str, jobs=JOBS, env=None, allocation_params=None, **kw):
    choice = PolicyChoice(policy, allocation_params) if allocation_params else policy
    return simulate(env or clusters(4), jobs, choice, "none", check_purity=True, **kw)


def test_fcfs_never_skips_the_head():
    # job 2 (4 procs) blocks jobs 3 and 4 until job 1 ends at 10; then 3 and 4 start at 15.
    assert start_of(run("fcfs")) == {1: (0, 0), 2: (10, 0), 3: (15, 0), 4: (15, 0)}


def test_easy_backfills_only_what_does_not_delay_the_head():
    # Head job 2 is reserved at 10 (when job 1 ends) with no extra processor. Job 3 (ends at 4)
    # backfills at 1; job 4 (runs 100 s) would delay job 2, so it waits until 15.
    assert start_of(run("easy")) == {1: (0, 0), 3: (1, 0), 2: (10, 0), 4: (15, 0)}


def test_easy_uses_extra_processors_for_long_jobs():
    # 5 processors: job 1 (2 procs) ends at 10; head job 2 needs 4 -> shadow 10, extra 1.
    # Job 4 (1 proc, 100 s) fits in the extra processor, so it starts at 2 without delaying job 2.
    result = run("easy", env=clusters(5))
    assert start_of(result) == {1: (0, 0), 3: (1, 0), 4: (2, 0), 2: (10, 0)}


def test_easy_respects_requested_runtimes_not_actual():
    # Job 3 asks for 20 s (ends 21 > shadow 10) although it runs 3 s: not backfilled.
    jobs = [job(1, 0, 2, 10, req=10), job(2, 0, 4, 5, req=5), job(3, 1, 2, 3, req=20)]
    assert start_of(run("easy", jobs)) == {1: (0, 0), 2: (10, 0), 3: (15, 0)}


# EASY with running jobs that share an estimated end: the processors left over at
# the shadow time ("extra") count every job ending at that instant, not only those up to the
# first one that lets the head fit.


def test_easy_tie_two_jobs_ending_together_leave_their_processors_extra():
    # 10 processors. Jobs 1 and 2 (4 procs each) end together at 100, 2 free. Head job 3 (6
    # procs) is reserved at 100, when 10 are free: extra 4. Job 4 (2 procs, 500 s) fits in the
    # extra processors, so it starts at 2 without delaying job 3.
    jobs = [job(1, 0, 4, 100, 100), job(2, 0, 4, 100, 100), job(3, 1, 6, 50, 50), job(4, 2, 2, 500, 500)]
    assert start_of(run("easy", jobs, clusters(10))) == {1: (0, 0), 2: (0, 0), 4: (2, 0), 3: (100, 0)}


def test_easy_tie_with_runs_started_in_the_same_round():
    # The same case with every job arriving at 0: jobs 1 and 2 start in the round that blocks job
    # 3, so the tie is among this round's own starts; job 4 still backfills at once.
    jobs = [job(1, 0, 4, 100, 100), job(2, 0, 4, 100, 100), job(3, 0, 6, 50, 50), job(4, 0, 2, 500, 500)]
    assert start_of(run("easy", jobs, clusters(10))) == {1: (0, 0), 2: (0, 0), 4: (0, 0), 3: (100, 0)}


def test_easy_tie_three_jobs_ending_together():
    # 14 processors, jobs 1-3 (4 procs each) end together at 100, 2 free. Head job 4 needs 10:
    # it could start once two of them end, but all three end at 100, so extra = 14 - 10 = 4.
    # Job 5 (2 procs, 500 s) backfills at 2; at 100 job 4 takes 10 of the 12 free.
    jobs = [
        job(1, 0, 4, 100, 100),
        job(2, 0, 4, 100, 100),
        job(3, 0, 4, 100, 100),
        job(4, 1, 10, 50, 50),
        job(5, 2, 2, 500, 500),
    ]
    assert start_of(run("easy", jobs, clusters(14))) == {
        1: (0, 0),
        2: (0, 0),
        3: (0, 0),
        5: (2, 0),
        4: (100, 0),
    }


def test_easy_tie_extra_exactly_the_candidates_size():
    # 10 processors: job 0 (2 procs) runs to 1000; jobs 1 and 2 (2 procs each) end together at
    # 100, so 4 are free. Head job 3 (6 procs) is reserved at 100, when 8 are free: extra 2.
    # At 2: job 4 (2 procs, 500 s) uses exactly the extra (extra 0 left); job 5 (1 proc, 500 s)
    # would delay job 3 and waits; job 6 (2 procs, ends at 92) ends before the shadow time.
    # At 92 the reservation is again 100 with extra 0, so job 5 still waits; job 3 starts at
    # 100 and job 5 at 150, when job 3 ends.
    jobs = [
        job(0, 0, 2, 1000, 1000),
        job(1, 0, 2, 100, 100),
        job(2, 0, 2, 100, 100),
        job(3, 1, 6, 50, 50),
        job(4, 2, 2, 500, 500),
        job(5, 2, 1, 500, 500),
        job(6, 2, 2, 90, 90),
    ]
    assert start_of(run("easy", jobs, clusters(10))) == {
        0: (0, 0),
        1: (0, 0),
        2: (0, 0),
        4: (2, 0),
        6: (2, 0),
        3: (100, 0),
        5: (150, 0),
    }


def test_easy_ties_on_several_sites():
    # Two 10-processor sites, each with two 4-proc jobs ending together at 100 (2 free on each).
    # Head job 5 (6 procs) can start at 100 on both; the reservation is on s0, the first, with
    # extra 4. Job 6 (2 procs, 500 s) goes to s0 within the extra; job 7 (2 procs, 500 s) no
    # longer fits on s0 and starts on s1, which holds no reservation. At 100 job 5 starts on s0.
    jobs = [
        job(1, 0, 4, 100, 100),
        job(2, 0, 4, 100, 100),
        job(3, 0, 4, 100, 100),
        job(4, 0, 4, 100, 100),
        job(5, 1, 6, 50, 50),
        job(6, 2, 2, 500, 500),
        job(7, 2, 2, 500, 500),
    ]
    assert start_of(run("easy", jobs, clusters(10, 10))) == {
        1: (0, 0),
        2: (0, 0),
        3: (0, 1),
        4: (0, 1),
        6: (2, 0),
        7: (2, 1),
        5: (100, 0),
    }


def test_ff_places_later_jobs_that_fit():
    # KOALA placement queue: job 2 does not fit, later jobs do.
    assert start_of(run("ff")) == {1: (0, 0), 3: (1, 0), 4: (4, 0), 2: (104, 0)}


def test_ff_takes_first_site_rr_cycles():
    jobs = [job(i, 0, 1, 10) for i in (1, 2, 3)]
    env = clusters(2, 2)
    assert [s for _, _, s in starts(run("ff", jobs, env))] == [0, 0, 1]
    assert [s for _, _, s in starts(run("rr", jobs, env))] == [0, 1, 0]


def test_rr_continues_after_last_site_used_across_rounds():
    jobs = [job(1, 0, 1, 100), job(2, 5, 1, 100), job(3, 6, 1, 100)]
    env = clusters(2, 2, 2)
    assert [s for _, _, s in starts(run("rr", jobs, env))] == [0, 1, 2]


def test_sjf_orders_by_predicted_runtime():
    # No history yet: predictions are the requested runtimes (20 < 50 < 100).
    jobs = [job(1, 0, 1, 100, req=100), job(2, 0, 1, 50, req=50), job(3, 0, 1, 20, req=20)]
    assert start_of(run("sjf", jobs, clusters(1))) == {3: (0, 0), 2: (20, 0), 1: (70, 0)}


def test_sjf_ideal_orders_by_actual_runtime():
    jobs = [job(1, 0, 1, 100, req=10), job(2, 0, 1, 50, req=10), job(3, 0, 1, 20, req=10)]
    assert start_of(run("sjf-ideal", jobs, clusters(1))) == {3: (0, 0), 2: (20, 0), 1: (70, 0)}


def test_hsdf_prefers_the_job_that_waited_longest_relative_to_its_length():
    # At 100: job 1 (predicted 100 s, waited 100 s) has estimated slowdown 2.0;
    # job 2 (predicted 50 s, waited 5 s) 1.1. HSDF starts job 1 first, SJF job 2.
    jobs = [job(0, 0, 1, 100, req=100), job(1, 0, 1, 100, req=100), job(2, 95, 1, 50, req=50)]
    env = clusters(1)
    assert start_of(run("hsdf", jobs, env)) == {0: (0, 0), 1: (100, 0), 2: (200, 0)}
    assert start_of(run("sjf", jobs, env)) == {0: (0, 0), 2: (100, 0), 1: (150, 0)}


def test_periodic_rounds_start_jobs_on_the_grid():
    # Rounds every 30 s: a job submitted at 1 starts at 30, one freed at 40 restarts at 60.
    jobs = [job(1, 1, 1, 10), job(2, 2, 1, 5)]
    result = run("fcfs", jobs, clusters(1, interval=30.0))
    assert start_of(result) == {1: (30, 0), 2: (60, 0)}


def test_impossible_job_is_rejected_with_a_reason():
    result = run("ff", [job(1, 0, 8, 10), job(2, 0, 1, 1)])
    assert 1 not in start_of(result)
    assert "needs 8 processors" in result.log.reasons[1]
    assert result.unfinished == {}


@pytest.mark.parametrize("policy", ["fcfs", "easy", "ff", "rr", "sjf", "sjf-ideal", "hsdf"])
def test_every_policy_completes_a_small_workload(policy):
    result = run(policy)
    assert sorted(start_of(result)) == [1, 2, 3, 4]
    assert not result.unfinished


# HSDF's wait-time prediction (docs/simulation.md, "HSDF"): one 4-processor cluster, rounds
# every 30 s. Job 1 (3 procs) runs 0-100; job 3 (1 proc, predicted 100 s) arrives at 5, job 2
# (4 procs, predicted 20 s) at 26. Predicted runtimes are the requested ones (no history).
HSDF_JOBS = [job(1, 0, 3, 100, 100), job(3, 5, 1, 100, 100), job(2, 26, 4, 20, 20)]


def test_hsdf_blocking_prediction_lets_the_job_that_cannot_start_yet_go_first():
    # Round 30: job 2 needs 4 procs, free at 100 (job 1's estimated end): predicted wait
    # 4 + 70 = 74 s, slowdown (74 + 20) / 20 = 4.7; job 3: (25 + 100) / 100 = 1.25. Job 2 ranks
    # first, fits nowhere and holds job 3 back (same at 60 and 90). Round 120: job 2 starts
    # (ends 140), job 3 fits nowhere. Round 150: job 3. Ranked by elapsed wait only, job 2's
    # slowdown would be (4 + 20) / 20 = 1.2 < 1.25: job 3 would start at 30 and job 2 at 150.
    result = run("hsdf", HSDF_JOBS, clusters(4, interval=30.0), allocation_params={"blocking": True})
    assert start_of(result) == {1: (0, 0), 2: (120, 0), 3: (150, 0)}


def test_hsdf_default_skips_jobs_that_fit_nowhere():
    # KOALA-C's list placement: job 2 fits nowhere at 30 and is skipped, so job 3 starts at 30
    # (the order by elapsed wait); at 120 job 3 still holds 1 proc, so job 2 starts at 150.
    result = run("hsdf", HSDF_JOBS, clusters(4, interval=30.0), allocation_params={"blocking": False})
    assert start_of(result) == {1: (0, 0), 3: (30, 0), 2: (150, 0)}
