"""What the operator's dashboard shows of the pool beyond single jobs: the queue of each set of
sites now, and the pool over time (queued and running processors, leased VMs, charged spend).

The time series come from the persisted event log (the events table) through the same metrics
code as a simulated run (`isthmus.metrics.timeseries`), so a chart and a run summary agree by
construction and a restarted manager shows the history from before its restart.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from isthmus.engine.engine import Engine
from isthmus.metrics.tables import build_tables
from isthmus.metrics.timeseries import charged_spend, compute_timeseries
from isthmus.model.environment import Environment
from isthmus.model.states import PilotState
from isthmus.store.tables import Store

if TYPE_CHECKING:
    from isthmus.backends.node import Node
    from isthmus.live.pilots import Assignment


@dataclass(frozen=True, slots=True)
class QueueRow:
    """One queue of the engine now: the set of sites it serves and what waits in it."""

    index: int
    name: str
    sites: list[str]
    runtime_limit: float | None
    jobs: int
    processors: int
    oldest_wait: float | None

    def as_dict(self) -> dict[str, Any]:
        """The row as JSON-ready values."""
        return asdict(self)


def queue_rows(engine: Engine, env: Environment) -> list[QueueRow]:
    """Every queue of `engine` (one per set of sites its allocation policy uses; one for most
    policies), named after the environment's set of the same sites when there is one."""
    now = engine.clock.now
    names = [s.name for s in env.sites]
    by_sites = {tuple(sorted(s.sites)): s for s in env.sets}
    rows = []
    for i, (queue, sites) in enumerate(zip(engine.queues, engine.stage_sites, strict=True)):
        site_names = [names[k] for k in sites]
        named = by_sites.get(tuple(sorted(site_names)))
        if named is not None:
            name, limit = named.name, named.runtime_limit
        else:
            name, limit = ("all sites" if len(sites) == len(names) else f"queue {i}"), None
        oldest = min((e.queued_at for e in queue.values()), default=None)
        rows.append(
            QueueRow(
                index=i,
                name=name,
                sites=site_names,
                runtime_limit=limit,
                jobs=len(queue),
                processors=sum(e.job.size for e in queue.values()),
                oldest_wait=None if oldest is None else max(0.0, now - oldest),
            )
        )
    return rows


def pool_timeseries(store: Store, env: Environment, *, now: float, window: float, points: int) -> dict[str, Any]:
    """The pool over the last `window` seconds up to `now`, at `points` evenly spaced times
    (fewer when the log is younger than the window): processors requested by queued jobs and
    used by running ones, VMs leased and the charged spend so far, each the value at that time.
    """
    log = store.event_log()
    times_col = log.columns()["time"]
    if len(times_col) == 0:
        return {"times": [], "queued_processors": [], "running_processors": [], "leased_vms": [], "spend": []}
    first = float(times_col[0])
    horizon = max(now, float(times_col[-1]))
    start = max(first, horizon - window)
    n = max(2, points) if horizon > start else 1
    grid = np.linspace(start, horizon, n)
    # what is still running or leased is closed a second after the last point, not at it: the
    # series steps down at an interval's end, so closing at `horizon` would show zero "now"
    tables = build_tables(log, (), len(env.sites), horizon + 1.0)
    ts = compute_timeseries(tables, env)
    running = ts.allocated.value_at(grid)
    requested = ts.requested.value_at(grid)
    leased = np.zeros(grid.size)
    for series in ts.leased_vms_by_site.values():
        leased += series.value_at(grid)
    spend = charged_spend(tables, env, grid)

    def floats(a: Any) -> list[float]:
        return [float(x) if math.isfinite(x) else 0.0 for x in a]

    return {
        "times": floats(grid),
        "queued_processors": floats(np.maximum(requested - running, 0.0)),
        "running_processors": floats(running),
        "leased_vms": floats(leased),
        "spend": floats(spend),
    }


def site_costs(store: Store, env: Environment, *, now: float) -> dict[int, float]:
    """Charged cost of every lease of each paid cloud site so far (released leases and those still
    held, billed per begun increment), by site index."""
    out: dict[int, float] = {}
    for row in store.vm_rows():
        site = env.sites[row["site"]]
        if not site.is_paid:
            continue
        end = row["released_at"] if row["released_at"] is not None else now
        out[row["site"]] = out.get(row["site"], 0.0) + site.charged_cost(
            end - row["leased_at"], int(row.get("vm_type") or 0)
        )
    return out


#: a pilot position's state in `node_rows`, as sinfo names a node's (an ended position is not listed)
_NODE_STATES = {
    PilotState.QUEUED: "queued",  # its pilot job waits in the batch system
    PilotState.SPAWNED: "starting",
    PilotState.AWAITING: "starting",
    PilotState.EXITING: "draining",
    PilotState.DOWN: "down",
}


def node_rows(
    nodes: Mapping[str, Node], assign: Iterable[Assignment], lanes_on: Callable[[str], int], env: Environment
) -> list[dict[str, Any]]:
    """Each pilot position (a cluster node, a pilot job's node, a VM) as `sinfo -N` shows a node:
    its site, state (idle, mixed, allocated; booting, queued, starting, draining, down while its
    pilot is not serving), host, and processors allocated (runs' slots and bag lanes), idle and in all.
    `assign` are the runs' assignments, `lanes_on(node)` the bag lanes a node runs."""
    used: dict[str, int] = {}
    for a in assign:
        for key, _slot in a.slots:
            used[key] = used.get(key, 0) + 1
    rows = []
    for key, node in sorted(nodes.items(), key=lambda kv: (kv[1].site, kv[0])):
        busy = min(node.slots, used.get(key, 0) + lanes_on(key))
        serving = node.state is PilotState.REGISTERED
        if serving:
            state = "idle" if busy == 0 else "allocated" if busy == node.slots else "mixed"
        elif node.vm is not None and (node.booting or node.state is PilotState.DOWN):
            state = "booting"  # a VM whose first pilot has not registered yet
        else:
            state = _NODE_STATES.get(node.state, node.state.value.lower())
        rows.append(
            {
                "node": key,
                "site": env.sites[node.site].name,
                "state": state,
                "host": node.host or None,
                "cpus_allocated": busy,
                "cpus_idle": node.slots - busy if serving else 0,
                "cpus_total": node.slots,
            }
        )
    return rows
