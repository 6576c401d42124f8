"""Hypothesis strategies for workloads and environments, and invariant checks over event logs,
shared by the property tests of tests/sim and tests/policies."""

from __future__ import annotations

from collections import defaultdict

from hypothesis import strategies as st

from isthmus.model import Environment, Job, Site, SiteKind, SiteSet
from isthmus.model.events import EventKind

ALLOCATION = ["fcfs", "easy", "ff", "rr", "sjf", "sjf-ideal", "hsdf", "tags-sets", "tags-chain", "wrr"]


@st.composite
def workloads(draw):
    n = draw(st.integers(1, 30))
    t = 0
    jobs = []
    for i in range(n):
        t += draw(st.integers(0, 40))
        runtime = draw(st.integers(0, 200))
        req = draw(st.one_of(st.none(), st.integers(1, 300)))
        jobs.append(
            Job(
                i + 1,
                float(t),
                draw(st.integers(1, 6)),
                float(runtime),
                None if req is None else float(max(req, runtime)),
                user=str(draw(st.integers(0, 3))),
            )
        )
    return jobs


@st.composite
def environments(draw):
    n_clusters = draw(st.integers(1, 3))
    sites = [Site(f"c{i}", nodes=draw(st.integers(1, 6))) for i in range(n_clusters)]
    if draw(st.booleans()):
        max_vms = draw(st.integers(1, 6))
        sites.append(
            Site(
                "cloud",
                kind=SiteKind.CLOUD,
                max_vms=max_vms,
                min_vms=draw(st.integers(0, max_vms)),
                boot_time=float(draw(st.integers(0, 100))),
                price_per_hour=draw(st.sampled_from([0, 0.065])),
                billing_increment=draw(st.sampled_from([1.0, 60.0, 3600.0])),
                idle_release_time=float(draw(st.integers(0, 300))),
            )
        )
    if len(sites) % 2:
        sites.append(Site("extra", nodes=draw(st.integers(1, 6))))
    names = tuple(s.name for s in sites)
    sets = (SiteSet("all", names, float(draw(st.integers(5, 60)))), SiteSet("long", names[1:], None))
    interval = draw(st.sampled_from([None, 30.0]))
    return Environment("random", tuple(sites), sets=sets, round_interval=interval)


def capacity_never_exceeded(env, log):
    """No START puts a site over its processors (a cloud: over its ready VMs' cores), and no VM
    running a job is released."""
    busy = defaultdict(int)
    size = {}  # processors of each running job, from its START
    ready = defaultdict(int)
    up = set()  # (site, vm) of the VMs that became ready and were not released
    for e in log:
        site = env.sites[e.site] if e.site >= 0 else None
        if e.kind is EventKind.VM_READY:
            up.add((e.site, e.vm))
            ready[e.site] += site.cores_per_node
        elif e.kind is EventKind.VM_RELEASE and (e.site, e.vm) in up:  # a VM still booting holds no job
            up.discard((e.site, e.vm))
            ready[e.site] -= site.cores_per_node
            assert ready[e.site] >= busy[e.site], "a VM running a job was released"
        elif e.kind is EventKind.START:
            busy[e.site] += int(e.value)
            size[e.job] = int(e.value)
            cap = ready[e.site] if site.is_cloud else site.nodes * site.cores_per_node
            assert busy[e.site] <= cap, f"site {site.name} over capacity at {e.time}"
        elif e.kind in (EventKind.END, EventKind.KILL):
            busy[e.site] -= size.pop(e.job)


def charged_by_billing_rules(env, log, horizon):
    """Σ over leases of ceil(lease time / increment) × increment price, from the log alone."""
    leased = {}
    total = 0.0
    for e in log:
        if e.kind is EventKind.VM_LEASE:
            leased[(e.site, e.vm)] = e.time
        elif e.kind is EventKind.VM_RELEASE:
            total += env.sites[e.site].charged_cost(e.time - leased.pop((e.site, e.vm)))
    return total + sum(env.sites[s].charged_cost(horizon - t) for (s, _), t in leased.items())
