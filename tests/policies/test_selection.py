"""Hand-computed choices of the forwarding (site-selection) policies through the policy harness
(Villegas dissertation §4.3.2, §4.5.2, §7.3.2; IBM seed §3.2), and the ForwardJob statuses."""

from __future__ import annotations

import pytest

from helpers import job
from isthmus.decisions.forward import ForwardJob
from isthmus.decisions.hold import HoldJob
from isthmus.model import Environment, PolicyChoice, Site
from isthmus.model.job import Job
from isthmus.model.peers import PeerRole
from isthmus.model.status import StatusCode
from isthmus.sim.harness import Harness, peer_data


def harness(policy: str, nodes: int = 4, **params: object) -> Harness:
    env = Environment("A", (Site("a", nodes=nodes),), round_interval=None)
    return Harness(env, "fcfs", "none", others={"selection": PolicyChoice(policy, params)})


def fill_local(h: Harness, queued: tuple[int, ...] = (), first_id: int = 100) -> None:
    """Make site a busy (one job of all its nodes) and queue jobs of the given sizes, all routed."""
    size = h.engine.backends[0].site.nodes
    h.running(job(first_id, 0, size, 1000), 0, 0)
    for i, s in enumerate(queued):
        h.queue(job(first_id + 1 + i, 0, s, 100))
    h.engine.unrouted.clear()


def forwards(h: Harness, family: str = "selection") -> list[tuple[int, str, StatusCode]]:
    out = h.decide(family)
    names = {p.index: p.name for p in h.view.peers}
    return [
        (o.decision.job_id, names[o.decision.peer], o.status.code) for o in out if isinstance(o.decision, ForwardJob)
    ]


def test_lowest_qlen_counts_its_own_placements_within_the_round():
    h = harness("lowest-qlen")
    h.peer("B", peer_data("B", idle=0, processors=4, queued_jobs=1))
    h.peer("C", peer_data("C", idle=0, processors=4, queued_jobs=3))
    fill_local(h, (1, 1))
    h.queue(job(1, 0, 1, 10))
    h.queue(job(2, 0, 1, 10))
    # job 1: A 2 waiting, B 1, C 3 -> B; job 2: A 2, B 2 (job 1 counted), C 3 -> tie, A keeps it
    assert forwards(h) == [(1, "B", StatusCode.ACCEPTED)]
    assert h.federation is not None and h.federation.sent == [(1, "B")]
    assert 2 in h.engine.entries and 1 not in h.engine.entries


def test_lowest_qlen_cpus_compares_requested_processors():
    h = harness("lowest-qlen-cpus")
    h.peer("B", peer_data("B", idle=0, processors=16, queued_jobs=1, queued_processors=16))
    h.peer("C", peer_data("C", idle=0, processors=4, queued_jobs=3, queued_processors=3))
    fill_local(h, (4, 4))
    h.queue(job(1, 0, 2, 10))
    assert forwards(h) == [(1, "C", StatusCode.ACCEPTED)]  # A 8, B 16, C 3


def test_highest_idle_then_the_next_best_once_the_first_is_taken():
    h = harness("highest-idle")
    h.peer("B", peer_data("B", idle=3, processors=4))
    h.peer("C", peer_data("C", idle=5, processors=8))
    fill_local(h)
    h.queue(job(1, 0, 4, 10))
    h.queue(job(2, 0, 2, 10))
    # job 1: idle A 0, B 3, C 5 -> C (1 left); job 2: B 3 > C 1 -> B
    assert forwards(h) == [(1, "C", StatusCode.ACCEPTED), (2, "B", StatusCode.ACCEPTED)]


def test_lowest_load_is_queued_processors_minus_idle():
    h = harness("lowest-load")
    h.peer("B", peer_data("B", idle=2, processors=8, queued_jobs=2, queued_processors=10))  # load 8
    h.peer("C", peer_data("C", idle=0, processors=8, queued_jobs=1, queued_processors=4))  # load 4
    fill_local(h, (4, 4))  # load 8
    h.queue(job(1, 0, 1, 10))
    assert forwards(h) == [(1, "C", StatusCode.ACCEPTED)]


def test_highest_cap_counts_potential_vms_as_in_the_dissertation_example():
    # §7.3.2: max 100 VMs, 50 in use, 20 idle -> capacity 20 idle + 30 potential = 50
    h = harness("highest-cap")
    cloud = peer_data("B", idle=20, processors=70, max_processors=100, busy=50, is_cloud=True)
    assert cloud.capacity == 50
    h.peer("B", cloud)
    h.peer("C", peer_data("C", idle=40, processors=40))
    fill_local(h)
    h.queue(job(1, 0, 1, 10))
    assert forwards(h) == [(1, "B", StatusCode.ACCEPTED)]


def test_bf_cap_takes_the_smallest_capacity_that_holds_the_job_else_the_largest():
    h = harness("bf-cap")
    h.peer("B", peer_data("B", idle=20, processors=70, max_processors=100, busy=50, is_cloud=True))  # cap 50
    h.peer("C", peer_data("C", idle=12, processors=12))  # cap 12
    fill_local(h)  # cap 0
    h.queue(job(1, 0, 10, 10))
    h.queue(job(2, 0, 90, 10))
    # job 1 (10): C's 12 is the closest that holds it; job 2 (90): none holds it -> the largest, B
    assert forwards(h) == [(1, "C", StatusCode.ACCEPTED), (2, "B", StatusCode.ACCEPTED)]


def test_bf_idle_takes_the_closest_idle_count():
    h = harness("bf-idle", nodes=8)
    h.peer("B", peer_data("B", idle=6, processors=8))
    h.peer("C", peer_data("C", idle=3, processors=8))
    h.queue(job(1, 0, 3, 10))  # A idle 8, B 6, C 3 -> C exactly
    h.queue(job(2, 0, 5, 10))  # A 8, B 6, C 0 -> B
    h.queue(job(3, 0, 7, 10))  # A 8, B 1, C 0 -> A keeps it
    assert forwards(h) == [(1, "C", StatusCode.ACCEPTED), (2, "B", StatusCode.ACCEPTED)]
    assert 3 in h.engine.entries


def test_local_first_keeps_what_fits_here_then_the_first_peer_where_it_fits():
    h = harness("local-first", nodes=4)
    h.peer("B", peer_data("B", idle=1, processors=4))
    h.peer("C", peer_data("C", idle=4, processors=4))
    h.queue(job(1, 0, 3, 10))  # fits here (4 idle)
    h.queue(job(2, 0, 3, 10))  # 1 left here, B 1: C
    h.queue(job(3, 0, 4, 10))  # fits nowhere now: waits here
    assert forwards(h) == [(2, "C", StatusCode.ACCEPTED)]
    assert {1, 3} <= set(h.engine.entries)


def test_round_robin_alternates_over_here_and_peers_across_rounds():
    h = harness("round-robin")
    h.peer("B", peer_data("B", idle=4, processors=4))
    h.peer("C", peer_data("C", idle=4, processors=4))
    for i in range(1, 5):
        h.queue(job(i, 0, 1, 10))
    assert forwards(h) == [(2, "B", StatusCode.ACCEPTED), (3, "C", StatusCode.ACCEPTED)]
    h.engine.unrouted.clear()
    h.queue(job(5, 0, 1, 10))
    assert forwards(h) == [(5, "B", StatusCode.ACCEPTED)]  # job 4 stayed here; B's turn


def test_round_robin_skips_a_place_too_small_for_the_job():
    h = harness("round-robin")
    h.peer("B", peer_data("B", idle=2, processors=2))
    h.queue(job(1, 0, 1, 10))  # here
    h.queue(job(2, 0, 3, 10))  # B's turn, but B has 2 processors at most: here
    assert forwards(h) == []


def ibm() -> Harness:
    h = harness("ibm-matching")
    h.federation_max_hops = 1
    return h


def test_ibm_sort_ranks_an_empty_queue_above_any_priority():
    h = harness("ibm-matching")
    # B: 5 free, no waiting job; C: 40 free, 1 waiting job of 4 (priority 36, but a queue)
    h.peer("B", peer_data("B", idle=5, processors=5, is_cloud=True))
    h.peer("C", peer_data("C", idle=40, processors=40, queued_jobs=1, queued_processors=4))
    fill_local(h, (4, 4))  # A: 0 free, 8 requested, 2 waiting
    h.queue(job(1, 0, 2, 100, req=100))
    assert forwards(h) == [(1, "B", StatusCode.ACCEPTED)]


def test_ibm_sort_breaks_ties_by_queue_length_then_distance():
    h = harness("ibm-matching")
    h.peer("far", peer_data("far", idle=0, processors=8, queued_jobs=1, queued_processors=2), distance=0.5)
    h.peer("near", peer_data("near", idle=0, processors=8, queued_jobs=1, queued_processors=2), distance=0.1)
    fill_local(h, (1, 1))  # A: priority 0 - 2 = -2 as well, but 2 waiting
    h.queue(job(1, 0, 1, 100, req=100))
    assert forwards(h) == [(1, "near", StatusCode.ACCEPTED)]


def test_ibm_cloud_short_filter_keeps_very_short_jobs_off_clouds():
    h = harness("ibm-matching")
    h.peer("B", peer_data("B", idle=5, processors=5, is_cloud=True))
    fill_local(h, (4,))
    h.queue(job(1, 0, 1, 2, req=2))  # expected 2 s < 3 s: not to a cloud
    h.queue(job(2, 0, 1, 2, req=3))  # 3 s is not "less than 3 seconds"
    assert forwards(h) == [(2, "B", StatusCode.ACCEPTED)]


def test_ibm_filtered_job_is_held_with_the_filter_and_the_sites_it_excluded():
    h = harness("ibm-matching")
    h.peer("B", peer_data("B", idle=5, processors=5, is_cloud=True))
    fill_local(h, (4,))
    h.queue(job(1, 0, 1, 2, req=2))  # expected 2 s < 3 s: cloud-short keeps it off B's cloud
    out = h.decide("selection")
    holds = [o for o in out if isinstance(o.decision, HoldJob)]
    assert [(o.decision.job_id, o.status.code, o.status.policy) for o in holds] == [
        (1, StatusCode.HELD, "ibm-matching")
    ]
    assert h.engine.why(1) == "kept at A by the forwarding policy: filter cloud-short excluded B/B"
    assert h.engine.why_status(1).code is StatusCode.HELD


def test_ibm_job_matched_here_by_sorting_is_not_held():
    h = harness("ibm-matching", nodes=8)
    h.peer("B", peer_data("B", idle=5, processors=5, is_cloud=True))
    h.queue(job(1, 0, 1, 100, req=100))  # here: 8 free, no queue, before B's 5
    assert [o for o in h.decide("selection") if isinstance(o.decision, HoldJob)] == []


def test_ibm_failed_resource_and_parallel_filters():
    h = harness("ibm-matching")
    h.peer("B", peer_data("B", idle=5, processors=5, is_cloud=True))
    h.peer("C", peer_data("C", idle=2, processors=2, max_processors=8, is_cloud=True))  # booting: 2 of 8 up
    fill_local(h, (4,))
    h.queue(job(1, 0, 1, 100, req=100), failed=("B",))  # B handed it back: C instead
    h.queue(job(2, 0, 4, 100, req=100), failed=("B",))  # parallel: C offers 2 now, not 4 -> stays
    assert forwards(h) == [(1, "C", StatusCode.ACCEPTED)]
    assert 2 in h.engine.entries


def test_ibm_filters_are_plugins_that_can_be_left_out():
    h = harness("ibm-matching", filters=["visited"])
    h.peer("B", peer_data("B", idle=5, processors=5, is_cloud=True))
    fill_local(h, (4,))
    h.queue(job(1, 0, 1, 1, req=1))  # no cloud-short filter: it goes
    assert forwards(h) == [(1, "B", StatusCode.ACCEPTED)]


def test_ibm_drained_peer_is_not_found():
    h = harness("ibm-matching")
    h.peer("B", peer_data("B", idle=0, processors=0, available=False, is_cloud=True))
    fill_local(h, (4,))
    h.queue(job(1, 0, 1, 100, req=100))
    assert forwards(h) == []


@pytest.mark.parametrize(
    ("setup", "code", "words"),
    [
        ({"up": False}, StatusCode.NO_CAPACITY, "down"),
        ({"role": PeerRole.CONSUMER}, StatusCode.NOT_ALLOWED, "consumer only"),
    ],
)
def test_forwarding_to_a_down_or_consumer_peer_is_refused(setup, code, words):
    h = harness("lowest-qlen")
    h.peer("B", peer_data("B", idle=4, processors=4), **setup)
    h.queue(job(1, 0, 1, 10))
    status = h.engine.apply(ForwardJob(1, 0, by="test"))
    assert status.code is code and words in status.reason
    assert 1 in h.engine.entries and h.engine.status(1) == status


def test_forwarding_refuses_a_visited_peer_a_failed_one_and_a_too_small_one():
    h = harness("lowest-qlen")
    h.peer("B", peer_data("B", idle=4, processors=4))
    h.queue(Job(1, 0, 1, 10), chain=("B",))
    h.queue(Job(2, 0, 1, 10), failed=("B",))
    h.queue(Job(3, 0, 5, 10))
    a, b, c = (h.engine.apply(ForwardJob(i, 0)) for i in (1, 2, 3))
    assert (a.code, b.code, c.code) == (StatusCode.NOT_ALLOWED, StatusCode.NOT_ALLOWED, StatusCode.NO_CAPACITY)
    assert "already visited B" in a.reason and "handed job 2 back" in b.reason and "offers 4" in c.reason


def test_no_peers_means_no_forwarding():
    h = harness("lowest-qlen")
    h.queue(job(1, 0, 1, 10))
    assert h.engine.apply(ForwardJob(1, 0)).code is StatusCode.INVALID
    assert h.decide("selection") == []


def test_a_round_routes_new_jobs_once():
    h = harness("lowest-qlen")
    h.peer("B", peer_data("B", idle=0, processors=4, queued_jobs=5))
    h.queue(job(1, 0, 1, 10))
    assert [e.job.id for e in h.view.unrouted()] == [1]
    h.engine.run_round()
    assert h.view.unrouted() == ()
