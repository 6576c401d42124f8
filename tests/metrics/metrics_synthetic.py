"""A synthetic event log of many jobs on clusters and a paid cloud (for speed checks and property tests)."""

from __future__ import annotations

import numpy as np

from isthmus.model.environment import Environment
from isthmus.model.events import EventKind, EventLog, KillCause
from isthmus.model.job import Job
from isthmus.model.site import Site, SiteKind


def synthetic_env() -> Environment:
    """Three 1024-processor clusters and a paid cloud of 4-core VMs."""
    sites = (
        Site("c0", nodes=1024),
        Site("c1", nodes=1024),
        Site("c2", nodes=1024),
        Site("ec2", kind=SiteKind.CLOUD, max_vms=100000, cores_per_node=4, price_per_hour=0.065),
    )
    return Environment("synthetic", sites)


def synthetic_run(n_jobs: int, seed: int = 0) -> tuple[EventLog, dict[int, Job], Environment]:
    """A log of `n_jobs` jobs: 5 % killed once and restarted, 1 % rejected, the last 1 % unfinished.

    Runs do not respect site capacity (the log is for speed, not realism); each cloud run gets
    its own VM lease.
    """
    rng = np.random.default_rng(seed)
    env = synthetic_env()
    submit = np.sort(rng.uniform(0, 30 * 86400, n_jobs))
    size = rng.integers(1, 5, n_jobs)
    runtime = rng.exponential(3600, n_jobs).round(1) + 1
    wait = rng.exponential(600, n_jobs)
    site = rng.integers(0, 4, n_jobs)
    killed = rng.random(n_jobs) < 0.05
    rejected = rng.random(n_jobs) < 0.01
    unfinished = (submit > np.quantile(submit, 0.99)) & ~rejected
    jobs = {
        i: Job(i, float(submit[i]), int(size[i]), float(runtime[i]), requested_runtime=float(2 * runtime[i]))
        for i in range(n_jobs)
    }
    t: list[np.ndarray] = []
    k: list[np.ndarray] = []
    j: list[np.ndarray] = []
    s: list[np.ndarray] = []
    v: list[np.ndarray] = []
    val: list[np.ndarray] = []
    ids = np.arange(n_jobs)
    none = np.full(n_jobs, -1)

    def add(
        mask: np.ndarray, time: np.ndarray, kind: int, sites: np.ndarray, vms: np.ndarray, value: np.ndarray
    ) -> None:
        t.append(time[mask])
        k.append(np.full(int(mask.sum()), kind))
        j.append(ids[mask])
        s.append(sites[mask])
        v.append(vms[mask])
        val.append(value[mask].astype(float))

    everyone = np.ones(n_jobs, dtype=bool)
    add(everyone, submit, EventKind.SUBMIT, none, none, size)
    add(rejected, submit, EventKind.REJECT, none, none, np.zeros(n_jobs))
    runs = ~rejected
    first = submit + wait
    limit = 600.0
    add(runs & killed, first, EventKind.START, site, none, size)
    add(runs & killed, first + limit, EventKind.KILL, site, none, np.full(n_jobs, KillCause.LIMIT))
    add(runs & killed, first + limit, EventKind.REQUEUE, none, none, np.ones(n_jobs))
    start = np.where(killed, first + limit + 30, first)
    end = start + runtime
    add(runs, start, EventKind.START, site, none, size)
    done = runs & ~unfinished
    add(done, end, EventKind.END, site, none, np.zeros(n_jobs))
    cloud = runs & (site == 3)
    vm = ids
    lease_start = np.where(killed, first, start) - 60
    add(cloud, lease_start, EventKind.VM_LEASE, site, vm, np.zeros(n_jobs))
    add(cloud, lease_start + 60, EventKind.VM_READY, site, vm, np.zeros(n_jobs))
    add(cloud & ~unfinished, end, EventKind.VM_RELEASE, site, vm, np.zeros(n_jobs))
    add(cloud & ~unfinished, end + 30, EventKind.VM_GONE, site, vm, np.zeros(n_jobs))
    time = np.concatenate(t)
    order = np.argsort(time, kind="stable")
    log = EventLog()
    cols = [np.concatenate(c)[order].tolist() for c in (t, k, j, s, v, val)]
    for row in zip(*cols, strict=True):
        log.append(*row)
    for i in np.flatnonzero(rejected).tolist():
        log.reasons[i] = "too large"
    return log, jobs, env
