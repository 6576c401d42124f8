"""The ledger of budget caps: what each cap has charged and committed, per period, whether it
can pay more, and to which user each VM's increments are charged (docs/clouds.md, "Budgets").

Charges are booked when a billing increment starts (the lease's first, then each boundary),
in the period of that moment: a day is a UTC day of the clock's time (seconds since the epoch
live; since the simulation's start, counted from the epoch, in simulation), a month a calendar
month of it. Limits can change at run time (an admin raising a cap); what was charged stays.

Attribution (per-user caps). Every VM of a paid cloud has a *user* its increments are charged
to, at the moment each increment starts:

- at its lease, the user it was leased for (`lease_users`: the queued jobs are walked in
  queue order and each new VM goes to the first job not yet covered by free processors or by
  VMs already leased for its user and still unused; "" when no queued job wants it);
- when a job starts on it while nothing else runs on it, that job's user (it stays the VM's
  user after the job ends: an idle VM's increments are charged to the user it last served);
- a job joining a VM that already runs another job does not change the VM's user.

A cap naming `users` covers only increments charged to those users; a cap without users covers
every increment on its sites (a VM leased for no user included).

Commitments (`on_limit = "finish"`). When a job starts on VMs of a site that a finish cap
covers, the increments those VMs need until the job's requested runtime ends are *committed*
(reserved) on every cap covering them, if every such cap can afford them on top of what it
spent and already committed; otherwise the job runs uncommitted. New leases and uncommitted
boundaries must fit in limit - spent - committed, so a committed boundary is always payable
(unless an admin lowers the limit). A commitment is dropped when its job stops.
"""

from __future__ import annotations

import datetime as dt
import json
import math
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from isthmus.engine.backend import CloudBackend, Vm
from isthmus.model.budget import BudgetCap
from isthmus.model.job import Job
from isthmus.model.states import VmState

if TYPE_CHECKING:
    from isthmus.engine.ops import BillingOps, EngineOps
    from isthmus.engine.state import JobEntry

_EPS = 1e-9
_ALIVE = (VmState.BOOTING, VmState.READY)


def period_key(period: str | None, t: float) -> str:
    """The period `t` falls in: "" for a total cap, "YYYY-MM-DD" or "YYYY-MM" otherwise."""
    if period is None:
        return ""
    day = dt.datetime.fromtimestamp(max(0.0, t), tz=dt.UTC)
    return day.strftime("%Y-%m-%d") if period == "day" else day.strftime("%Y-%m")


def period_bounds(period: str | None, t: float) -> tuple[float, float]:
    """The start and end (exclusive) of the period `t` falls in; (-inf, inf) for a total cap."""
    if period is None:
        return -math.inf, math.inf
    day = dt.datetime.fromtimestamp(max(0.0, t), tz=dt.UTC)
    if period == "day":
        start = day.replace(hour=0, minute=0, second=0, microsecond=0)
        end = start + dt.timedelta(days=1)
    else:
        start = day.replace(day=1, hour=0, minute=0, second=0, microsecond=0)
        end = start.replace(year=start.year + 1, month=1) if start.month == 12 else start.replace(month=start.month + 1)
    return start.timestamp(), end.timestamp()


@dataclass
class Commitment:
    """Increments reserved for the runs on one VM: its boundaries from `next_boundary` (the next
    one not yet paid) while before the latest end of its committed runs (`until`, by job id)."""

    site: int
    user: str
    price: float
    increment: float
    next_boundary: float
    until: dict[int, float] = field(default_factory=dict)

    def count(self, start: float, end: float) -> int:
        """How many committed boundaries fall in [start, end)."""
        if not self.until:
            return 0
        last = max(self.until.values())  # boundaries strictly before the latest end
        lo = max(start, self.next_boundary)
        hi = min(end, last)
        if hi <= lo + _EPS:
            return 0
        first = math.ceil((lo - self.next_boundary) / self.increment - _EPS)
        past = math.ceil((hi - self.next_boundary) / self.increment - _EPS)  # first k with b >= hi
        return max(0, past - first)

    def boundaries(self) -> list[float]:
        """Every committed boundary, earliest first."""
        n = self.count(-math.inf, math.inf)
        return [self.next_boundary + k * self.increment for k in range(n)]


@dataclass
class CapState:
    """A cap with the sites it covers (indices), the users it covers (empty: everyone, a VM
    leased for no user included), its charges by period and its refusals so far."""

    cap: BudgetCap
    sites: frozenset[int]
    limit: float
    users: frozenset[str] = frozenset()
    charged: dict[str, float] = field(default_factory=dict)
    #: leases (VMs) this cap refused, and VMs released at a boundary it could not pay
    refused_leases: int = 0
    released_vms: int = 0

    def covers(self, site: int, user: str) -> bool:
        """True when increments of `site` charged to `user` are booked on this cap."""
        return site in self.sites and (not self.users or user in self.users)

    def spent(self, t: float) -> float:
        """Charged in the period of `t`."""
        return self.charged.get(period_key(self.cap.period, t), 0.0)

    def left(self, t: float) -> float:
        """What the cap can still pay in the period of `t` (commitments not deducted)."""
        return max(0.0, self.limit - self.spent(t))


class Ledger:
    """Every cap of an environment, with its charges, the user of each VM and the commitments
    of finish caps (see the module docstring)."""

    def __init__(self, caps: tuple[BudgetCap, ...], site_index: dict[str, int], clouds: frozenset[int]) -> None:
        self.caps: list[CapState] = [
            CapState(
                c,
                frozenset(site_index[s] for s in c.sites) if c.sites else clouds,
                c.limit,
                frozenset(c.users),
            )
            for c in caps
        ]
        #: some cap names users: leases are attributed to users (lease_users)
        self.per_user = any(c.users for c in self.caps)
        #: some cap finishes jobs: starts commit increments (commit_start)
        self.finishing = any(c.cap.on_limit == "finish" for c in self.caps)
        #: the user each VM's increments are charged to, by (site, vm id) ("" or absent: none)
        self.vm_user: dict[tuple[int, int], str] = {}
        #: VMs leased for a user that have not run a job yet
        self.fresh: set[tuple[int, int]] = set()
        #: commitments by (site, vm id)
        self.commits: dict[tuple[int, int], Commitment] = {}
        #: the next boundary not yet paid of each paid VM under a cap, by (site, vm id)
        self.next_due: dict[tuple[int, int], float] = {}
        #: VMs of capped sites whose boundaries are not followed: no cap covers their user
        #: (per-user caps only); a job of a covered user starting on one follows them again
        self.unbilled: set[tuple[int, int]] = set()

    def __bool__(self) -> bool:
        return bool(self.caps)

    def covering(self, site: int) -> list[CapState]:
        """The caps that bound leases on `site` (for any user)."""
        return [c for c in self.caps if site in c.sites]

    def charged_to(self, site: int, user: str) -> list[CapState]:
        """The caps an increment of `site` charged to `user` is booked on."""
        return [c for c in self.caps if c.covers(site, user)]

    def committed(self, cap: CapState, t: float) -> float:
        """Committed on `cap` in the period of `t` and not yet paid."""
        if not self.commits:
            return 0.0
        start, end = period_bounds(cap.cap.period, t)
        return sum(m.price * m.count(start, end) for m in self.commits.values() if cap.covers(m.site, m.user))

    def committed_at(self, site: int, vm_id: int, t: float) -> bool:
        """True when the boundary of VM `vm_id` at `t` is committed."""
        m = self.commits.get((site, vm_id))
        return m is not None and m.count(t - m.increment / 2, t + m.increment / 2) > 0

    def refusal(self, site: int, amount: float, t: float, user: str = "") -> CapState | None:
        """The first cap booking increments of `site` charged to `user` that cannot pay `amount`
        at `t` on top of what it spent and committed, or None. Without per-user caps every cap
        covering the site is checked, whatever `user`."""
        for c in self.caps:
            if site not in c.sites or (c.users and user not in c.users):
                continue
            if c.spent(t) + self.committed(c, t) + amount > c.limit + _EPS:
                return c
        return None

    def pay(self, site: int, amount: float, t: float, user: str = "") -> None:
        """Book `amount` charged at `t` to `user` on every cap that covers it."""
        for c in self.caps:
            if site in c.sites and (not c.users or user in c.users):
                key = period_key(c.cap.period, t)
                c.charged[key] = c.charged.get(key, 0.0) + amount

    def pay_boundary(self, site: int, vm_id: int, price: float, t: float, increment: float) -> CapState | None:
        """A VM reached its boundary at `t`: pay the next increment for its user, or return the
        cap that cannot (a boundary it committed is paid out of that commitment)."""
        user = self.vm_user.get((site, vm_id), "")
        m = self.commits.get((site, vm_id))
        reserved = self.committed_at(site, vm_id, t)
        cap = self.refusal(site, 0.0 if reserved else price, t, user)
        if cap is not None:
            return cap
        self.pay(site, price, t, user)
        if self.per_user or self.finishing:
            self.next_due[(site, vm_id)] = t + increment
        if m is not None:
            m.next_boundary = t + increment
        return None

    def replay(
        self, site: int, leased_at: float, until: float, increment: float, price: float, user: str = ""
    ) -> float:
        """Book the increments a lease from `leased_at` started before `until` (a restart
        rebuilding the ledger); returns their total."""
        if price <= 0:
            return 0.0
        n = max(1, math.ceil((until - leased_at) / increment - _EPS))
        for k in range(n):
            self.pay(site, price, leased_at + k * increment, user)
        return n * price

    def get(self, name: str) -> CapState | None:
        """The cap named `name`."""
        return next((c for c in self.caps if c.cap.name == name), None)

    # ---------------------------------------------------------------- VMs and their users

    def leased(self, site: int, vm_id: int, user: str, next_due: float) -> None:
        """VM `vm_id` was leased for `user` ("" none); its next boundary is at `next_due`."""
        if self.per_user or self.finishing:
            self.next_due[(site, vm_id)] = next_due
        if user:
            self.vm_user[(site, vm_id)] = user
            self.fresh.add((site, vm_id))

    def released(self, site: int, vm_id: int) -> None:
        """VM `vm_id` is gone: forget its user and commitment."""
        self.vm_user.pop((site, vm_id), None)
        self.fresh.discard((site, vm_id))
        self.commits.pop((site, vm_id), None)
        self.next_due.pop((site, vm_id), None)
        self.unbilled.discard((site, vm_id))

    def bills(self, site: int, user: str) -> bool:
        """True when some cap covers increments of `site` charged to `user` (its boundaries
        must be followed)."""
        return any(c.covers(site, user) for c in self.caps)

    def next_boundary(self, key: tuple[int, int], leased_at: float, increment: float, now: float) -> float:
        """The next boundary not yet paid of VM `key` leased at `leased_at`: the one recorded, or
        (not followed meanwhile: increments started were charged to no cap) the first at or after `now`."""
        nb = self.next_due.get(key, leased_at + increment)
        if nb < now - _EPS:
            nb += increment * math.ceil((now - nb) / increment - _EPS)
        return nb

    def may_take(
        self, site: int, vm_id: int, leased_at: float, increment: float, price: float, user: str, now: float
    ) -> bool:
        """Whether a job of `user` may take over VM `vm_id`, running nothing now: yes when the VM
        is already `user`'s, or when every cap naming users that would charge the VM's next
        increment to `user` can pay it then (on top of what it spent and committed). Otherwise
        the job would run on an increment another user paid and be killed at the boundary, and
        the VM's own user's jobs would have to lease again: a start and a kill per increment,
        for ever while the caps refuse (docs/clouds.md, "Budgets")."""
        key = (site, vm_id)
        if price <= 0 or self.vm_user.get(key, "") == user:
            return True
        return self.user_can_pay(site, user, price, self.next_boundary(key, leased_at, increment, now))

    def user_can_pay(self, site: int, user: str, price: float, t: float) -> bool:
        """Whether every cap naming users that books increments of `site` charged to `user` can
        pay `price` more at `t` (on top of what it spent and committed in that period)."""
        for c in self.caps:
            if c.users and c.covers(site, user) and c.spent(t) + self.committed(c, t) + price > c.limit + _EPS:
                return False
        return True

    def started(self, engine: EngineOps, job_id: int, site: int) -> list[tuple[int, float]]:
        """Job `job_id` started now on VMs of cloud `site`: each VM it took idle is now charged to
        its user; with a finish cap, commit the increments its requested runtime needs. Returns
        the VMs whose boundaries must be followed again (vm id, next boundary)."""
        entry = engine.entries[job_id]
        backend = engine.cloud_backend(site)
        user = entry.job.user
        now = engine.clock.now
        follow: list[tuple[int, float]] = []
        for vm_id, cores in entry.alloc:
            vm = backend.vms[vm_id]
            key = (site, vm_id)
            if vm.free + vm.bagged + cores >= vm.cores:  # it ran no other job: the job takes it
                self.vm_user[key] = user
                if key in self.unbilled and self.bills(site, user):
                    self.unbilled.discard(key)
                    nb = self.next_boundary(key, vm.leased_at, backend.site.billing_increment, now)
                    self.next_due[key] = nb
                    follow.append((vm_id, nb))
            self.fresh.discard(key)
        if self.finishing and any(c.cap.on_limit == "finish" for c in self.covering(site)):
            self._commit(engine, entry.job.id, entry.job.requested_runtime, site, entry.alloc)
        return follow

    def _commit(
        self, engine: EngineOps, job_id: int, runtime: float | None, site: int, alloc: tuple[tuple[int, int], ...]
    ) -> None:
        if runtime is None:
            return  # nothing to commit to: the job runs uncommitted
        backend = engine.cloud_backend(site)
        inc = backend.site.billing_increment
        price = backend.site.price_per_increment
        now = engine.clock.now
        end = now + runtime
        planned: dict[tuple[int, int], Commitment] = {}
        for vm_id, _ in alloc:
            vm = backend.vms[vm_id]
            old = self.commits.get((site, vm_id))
            if old is not None:
                nb = old.next_boundary
            else:  # the next boundary not paid yet (recorded; else the first one after now)
                nb = self.next_due.get((site, vm_id), math.nan)
                if math.isnan(nb):
                    nb = vm.leased_at + inc * math.floor((now - vm.leased_at) / inc + 1 + _EPS)
            m = Commitment(site, self.vm_user.get((site, vm_id), ""), price, inc, nb, dict(old.until) if old else {})
            m.until[job_id] = end
            planned[(site, vm_id)] = m
        # affordable on every cap covering the VMs, in every period the new boundaries fall in
        saved = self.commits
        self.commits = {**saved, **planned}
        times = {t for m in planned.values() for t in m.boundaries()}
        caps = [c for c in self.caps if any(c.covers(m.site, m.user) for m in planned.values())]
        ok = all(c.spent(t) + self.committed(c, t) <= c.limit + _EPS for t in times for c in caps)
        if not ok:
            self.commits = saved

    def stopped(self, job_id: int) -> None:
        """Job `job_id`'s run stopped: drop what was committed for it."""
        for key in [k for k, m in self.commits.items() if job_id in m.until]:
            m = self.commits[key]
            del m.until[job_id]
            if not m.until:
                del self.commits[key]


def guard_takeovers(engine: BillingOps) -> None:
    """On every paid cloud covered by a cap naming users, let a job take over an idle VM only if
    its user's caps can pay that VM's next increment (`Ledger.may_take`): the backend's placement,
    the start's validation and the policies' view (`vm_accepts`) then all see it."""
    ledger = engine.ledger
    if not ledger.per_user:
        return
    clock = engine.clock
    for backend in engine.clouds:
        site = backend.index
        if not backend.site.is_paid or not any(c.users and site in c.sites for c in ledger.caps):
            continue

        def takeover(
            vm: Vm,
            job: Job,
            site: int = site,
            backend: CloudBackend = backend,
            inc: float = backend.site.billing_increment,
        ) -> bool:
            return ledger.may_take(site, vm.id, vm.leased_at, inc, backend.price_of(vm), job.user, clock.now)

        backend.takeover = takeover
        backend.selective = True


def lease_users(
    engine: EngineOps, site: int, count: int, price: float | None = None, cores: int | None = None
) -> tuple[list[str], CapState | None]:
    """The users `count` VMs leased now on cloud `site` are for, and the cap that refused the
    rest (the list is shorter than `count` then).

    The queued jobs of every queue using `site` are walked in queue order, skipping those that
    fit in free processors of their sites now and those covered by VMs of `site` already leased
    for their user and still unused (booting or not yet run); each new VM goes to the next job
    still short of VMs (ceil(size / cores) each) whose user's caps can pay its first increment.
    A job whose user's caps cannot is skipped, and that cap refuses the VMs left over if no other
    job wants them; VMs no queued job wants are leased for no user (""). `price` and `cores` are
    those of one VM of the type leased (default: the site's default type)."""
    ledger = engine.ledger
    backend = engine.cloud_backend(site)
    if price is None:
        price = backend.site.price_per_increment if backend.site.is_paid else 0.0
    if cores is None:
        cores = backend.site.cores_per_node
    now = engine.clock.now
    have: dict[str, int] = {}
    for key in ledger.fresh:
        vm = backend.vms.get(key[1]) if key[0] == site else None
        if vm is not None and vm.state in _ALIVE:
            u = ledger.vm_user.get(key, "")
            have[u] = have.get(u, 0) + 1
    free = [b.free for b in engine.backends]
    planned: dict[int, float] = {}  # extra charged per cap index by this lease
    users: list[str] = []
    refused: CapState | None = None

    def payable(user: str) -> CapState | None:
        for i, c in enumerate(ledger.caps):
            if (
                c.covers(site, user)
                and c.spent(now) + ledger.committed(c, now) + planned.get(i, 0.0) + price > c.limit + _EPS
            ):
                return c
        return None

    for stage, sites in enumerate(engine.stage_sites):
        if site not in sites:
            continue
        for e in _queued(engine, stage):
            if len(users) == count:
                return users, None
            size = e.job.size
            if size > backend.site.max_processors:
                continue
            fit = next((i for i in sites if free[i] >= size), None)
            if fit is not None:
                free[fit] -= size
                continue
            user = e.job.user
            need = math.ceil(size / cores)
            covered = min(need, have.get(user, 0))
            have[user] = have.get(user, 0) - covered
            for _ in range(need - covered):
                if len(users) == count:
                    break
                cap = payable(user)
                if cap is not None:
                    refused = refused or cap
                    break
                for i, c in enumerate(ledger.caps):
                    if c.covers(site, user):
                        planned[i] = planned.get(i, 0.0) + price
                users.append(user)
    while len(users) < count and refused is None:
        cap = payable("")
        if cap is not None:
            return users, cap
        for i, c in enumerate(ledger.caps):
            if c.covers(site, ""):
                planned[i] = planned.get(i, 0.0) + price
        users.append("")
    return users, refused


def _queued(engine: EngineOps, stage: int) -> Iterable[JobEntry]:
    return list(engine.queue_book.queues[stage].values())


def cap_rows(ledger: Ledger, site_names: list[str], now: float) -> list[dict[str, object]]:
    """Each cap now, as a row: what it covers, its limit, and in its current period what it
    spent (charged increments), committed (reserved for running jobs by finish caps, not yet
    charged) and has left (limit - spent - committed); its charges by period and refusals."""
    rows: list[dict[str, object]] = []
    for c in ledger.caps:
        spent = c.spent(now)
        committed = ledger.committed(c, now)
        rows.append(
            {
                "name": c.cap.name,
                "sites": sorted(site_names[i] for i in c.sites),
                "users": sorted(c.users),
                "period": c.cap.period,
                "on_limit": c.cap.on_limit,
                "current": period_key(c.cap.period, now),
                "limit": c.limit,
                "spent": spent,
                "committed": committed,
                "left": max(0.0, c.limit - spent - committed),
                "charged": dict(sorted(c.charged.items())),
                "refused_leases": c.refused_leases,
                "released_vms": c.released_vms,
            }
        )
    return rows


def ledger_snapshot(ledger: Ledger) -> str:
    """What a restart cannot rebuild from the leases alone, as JSON: the user each VM is charged
    to and each per-user cap's charges by period (a live manager keeps it in its database)."""
    return json.dumps(
        {
            "vm_users": sorted([s, v, u] for (s, v), u in ledger.vm_user.items() if u),
            "charged": {c.cap.name: c.charged for c in ledger.caps if c.users},
        },
        sort_keys=True,
    )


def restore_vm_users(ledger: Ledger, doc: str | None) -> dict[str, dict[str, float]]:
    """Put back the VM users of a snapshot (before the leases are replayed, so that they are
    booked to those users); returns the per-user caps' charges it recorded, for `merge_charged`."""
    if not doc:
        return {}
    data = json.loads(doc)
    for s, v, u in data.get("vm_users", []):
        ledger.vm_user[(int(s), int(v))] = str(u)
    return {str(k): {str(p): float(x) for p, x in d.items()} for k, d in data.get("charged", {}).items()}


def merge_charged(ledger: Ledger, saved: dict[str, dict[str, float]]) -> None:
    """After the replay: each per-user cap keeps, per period, the larger of what the replay
    booked and what was recorded (a replay books a VM's every increment to its last user)."""
    for c in ledger.caps:
        for period, amount in saved.get(c.cap.name, {}).items():
            c.charged[period] = max(c.charged.get(period, 0.0), amount)
