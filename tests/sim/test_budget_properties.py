"""Budget caps hold whatever the scenario: over random prices, billing increments, boot times,
caps (total, per day; on one cloud or all) and workloads, no cap is ever charged more than its
limit in any period, and a job that a cluster can run never waits forever because of a cap.

ISTHMUS_BUDGET_EXAMPLES sets the number of scenarios (default 400 in the suite)."""

from __future__ import annotations

import dataclasses
import math
import os
from collections import defaultdict

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from invariants import workloads
from isthmus.engine.budgets import period_key
from isthmus.model import Environment, Site, SiteKind
from isthmus.model.budget import BudgetCap
from isthmus.model.events import EventKind
from isthmus.sim.runner import simulate

EXAMPLES = int(os.environ.get("ISTHMUS_BUDGET_EXAMPLES", "400"))
DAY = 86400.0


@st.composite
def scenarios(draw):  # type: ignore[no-untyped-def]
    next_day = draw(st.booleans())  # some jobs the next day: daily caps start again
    # a VM kept a whole day with per-second billing is 86,400 boundaries: minutes over a day
    increments = [60.0, 3600.0] if next_day else [1.0, 60.0, 3600.0]
    sites = [Site("c0", nodes=draw(st.integers(1, 6)))]
    for name in ("cloud-a", "cloud-b")[: draw(st.integers(1, 2))]:
        max_vms = draw(st.integers(1, 6))
        sites.append(
            Site(
                name,
                kind=SiteKind.CLOUD,
                max_vms=max_vms,
                boot_time=float(draw(st.integers(0, 120))),
                price_per_hour=draw(st.sampled_from([0.065, 0.5, 3.6, 36.0])),
                billing_increment=draw(st.sampled_from(increments)),
                idle_release_time=float(draw(st.integers(0, 300))),
            )
        )
    clouds = [s.name for s in sites if s.is_cloud]
    caps = []
    for i in range(draw(st.integers(1, 3))):
        covered = draw(st.sampled_from([(), *[(c,) for c in clouds]]))
        caps.append(
            BudgetCap(
                f"cap{i}",
                float(draw(st.sampled_from([0.0, 0.05, 0.1, 0.5, 1.0, 5.0, 50.0]))),
                covered,
                draw(st.sampled_from([None, "day"])),
            )
        )
    env = Environment("budgets", tuple(sites), round_interval=draw(st.sampled_from([None, 30.0])), budgets=tuple(caps))
    jobs = draw(workloads())
    if next_day:
        jobs = [dataclasses.replace(j, submit=j.submit + DAY) if j.id % 2 else j for j in jobs]
        jobs.sort(key=lambda j: (j.submit, j.id))
    return env, jobs


def _charges(env: Environment, log, horizon: float) -> dict[tuple[str, str], float]:  # type: ignore[no-untyped-def]
    """What each cap was charged per period, from the log alone: every started increment of
    every lease, booked in the period it starts in."""
    index = {s.name: i for i, s in enumerate(env.sites)}
    clouds = {i for i, s in enumerate(env.sites) if s.is_cloud}
    leased: dict[tuple[int, int], float] = {}
    spans = []
    for e in log:
        if e.kind is EventKind.VM_LEASE:
            leased[(e.site, e.vm)] = e.time
        elif e.kind is EventKind.VM_RELEASE:
            spans.append((e.site, leased.pop((e.site, e.vm)), e.time))
    spans += [(s, t, horizon) for (s, _), t in leased.items()]
    out: dict[tuple[str, str], float] = defaultdict(float)
    for site, start, end in spans:
        s = env.sites[site]
        if not s.is_paid:
            continue
        n = max(1, math.ceil((end - start) / s.billing_increment - 1e-9))
        for k in range(n):
            t = start + k * s.billing_increment
            for cap in env.budgets:
                if site in ({index[c] for c in cap.sites} if cap.sites else clouds):
                    out[(cap.name, period_key(cap.period, t))] += s.price_per_increment
    return out


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scenarios(), st.sampled_from(["ff", "fcfs", "easy"]), st.sampled_from(["on-demand", "startup"]))
def test_no_cap_is_ever_passed_and_cluster_jobs_always_run(scenario, allocation: str, provisioning: str) -> None:  # type: ignore[no-untyped-def]
    env, jobs = scenario
    result = simulate(env, jobs, allocation, provisioning)
    limits = {c.name: c.limit for c in env.budgets}
    for (cap, period), charged in _charges(env, result.log, result.end_time).items():
        assert charged <= limits[cap] + 1e-9, (cap, period, charged, limits[cap])
    if allocation == "fcfs":
        return  # strict FCFS holds everything behind a head job no cap can pay: by definition
    cluster = env.sites[0].nodes
    for job_id, why in result.unfinished.items():
        size = next(j.size for j in jobs if j.id == job_id)
        # only a job too large for the cluster may wait forever: for a cloud the caps cannot pay
        assert size > cluster, (job_id, size, why)
