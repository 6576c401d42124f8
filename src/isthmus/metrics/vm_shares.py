"""VM leases per instance type and per user, from the event log alone.

A VM_LEASE event's value is the index of its instance type in the site's `types` (0 for a
site with one type) and its slots the VM's cores; a VM leased for one user (vm-share, Cloud
Scheduler §3.3) is followed by a VM_USER event naming the user in the log's notes. From these:
each lease's price and cores (costs and capacity of clouds with several types), VM-hours per
user, and the spread of the users' shares of each cloud's VMs over time.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from isthmus.metrics.tables import FloatArray, LogTables
from isthmus.model.events import EventKind, EventLog
from isthmus.model.site import Site


def lease_types(tables: LogTables) -> np.ndarray:
    """Instance type index of each lease (row of `tables.leases`)."""
    return tables.events.value[tables.leases.start_pos].astype(np.int64)


def lease_hourly_prices(site: Site, types: np.ndarray) -> FloatArray:
    """Price per hour of each lease of `site`, given its leases' type indices."""
    prices = np.array([t.price_per_hour for t in site.types], dtype=np.float64)
    out: FloatArray = prices[np.clip(types, 0, prices.size - 1)]
    return out


def lease_cores(site: Site, types: np.ndarray) -> FloatArray:
    """Cores of each lease of `site`, given its leases' type indices."""
    cores = np.array([t.cores for t in site.types], dtype=np.float64)
    out: FloatArray = cores[np.clip(types, 0, cores.size - 1)]
    return out


def lease_users(log: EventLog, tables: LogTables) -> list[str]:
    """The user each lease serves ("" for a VM leased for any user), by lease row."""
    ev = tables.events
    users: dict[tuple[int, int], str] = {}
    for p in np.flatnonzero(ev.kind == EventKind.VM_USER):
        users[(int(ev.site[p]), int(ev.vm[p]))] = log.notes.get(int(p), "")
    leases = tables.leases
    return [users.get((int(s), int(v)), "") for s, v in zip(leases.site, leases.vm, strict=True)]


def user_vm_metrics(log: EventLog, tables: LogTables, sites: tuple[Site, ...]) -> dict[str, Any]:
    """VM-hours per user (`vm_hours_by_user`), and per cloud with per-user VMs the spread of the
    users' shares (`vm_share_spread`: the time-weighted mean and the largest difference between
    the most and the fewest VMs leased for users holding at least one, over the time two or more
    do; states inside one instant do not count)."""
    users = lease_users(log, tables)
    leases = tables.leases
    secs = leases.seconds
    hours: dict[str, float] = {}
    for u, s in zip(users, secs, strict=True):
        if u:
            hours[u] = hours.get(u, 0.0) + float(s) / 3600.0
    spread: dict[str, dict[str, float]] = {}
    for i, site in enumerate(sites):
        rows = [k for k in range(len(leases)) if leases.site[k] == i and users[k]]
        if not rows:
            continue
        changes: list[tuple[float, str, int]] = []
        for k in rows:
            changes.append((float(leases.start[k]), users[k], 1))
            changes.append((float(leases.end[k]), users[k], -1))
        changes.sort(key=lambda c: (c[0], c[2]))
        held: dict[str, int] = {}
        weighted = total = most = 0.0
        for n, (t, u, d) in enumerate(changes):
            held[u] = held.get(u, 0) + d
            if not held[u]:
                del held[u]
            nxt = changes[n + 1][0] if n + 1 < len(changes) else t
            if len(held) >= 2 and nxt > t:  # a state that lasts (not one inside an instant)
                gap = max(held.values()) - min(held.values())
                most = max(most, gap)
                weighted += gap * (nxt - t)
                total += nxt - t
        spread[site.name] = {"mean": weighted / total if total else 0.0, "max": most}
    return {"vm_hours_by_user": dict(sorted(hours.items())), "vm_share_spread": spread}
