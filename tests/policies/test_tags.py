"""Hand-computed TAGS-chain and TAGS-sets schedules (KOALA-C §IV-B, §IV-C)."""

from __future__ import annotations

import pytest

from helpers import clusters, events, job, start_of, starts
from isthmus.model import PolicyChoice, SiteSet
from isthmus.model.events import EventKind
from isthmus.policies.registry import PolicyError
from isthmus.sim.runner import simulate

K = (EventKind.START, EventKind.KILL, EventKind.REQUEUE, EventKind.END)


def chain(limits=(10.0,), dispatch="rr", seed=0):
    return PolicyChoice("tags-chain", {"limits": limits, "dispatch": dispatch, "seed": seed})


def test_chain_kills_exactly_at_the_limit_and_restarts_from_scratch():
    result = simulate(clusters(1, 1), [job(1, 0, 1, 25), job(2, 1, 1, 5)], chain(), "none", check_purity=True)
    assert events(result, *K) == [
        (0, "START", 1, 0),
        (10, "KILL", 1, 0),
        (10, "REQUEUE", 1, -1),
        (10, "START", 2, 0),  # queues are scanned in chain order: site 0's first
        (10, "START", 1, 1),  # from scratch on the next site: ends at 10 + 25
        (15, "END", 2, 0),
        (35, "END", 1, 1),
    ]


def test_chain_job_ending_exactly_at_the_limit_completes():
    result = simulate(clusters(1, 1), [job(1, 0, 1, 10)], chain(), "none")
    assert events(result, *K) == [(0, "START", 1, 0), (10, "END", 1, 0)]


def test_chain_rr_dispatch_alternates_chains():
    jobs = [job(i, i, 1, 1) for i in range(1, 5)]
    result = simulate(clusters(1, 1, 1, 1), jobs, chain(), "none")
    assert [s for _, _, s in starts(result)] == [0, 2, 0, 2]


def test_chain_rnd_dispatch_is_seeded():
    jobs = [job(i, i, 1, 1) for i in range(1, 40)]
    env = clusters(1, 1, 1, 1, 1, 1)
    a = simulate(env, jobs, chain(dispatch="rnd", seed=3), "none").log.rows()
    b = simulate(env, jobs, chain(dispatch="rnd", seed=3), "none").log.rows()
    c = simulate(env, jobs, chain(dispatch="rnd", seed=4), "none").log.rows()
    assert a == b
    assert a != c
    used = {s for _, _, s in starts(simulate(env, jobs, chain(dispatch="rnd", seed=3), "none"))}
    assert used == {0, 2, 4}


def test_chain_needs_whole_chains():
    with pytest.raises(ValueError, match="multiple of 2 sites"):
        simulate(clusters(1, 1, 1), [job(1, 0, 1, 1)], chain(), "none")


def test_chain_limits_must_increase():
    with pytest.raises(ValueError, match="must increase"):
        simulate(clusters(1, 1, 1), [job(1, 0, 1, 1)], chain(limits=(20.0, 10.0)), "none")


SETS = (SiteSet("all", ("s0", "s1"), 10.0), SiteSet("long", ("s1",), None))


def test_sets_killed_jobs_wait_behind_earlier_sets():
    # j1, j2 run on s0, s1 and are killed at 10; j3, j4 (queued in set 1) take both sites at 10,
    # ahead of the killed jobs. At 13 s0 is free but not in set 2: j1 restarts on s1, j2 after it.
    env = clusters(1, 1, sets=SETS)
    jobs = [job(1, 0, 1, 30), job(2, 0, 1, 30), job(3, 5, 1, 3), job(4, 5, 1, 3)]
    result = simulate(env, jobs, "tags-sets", "none", check_purity=True)
    assert start_of(result) == {3: (10, 0), 4: (10, 1), 1: (13, 1), 2: (43, 1)}
    kills = [(t, j) for t, k, j, _ in events(result, EventKind.KILL)]
    assert kills == [(10, 1), (10, 2)]


def test_sets_limit_override_and_validation():
    env = clusters(1, 1, sets=SETS)
    result = simulate(env, [job(1, 0, 1, 15)], PolicyChoice("tags-sets", {"limits": [20.0]}), "none")
    assert not events(result, EventKind.KILL)
    bad = clusters(1, 1, sets=(SiteSet("a", ("s0",), 10.0), SiteSet("b", ("s1",), None)))
    with pytest.raises(ValueError, match="every site"):
        simulate(bad, [job(1, 0, 1, 1)], "tags-sets", "none")
    not_subset = clusters(1, 1, sets=(SiteSet("a", ("s0", "s1"), 10.0), SiteSet("b", ("s0", "s1"), None)))
    with pytest.raises(ValueError, match="proper subset"):
        simulate(not_subset, [job(1, 0, 1, 1)], "tags-sets", "none")
    with pytest.raises(PolicyError, match="limits"):
        simulate(env, [job(1, 0, 1, 1)], PolicyChoice("tags-sets", {"limits": "x"}), "none")


def test_restart_metrics_from_a_tags_run():
    """Restarts, wasted processor-seconds and the response of a restarted job include its killed run."""
    from isthmus.metrics.run import compute_run_metrics

    env = clusters(2, 2)
    result = simulate(env, [job(1, 0, 2, 25), job(2, 1, 1, 5)], chain(), "none")
    m = compute_run_metrics(result.log, result.jobs, env, result.end_time)
    rec = {int(j): i for i, j in enumerate(m.records.job_id)}
    i = rec[1]
    assert m.records.restarts[i] == 1
    assert m.records.wasted_processor_seconds[i] == 2 * 10  # 2 processors for the 10 s killed run
    assert m.records.start[i] == 10 and m.records.end[i] == 35
    assert m.records.response[i] == 35  # from submission, killed run included
    assert m.records.wait[i] == 10
    assert m.summary["restarts"] == 1 and m.summary["wasted_processor_seconds"] == 20
