"""The dissertation's provisioning policies stop reading the queue once the rest cannot change
their decision: `queue_demand` once no site has a free processor and no cloud may grow (every
later job is unplaced), the threshold family's total once it passes the threshold (quantities
are never negative) or when no cloud can take a lease (the total is then unused). Their
decisions are those of the whole scan, kept here as the oracle (the code before), event log
against event log on random workloads over a cluster and one or two small clouds."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from isthmus.model import Environment, Job, Site, SiteKind
from isthmus.policies.api import CloudInfo, View
from isthmus.policies.provisioning import common, od_2q, od_g, od_s, threshold
from isthmus.policies.provisioning.common import Demand, demand_free
from isthmus.sim.runner import SimulationResult, simulate

POLICIES = ["od-s", "od-g", "od-wait", "od-exectime", "od-execavg", "od-execkn"]


def scanned_queue_demand(view: View, clouds: dict[int, CloudInfo]) -> Demand:
    """`queue_demand` as it was: every queued job placed on paper."""
    if view.vm_matching:
        return common._typed_demand(view, clouds)
    demand = Demand(lease=dict.fromkeys(clouds, 0), claimed_vms=dict.fromkeys(clouds, 0))
    ready_free = demand_free(view)
    free = list(ready_free)
    for i, c in clouds.items():
        deficit = max(0, c.site.min_vms - c.leased)
        demand.lease[i] = deficit
        free[i] += (c.booting + deficit) * c.site.cores_per_node
    claimed = [0] * len(free)
    for stage in range(view.stages):
        order = view.stage_sites(stage)
        for e in view.queue(stage):
            size = e.job.size
            placed = False
            for i in order:
                if free[i] >= size:
                    free[i] -= size
                    claimed[i] += size
                    placed = True
                    break
            if placed:
                continue
            for i in order:
                cl = clouds.get(i)
                if cl is None:
                    continue
                cores = cl.site.cores_per_node
                vms = math.ceil((size - free[i]) / cores)
                if cl.leased + demand.lease[i] + vms <= cl.site.max_vms:
                    demand.lease[i] += vms
                    claimed[i] += free[i]
                    free[i] += vms * cores - size
                    placed = True
                    break
            if not placed:
                demand.unplaced += 1
    for i, c in clouds.items():
        demand.claimed_vms[i] = math.ceil(min(claimed[i], ready_free[i]) / c.site.cores_per_node)
    return demand


def scanned_total(self: threshold.ThresholdProvisioning, view: View, limit: float) -> float:
    """The threshold family's total as it was: every queued job's quantity."""
    return sum((self.quantity(view, e) for stage in range(view.stages) for e in view.queue(stage)), 0.0)


@st.composite
def cases(draw: st.DrawFn) -> tuple[Environment, list[Job]]:
    """A cluster of 1-8 processors and one or two clouds of 1-4 VMs (1-2 cores, boots of 1-300 s),
    and 5-50 jobs arriving in bursts: queues that outgrow what the clouds may lease."""
    sites = [Site("c", nodes=draw(st.integers(1, 8)))]
    for k in range(draw(st.integers(1, 2))):
        sites.append(
            Site(
                f"cloud{k}",
                kind=SiteKind.CLOUD,
                max_vms=draw(st.integers(1, 4)),
                cores_per_node=draw(st.integers(1, 2)),
                # a boot time of 0 with an idle release time of 0 lets the threshold family lease
                # and release VMs forever without time passing (docs/clouds.md): not drawn here
                boot_time=float(draw(st.sampled_from([1, 30, 300]))),
                shutdown_time=0.0,
                idle_release_time=float(draw(st.sampled_from([0, 60]))),
            )
        )
    t, jobs = 0.0, []
    for jid in range(1, draw(st.integers(5, 50)) + 1):
        t += draw(st.sampled_from([0, 0, 1, 10, 100]))
        runtime = float(draw(st.sampled_from([5, 50, 500, 3000])))
        jobs.append(Job(jid, t, draw(st.integers(1, 4)), runtime, requested_runtime=runtime, user=str(jid % 2)))
    interval = draw(st.sampled_from([None, 20.0]))
    return Environment("queue-cost", tuple(sites), round_interval=interval), jobs


def run(env: Environment, jobs: list[Job], policy: str, scanned: bool) -> SimulationResult:
    with pytest.MonkeyPatch.context() as mp:
        if scanned:
            for module in (od_s, od_g, od_2q, threshold):
                mp.setattr(module, "queue_demand", scanned_queue_demand)
            mp.setattr(threshold.ThresholdProvisioning, "_total", scanned_total)
        return simulate(env, jobs, "fcfs", policy)


@settings(max_examples=120, deadline=None)
@given(cases(), st.sampled_from(POLICIES))
def test_provisioning_decides_as_a_scan_of_the_whole_queue(case: tuple[Environment, list[Job]], policy: str) -> None:
    env, jobs = case
    a = run(env, jobs, policy, scanned=True).log.columns()
    b = run(env, jobs, policy, scanned=False).log.columns()
    for name in a:
        assert np.array_equal(a[name], b[name]), (policy, name)


def test_the_demand_of_a_queue_no_site_can_take_more_of_counts_every_job() -> None:
    # one processor on the cluster, a cloud of at most one 1-core VM: the first two jobs take
    # them on paper, the other 38 are unplaced without being looked at
    from isthmus.sim.harness import Harness

    env = Environment(
        "full",
        (Site("c", nodes=1), Site("cloud", kind=SiteKind.CLOUD, max_vms=1, boot_time=60.0)),
        round_interval=None,
    )
    h = Harness(env, "fcfs", "od-s")
    for jid in range(1, 41):
        h.engine.submit(Job(jid, 0.0, 1, 100.0, requested_runtime=100.0))
    clouds, _ = common.usable_clouds(h.view, "od-s")
    demand, scanned = common.queue_demand(h.view, clouds), scanned_queue_demand(h.view, clouds)
    assert (demand.lease, demand.claimed_vms, demand.unplaced) == (scanned.lease, scanned.claimed_vms, scanned.unplaced)
    assert (demand.lease, demand.unplaced) == ({1: 1}, 38)
