"""Property tests on random logs of non-overlapping runs."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from metrics_helpers import LogBuilder

from isthmus.metrics import compute_run_metrics
from isthmus.model.environment import Environment
from isthmus.model.site import Site, SiteKind


@dataclass
class Scenario:
    builder: LogBuilder
    env: Environment
    leases: list[tuple[float, float | None]]  # (lease, release or None) on the cloud
    kills: int
    horizon: float | None


@st.composite
def scenarios(draw: st.DrawFn) -> Scenario:
    processors = draw(st.integers(1, 8))
    cores = draw(st.integers(1, 4))
    price = draw(st.sampled_from([0.0, 0.065, 0.5]))
    increment = draw(st.sampled_from([1.0, 60.0, 3600.0]))
    cloud = Site(
        "cloud",
        kind=SiteKind.CLOUD,
        max_vms=100,
        cores_per_node=cores,
        price_per_hour=price,
        billing_increment=increment,
    )
    env = Environment("prop", (Site("cluster", nodes=processors), cloud))
    b = LogBuilder()
    t_cluster = 0.0
    t_cloud = 0.0
    leases: list[tuple[float, float | None]] = []
    kills = 0
    duration = st.floats(1.0, 10_000.0, allow_nan=False)
    gap = st.floats(0.0, 5_000.0, allow_nan=False)
    for job in range(draw(st.integers(0, 12))):
        on_cloud = draw(st.booleans())
        size = draw(st.integers(1, cores if on_cloud else processors))
        if on_cloud:  # one VM per job, leased before the job starts and released after it ends
            t_lease = t_cloud + draw(gap)
            submit = t_lease - draw(gap)
            b.submit(submit, job, size)
            b.lease(t_lease, 1, vm=job)
            t = t_lease + draw(gap)
            site = 1
        else:
            submit = t_cluster - draw(gap)
            b.submit(submit, job, size)
            t = t_cluster + draw(gap)
            site = 0
        if draw(st.booleans()):  # a killed run first
            d = draw(duration)
            b.start(t, job, site).kill(t + d, job, site)
            kills += 1
            t += d + draw(gap)
        d = draw(duration)
        finished = draw(st.integers(0, 5)) > 0
        b.start(t, job, site)
        if finished:
            b.end(t + d, job, site)
        t += d
        if on_cloud:
            release = t + draw(gap) if finished and draw(st.booleans()) else None
            if release is not None:
                b.release(release, 1, vm=job)
            leases.append((t_lease, release))
            t_cloud = t if release is None else release
            if not finished:
                t_cloud = math.inf  # the VM stays busy to the horizon; no more cloud jobs
                break
        else:
            t_cluster = t
            if not finished:
                break
    horizon = None
    if draw(st.booleans()) and b.rows:
        horizon = max(r[0] for r in b.rows) + draw(gap)
    return Scenario(b, env, leases, kills, horizon)


@settings(max_examples=150, deadline=None)
@given(scenarios())
def test_costs_follow_billing_rule_and_utilization_is_a_fraction(sc: Scenario) -> None:
    log = sc.builder.build()
    m = compute_run_metrics(log, sc.builder.jobs, sc.env, horizon=sc.horizon)
    horizon = m.summary["horizon"]
    cloud = sc.env.sites[1]
    seconds = [(horizon if rel is None else rel) - lease for lease, rel in sc.leases]
    assert m.summary["cost_charged"] == pytest.approx(sum(cloud.charged_cost(s) for s in seconds))
    assert m.summary["cost_actual"] == pytest.approx(sum(cloud.actual_cost(s) for s in seconds))
    assert m.summary["vm_leases"] == len(sc.leases)
    assert m.summary["restarts"] == sc.kills
    eps = 1e-9
    for u in [m.summary["utilization"], *(s["utilization"] for s in m.summary["sites"].values())]:
        assert u is None or -eps <= u <= 1 + eps
    _, util = m.timeseries.utilization(bins=50)
    util = util[~np.isnan(util)]
    assert ((util >= -eps) & (util <= 1 + eps)).all()
    assert (m.timeseries.allocated.values <= m.timeseries.requested.value_at(m.timeseries.allocated.times)).all()
