"""Step series: allocated / requested processors, leased VMs, capacity, utilization over time."""

from __future__ import annotations

import numpy as np
import pytest
from metrics_helpers import LogBuilder, cluster_env, env_with_cloud

from isthmus.metrics import StepSeries, build_tables, compute_run_metrics
from isthmus.metrics.timeseries import charged_spend
from isthmus.model import Site, SiteKind


def test_allocated_and_requested_by_hand() -> None:
    b = LogBuilder()
    b.submit(0, 1, 2).start(0, 1, 0).end(100, 1, 0)
    b.submit(10, 2, 4).start(100, 2, 1).end(300, 2, 1)
    ts = compute_run_metrics(b.build(), b.jobs, cluster_env(4, 4)).timeseries
    assert ts.allocated.times.tolist() == [0, 100, 300]
    assert ts.allocated.values.tolist() == [2, 4, 0]
    assert ts.requested.times.tolist() == [0, 10, 100, 300]
    assert ts.requested.values.tolist() == [2, 6, 4, 0]
    assert ts.allocated_by_site["c0"].values.tolist() == [2, 0]
    assert ts.allocated_by_site["c1"].times.tolist() == [100, 300]
    assert ts.capacity.times.tolist() == [0] and ts.capacity.values.tolist() == [8]
    assert (ts.start, ts.end) == (0, 300)


def test_unfinished_and_rejected_jobs_in_requested() -> None:
    b = LogBuilder()
    b.submit(0, 1, 3).start(5, 1, 0)  # running until the horizon
    b.submit(1, 2, 8).reject(1, 2, "too large")
    b.submit(2, 3, 1).start(6, 3, 0).kill(8, 3, 0).start(9, 3, 0).end(10, 3, 0)
    ts = compute_run_metrics(b.build(), b.jobs, cluster_env(4), horizon=20).timeseries
    assert ts.requested.value_at(np.array([0.5, 1.5, 3, 11, 20])).tolist() == [3, 3, 4, 3, 0]
    assert ts.allocated.value_at(np.array([5, 6, 8, 9, 10, 19, 20])).tolist() == [3, 4, 3, 4, 3, 3, 0]
    # one site: its series is the whole system's
    (only,) = ts.allocated_by_site.values()
    assert only.value_at(np.array([5, 6, 8, 9, 10, 19, 20])).tolist() == [3, 4, 3, 4, 3, 3, 0]


def test_leased_vms_and_cloud_capacity() -> None:
    b = LogBuilder()
    b.lease(0, 1, vm=0, boot=60).lease(10, 1, vm=1).release(100, 1, vm=0, shutdown=20)
    b.submit(0, 1, 1).start(0, 1, 0).end(200, 1, 0)
    ts = compute_run_metrics(b.build(), b.jobs, env_with_cloud(cluster_nodes=4)).timeseries
    vms = ts.leased_vms_by_site["ec2"]
    assert vms.times.tolist() == [0, 10, 100, 200]
    assert vms.values.tolist() == [1, 2, 1, 0]
    assert ts.capacity.value_at(np.array([0, 10, 100, 150])).tolist() == [5, 6, 5, 5]
    assert set(ts.leased_vms_by_site) == {"ec2"}


def test_step_series_integral_and_bin_means() -> None:
    s = StepSeries(np.array([0.0, 10.0, 20.0]), np.array([2.0, 4.0, 0.0]))
    assert s.value_at(np.array([-1.0, 0.0, 9.9, 10.0, 25.0])).tolist() == [0, 2, 2, 4, 0]
    assert s.integral_to(np.array([-5.0, 5.0, 15.0, 30.0])).tolist() == [0, 10, 40, 60]
    assert s.bin_means(np.array([0.0, 10.0, 20.0, 30.0])).tolist() == [2, 4, 0]
    assert s.bin_means(np.array([5.0, 15.0])).tolist() == [3]
    d = StepSeries(np.arange(10.0), np.arange(10.0) % 2).downsample(5, end=10.0)
    assert len(d) == 5 and d.values.tolist() == pytest.approx([0.5] * 5)
    assert StepSeries.empty().integral_to(np.array([1.0])).tolist() == [0]
    merged = StepSeries.from_changes(np.array([5.0, 0.0, 5.0, 7.0]), np.array([1.0, 2.0, -1.0, -2.0]))
    assert merged.times.tolist() == [0, 7] and merged.values.tolist() == [2, 0]


def test_utilization_over_time() -> None:
    b = LogBuilder()
    b.submit(0, 1, 4).start(0, 1, 0).end(50, 1, 0)
    b.submit(0, 2, 2).start(50, 2, 0).end(100, 2, 0)
    ts = compute_run_metrics(b.build(), b.jobs, cluster_env(4)).timeseries
    centres, util = ts.utilization(bins=4)
    assert centres.tolist() == [12.5, 37.5, 62.5, 87.5]
    assert util.tolist() == [1.0, 1.0, 0.5, 0.5]


def test_charged_spend_by_hand_and_at_the_horizon() -> None:
    # increments of 100 s at 0.5 $ each; VM 0 held 10..250 (3 increments begun: at 10, 110, 210),
    # VM 1 from 200 to the horizon 300 (1 increment begun at 200, none exactly at its start)
    cloud = Site("ec2", kind=SiteKind.CLOUD, max_vms=4, price_per_hour=18.0, billing_increment=100.0)
    env = env_with_cloud(cloud=cloud)
    b = LogBuilder()
    b.lease(10, 1, vm=0).lease(200, 1, vm=1).release(250, 1, vm=0)
    b.submit(0, 1, 1).start(0, 1, 0).end(300, 1, 0)
    log = b.build()
    tables = build_tables(log, b.jobs.keys(), 2, 300)
    at = np.array([0.0, 10.0, 10.5, 110.0, 110.5, 200.0, 210.5, 250.0, 300.0])
    spend = charged_spend(tables, env, at)
    assert spend.tolist() == pytest.approx([0, 0, 0.5, 0.5, 1.0, 1.0, 2.0, 2.0, 2.0])
    summary = compute_run_metrics(log, b.jobs, env, horizon=300).summary
    assert spend[-1] == pytest.approx(summary["cost_charged"])
