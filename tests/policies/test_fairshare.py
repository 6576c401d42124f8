"""Grid- and Site-EquiPartition (KOALA-CS thesis §3.7.1) on hand-built states through the harness,
the GrowBag / ShrinkBag statuses, and the split helpers."""

from __future__ import annotations

import random

from helpers import cloud_env, clusters, job
from isthmus.decisions.grow import GrowBag
from isthmus.decisions.kill import KillJob
from isthmus.decisions.shrink import ShrinkBag
from isthmus.decisions.start import StartJob
from isthmus.engine.bags import BagSettings
from isthmus.model.environment import PolicyChoice
from isthmus.model.events import EventKind
from isthmus.model.job import Job, JobKind, PriorityClass
from isthmus.model.status import StatusCode
from isthmus.policies.api import SlotInfo
from isthmus.policies.fairshare.common import equipartition, level_up, shrink_schedule, take_evenly
from isthmus.sim.harness import Harness


def bag(jid: int, tasks: int, runtime: float = 100.0, submit: float = 0.0) -> Job:
    """A bag of `tasks` tasks of `runtime` seconds."""
    return Job(
        jid, submit, 1, runtime, user=f"u{jid}", kind=JobKind.MALLEABLE, tasks=tasks, priority=PriorityClass.SUPER_LOW
    )


def harness(env, policy: str = "sep", **params: object) -> Harness:
    h = Harness(env, "fcfs", others={"fairshare": PolicyChoice(policy, params)})
    h.engine.bags.settings = BagSettings(preemption_time=10.0)
    return h


def decisions(h: Harness) -> list[tuple[object, StatusCode]]:
    return [(o.decision, o.status.code) for o in h.decide("fairshare")]


# ----------------------------------------------------------------------------- growth


def test_sep_splits_each_sites_idle_processors_evenly():
    # sites of 4 and 6 processors; a rigid job runs on 2 of site 1. Site 0: 4 idle -> 2 and 2;
    # site 1: 4 idle (load 2/6 < 80%) -> 2 and 2. Bag 11 arrived first: it gets the odd one.
    h = harness(clusters(4, 6))
    h.running(job(1, 0, 2, 100), 1, started=0.0)
    h.bag(bag(10, 20))
    h.bag(bag(11, 20))
    assert decisions(h) == [
        (GrowBag(10, 0, 2, by="sep"), StatusCode.ACCEPTED),
        (GrowBag(11, 0, 2, by="sep"), StatusCode.ACCEPTED),
        (GrowBag(10, 1, 2, by="sep"), StatusCode.ACCEPTED),
        (GrowBag(11, 1, 2, by="sep"), StatusCode.ACCEPTED),
    ]
    assert [s.free for s in h.view.sites] == [0, 0]
    odd = harness(clusters(5))
    odd.bag(bag(10, 20))
    odd.bag(bag(11, 20))
    assert decisions(odd) == [
        (GrowBag(10, 0, 3, by="sep"), StatusCode.ACCEPTED),
        (GrowBag(11, 0, 2, by="sep"), StatusCode.ACCEPTED),
    ]


def test_sep_gives_a_bag_no_more_than_its_waiting_tasks_over_all_sites():
    # bag 10 has 3 tasks: 2 on site 0 (its half of 4), then 1 on site 1; bag 11 takes the rest
    h = harness(clusters(4, 4))
    h.bag(bag(10, 3))
    h.bag(bag(11, 20))
    assert decisions(h) == [
        (GrowBag(10, 0, 2, by="sep"), StatusCode.ACCEPTED),
        (GrowBag(11, 0, 2, by="sep"), StatusCode.ACCEPTED),
        (GrowBag(10, 1, 1, by="sep"), StatusCode.ACCEPTED),
        (GrowBag(11, 1, 3, by="sep"), StatusCode.ACCEPTED),
    ]


def test_gep_splits_the_grids_idle_processors_regardless_of_site():
    # the same state as SEP's: 8 idle processors in the grid -> 4 each, each taken from the site
    # with the most idle processors (ties: the lower index): bag 10 all on site 0, bag 11 all on
    # site 1 (Figure 3.9, top)
    h = harness(clusters(4, 6), "gep")
    h.running(job(1, 0, 2, 100), 1, started=0.0)
    h.bag(bag(10, 20))
    h.bag(bag(11, 20))
    assert decisions(h) == [
        (GrowBag(10, 0, 4, by="gep"), StatusCode.ACCEPTED),
        (GrowBag(11, 1, 4, by="gep"), StatusCode.ACCEPTED),
    ]


def test_no_growth_at_80_percent_load_per_site_for_sep_and_per_grid_for_gep():
    # site 0: 8 of 10 busy (80%): SEP does not grow there; site 1 is empty: it grows there.
    h = harness(clusters(10, 10))
    h.running(job(1, 0, 8, 100), 0, started=0.0)
    h.bag(bag(10, 50))
    assert decisions(h) == [(GrowBag(10, 1, 10, by="sep"), StatusCode.ACCEPTED)]
    # GEP: the grid is 8/20 = 40% loaded: it grows on both (site 1 first: the most idle)
    g = harness(clusters(10, 10), "gep")
    g.running(job(1, 0, 8, 100), 0, started=0.0)
    g.bag(bag(10, 50))
    assert decisions(g) == [
        (GrowBag(10, 1, 10, by="gep"), StatusCode.ACCEPTED),
        (GrowBag(10, 0, 2, by="gep"), StatusCode.ACCEPTED),
    ]
    # 16 of 20 busy: 80% of the grid, GEP does not grow at all
    full = harness(clusters(10, 10), "gep")
    full.running(job(1, 0, 8, 100), 0, started=0.0)
    full.running(job(2, 0, 8, 100), 1, started=0.0)
    full.bag(bag(10, 50))
    assert decisions(full) == []
    # a lower threshold is a parameter: 70% stops SEP on a site 7/10 busy
    low = harness(clusters(10), max_load=0.7)
    low.running(job(1, 0, 7, 100), 0, started=0.0)
    low.bag(bag(10, 50))
    assert decisions(low) == []


# --------------------------------------------------------------------------- shrinking


def test_a_waiting_rigid_job_makes_the_bags_on_its_site_shrink_an_equal_amount():
    # 8 processors, held 4 and 4 by two bags; a rigid job of 4 waits: each bag gives back 2
    h = harness(clusters(8))
    h.bag(bag(10, 20), {0: 4})
    h.bag(bag(11, 20), {0: 4})
    h.queue(job(1, 0, 4, 50))
    out = decisions(h)
    assert [(type(d).__name__, d.job_id, d.site, len(d.slots), d.for_job, c) for d, c in out] == [
        ("ShrinkBag", 10, 0, 2, 1, StatusCode.ACCEPTED),
        ("ShrinkBag", 11, 0, 2, 1, StatusCode.ACCEPTED),
    ]
    assert [e.task for e in h.engine.log if e.kind is EventKind.SHRINK] == [1, 1]  # the job they are for
    bags = h.engine.bags
    assert (bags.held[0], bags.leaving[0], h.engine.backends[0].free) == (8, 4, 0)
    # the preempted tasks are back in their bags' queues, their work lost (0 s: they started now)
    preempted = [e for e in h.engine.log if e.kind is EventKind.TASK_PREEMPT]
    assert len(preempted) == 4 and all(e.value == 0.0 for e in preempted)
    assert [b.queued for b in h.view.bags.active] == [16 + 2, 16 + 2]
    # a second look while the processors are being preempted asks for nothing more
    assert decisions(h) == []


def test_a_shrink_takes_effect_at_once_without_preemption_time_so_the_job_starts_in_the_same_round():
    h = harness(clusters(8))
    h.engine.bags.settings = BagSettings(preemption_time=0.0)
    h.bag(bag(10, 20), {0: 5})
    h.bag(bag(11, 20), {0: 3})
    h.queue(job(1, 0, 3, 50))
    out = decisions(h)
    # the larger holder gives more: 5 and 3 -> take 3 from the top: 2 from bag 10, 1 from bag 11
    assert [(d.job_id, len(d.slots)) for d, _ in out] == [(10, 2), (11, 1)]
    assert h.engine.backends[0].free == 3
    assert [(o.decision, o.status.code) for o in h.decide("allocation")] == [
        (StartJob(1, 0, by="fcfs"), StatusCode.ACCEPTED)
    ]


def test_a_job_that_fits_on_free_processors_now_is_expected_there_not_on_processors_being_freed():
    # Sites of 4 and 2 processors. The bag holds site 0's 4; a rigid job of 2 runs on site 1.
    # Job 2 (2 processors) waits: the bag gives back 2 on site 0 for it. Then the job on site 1
    # is gone: the allocation will start job 2 there at once (First-Fit on free processors), so
    # job 3 (4 processors) behind it may count on site 0's 2 being freed and needs only 2 more
    # (the walk once put job 2 on site 0's processors being freed, and job 3 then took 4 more).
    h = harness(clusters(4, 2))
    h.running(job(1, 0, 2, 5), 1, started=0.0)
    h.bag(bag(10, 20), {0: 4})
    h.queue(job(2, 0, 2, 50))
    assert [(d.job_id, d.site, len(d.slots), d.for_job) for d, _ in decisions(h)] == [(10, 0, 2, 2)]
    assert h.engine.apply(KillJob(1, "ended")).accepted
    h.queue(job(3, 0, 4, 50))
    assert h.view.sites[1].free == 2
    assert [(d.job_id, d.site, len(d.slots), d.for_job) for d, _ in decisions(h)] == [(10, 0, 2, 3)]
    assert [(o.decision, o.status.code) for o in h.decide("allocation")] == [
        (StartJob(2, 1, by="fcfs"), StatusCode.ACCEPTED)
    ]


def test_a_job_that_fits_on_free_processors_claims_them_and_bags_do_not_grow_there():
    h = harness(clusters(8))
    h.running(job(1, 0, 4, 100), 0, started=0.0)
    h.queue(job(2, 0, 3, 50))
    h.bag(bag(10, 20))
    # 4 free: the waiting job takes 3, one is left for the bag
    assert decisions(h) == [(GrowBag(10, 0, 1, by="sep"), StatusCode.ACCEPTED)]


def test_a_job_that_cannot_start_even_with_the_bags_processors_leaves_them_alone():
    # 8 processors: a rigid job runs on 6, a bag holds 2; a job of 8 waits: it could not start
    # even if the bag left, so the bag keeps its processors
    h = harness(clusters(8))
    h.running(job(1, 0, 6, 100), 0, started=0.0)
    h.bag(bag(10, 20), {0: 2})
    h.queue(job(2, 0, 8, 50))
    assert decisions(h) == []


def test_with_blocking_no_job_past_one_that_cannot_start_claims_processors():
    # 8 processors: a rigid job runs on 6, a bag holds 2; job 2 (8) cannot start even if the bag
    # left; job 3 (2) could. Non-blocking: the bag shrinks for job 3. Blocking (strict FCFS
    # would not start job 3 before job 2): nothing.
    for blocking, expected in ((False, [(10, 2, 3)]), (True, [])):
        h = harness(clusters(8), blocking=blocking)
        h.running(job(1, 0, 6, 100), 0, started=0.0)
        h.bag(bag(10, 20), {0: 2})
        h.queue(job(2, 0, 8, 50))
        h.queue(job(3, 0, 2, 50))
        assert [(d.job_id, len(d.slots), d.for_job) for d, _ in decisions(h)] == expected


def test_rebalancing_shrinks_a_bag_above_its_share_for_a_newcomer_unless_turned_off():
    h = harness(clusters(8))
    h.bag(bag(10, 40), {0: 8})
    h.bag(bag(11, 40))
    out = decisions(h)
    assert [(type(d).__name__, d.job_id, len(d.slots), c) for d, c in out] == [
        ("ShrinkBag", 10, 4, StatusCode.ACCEPTED)
    ]
    seed_literal = harness(clusters(8), rebalance=False)
    seed_literal.bag(bag(10, 40), {0: 8})
    seed_literal.bag(bag(11, 40))
    assert decisions(seed_literal) == []


def test_the_shrink_schedule_is_random_with_the_seed_or_prefers_processors_between_tasks():
    slots = [SlotInfo(i, 0, i if i % 2 else -1, 0.0) for i in range(10)]  # even ids between tasks
    a = shrink_schedule(slots, 3, random.Random(7), prefer_between=False)
    assert a == shrink_schedule(slots, 3, random.Random(7), prefer_between=False)
    assert len(set(a)) == 3
    picks = {shrink_schedule(slots, 3, random.Random(s), prefer_between=False) for s in range(20)}
    assert len(picks) > 1  # random, not the first three
    between = shrink_schedule(slots, 3, random.Random(7), prefer_between=True)
    assert all(i % 2 == 0 for i in between)
    seven = shrink_schedule(slots, 7, random.Random(7), prefer_between=True)
    assert {0, 2, 4, 6, 8} <= set(seven) and len(set(seven)) == 7
    assert shrink_schedule(slots, 12, random.Random(7), prefer_between=False) == tuple(range(10))


def test_prefer_between_tasks_preempts_the_processors_pulling_a_task():
    h = Harness(clusters(4), "fcfs", others={"fairshare": PolicyChoice("sep", {"prefer_between_tasks": True})})
    h.engine.bags.settings = BagSettings(preemption_time=10.0, pull_latency=5.0)
    h.bag(bag(10, 20), {0: 2})  # pulling: between tasks
    h.engine.bags.settings = BagSettings(preemption_time=10.0, pull_latency=0.0)
    h.engine.apply(GrowBag(10, 0, 2), "harness")  # running a task each
    pulling = {s.id for s in h.view.bags.active[0].slots(0) if s.task < 0}
    assert len(pulling) == 2
    h.queue(job(1, 0, 2, 50))
    ((d, code),) = decisions(h)
    assert code is StatusCode.ACCEPTED and set(d.slots) == pulling
    assert not [e for e in h.engine.log if e.kind is EventKind.TASK_PREEMPT]  # no work lost


# --------------------------------------------------------------------------- statuses


def test_grow_and_shrink_statuses():
    h = harness(cloud_env(4, 4))
    h.running(job(1, 0, 1, 100), 0, started=0.0)
    h.bag(bag(10, 3))
    apply = h.engine.apply
    assert apply(GrowBag(1, 0, 1), "t").code is StatusCode.NOT_MALLEABLE
    assert apply(GrowBag(99, 0, 1), "t").code is StatusCode.UNKNOWN_TARGET
    assert apply(GrowBag(10, 0, 0), "t").code is StatusCode.INVALID
    assert apply(GrowBag(10, 7, 1), "t").code is StatusCode.UNKNOWN_TARGET
    assert apply(GrowBag(10, 1, 1), "t").code is StatusCode.NO_CAPACITY  # a cloud with no ready VM
    assert apply(GrowBag(10, 0, 4), "t").code is StatusCode.OVER_LIMIT  # 3 tasks waiting
    h2 = harness(clusters(2))
    h2.bag(bag(10, 5))
    status = h2.engine.apply(GrowBag(10, 0, 3), "t")
    assert status.code is StatusCode.NO_CAPACITY and status.reason == "needs 3 processors; site s0 has 2 free"
    assert h2.engine.apply(GrowBag(10, 0, 2), "t").accepted
    slots = [s.id for s in h2.view.bags.active[0].slots(0)]
    assert h2.engine.apply(ShrinkBag(10, 0, ()), "t").code is StatusCode.INVALID
    assert h2.engine.apply(ShrinkBag(10, 0, (slots[0], slots[0])), "t").code is StatusCode.INVALID
    assert h2.engine.apply(ShrinkBag(10, 0, (999,)), "t").code is StatusCode.UNKNOWN_TARGET
    assert h2.engine.apply(ShrinkBag(10, 0, (slots[0],)), "t").accepted
    assert h2.engine.apply(ShrinkBag(10, 0, (slots[0],)), "t").code is StatusCode.WRONG_STATE
    refused = [(e.job, e.value, e.policy) for e in h2.engine.log if e.kind is EventKind.DECISION]
    assert refused[0] == (10, StatusCode.NO_CAPACITY, "t") and len(refused) == 5


# ------------------------------------------------------------------------------ helpers


def test_equipartition_caps_and_leftovers():
    assert equipartition(10, [20, 20, 20], [0, 1, 2]) == [4, 3, 3]
    assert equipartition(10, [2, 20, 20], [2, 1, 0]) == [2, 4, 4]
    assert equipartition(10, [1, 2, 3], [0, 1, 2]) == [1, 2, 3]
    assert equipartition(0, [5], [0]) == [0]
    assert level_up(5, [4, 0, 1], [10, 10, 10]) == [0, 3, 2]
    assert level_up(5, [0, 0], [1, 10]) == [1, 4]
    assert take_evenly(3, [4, 4]) == [1, 2]
    assert take_evenly(5, [6, 1, 2]) == [4, 0, 1]  # 6 down to 2, then the later of the two at 2
    assert take_evenly(9, [2, 3]) == [2, 3]


def test_sep_gives_a_sites_odd_processor_to_the_bag_with_fewer_elsewhere():
    # sites of 3 and 3, two bags. Site 0: 2 and 1 (the tie goes to the earlier bag, 10). Site 1:
    # both hold 0 there, bag 11 holds fewer elsewhere (1 against 2): the odd one is bag 11's, so
    # both hold 3. Breaking every tie by arrival gave bag 10 both odd ones (4 against 2): on small
    # sites SEP then favoured the first bag for good (benchmarks/bench_bags_live.py measured it).
    h = harness(clusters(3, 3))
    h.bag(bag(10, 20))
    h.bag(bag(11, 20))
    assert decisions(h) == [
        (GrowBag(10, 0, 2, by="sep"), StatusCode.ACCEPTED),
        (GrowBag(11, 0, 1, by="sep"), StatusCode.ACCEPTED),
        (GrowBag(10, 1, 1, by="sep"), StatusCode.ACCEPTED),
        (GrowBag(11, 1, 2, by="sep"), StatusCode.ACCEPTED),
    ]


def test_ties_of_the_split_helpers_go_by_the_given_keys():
    # equal holdings: without keys the later holder gives first and the earlier one gets first;
    # with keys (processors elsewhere, tasks done, index) the larger key gives and the smaller gets
    assert take_evenly(1, [2, 2]) == [0, 1]
    assert take_evenly(1, [2, 2], [(0, 9, 0), (0, 3, 1)]) == [1, 0]
    assert take_evenly(3, [2, 2], [(1, 0, 0), (0, 0, 1)]) == [2, 1]
    assert level_up(1, [1, 1], [3, 3]) == [1, 0]
    assert level_up(1, [1, 1], [3, 3], [(4, 0, 0), (2, 0, 1)]) == [0, 1]
    assert level_up(3, [0, 1], [3, 3], [(0, 0, 0), (0, 0, 1)]) == [2, 1]
