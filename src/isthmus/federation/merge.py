"""One event log for a whole federation: every manager's events on one time line.

Per-job metrics of a federation are those its users see: a job's submit time is its arrival at
its origin, its start and end those of the run that completed, wherever that was. The merged
log keeps every manager's events in time order with sites renamed `manager/site` (indices
offset per manager) and drops the SUBMIT a receiving manager logs for a forwarded job, so the
existing metrics (`isthmus.metrics`) read it as one system.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from isthmus.model.environment import Environment
from isthmus.model.events import EventKind, EventLog

_SUBMIT = int(EventKind.SUBMIT)


def merged_environment(managers: Sequence[tuple[str, Environment]], name: str = "federation") -> Environment:
    """One environment with every manager's sites, named `manager/site`, in manager order."""
    sites = tuple(dataclasses.replace(s, name=f"{m}/{s.name}") for m, env in managers for s in env.sites)
    first = managers[0][1]
    return dataclasses.replace(first, name=name, sites=sites, sets=(), budgets=(), description="")


def merge_logs(managers: Sequence[tuple[str, Environment, EventLog]]) -> EventLog:
    """The managers' logs merged in time order (ties: manager order, then log order)."""
    order: list[tuple[float, int, int]] = []
    offsets: list[int] = []
    cols = []
    offset = 0
    for m, (_, env, log) in enumerate(managers):
        c = log.columns()
        cols.append(c)
        offsets.append(offset)
        offset += len(env.sites)
        times = c["time"]
        order.extend((times[i], m, i) for i in range(len(times)))
    order.sort()
    out = EventLog()
    for _t, m, i in order:
        c = cols[m]
        log = managers[m][2]
        kind = c["kind"][i]
        o = c["origin"][i]
        if kind == _SUBMIT and o >= 0:
            continue  # a forwarded job arriving at a peer: it was submitted at its origin
        site = c["site"][i]
        p = c["policy"][i]
        j = out.append(
            c["time"][i],
            kind,
            c["job"][i],
            site + offsets[m] if site >= 0 else site,
            c["vm"][i],
            c["value"][i],
            c["run"][i],
            out.policy_index(log.policies[p]) if p >= 0 else -1,
            slots=c["slots"][i],
            origin=out.origin_index(log.origins[o]) if o >= 0 else -1,
            task=c["task"][i],
        )
        note = log.notes.get(i)
        if note is not None:
            out.notes[j] = note
    for _, _, log in managers:
        for job, reason in log.reasons.items():
            if not reason.startswith("forwarded to ") or job not in out.reasons:
                out.reasons[job] = reason
    return out
