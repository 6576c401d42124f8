"""Summary figures, computed by hand on tiny logs."""

from __future__ import annotations

import json

import pytest
from metrics_helpers import EC2, LogBuilder, cluster_env, env_with_cloud

from isthmus.metrics import compute_records, compute_run_metrics, percentile_cdf, short_long_breakdown
from isthmus.metrics.summary import charged_costs, write_summary
from isthmus.model.environment import Environment
from isthmus.model.site import Site, SiteKind


def test_two_jobs_summary() -> None:
    b = LogBuilder()
    b.submit(0, 1, 2).start(0, 1, 0).end(100, 1, 0)
    b.submit(10, 2, 4).start(100, 2, 0).end(300, 2, 0)
    s = compute_run_metrics(b.build(), b.jobs, cluster_env(4)).summary
    assert s["jobs_total"] == 2 and s["jobs_completed"] == 2
    assert s["jobs_unfinished"] == 0 and s["jobs_rejected"] == 0
    assert s["wait_mean"] == 45 and s["wait_median"] == 45
    assert s["slowdown_mean"] == pytest.approx((1 + 1.45) / 2)
    # AWRT = (2*100*100 + 4*200*290) / (2*100 + 4*200) = 252000 / 1000
    assert s["awrt"] == pytest.approx(252.0)
    assert s["makespan"] == 300
    # busy 2*100 + 4*200 = 1000 processor-seconds of 4*300 available
    assert s["utilization"] == pytest.approx(1000 / 1200)
    assert s["sites"]["c0"]["utilization"] == pytest.approx(1000 / 1200)
    assert s["speedup"] == pytest.approx(300 / 300)
    assert s["throughput"] == pytest.approx(2 / 300)
    assert s["delay_p50"] == 0 and s["delay_p80"] == 90
    assert s["cost_charged"] == 0 and s["cost_actual"] == 0


def test_awrt_by_hand() -> None:
    b = LogBuilder()
    b.submit(0, 1, 1).start(0, 1, 0).end(10, 1, 0)  # area 10, response 10
    b.submit(0, 2, 3).start(10, 2, 0).end(30, 2, 0)  # area 60, response 30
    b.submit(5, 3, 2).start(30, 3, 0).end(70, 3, 0)  # area 80, response 65
    s = compute_run_metrics(b.build(), b.jobs, cluster_env(4)).summary
    assert s["awrt"] == pytest.approx((10 * 10 + 60 * 30 + 80 * 65) / (10 + 60 + 80))


def test_delay_percentiles_by_hand() -> None:
    b = LogBuilder()
    for i in range(10):  # delays 0, 10, ..., 90 (wait only, no restarts)
        b.submit(0, i, 1).start(10 * i, i, 0).end(10 * i + 5, i, 0)
    s = compute_run_metrics(b.build(), b.jobs, cluster_env(16)).summary
    # Read off the CDF: the smallest delay that at least q % of the jobs do not exceed.
    assert (s["delay_p50"], s["delay_p80"], s["delay_p90"], s["delay_p95"]) == (40, 70, 80, 90)


def test_delay_includes_killed_runs() -> None:
    b = LogBuilder()
    b.submit(0, 1, 1).start(0, 1, 0).kill(600, 1, 0).start(650, 1, 0).end(950, 1, 0)
    s = compute_run_metrics(b.build(), b.jobs, cluster_env(4)).summary
    # finish - arrival - execution = 950 - 0 - 300
    assert s["delay_p50"] == 650
    assert s["restarts"] == 1
    assert s["wasted_processor_seconds"] == 600
    assert s["killed_work_cost"] == 0  # on a cluster


def test_percentile_cdf_small_cases() -> None:
    import numpy as np

    assert percentile_cdf(np.array([]), 50) is None
    assert percentile_cdf(np.array([5.0]), 95) == 5
    assert percentile_cdf(np.array([1.0, 2.0, 3.0, 4.0]), 50) == 2
    assert percentile_cdf(np.array([1.0, 2.0, 3.0, 4.0]), 51) == 3


def test_cloud_lease_of_90_minutes_is_charged_two_hours() -> None:
    b = LogBuilder()
    b.lease(0, 1, vm=0, boot=60)
    b.submit(0, 1, 1).start(60, 1, 1).end(5400, 1, 1)
    b.release(5400, 1, vm=0, shutdown=30)
    m = compute_run_metrics(b.build(), b.jobs, env_with_cloud())
    s = m.summary
    assert s["cost_charged"] == pytest.approx(0.13)
    assert s["cost_actual"] == pytest.approx(0.0975)
    assert s["sites"]["ec2"]["cost_charged"] == pytest.approx(0.13)
    assert s["sites"]["c0"]["cost_charged"] == 0
    assert s["vm_leases"] == 1 and s["vm_seconds"] == 5400
    # the run used 1 of the VM's 1 core for 5340 of the 5400 leased seconds in [0, 5400]
    assert s["sites"]["ec2"]["utilization"] == pytest.approx(5340 / 5400)


def test_lease_never_released_is_billed_to_the_horizon() -> None:
    b = LogBuilder()
    b.lease(0, 1, vm=5)
    b.submit(0, 1, 1).start(0, 1, 1).end(3000, 1, 1)
    b.submit(0, 2, 1).start(0, 2, 0).end(3500, 2, 0)
    log = b.build()
    s = compute_run_metrics(log, b.jobs, env_with_cloud()).summary  # horizon = last event = 3500
    assert s["vm_seconds"] == 3500
    assert s["cost_charged"] == pytest.approx(0.065)
    assert s["cost_actual"] == pytest.approx(3500 * 0.065 / 3600)
    s = compute_run_metrics(log, b.jobs, env_with_cloud(), horizon=7201).summary
    assert s["vm_seconds"] == 7201
    assert s["cost_charged"] == pytest.approx(3 * 0.065)


def test_per_second_billing_and_free_cloud() -> None:
    per_second = Site("ps", kind=SiteKind.CLOUD, max_vms=4, price_per_hour=3.6, billing_increment=1)
    free = Site("one", kind=SiteKind.CLOUD, max_vms=4, cores_per_node=2)
    env = Environment("t", (per_second, free))
    b = LogBuilder()
    b.lease(0, 0, vm=1).release(100.5, 0, vm=1)
    b.lease(0, 1, vm=1).release(7200, 1, vm=1)
    s = compute_run_metrics(b.build(), {}, env).summary
    assert s["sites"]["ps"]["cost_charged"] == pytest.approx(101 * 0.001)
    assert s["sites"]["ps"]["cost_actual"] == pytest.approx(100.5 * 0.001)
    assert s["sites"]["one"]["cost_charged"] == 0 and s["sites"]["one"]["cost_actual"] == 0


def test_utilization_with_cluster_and_cloud_by_hand() -> None:
    cloud = Site("cl", kind=SiteKind.CLOUD, max_vms=8, cores_per_node=2, price_per_hour=0.065)
    env = Environment("t", (Site("c0", nodes=2), cloud))
    b = LogBuilder()
    b.submit(0, 1, 2).start(0, 1, 0).end(100, 1, 0)  # cluster: 200 busy of 2*200
    b.lease(50, 1, vm=0).lease(50, 1, vm=1)
    b.submit(50, 2, 3).start(60, 2, 1).end(200, 2, 1)  # cloud: 3*140 busy
    b.release(200, 1, vm=0)  # vm 1 never released: leased to the horizon
    b.add(250, 0, job=3, value=1)  # a late submit moves the horizon to 250
    s = compute_run_metrics(b.build(), b.jobs, env).summary
    # window = [first submit 0, last end 200]
    assert s["makespan"] == 200
    assert s["sites"]["c0"]["utilization"] == pytest.approx(200 / 400)
    # available on the cloud inside the window: 2 VMs * 150 s * 2 cores
    assert s["sites"]["cl"]["available_processor_seconds"] == 600
    assert s["sites"]["cl"]["utilization"] == pytest.approx(420 / 600)
    assert s["utilization"] == pytest.approx((200 + 420) / (400 + 600))
    # billing uses full leases: vm 0 150 s, vm 1 200 s (to the horizon 250)
    assert s["vm_seconds"] == 350
    assert s["jobs_unfinished"] == 1


def test_cluster_available_window_limits_available_time() -> None:
    env = Environment("t", (Site("c0", nodes=4), Site("late", nodes=4, available_from=50, available_until=80)))
    b = LogBuilder()
    b.submit(0, 1, 4).start(0, 1, 0).end(100, 1, 0)
    b.submit(0, 2, 4).start(50, 2, 1).end(80, 2, 1)
    s = compute_run_metrics(b.build(), b.jobs, env).summary
    assert s["sites"]["late"]["available_processor_seconds"] == 4 * 30
    assert s["sites"]["late"]["utilization"] == 1.0
    assert s["utilization"] == 1.0


def test_site_completion_fractions() -> None:
    b = LogBuilder()
    for i, site in enumerate([0, 0, 0, 1]):
        b.submit(0, i, 1).start(1, i, site).end(2, i, site)
    b.submit(0, 9, 1)  # unfinished: not counted
    s = compute_run_metrics(b.build(), b.jobs, cluster_env(4, 4)).summary
    assert s["sites"]["c0"]["completed_fraction"] == 0.75
    assert s["sites"]["c1"]["completed_fraction"] == 0.25
    assert s["sites"]["c0"]["jobs_completed"] == 3


def test_killed_work_cost_on_paid_cloud() -> None:
    cloud = Site("ec2", kind=SiteKind.CLOUD, max_vms=8, cores_per_node=4, price_per_hour=0.4)
    env = Environment("t", (Site("c0", nodes=4), cloud))
    b = LogBuilder()
    b.lease(0, 1, vm=0)
    b.submit(0, 1, 2).start(0, 1, 1).kill(900, 1, 1).start(900, 1, 0).end(1000, 1, 0)
    b.release(900, 1, vm=0)
    s = compute_run_metrics(b.build(), b.jobs, env).summary
    # 2 processors * 900 s wasted; a processor-second costs 0.4 / 3600 / 4
    assert s["wasted_processor_seconds"] == 1800
    assert s["killed_work_cost"] == pytest.approx(1800 * 0.4 / 3600 / 4)
    assert s["sites"]["ec2"]["restarts"] == 1


def test_short_long_breakdown() -> None:
    b = LogBuilder()
    b.submit(0, 1, 1).start(10, 1, 0).end(20, 1, 0)  # short: runtime 10, wait 10, sd 2
    b.submit(0, 2, 1).start(30, 2, 0).end(60, 2, 0)  # short: runtime 30, wait 30, sd 2
    b.submit(0, 3, 1).start(100, 3, 0).end(1100, 3, 0)  # long: runtime 1000, wait 100, sd 1.1
    b.submit(0, 4, 1)  # unfinished: ignored
    r = compute_records(b.build(), b.jobs, cluster_env(4))
    out = short_long_breakdown(r, threshold=30)
    assert out["short"]["jobs"] == 2 and out["long"]["jobs"] == 1
    assert out["short"]["fraction"] == pytest.approx(2 / 3)
    assert out["short"]["wait_mean"] == 20 and out["short"]["slowdown_mean"] == 2
    assert out["long"]["wait_mean"] == 100 and out["long"]["slowdown_mean"] == pytest.approx(1.1)
    assert out["all"]["jobs"] == 3
    empty = short_long_breakdown(r, threshold=-1)
    assert empty["short"]["jobs"] == 0 and empty["short"]["wait_mean"] is None


def test_empty_log_summary_is_json(tmp_path) -> None:  # type: ignore[no-untyped-def]
    m = compute_run_metrics(LogBuilder().build(), {}, env_with_cloud())
    s = m.summary
    assert s["jobs_total"] == 0 and s["makespan"] is None and s["utilization"] is None
    assert s["wait_mean"] is None and s["delay_p95"] is None and s["awrt"] is None
    p = write_summary(s, tmp_path / "empty.summary.json")
    assert json.loads(p.read_text())["sites"]["ec2"]["cost_charged"] == 0


def test_write_summary_turns_nan_into_null(tmp_path) -> None:  # type: ignore[no-untyped-def]
    p = write_summary({"a": float("nan"), "b": {"c": float("inf")}, "d": 1.5}, tmp_path / "s.json")
    assert json.loads(p.read_text()) == {"a": None, "b": {"c": None}, "d": 1.5}
    assert not list(tmp_path.glob("*.tmp"))


def test_charged_costs_vectorized_matches_site_rule() -> None:
    import numpy as np

    secs = np.array([0.0, 1.0, 3599.0, 3600.0, 3600.5, 5400.0, 7200.0, -3.0])
    got = charged_costs(EC2, secs)
    assert got.tolist() == pytest.approx([EC2.charged_cost(float(x)) for x in secs])
