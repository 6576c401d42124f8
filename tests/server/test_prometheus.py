"""`GET /metrics` of an in-process manager, read with prometheus-client's own text parser:
names, types and units as docs/live.md lists them, the process's metrics, the pilots' long
poll kept out of the latency histogram, and spend as a counter."""

from __future__ import annotations

from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.samples import Sample
from serverkit import Api

from isthmus.server.prometheus import WAITING_ROUTES

# family name (as the parser names it: a counter without `_total`) -> type
DOCUMENTED = {
    "isthmus_jobs": "gauge",
    "isthmus_jobs_submitted": "counter",
    "isthmus_jobs_finished": "counter",
    "isthmus_queue_length": "gauge",
    "isthmus_jobs_running": "gauge",
    "isthmus_processors_busy": "gauge",
    "isthmus_processors_online": "gauge",
    "isthmus_vms": "gauge",
    "isthmus_vm_leases": "counter",
    "isthmus_vm_releases": "counter",
    "isthmus_spend_dollars": "counter",
    "isthmus_decisions_refused": "counter",
    "isthmus_rounds": "counter",
    "isthmus_round_duration_seconds": "histogram",
    "isthmus_api_request_duration_seconds": "histogram",
    "isthmus_api_waiting_requests": "counter",
    "isthmus_pilots": "gauge",
    "isthmus_bags": "gauge",
    "isthmus_bag_tasks": "gauge",
    "isthmus_bag_processors_held": "gauge",
    "process_cpu_seconds": "counter",
    "process_resident_memory_bytes": "gauge",
    "process_virtual_memory_bytes": "gauge",
    "process_open_fds": "gauge",
    "process_max_fds": "gauge",
    "process_start_time_seconds": "gauge",
}


def _scrape(api: Api) -> tuple[dict[str, str], list[Sample]]:
    """The families' types by name and every sample of one scrape."""
    answer = api.client.get("/metrics", headers=api.admin)
    assert answer.status_code == 200, answer.text
    types: dict[str, str] = {}
    samples: list[Sample] = []
    for family in text_string_to_metric_families(answer.text):
        types[family.name] = family.type
        samples.extend(family.samples)
    return types, samples


def _value(samples: list[Sample], name: str, **labels: str) -> float:
    (value,) = [s.value for s in samples if s.name == name and s.labels == labels]
    return value


def test_every_metric_has_its_documented_type_and_counters_end_in_total(api: Api) -> None:
    alice = api.user("alice")
    assert api.client.post("/jobs", json={"command": "true", "size": 1}, headers=alice).status_code == 201
    types, samples = _scrape(api)
    assert {n: t for n, t in types.items() if n in DOCUMENTED} == DOCUMENTED
    # nothing undocumented (prometheus-client adds a `_created` timestamp to its own counters and histograms)
    assert {n.removesuffix("_created") for n in types} == set(DOCUMENTED)
    counters = {n for n, t in types.items() if t == "counter"}
    for s in samples:
        family = max((n for n in DOCUMENTED if s.name == n or s.name.startswith(n + "_")), key=len)
        if family in counters:
            assert s.name in (f"{family}_total", f"{family}_created"), s.name
        assert not s.name.endswith("_total") or family in counters, s.name
    assert _value(samples, "isthmus_jobs_submitted_total") == 1
    assert _value(samples, "isthmus_jobs_finished_total", state="completed") == 0
    assert _value(samples, "process_resident_memory_bytes") > 0
    assert _value(samples, "process_open_fds") > 0
    assert _value(samples, "process_start_time_seconds") > 1e9  # seconds since the epoch


def test_the_long_poll_is_counted_apart_from_the_latency_histogram(api: Api) -> None:
    assert set(api.client.get("/openapi.json").json()["paths"]) >= WAITING_ROUTES  # templates the API has
    pilot = api.pilot("node-1")
    api.client.get("/pilot/poll", params={"pilot_id": "p", "wait": 0}, headers=pilot)
    api.client.get("/pilot/poll", params={"pilot_id": "p", "wait": 0}, headers=pilot)
    api.client.get("/jobs/1", headers=api.admin)
    api.client.get("/ui/index.html")
    api.client.get("/no/such/path")
    _, samples = _scrape(api)
    latency = {s.labels["route"] for s in samples if s.name == "isthmus_api_request_duration_seconds_count"}
    # templates only, the plain routes (documentation, dashboard) by theirs too
    assert latency == {"/openapi.json", "/jobs/{job_id}", "/ui", "unmatched"}
    waiting = [s for s in samples if s.name == "isthmus_api_waiting_requests_total"]
    assert [s.labels["route"] for s in waiting] == ["/pilot/poll"] and waiting[0].value == 2


def test_spend_is_a_counter_in_dollars_that_follows_the_charges(api: Api) -> None:
    types, samples = _scrape(api)
    assert types["isthmus_spend_dollars"] == "counter"
    assert _value(samples, "isthmus_spend_dollars_total") == 0.0
    seen = []
    for charge in (0.25, 1.5):
        api.manager.engine.billing.spent += charge  # as a started billing increment charges it
        _, samples = _scrape(api)
        seen.append(_value(samples, "isthmus_spend_dollars_total"))
    assert seen == [0.25, 1.75]
