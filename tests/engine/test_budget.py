"""The budget cap: charged cost of cloud leases never exceeds it."""

from __future__ import annotations

import pytest

from helpers import cloud_env, events, job
from isthmus.metrics.run import compute_run_metrics
from isthmus.model.events import EventKind, KillCause
from isthmus.sim.runner import simulate

PRICE = 0.065


def cost(result, env):
    return compute_run_metrics(result.log, result.jobs, env, result.end_time).summary["cost_charged"]


def test_lease_the_budget_cannot_pay_is_refused():
    env = cloud_env(cluster=0, max_vms=4, price=PRICE)
    result = simulate(env, [job(1, 0, 2, 10)], "ff", "on-demand", budget=0.1)
    assert not events(result, EventKind.VM_LEASE)  # two VM-hours would cost 0.13 > 0.1
    assert 1 in result.unfinished
    assert cost(result, env) == 0


def test_vm_released_at_the_boundary_when_the_next_increment_is_unaffordable():
    env = cloud_env(cluster=0, max_vms=1, price=PRICE)
    result = simulate(env, [job(1, 0, 1, 7200)], "ff", "on-demand", budget=PRICE)
    kills = [(e.time, e.value) for e in result.log if e.kind is EventKind.KILL]
    assert kills == [(3600.0, KillCause.BUDGET)]
    assert (3600.0, "VM_RELEASE", -1, 1) in events(result, EventKind.VM_RELEASE)
    assert 1 in result.unfinished  # requeued, and no VM can be paid any more
    assert cost(result, env) == pytest.approx(PRICE)


def test_budget_that_suffices_changes_nothing():
    env = cloud_env(cluster=0, max_vms=2, price=PRICE)
    jobs = [job(1, 0, 1, 7200), job(2, 100, 1, 50)]
    free = simulate(env, jobs, "ff", "on-demand")
    capped = simulate(env, jobs, "ff", "on-demand", budget=10.0)
    assert free.log.rows() == capped.log.rows()


def test_negative_budget_is_an_error():
    with pytest.raises(ValueError, match="budget"):
        simulate(cloud_env(cluster=1, max_vms=1), [job(1, 0, 1, 1)], "ff", "on-demand", budget=-1)
