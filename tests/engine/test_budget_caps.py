"""Budget caps of the environment ([[budgets]]): per site set and per period, hand-computed.

The cloud charges $1 per started second (price 3600 per hour, billing per second), so a VM
costs $1 when leased and $1 at each one-second boundary it is still leased."""

from __future__ import annotations

import dataclasses

import pytest

from helpers import cloud_env, events, job
from isthmus.model.budget import BudgetCap
from isthmus.model.events import EventKind, KillCause
from isthmus.model.status import StatusCode
from isthmus.sim.runner import simulate

DAY = 86400.0


def _env(*caps: BudgetCap):  # type: ignore[no-untyped-def]
    env = cloud_env(cluster=0, max_vms=1, price=3600.0, increment=1.0, idle=0.0)
    return dataclasses.replace(env, budgets=caps)


def test_a_cap_releases_the_vm_at_the_boundary_it_cannot_pay_and_refuses_new_leases() -> None:
    env = _env(BudgetCap("cloud-total", 5.0, ("cloud",)))
    result = simulate(env, [job(1, 0, 1, 10)], "ff", "on-demand")
    # paid at 0 (lease), 1, 2, 3, 4: $5; the boundary at 5 cannot be paid: released, job requeued
    assert [(e.time, e.value) for e in result.log if e.kind is EventKind.KILL] == [(5.0, KillCause.BUDGET)]
    assert [e[0] for e in events(result, EventKind.VM_RELEASE)] == [5.0]
    assert 1 in result.unfinished  # no lease can be paid any more
    notes = [
        result.log.notes[i]
        for i, e in enumerate(result.log)
        if e.kind is EventKind.DECISION and e.value == StatusCode.OVER_BUDGET
    ]
    assert notes and "exceeds budget cloud-total: $5.0000 of $5.0000 committed" in notes[0], notes


def test_a_daily_cap_starts_again_each_day_a_total_cap_does_not() -> None:
    jobs = [job(1, 0, 1, 2), job(2, DAY + 10, 1, 2)]  # each costs $2 (lease + one boundary)
    daily = simulate(_env(BudgetCap("per-day", 3.0, (), "day")), jobs, "ff", "on-demand")
    assert not daily.unfinished  # $2 on day 1, $2 on day 2
    total = simulate(_env(BudgetCap("total", 3.0)), jobs, "ff", "on-demand")
    assert 2 in total.unfinished  # $2 then only $1 left: its VM is released after one second
    assert [(e.time, e.value) for e in total.log if e.kind is EventKind.KILL] == [(DAY + 11, KillCause.BUDGET)]


def test_a_cap_on_another_site_does_not_bound_this_one() -> None:
    env = cloud_env(cluster=0, max_vms=1, price=3600.0, increment=1.0, idle=0.0)
    other = dataclasses.replace(env.sites[1], name="other")
    env = dataclasses.replace(env, sites=(*env.sites, other), budgets=(BudgetCap("other-only", 0.0, ("other",)),))
    result = simulate(env, [job(1, 0, 1, 3)], "ff", "on-demand")
    assert not result.unfinished


@pytest.mark.parametrize("limit", [0.0, 1.0])
def test_nothing_is_leased_that_the_first_increment_cannot_pay(limit: float) -> None:
    result = simulate(_env(BudgetCap("tiny", limit)), [job(1, 0, 1, 3)], "ff", "on-demand")
    leases = events(result, EventKind.VM_LEASE)
    assert len(leases) == (0 if limit < 1 else 1)
