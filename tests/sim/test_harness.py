"""Policies run once on hand-built states through the harness: their decisions and statuses."""

from __future__ import annotations

from helpers import cloud_env, clusters, job
from isthmus.decisions.lease import LeaseVms
from isthmus.decisions.release import ReleaseVms
from isthmus.decisions.start import StartJob
from isthmus.decisions.wake import WakeUp
from isthmus.model.events import EventKind
from isthmus.model.status import StatusCode
from isthmus.sim.harness import Harness


def test_easy_backfills_behind_a_reservation_on_a_hand_built_state():
    # 10 processors at t=50: job 1 (6 procs) runs since 0 with estimate 100; queued: job 2
    # (8 procs) is the head and gets the reservation at 100 with 8 of 10 processors, so 2 are
    # spare; job 3 (2 procs, estimate 200) may use them; job 4 (2 procs, estimate 40, ends by 90)
    # backfills in the 4 - 2 = 2 free before the reservation.
    h = Harness(clusters(10), "easy", now=50.0)
    h.running(job(1, 0, 6, 100, req=100), 0, started=0.0)
    for j in (job(2, 10, 8, 50, req=50), job(3, 20, 2, 200, req=200), job(4, 30, 2, 40, req=40)):
        h.queue(j, queued_at=j.submit)
    outcomes = h.decide()
    assert [(o.decision, o.status.code) for o in outcomes] == [
        (StartJob(3, 0, by="easy"), StatusCode.ACCEPTED),
        (StartJob(4, 0, by="easy"), StatusCode.ACCEPTED),
    ]
    assert h.engine.why(2).startswith("waiting in queue 0 behind 0 jobs; needs 8 processors")


def test_fcfs_head_blocks_and_a_manual_decision_gets_a_status():
    h = Harness(clusters(4), "fcfs")
    h.running(job(1, 0, 3, 100), 0, started=0.0)
    h.queue(job(2, 0, 2, 10))
    h.queue(job(3, 0, 1, 10))
    assert h.decide() == []  # strict FCFS: job 3 may not pass job 2
    status = h.engine.apply(StartJob(2, 0), "operator")
    assert (status.code, status.policy) == (StatusCode.NO_CAPACITY, "operator")
    assert h.engine.refusals == {StatusCode.NO_CAPACITY: 1}


def test_on_demand_leases_for_the_queue_and_the_budget_refuses_with_a_reason():
    env = cloud_env(2, 8, price=0.065, increment=3600.0)
    h = Harness(env, "ff", "on-demand", budget=0.1)
    h.queue(job(1, 0, 4, 100))
    outcomes = h.decide("provisioning")
    assert [o.decision for o in outcomes] == [LeaseVms(1, 4, by="on-demand")]
    (o,) = outcomes
    assert o.status.code is StatusCode.OVER_BUDGET and "exceeds the budget" in o.status.reason
    refusals = [e for e in h.engine.log if e.kind is EventKind.DECISION]
    assert [(e.site, e.value, e.policy) for e in refusals] == [(1, StatusCode.OVER_BUDGET, "on-demand")]


def test_on_demand_releases_an_idle_free_vm_after_its_idle_time():
    env = cloud_env(2, 4, idle=300.0)
    h = Harness(env, "ff", "on-demand", now=1000.0)
    (vm,) = h.vms(1, 1, leased_at=0.0)
    h.engine.backends[1].vms[vm].idle_since = 600.0  # idle for 400 s > 300 s
    outcomes = h.decide("provisioning")
    assert [(o.decision, o.status.accepted) for o in outcomes] == [(ReleaseVms(1, (vm,), by="on-demand"), True)]


def test_on_demand_asks_to_be_woken_when_an_idle_vm_will_be_due():
    env = cloud_env(2, 4, idle=300.0)
    h = Harness(env, "ff", "on-demand", now=700.0)
    (vm,) = h.vms(1, 1, leased_at=0.0)
    h.engine.backends[1].vms[vm].idle_since = 600.0  # due at 900
    outcomes = h.decide("provisioning")
    assert [o.decision for o in outcomes] == [WakeUp(900.0, by="on-demand")]
