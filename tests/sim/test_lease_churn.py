"""A provisioning policy that leases and releases VMs without time passing (clouds whose VMs boot
and are released in no time) stops the simulation with an error naming the clouds, instead of
looping forever at one instant (found by tests/policies/test_provisioning_queue_cost.py)."""

from __future__ import annotations

import pytest

from isthmus.model import Environment, Job, Site, SiteKind
from isthmus.sim.runner import simulate


def _cloud(name: str, boot: float) -> Site:
    return Site(name, kind=SiteKind.CLOUD, max_vms=1, boot_time=boot, shutdown_time=0.0, idle_release_time=0.0)


def _jobs() -> list[Job]:
    # three 1-processor jobs keep the 3-processor cluster busy; then 2-processor jobs wait for it
    # (a 1-core VM cannot take them) while their waiting time passes OD-Wait's threshold
    spec = [(i, 0.0, 1) for i in range(1, 8)] + [(i, 0.0, 2) for i in range(8, 11)]
    spec += [(i, 10.0, 1) for i in range(11, 24)]
    return [Job(i, t, size, 5.0, requested_runtime=5.0, user=str(i % 2)) for i, t, size in spec]


def test_leasing_and_releasing_without_time_passing_is_an_error() -> None:
    env = Environment("churn", (Site("c", nodes=3), _cloud("cloud0", 0.0), _cloud("cloud1", 0.0)), round_interval=None)
    with pytest.raises(ValueError, match=r"od-wait has leased \d+ VMs without the clock moving on") as err:
        simulate(env, _jobs(), "fcfs", "od-wait")
    assert "boot and idle release times of 0 on cloud0, cloud1" in str(err.value)


def test_with_a_boot_time_the_same_workload_finishes() -> None:
    env = Environment("churn", (Site("c", nodes=3), _cloud("cloud0", 1.0), _cloud("cloud1", 1.0)), round_interval=None)
    result = simulate(env, _jobs(), "fcfs", "od-wait")
    assert not result.unfinished
