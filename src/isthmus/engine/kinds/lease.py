"""LeaseVms: lease more VMs on a cloud site, within its maximum, window and the budget cap."""

from __future__ import annotations

from typing import TYPE_CHECKING

from isthmus.engine.backend import CloudBackend
from isthmus.engine.budgets import CapState, lease_users
from isthmus.engine.kinds import register
from isthmus.model.decisions import LeaseVms
from isthmus.model.events import EventKind
from isthmus.model.status import Refused, StatusCode

if TYPE_CHECKING:
    from isthmus.engine.engine import Engine


_VM_LEASE = int(EventKind.VM_LEASE)


class LeaseKind:
    """Valid for a positive count on a cloud in its window, within its maximum and the budget."""

    decision = LeaseVms

    def validate(self, engine: Engine, d: LeaseVms) -> tuple[CloudBackend, list[str], CapState | None]:
        """The cloud's backend, the user each VM is leased for (fewer than asked when a per-user
        cap refuses the rest: that cap is third), or Refused."""
        backend = engine.cloud_backend(d.site)
        if d.count <= 0:
            raise Refused(StatusCode.INVALID, f"lease of {d.count} VMs")
        room = backend.site.max_vms - backend.leased
        if d.count > room:
            raise Refused(
                StatusCode.OVER_LIMIT,
                f"lease of {d.count} VMs on {backend.name} exceeds its maximum ({backend.site.max_vms}, "
                f"{backend.leased} leased)",
            )
        if not backend.available(engine.clock.now):
            raise Refused(StatusCode.OUTSIDE_WINDOW, f"site {backend.name} is outside its availability window")
        why = backend.lease_refusal(engine.clock.now)
        if why:
            raise Refused(StatusCode.NO_CAPACITY, f"site {backend.name} leases nothing now: {why}")
        price = backend.site.price_per_increment if backend.site.is_paid else 0.0
        if engine.budget is not None and engine.spent + d.count * price > engine.budget + 1e-9:
            raise Refused(
                StatusCode.OVER_BUDGET,
                f"lease of {d.count} VMs on {backend.name} (${d.count * price:.4f} for the first increment) "
                f"exceeds the budget: ${engine.spent:.4f} of ${engine.budget:.4f} committed",
            )
        ledger = engine.ledger
        now = engine.clock.now
        if price and ledger.per_user and any(c.users for c in ledger.covering(d.site)):
            users, cap = lease_users(engine, d.site, d.count)
            if not users and cap is not None:
                cap.refused_leases += d.count
                raise Refused(StatusCode.OVER_BUDGET, _over(engine, d, backend.name, price, cap))
            return backend, users, cap
        cap = ledger.refusal(d.site, d.count * price, now) if price else None
        if cap is not None:
            cap.refused_leases += d.count
            raise Refused(StatusCode.OVER_BUDGET, _over(engine, d, backend.name, price, cap))
        return backend, [""] * d.count, None

    def apply(self, engine: Engine, d: LeaseVms, ctx: tuple[CloudBackend, list[str], CapState | None]) -> None:
        """Lease the VMs (for their users), pay their first billing increment, schedule the next
        boundary; the VMs a per-user cap refused are recorded as a refused lease."""
        backend, users, cap = ctx
        now = engine.clock.now
        price = backend.site.price_per_increment if backend.site.is_paid else 0.0
        log = engine.log
        policy = log.policy_index(d.by or engine.deciding)
        ledger = engine.ledger
        capped = bool(ledger.caps)
        bill = bool(price) and (engine.budget is not None or (capped and bool(ledger.covering(d.site))))
        cores = backend.site.cores_per_node
        for vm_id, user in zip(backend.lease(len(users), now), users, strict=True):
            log.append(now, _VM_LEASE, -1, d.site, vm_id, 0.0, -1, policy, slots=cores)
            engine.spent += price
            if capped:
                ledger.pay(d.site, price, now, user)
                ledger.leased(d.site, vm_id, user, now + backend.site.billing_increment)
            if bill:
                if engine.budget is None and ledger.per_user and not ledger.bills(d.site, user):
                    ledger.unbilled.add((d.site, vm_id))  # no cap covers its user (yet)
                else:
                    engine.schedule_billing(now + backend.site.billing_increment, d.site, vm_id)
        if cap is not None and len(users) < d.count:
            rest = LeaseVms(d.site, d.count - len(users), d.by)
            cap.refused_leases += rest.count
            engine.refuse(rest, Refused(StatusCode.OVER_BUDGET, _over(engine, rest, backend.name, price, cap)), d.by)


def _over(engine: Engine, d: LeaseVms, site: str, price: float, cap: CapState) -> str:
    """The reason a lease is over budget `cap`."""
    now = engine.clock.now
    period = f" this {cap.cap.period}" if cap.cap.period else ""
    users = f" (users {', '.join(sorted(cap.users))})" if cap.users else ""
    committed = engine.ledger.committed(cap, now)
    spent = (
        f"${cap.spent(now):.4f} spent + ${committed:.4f} reserved for running jobs"
        if committed
        else (f"${cap.spent(now):.4f}")
    )
    return (
        f"lease of {d.count} VMs on {site} (${d.count * price:.4f} for the first increment) "
        f"exceeds budget {cap.cap.name}{users}: {spent} of ${cap.limit:.4f}{period} committed"
    )


register(LeaseKind())
