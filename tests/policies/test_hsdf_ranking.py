"""HSDF without blocking ranks only the jobs that fit now: the decisions equal those of
ranking the whole queue with the wait-time prediction (the argument in HSDF's docstring)."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import ClassVar

import pytest
from hypothesis import given, settings

from invariants import capacity_never_exceeded, environments, workloads
from isthmus.decisions import Decision
from isthmus.model import PolicyChoice
from isthmus.model.events import EventKind
from isthmus.policies import registry
from isthmus.policies.allocation.common import SingleSetPolicy, any_free, list_schedule
from isthmus.policies.allocation.hsdf import estimated_slowdown
from isthmus.policies.api import View
from isthmus.policies.prediction.wait import AvailabilityProfile
from isthmus.sim.runner import simulate

REFERENCE = "test-hsdf-whole-queue"


class WholeQueueHsdf(SingleSetPolicy):
    """Reference: every queued job ranked by estimated slowdown with its predicted wait, then
    placed first fit in that order, skipping those that fit nowhere."""

    name: ClassVar[str] = "hsdf"  # so that event logs compare equal
    uses_prediction: ClassVar[bool] = True

    def decide(self, view: View) -> Iterable[Decision]:
        """This round's starts."""
        if not view.queued or not any_free(view):
            return []
        profile = AvailabilityProfile(view, view.stage_sites(0))
        jobs = sorted(
            view.queue(0),
            key=lambda e: -estimated_slowdown(profile.earliest_start(e.job.size) - e.queued_at, e.predicted),
        )
        return list_schedule(view, jobs, self.name)


@pytest.fixture(autouse=True, scope="module")
def _reference_registered() -> Iterator[None]:
    """The reference is registered only while this module runs, so that catalog tests
    elsewhere in the same worker never see it."""
    registry.register("allocation", REFERENCE, f"{__name__}:WholeQueueHsdf")
    yield
    registry.unregister("allocation", REFERENCE)


@settings(max_examples=100, deadline=None)
@given(workloads(), environments())
def test_hsdf_decisions_equal_whole_queue_ranking(jobs, env):
    ours = simulate(env, jobs, PolicyChoice("hsdf", {"blocking": False}), "on-demand")
    ref = simulate(env, jobs, REFERENCE, "on-demand")
    assert list(ours.log) == list(ref.log)


@settings(max_examples=100, deadline=None)
@given(workloads(), environments())
def test_blocking_hsdf_keeps_capacity_and_finishes_every_job(jobs, env):
    result = simulate(env, jobs, PolicyChoice("hsdf", {"blocking": True}), "on-demand", check_purity=True)
    capacity_never_exceeded(env, list(result.log))
    ended = {e.job for e in result.log if e.kind is EventKind.END}
    assert ended | set(result.unfinished) | set(result.log.reasons) >= {j.id for j in jobs}


def test_blocking_hsdf_does_not_stall_on_demand() -> None:
    """Found by the invariant property test: blocking HSDF ranks first a 6-processor job that fits
    nowhere, while On-Demand (planning in queue order) has grown the cloud for the 5-processor
    job ahead of it. With nothing running or booting, waiting cannot help: the 6-processor job
    is passed over, the 5-processor one starts, and On-Demand then grows the cloud for it."""
    from isthmus.model.environment import Environment, PolicyChoice
    from isthmus.model.job import Job
    from isthmus.model.site import Site, SiteKind, SiteSet
    from isthmus.sim.runner import simulate

    sites = (
        Site(name="c0", kind=SiteKind.CLUSTER, nodes=3, cores_per_node=1),
        Site(name="cloud", kind=SiteKind.CLOUD, nodes=0, cores_per_node=1, max_vms=6, boot_time=0.0,
             shutdown_time=0.0, price_per_hour=0, billing_increment=1.0, idle_release_time=0.0),
    )  # fmt: skip
    sets = (SiteSet("all", ("c0", "cloud"), runtime_limit=5.0), SiteSet("long", ("cloud",), runtime_limit=None))
    env = Environment(name="stall", sites=sites, sets=sets, allocation=PolicyChoice("hsdf"),
                      provisioning=PolicyChoice("on-demand"), round_interval=None)  # fmt: skip
    sizes = {2: 4, 3: 5, 6: 2, 11: 6}  # every other job: 1 processor
    rows = [(1, 0, 1, 0)] + [(i, 1, sizes.get(i, 1), 1 if i in (2, 6) else 0) for i in range(2, 15)]
    jobs = [Job(id=i, submit=float(s), size=n, runtime=float(r), user="1" if i == 3 else "0") for i, s, n, r in rows]
    result = simulate(env, jobs, PolicyChoice("hsdf"), "on-demand")
    assert not result.unfinished, result.unfinished
