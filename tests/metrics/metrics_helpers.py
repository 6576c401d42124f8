"""Helpers for building event logs by hand."""

from __future__ import annotations

from isthmus.model.environment import Environment
from isthmus.model.events import EventKind, EventLog, KillCause
from isthmus.model.job import Job
from isthmus.model.site import Site, SiteKind

EC2 = Site("ec2", kind=SiteKind.CLOUD, max_vms=64, cores_per_node=1, price_per_hour=0.065)

Row = tuple[float, int, int, int, int, float]


class LogBuilder:
    """Collect events with readable calls in any order; `build()` sorts them by time (stably)."""

    def __init__(self) -> None:
        self.rows: list[Row] = []
        self.reasons: dict[int, str] = {}
        self.jobs: dict[int, Job] = {}

    def add(self, t: float, kind: int, job: int = -1, site: int = -1, vm: int = -1, value: float = 0.0) -> LogBuilder:
        self.rows.append((float(t), int(kind), job, site, vm, float(value)))
        return self

    def submit(self, t: float, job: int, size: int, runtime: float = 0.0, user: str = "u") -> LogBuilder:
        self.jobs[job] = Job(job, t, size, runtime, requested_runtime=2 * runtime or None, user=user)
        return self.add(t, EventKind.SUBMIT, job=job, value=size)

    def start(self, t: float, job: int, site: int) -> LogBuilder:
        return self.add(t, EventKind.START, job=job, site=site, value=self.jobs[job].size)

    def end(self, t: float, job: int, site: int) -> LogBuilder:
        return self.add(t, EventKind.END, job=job, site=site, value=0)

    def kill(self, t: float, job: int, site: int, stage: int = 1) -> LogBuilder:
        self.add(t, EventKind.KILL, job=job, site=site, value=KillCause.LIMIT)
        return self.add(t, EventKind.REQUEUE, job=job, value=stage)

    def fail(self, t: float, job: int, site: int, code: int = 1) -> LogBuilder:
        return self.add(t, EventKind.FAIL, job=job, site=site, value=code)

    def cancel(self, t: float, job: int) -> LogBuilder:
        return self.add(t, EventKind.CANCEL, job=job)

    def reject(self, t: float, job: int, reason: str) -> LogBuilder:
        self.reasons[job] = reason
        return self.add(t, EventKind.REJECT, job=job)

    def lease(self, t: float, site: int, vm: int, boot: float = 0.0) -> LogBuilder:
        self.add(t, EventKind.VM_LEASE, site=site, vm=vm)
        return self.add(t + boot, EventKind.VM_READY, site=site, vm=vm)

    def release(self, t: float, site: int, vm: int, shutdown: float = 0.0) -> LogBuilder:
        self.add(t, EventKind.VM_RELEASE, site=site, vm=vm)
        return self.add(t + shutdown, EventKind.VM_GONE, site=site, vm=vm)

    def build(self) -> EventLog:
        log = EventLog()
        for row in sorted(self.rows, key=lambda r: r[0]):
            log.append(*row)
        log.reasons.update(self.reasons)
        return log


def cluster_env(*nodes: int) -> Environment:
    """Clusters c0, c1, ... with the given node counts (one processor per node)."""
    return Environment("test", tuple(Site(f"c{i}", nodes=n) for i, n in enumerate(nodes)))


def env_with_cloud(cluster_nodes: int = 4, cloud: Site = EC2) -> Environment:
    """Cluster c0 (index 0) and a cloud (index 1)."""
    return Environment("test", (Site("c0", nodes=cluster_nodes), cloud))
