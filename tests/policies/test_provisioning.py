"""On-Demand and Startup provisioning on hand-computed cases (KOALA-C §III-B)."""

from __future__ import annotations

from helpers import cloud_env, events, job, start_of
from isthmus.model.events import EventKind
from isthmus.sim.runner import simulate

VM = (EventKind.VM_LEASE, EventKind.VM_READY, EventKind.VM_RELEASE, EventKind.VM_GONE)


def vm_events(result):
    return [(t, k) for t, k, _, _ in events(result, *VM)]


def test_on_demand_leases_for_jobs_that_fit_nowhere_and_waits_for_boot():
    env = cloud_env(cluster=1, max_vms=4, boot=60)
    result = simulate(env, [job(1, 0, 1, 100), job(2, 0, 2, 10)], "ff", "on-demand")
    assert start_of(result) == {1: (0, 0), 2: (60, 1)}
    assert vm_events(result)[:4] == [(0, "VM_LEASE"), (0, "VM_LEASE"), (60, "VM_READY"), (60, "VM_READY")]


def test_on_demand_free_cloud_releases_after_idle_time():
    env = cloud_env(cluster=0, max_vms=2, idle=300)
    result = simulate(env, [job(1, 0, 1, 10)], "ff", "on-demand")
    assert vm_events(result) == [(0, "VM_LEASE"), (0, "VM_READY"), (310, "VM_RELEASE"), (310, "VM_GONE")]


def test_on_demand_paid_cloud_releases_close_to_the_billing_boundary():
    env = cloud_env(cluster=0, max_vms=2, price=0.065)
    result = simulate(env, [job(1, 0, 1, 10)], "ff", "on-demand")
    # Released in the last 120 s of the first paid hour, never starting a second hour.
    assert vm_events(result) == [(0, "VM_LEASE"), (0, "VM_READY"), (3480, "VM_RELEASE"), (3480, "VM_GONE")]


def test_on_demand_reuses_a_paid_vm_within_its_hour():
    env = cloud_env(cluster=0, max_vms=2, price=0.065)
    result = simulate(env, [job(1, 0, 1, 10), job(2, 1000, 1, 10)], "ff", "on-demand")
    assert [k for _, k in vm_events(result)].count("VM_LEASE") == 1
    assert start_of(result)[2] == (1000, 1)


def test_on_demand_keeps_the_minimum():
    env = cloud_env(cluster=0, max_vms=4, min_vms=2, idle=10)
    result = simulate(env, [job(1, 0, 3, 10)], "ff", "on-demand")
    kinds = [k for _, k in vm_events(result)]
    assert kinds.count("VM_LEASE") == 3
    assert kinds.count("VM_RELEASE") == 1  # back down to the minimum of 2


def test_startup_leases_everything_and_never_releases():
    env = cloud_env(cluster=0, max_vms=3, boot=5)
    result = simulate(env, [job(1, 0, 1, 10)], "ff", "startup")
    kinds = [k for _, k in vm_events(result)]
    assert kinds == ["VM_LEASE"] * 3 + ["VM_READY"] * 3
    assert start_of(result) == {1: (5, 1)}


def test_job_larger_than_cloud_maximum_is_rejected():
    env = cloud_env(cluster=1, max_vms=2)
    result = simulate(env, [job(1, 0, 3, 10)], "ff", "on-demand")
    assert "needs 3 processors" in result.log.reasons[1]


def test_on_demand_waits_for_the_cloud_window_and_keeps_the_minimum_from_then():
    from isthmus.model import Environment, Site, SiteKind

    cloud = Site("cloud", kind=SiteKind.CLOUD, max_vms=2, min_vms=2, available_from=3000.0)
    env = Environment("window", (Site("c", nodes=1), cloud), round_interval=None)
    result = simulate(env, [job(1, 0, 1, 10), job(2, 0, 1, 10)], "ff", "on-demand")
    leases = [t for t, k in vm_events(result) if k == "VM_LEASE"]
    assert leases == [3000.0, 3000.0]  # exactly when the window opens, none refused before
    assert result.rejected_decisions == 0
    assert start_of(result) == {1: (0, 0), 2: (10, 0)}
