"""Accounting of a live manager: jobs, processor-hours, VM-hours, charged cost, wait and
slowdown per user, site or policy over a time window (`isthmus accounting`, `GET /accounting`).

Every figure comes from the persisted event log (the events table), read into the same
`EventLog` the simulator writes and turned into per-job records by the metrics package, so an
accounting row and a run summary agree by construction. Attribution rules, as `sacct` users
would ask:

- a job belongs to the window in which it ended (its END, FAIL, CANCEL or REJECT event);
  jobs still queued or running belong to no window yet;
- processor-hours: its final run (size × runtime) plus every killed run (size × what it ran);
- wait and bounded slowdown (threshold 10 s): as in docs/metrics.md, over the jobs that ran;
- a VM belongs to the window in which its release was requested (billing stops), a VM still
  leased to the window holding `now`; VM-hours run from lease to release, and its charged cost
  is the site's billing of that lease (whole increments);
- by user, VM-hours and cost are not attributed (a VM serves many users' jobs): those columns
  are None; by policy, jobs go to the policy that started their final run, VMs to the policy
  that leased them.
- a bag of tasks (docs/bags.md) belongs to the window in which it ended (BAG_END); its
  processor-hours are the processors it held, from each GROW to each BAG_RELEASE, whether a task
  ran on them or not (what the pool gave it); it is completed when every task completed. By
  site, a bag counts once in the row of each site it held processors on, with that site's
  processor-hours; by policy it goes to the fair-share policy that grew it. A bag has no wait
  or slowdown of its own: it is left out of those means.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from isthmus.metrics.records import compute_records
from isthmus.metrics.summary import charged_costs
from isthmus.model.environment import Environment
from isthmus.model.events import EventKind, EventLog
from isthmus.model.job import Job
from isthmus.store.tables import Store

GROUPINGS = ("user", "site", "policy")
ENDING = (EventKind.END, EventKind.FAIL, EventKind.CANCEL, EventKind.REJECT)


@dataclass
class AccountRow:
    """The figures of one user, site or policy over the window."""

    key: str
    jobs: int = 0
    completed: int = 0
    processor_hours: float = 0.0
    vm_hours: float | None = None
    charged_cost: float | None = None
    mean_wait: float | None = None
    mean_bounded_slowdown: float | None = None

    def as_dict(self) -> dict[str, Any]:
        """The row as JSON-ready values."""
        return asdict(self)


def account(
    store: Store,
    env: Environment,
    *,
    by: str,
    since: float,
    until: float,
    now: float,
    user: str | None = None,
) -> list[AccountRow]:
    """Rows of `by` (user, site or policy) for the window [since, until), sorted by key.

    With `user`, only that user's jobs count and VM figures are left out (VMs are shared).
    """
    if by not in GROUPINGS:
        raise ValueError(f"cannot group by {by!r}: expected one of {', '.join(GROUPINGS)}")
    log = store.event_log()
    jobs = {
        jid: Job(jid, submit, max(int(size), 1), math.nan, requested, user=owner)
        for jid, owner, size, submit, requested in store.job_owners()
    }
    rows: dict[str, AccountRow] = {}
    _account_jobs(rows, log, jobs, env, by, since, until, now, user)
    _account_bags(rows, log, jobs, env, by, since, until, user)
    if user is None and by != "user":
        _account_vms(rows, log, env, by, since, until, now)
    return [rows[k] for k in sorted(rows)]


def _row(rows: dict[str, AccountRow], key: str) -> AccountRow:
    if key not in rows:
        rows[key] = AccountRow(key)
    return rows[key]


def _account_jobs(
    rows: dict[str, AccountRow],
    log: EventLog,
    jobs: dict[int, Job],
    env: Environment,
    by: str,
    since: float,
    until: float,
    now: float,
    user: str | None,
) -> None:
    """Add each job that ended in the window to its row."""
    closed: dict[int, float] = {}
    started_by: dict[int, str] = {}
    ending = {int(k) for k in ENDING}
    for e in log:
        if e.job < 0 or e.job not in jobs:
            continue
        if int(e.kind) in ending:
            closed[e.job] = e.time
        elif e.kind == EventKind.START:
            started_by[e.job] = e.policy or "(unknown)"
    chosen = {jid: job for jid, job in jobs.items() if since <= closed.get(jid, math.inf) < until}
    if user is not None:
        chosen = {jid: job for jid, job in chosen.items() if job.user == user}
    if not chosen:
        return
    rec = compute_records(log, chosen, env, horizon=now)
    waits: dict[str, list[float]] = {}
    slowdowns: dict[str, list[float]] = {}
    for i, jid in enumerate(rec.job_id.tolist()):
        if jid not in chosen:
            continue  # in the log, but not ended in the window (records cover every logged job)
        if by == "user":
            key = str(rec.user[i])
        elif by == "site":
            key = rec.site_names[rec.site[i]] if rec.site[i] >= 0 else "(none)"
        else:
            key = started_by.get(jid, "(none)")
        row = _row(rows, key)
        row.jobs += 1
        row.completed += int(rec.status[i] == 0)
        final = rec.size[i] * rec.runtime[i] if np.isfinite(rec.runtime[i]) else 0.0
        row.processor_hours += (final + rec.wasted_processor_seconds[i]) / 3600.0
        if np.isfinite(rec.wait[i]):
            waits.setdefault(key, []).append(float(rec.wait[i]))
        if np.isfinite(rec.bounded_slowdown[i]):
            slowdowns.setdefault(key, []).append(float(rec.bounded_slowdown[i]))
    for key, values in waits.items():
        rows[key].mean_wait = sum(values) / len(values)
    for key, values in slowdowns.items():
        rows[key].mean_bounded_slowdown = sum(values) / len(values)


def _account_bags(
    rows: dict[str, AccountRow],
    log: EventLog,
    jobs: dict[int, Job],
    env: Environment,
    by: str,
    since: float,
    until: float,
    user: str | None,
) -> None:
    """Add each bag of tasks that ended in the window (BAG_END) to its row(s)."""
    ended: dict[int, tuple[float, int]] = {}  # bag -> (end time, tasks done)
    tasks: dict[int, int] = {}
    held: dict[tuple[int, int], float] = {}  # (bag, site) -> processor-seconds up to its end
    grown_by: dict[int, str] = {}
    opened: list[tuple[int, int, float, float]] = []  # (bag, site, time, +/- processors)
    for e in log:
        if e.kind == EventKind.BAG_SUBMIT:
            tasks[e.job] = int(e.value)
        elif e.kind == EventKind.BAG_END:
            ended.setdefault(e.job, (e.time, int(e.value)))
        elif e.kind == EventKind.GROW:
            opened.append((e.job, e.site, e.time, e.value))
            grown_by.setdefault(e.job, e.policy or "(unknown)")
        elif e.kind == EventKind.BAG_RELEASE:
            opened.append((e.job, e.site, e.time, -e.value))
    chosen = {
        b for b, (t, _) in ended.items() if since <= t < until and b in jobs and (user is None or jobs[b].user == user)
    }
    if not chosen:
        return
    sites_of: dict[int, set[int]] = {}
    for b, site, t, change in opened:
        if b in chosen:
            # processors held from t to the bag's end; a release takes back from its time on
            held[(b, site)] = held.get((b, site), 0.0) + change * (ended[b][0] - t)
            sites_of.setdefault(b, set()).add(site)
    for b in sorted(chosen):
        complete = ended[b][1] >= tasks.get(b, 0)
        sites = sorted(sites_of.get(b, ())) or [-1]
        if by == "site":
            for site in sites:
                row = _row(rows, env.sites[site].name if site >= 0 else "(none)")
                row.jobs += 1
                row.completed += int(complete)
                row.processor_hours += held.get((b, site), 0.0) / 3600.0
            continue
        row = _row(rows, jobs[b].user if by == "user" else grown_by.get(b, "(none)"))
        row.jobs += 1
        row.completed += int(complete)
        row.processor_hours += sum(held.get((b, site), 0.0) for site in sites) / 3600.0


def _account_vms(
    rows: dict[str, AccountRow], log: EventLog, env: Environment, by: str, since: float, until: float, now: float
) -> None:
    """Add each VM whose release falls in the window to its site's or leasing policy's row."""
    leased: dict[tuple[int, int], tuple[float, str]] = {}
    released: dict[tuple[int, int], float] = {}
    for e in log:
        if e.kind == EventKind.VM_LEASE:
            leased[(e.site, e.vm)] = (e.time, e.policy or "(unknown)")
        elif e.kind == EventKind.VM_RELEASE:
            released.setdefault((e.site, e.vm), e.time)
    for key, rows_of_site in _by_site(leased, released, since, until, now):
        site = env.sites[key]
        seconds = np.array([end - start for start, end, _ in rows_of_site])
        costs = charged_costs(site, seconds)
        for (_, _, policy), secs, cost in zip(rows_of_site, seconds.tolist(), costs.tolist(), strict=True):
            row = _row(rows, site.name if by == "site" else policy)
            row.vm_hours = (row.vm_hours or 0.0) + secs / 3600.0
            row.charged_cost = (row.charged_cost or 0.0) + cost


def _by_site(
    leased: dict[tuple[int, int], tuple[float, str]],
    released: dict[tuple[int, int], float],
    since: float,
    until: float,
    now: float,
) -> Iterable[tuple[int, list[tuple[float, float, str]]]]:
    """Per site index: (lease time, release time or now, leasing policy) of the VMs in the window."""
    out: dict[int, list[tuple[float, float, str]]] = {}
    for (site, vm), (start, policy) in leased.items():
        end = released.get((site, vm), now)
        if since <= end < until or (end == now and since <= now <= until):
            out.setdefault(site, []).append((start, end, policy))
    return sorted(out.items())
