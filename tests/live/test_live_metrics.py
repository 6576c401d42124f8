"""`GET /metrics`: scraped from a real manager and read with the Prometheus
text parser; figures checked against what the workload did."""

from __future__ import annotations

import httpx
from livekit import LiveServer, bag_env, wait_for, wait_state
from prometheus_client.parser import text_string_to_metric_families

TERMINAL = ("completed", "failed", "cancelled")


def _scrape(live: LiveServer) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    r = httpx.get(live.url + "/metrics", headers={"Authorization": f"Bearer {live.admin_token}"})
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/plain"), r.text
    out = {}
    for family in text_string_to_metric_families(r.text):
        for s in family.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


def test_metrics_follow_the_workload(live: LiveServer) -> None:
    assert httpx.get(live.url + "/metrics").status_code == 401  # a token is needed
    c = live.client()
    hold = c.submit(command="sleep", args=["3"], size=4)  # fills the cluster c1 (2 nodes x 2 cores)
    wait_state(c, hold, ("running",))
    m = _scrape(live)
    assert m[("isthmus_jobs", (("state", "running"),))] == 1
    assert m[("isthmus_processors_busy", (("site", "c1"),))] == 4
    assert m[("isthmus_processors_online", (("site", "c1"),))] == 4
    on_cloud = c.submit(command="true", size=2)  # waits for a VM: on-demand leases one
    assert wait_state(c, on_cloud, TERMINAL, timeout=30)["state"] == "completed"
    c.cancel(hold)
    wait_state(c, hold, TERMINAL)
    for _ in range(3):
        httpx.get(live.url + "/jobs/999999", headers={"Authorization": f"Bearer {live.admin_token}"})
    m = wait_for(
        lambda: (lambda s: s if s[("isthmus_vm_releases_total", (("site", "cloud"),))] >= 1 else None)(_scrape(live)),  # noqa: PLC3002
        timeout=20,
        what="the idle VM released",
    )
    assert m[("isthmus_jobs", (("state", "completed"),))] == 1
    assert m[("isthmus_jobs", (("state", "cancelled"),))] == 1
    assert m[("isthmus_jobs", (("state", "queued"),))] == 0
    assert m[("isthmus_vm_leases_total", (("site", "cloud"),))] >= 1
    assert m[("isthmus_spend_dollars_total", ())] == 0.0  # the test cloud is free
    assert m[("isthmus_rounds_total", ())] >= 2
    assert m[("isthmus_round_duration_seconds_count", ())] == m[("isthmus_rounds_total", ())]
    submitted = (("method", "POST"), ("route", "/jobs"), ("status", "201"))
    assert m[("isthmus_api_request_duration_seconds_count", submitted)] == 2
    # a path a client varies is counted under its route template, not as a new series
    missing = (("method", "GET"), ("route", "/jobs/{job_id}"), ("status", "404"))
    assert m[("isthmus_api_request_duration_seconds_count", missing)] == 3
    assert not any("999999" in str(labels) for _, labels in m)
    # the pilots' long polls (they ran the jobs) are counted apart, never timed with the API
    polled = (("method", "GET"), ("route", "/pilot/poll"), ("status", "200"))
    assert m[("isthmus_api_waiting_requests_total", polled)] >= 1
    assert not any(("route", "/pilot/poll") in labels for name, labels in m if name.startswith("isthmus_api_request"))


def test_metrics_show_bags_their_tasks_and_the_processors_they_hold(tmp_path, tag) -> None:  # type: ignore[no-untyped-def]
    env = bag_env(tmp_path / "env.toml")
    live = LiveServer(env, tmp_path / "state", f"sqlite:///{tmp_path / 'db'}", tag).start()
    try:
        c = live.client()
        m = _scrape(live)
        assert m[("isthmus_bags", ())] == 0 and m[("isthmus_bag_processors_held", (("site", "c1"),))] == 0
        bag = c.submit_bag(tasks=["sleep 30"] * 12, name="long")
        # the bag grows on the whole idle cluster: 4 launchers, 4 tasks running, 8 not started
        # (4 of them on the launchers' local lists)
        m = wait_for(
            lambda: (lambda s: s if s[("isthmus_bag_tasks", (("state", "running"),))] == 4 else None)(_scrape(live)),  # noqa: PLC3002
            timeout=30,
            what="four tasks running",
        )
        assert m[("isthmus_bags", ())] == 1
        assert m[("isthmus_bag_processors_held", (("site", "c1"),))] == 4
        assert m[("isthmus_bag_tasks", (("state", "queued"),))] == 8
        assert c.job(bag)["bag"]["queued"] == 8  # as the API says
        assert m[("isthmus_bag_tasks", (("state", "done"),))] == 0
        c.cancel(bag)
        m = wait_for(
            lambda: (lambda s: s if s[("isthmus_bags", ())] == 0 else None)(_scrape(live)),  # noqa: PLC3002
            timeout=30,
            what="the bag cancelled",
        )
        assert wait_state(c, bag, TERMINAL)["state"] == "cancelled"
    finally:
        live.stop()
