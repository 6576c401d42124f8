"""The dissertation's allocation policies on hand-computed schedules (Villegas §6.3.2, §7.3.1)."""

from __future__ import annotations

import pytest

from helpers import clusters, job, start_of
from isthmus.model import Environment, PolicyChoice, Site, SiteKind
from isthmus.policies.allocation.fcfs_2q import Fcfs2Q, Fcfs2QParams
from isthmus.sim.runner import simulate

# One 4-processor cluster. Job 1 (2 procs, 0-100) runs; job 2 (4 procs, 50 s) arrives at 1 and
# blocks the head; jobs 3 and 4 (1 proc, 10 s) arrive at 2 and 3.
JOBS = [job(1, 0, 2, 100), job(2, 1, 4, 50), job(3, 2, 1, 10), job(4, 3, 1, 10)]


def run(policy):
    return {j: t for j, (t, _) in start_of(simulate(clusters(4), JOBS, policy, "none")).items()}


def test_fcfs_keeps_arrival_order():
    assert run("fcfs") == {1: 0, 2: 100, 3: 150, 4: 150}


def test_fcbf_aggressive_promotes_every_job_that_fits():
    assert run("fcbf-aggr") == {1: 0, 2: 100, 3: 2, 4: 3}


def test_fcbf_split_leaves_half_of_the_free_processors_to_the_head():
    # t=2: 2 free, the head's share is 1, job 3 takes the other. t=3: 1 free, all the head's.
    # t=12: job 3 ends, 2 free again: job 4 takes the others' half. Job 2 at 100.
    assert run("fcbf-split") == {1: 0, 2: 100, 3: 2, 4: 12}
    # with no share for the head it is FCBF-Aggressive; with all of it, FCFS
    assert run(PolicyChoice("fcbf-split", {"head_share": 0.0})) == run("fcbf-aggr")
    assert run(PolicyChoice("fcbf-split", {"head_share": 1.0})) == run("fcfs")


def test_fcbf_qwait_stops_promoting_once_the_head_has_waited_past_the_threshold():
    # default 300 s: the head waits at most 99 s here, so it behaves as FCBF-Aggressive
    assert run("fcbf-qwait") == run("fcbf-aggr")
    # 1.5 s: at t=2 the head has waited 1 s (job 3 promoted), at t=3 2 s (job 4 is not)
    assert run(PolicyChoice("fcbf-qwait", {"threshold": 1.5})) == {1: 0, 2: 100, 3: 2, 4: 150}
    assert run(PolicyChoice("fcbf-qwait", {"threshold": 0.5})) == run("fcfs")


def two_pools() -> Environment:
    def cloud(name: str) -> Site:
        return Site(name, kind=SiteKind.CLOUD, max_vms=1, boot_time=0)

    return Environment("pools", (cloud("x-short"), cloud("x-long")), round_interval=None)


def test_fcfs_2q_classifies_by_the_known_runtime_and_serves_each_queue_on_its_pool():
    policy = Fcfs2Q(Fcfs2QParams(threshold=60))
    assert policy.arrival_stage(job(1, 0, 1, 60)) == 0
    assert policy.arrival_stage(job(1, 0, 1, 61)) == 1
    assert policy.arrival_stage(job(1, 0, 1, 5, req=600)) == 1  # the user's estimate is what is known
    assert policy.stage_sites(two_pools()) == [(0,), (1,)]
    # two long jobs and a short one: the short one does not wait behind the long ones
    jobs = [job(1, 0, 1, 1000), job(2, 0, 1, 1000), job(3, 1, 1, 5)]
    starts = start_of(simulate(two_pools(), jobs, "fcfs-2q", "startup"))
    assert starts == {1: (0, 1), 2: (1000, 1), 3: (1, 0)}


def test_fcfs_2q_refuses_an_environment_without_pools():
    with pytest.raises(ValueError, match=r"'\*-short'"):
        Fcfs2Q().stage_sites(clusters(4))
    with pytest.raises(ValueError, match="no site named 'nope'"):
        Fcfs2Q(Fcfs2QParams(short_site="nope")).stage_sites(two_pools())
