"""LeaseVms: lease more VMs on a cloud site, within its maximum, window and the budget cap."""

from __future__ import annotations

from typing import TYPE_CHECKING

from isthmus.engine.backend import CloudBackend
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

    def validate(self, engine: Engine, d: LeaseVms) -> CloudBackend:
        """The cloud's backend, or Refused."""
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
        cap = engine.ledger.refusal(d.site, d.count * price, engine.clock.now) if price else None
        if cap is not None:
            period = f" this {cap.cap.period}" if cap.cap.period else ""
            raise Refused(
                StatusCode.OVER_BUDGET,
                f"lease of {d.count} VMs on {backend.name} (${d.count * price:.4f} for the first increment) "
                f"exceeds budget {cap.cap.name}: ${cap.spent(engine.clock.now):.4f} of ${cap.limit:.4f}{period} "
                "committed",
            )
        return backend

    def apply(self, engine: Engine, d: LeaseVms, backend: CloudBackend) -> None:
        """Lease the VMs, pay their first billing increment, schedule the next boundary."""
        now = engine.clock.now
        price = backend.site.price_per_increment if backend.site.is_paid else 0.0
        log = engine.log
        policy = log.policy_index(d.by or engine.deciding)
        ledger = engine.ledger
        capped = bool(ledger.caps)
        bill = bool(price) and (engine.budget is not None or (capped and bool(ledger.covering(d.site))))
        cores = backend.site.cores_per_node
        for vm_id in backend.lease(d.count, now):
            log.append(now, _VM_LEASE, -1, d.site, vm_id, 0.0, -1, policy, slots=cores)
            engine.spent += price
            if capped:
                ledger.pay(d.site, price, now)
            if bill:
                engine.schedule_billing(now + backend.site.billing_increment, d.site, vm_id)


register(LeaseKind())
