"""`GET /metrics`: the live manager in the Prometheus text format (prometheus-client).

Gauges (current levels) and counters (monotonic totals, exposed with `_total`) are read at
scrape time from the engine (the same state the policies see) and from the database (job
counts by state, VM leases and releases), so a scrape costs two grouped queries and no
bookkeeping on the hot path; the round duration and the API latency are histograms in seconds
fed as rounds and requests happen; the process's own CPU, memory, file descriptors and start
time come from prometheus-client's process collector. Each app has its own registry (several
managers in one process do not mix). Labels are bounded: site names from the environment, job
states, refusal codes, and the API's route templates (never a raw path, which a client could
vary at will). Routes that wait by design (the pilots' long poll) are kept out of the latency
histogram: they are counted apart, so that their seconds of waiting do not hide the latency of
the requests that answer at once.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Histogram,
    ProcessCollector,
    generate_latest,
)
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector
from starlette.routing import BaseRoute, Match

from isthmus.model.site import SiteKind
from isthmus.model.states import TERMINAL_NAMES, JobState, TaskState

if TYPE_CHECKING:
    from isthmus.live.manager import Manager

ROUND_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5)
API_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
JOB_STATES = (JobState.QUEUED.value, JobState.RUNNING.value, *sorted(TERMINAL_NAMES))
METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})
# route templates whose requests wait by design (a pilot's long poll holds up to `wait` seconds):
# matched by the template the router resolved, so no URL a client makes up lands here
WAITING_ROUTES = frozenset({"/pilot/poll"})


class ManagerCollector(Collector):
    """Reads the pool's figures from `manager` at each scrape."""

    def __init__(self, manager: Manager) -> None:
        self.m = manager

    def collect(self) -> Iterator[Metric]:
        """Every gauge and counter read from the engine and the database now."""
        engine = self.m.engine
        counts = self.m.store.job_counts()
        jobs = GaugeMetricFamily("isthmus_jobs", "Jobs by state (every job the database holds)", labels=["state"])
        for state in sorted(set(JOB_STATES) | set(counts)):
            jobs.add_metric([state], counts.get(state, 0))
        yield jobs
        # the database keeps every job and a terminal state is final: both only grow
        yield CounterMetricFamily(
            "isthmus_jobs_submitted", "Jobs submitted (bags included) so far", value=sum(counts.values())
        )
        finished = CounterMetricFamily("isthmus_jobs_finished", "Jobs that reached a terminal state", labels=["state"])
        for state in sorted(TERMINAL_NAMES):
            finished.add_metric([state], counts.get(state, 0))
        yield finished

        queued = GaugeMetricFamily(
            "isthmus_queue_length", "Jobs waiting in each queue (a queue serves a set of sites)", labels=["queue"]
        )
        for sites, queue in zip(engine.stage_sites, engine.queues, strict=True):
            queued.add_metric(["+".join(engine.backends[i].name for i in sites)], len(queue))
        yield queued

        running = GaugeMetricFamily("isthmus_jobs_running", "Jobs running on each site", labels=["site"])
        busy = GaugeMetricFamily("isthmus_processors_busy", "Processors running jobs", labels=["site"])
        online = GaugeMetricFamily("isthmus_processors_online", "Processors usable now", labels=["site"])
        vms = GaugeMetricFamily("isthmus_vms", "VMs of each cloud site by state", labels=["site", "state"])
        # each backend describes itself (as `GET /sites` shows it): a cloud counts its VMs by state
        described = [(b, b.describe()) for b in engine.backends]
        for b, d in described:
            running.add_metric([b.name], len(b.running))
            busy.add_metric([b.name], b.busy)
            online.add_metric([b.name], b.online)
            by_state = d.get("vms_by_state")
            if isinstance(by_state, dict):
                for state, n in by_state.items():
                    vms.add_metric([b.name, state], n)
        yield from (running, busy, online, vms)

        leases = CounterMetricFamily("isthmus_vm_leases", "VMs leased on each cloud site", labels=["site"])
        releases = CounterMetricFamily("isthmus_vm_releases", "VM releases requested on each site", labels=["site"])
        vm_counts = self.m.store.vm_counts()
        for b, d in described:
            if d["kind"] == SiteKind.CLOUD.value:
                leased, released = vm_counts.get(b.index, (0, 0))
                leases.add_metric([b.name], leased)
                releases.add_metric([b.name], released)
        yield from (leases, releases)

        # every started billing increment is charged once and never refunded: a counter
        yield CounterMetricFamily(
            "isthmus_spend_dollars", "Charged cost of every cloud lease so far", value=engine.spent, unit="dollars"
        )
        if engine.budget is not None:
            left = engine.budget - engine.spent
            yield GaugeMetricFamily(
                "isthmus_budget_left_dollars", "Budget cap minus the charged cost", value=left, unit="dollars"
            )
        refused = CounterMetricFamily(
            "isthmus_decisions_refused", "Policy decisions the engine refused, by status code", labels=["code"]
        )
        for code, n in sorted(engine.refusals.items(), key=lambda kv: kv[0].name):
            refused.add_metric([code.name.lower()], n)
        yield refused
        yield CounterMetricFamily("isthmus_rounds", "Scheduling rounds run", value=engine.rounds)
        pilots = GaugeMetricFamily("isthmus_pilots", "Pilots by state", labels=["state"])
        by_pilot_state: dict[str, int] = {}
        for node in self.m.hub.nodes.values():
            by_pilot_state[node.state] = by_pilot_state.get(node.state, 0) + 1
        for state, n in sorted(by_pilot_state.items()):
            pilots.add_metric([state], n)
        yield pilots
        yield from self._bags()

    def _bags(self) -> Iterator[Metric]:
        """Bags of tasks (docs/bags.md): how many are active, their tasks by state, the
        processors they hold on each site (those being preempted included)."""
        book = self.m.engine.bags
        active = [b for b in book.bags.values() if not b.finished]
        yield GaugeMetricFamily("isthmus_bags", "Bags of tasks not finished", value=len(active))
        tasks = GaugeMetricFamily("isthmus_bag_tasks", "Tasks of unfinished bags by state", labels=["state"])
        for state, n in (
            # not yet started: in the bag's queue or on a launcher's local list (as the API says)
            (TaskState.QUEUED.value, sum(b.job.tasks - b.done - b.failed - b.running for b in active)),
            (TaskState.RUNNING.value, sum(b.running for b in active)),
            (TaskState.DONE.value, sum(b.done for b in active)),
            (TaskState.FAILED.value, sum(b.failed for b in active)),
        ):
            tasks.add_metric([state], n)
        yield tasks
        held = GaugeMetricFamily(
            "isthmus_bag_processors_held", "Processors held by bags on each site (launchers)", labels=["site"]
        )
        for i in book.sites:
            held.add_metric([self.m.engine.backends[i].name], book.held.get(i, 0))
        yield held


class Metrics:
    """The registry behind `/metrics`: the manager's and the process's collectors, the two
    histograms and the count of waiting requests."""

    def __init__(self, manager: Manager) -> None:
        self.registry = CollectorRegistry(auto_describe=False)
        self.registry.register(ManagerCollector(manager))
        ProcessCollector(registry=self.registry)
        self.round_seconds = Histogram(
            "isthmus_round_duration_seconds",
            "Wall time of a scheduling round (every deciding policy)",
            buckets=ROUND_BUCKETS,
            registry=self.registry,
        )
        self.api_seconds = Histogram(
            "isthmus_api_request_duration_seconds",
            "Wall time of an API request, by method, route template and status",
            ["method", "route", "status"],
            buckets=API_BUCKETS,
            registry=self.registry,
        )
        self.api_waiting = Counter(
            "isthmus_api_waiting_requests",
            "API requests to routes that wait by design (the pilots' long poll), kept out of the latency histogram",
            ["method", "route", "status"],
            registry=self.registry,
        )
        manager.engine.round_observer = self.round_seconds.observe

    def render(self) -> tuple[bytes, str]:
        """The text exposition and its content type."""
        return generate_latest(self.registry), CONTENT_TYPE_LATEST


def _plain_route(scope: dict[str, Any]) -> str:
    """The template of the app's plain Starlette route (the API documentation pages, the
    dashboard's mount) that `scope` matches, or "unmatched": FastAPI names only its API routes
    in the scope."""
    for route in getattr(scope.get("app"), "routes", ()):
        path = getattr(route, "path", None)
        if isinstance(route, BaseRoute) and path and route.matches(scope)[0] is Match.FULL:
            return str(path)
    return "unmatched"


class LatencyMiddleware:
    """ASGI middleware timing each HTTP request into `Metrics.api_seconds` by route template;
    a request to a route of `WAITING_ROUTES` is counted in `Metrics.api_waiting` instead."""

    def __init__(self, app: Any, metrics: Metrics) -> None:
        self.app = app
        self.metrics = metrics

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        """Pass the request on; observe its duration once the answer has started."""
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        began = time.perf_counter()
        status = [500]
        asked = dict(scope)  # as it came: routing rewrites the scope (a mount's root path)

        async def send_status(message: dict[str, Any]) -> None:
            if message["type"] == "http.response.start":
                status[0] = message["status"]
            await send(message)

        try:
            await self.app(scope, receive, send_status)
        finally:
            template = getattr(scope.get("route"), "path", None) or _plain_route(asked)
            method = scope["method"] if scope["method"] in METHODS else "other"
            if template in WAITING_ROUTES:
                self.metrics.api_waiting.labels(method, template, str(status[0])).inc()
            else:
                self.metrics.api_seconds.labels(method, template, str(status[0])).observe(time.perf_counter() - began)
