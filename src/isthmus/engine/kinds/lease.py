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
_VM_USER = int(EventKind.VM_USER)


class LeaseKind:
    """Valid for a positive count on a cloud in its window, within its maximum and the budget."""

    decision = LeaseVms

    def validate(self, engine: Engine, d: LeaseVms) -> tuple[CloudBackend, int, int]:
        """The cloud's backend and the type and image indices, or Refused."""
        backend = engine.cloud_backend(d.site)
        if d.count <= 0:
            raise Refused(StatusCode.INVALID, f"lease of {d.count} VMs")
        vm_type, image = _type_and_image(backend, d)
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
        price = backend.site.type_price_per_increment(vm_type) if backend.site.is_paid else 0.0
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
        return backend, vm_type, image

    def apply(self, engine: Engine, d: LeaseVms, ctx: tuple[CloudBackend, int, int]) -> None:
        """Lease the VMs, pay their first billing increment, schedule the next boundary.

        The VM_LEASE event's value is the instance type's index (0, the default type, for a
        site with one type); a VM serving one user is followed by VM_USER naming the user."""
        backend, vm_type, image = ctx
        now = engine.clock.now
        price = backend.site.type_price_per_increment(vm_type) if backend.site.is_paid else 0.0
        log = engine.log
        policy = log.policy_index(d.by or engine.deciding)
        ledger = engine.ledger
        capped = bool(ledger.caps)
        bill = bool(price) and (engine.budget is not None or (capped and bool(ledger.covering(d.site))))
        cores = backend.site.types[vm_type].cores
        for vm_id in backend.lease(d.count, now, vm_type, image, d.user):
            log.append(now, _VM_LEASE, -1, d.site, vm_id, float(vm_type), -1, policy, slots=cores)
            if d.user is not None:
                log.notes[log.append(now, _VM_USER, -1, d.site, vm_id, 0.0, -1, policy)] = d.user
            engine.spent += price
            if capped:
                ledger.pay(d.site, price, now)
            if bill:
                engine.schedule_billing(now + backend.site.billing_increment, d.site, vm_id)


def _type_and_image(backend: CloudBackend, d: LeaseVms) -> tuple[int, int]:
    """Indices of the instance type and image `d` names (the site's default ones when it names
    none); Refused (UNKNOWN_TARGET) naming what the site offers when it names one it does not."""
    site = backend.site
    types = site.types
    vm_type = 0
    if d.vm_type is not None:
        names = [t.name for t in types]
        if d.vm_type not in names:
            raise Refused(
                StatusCode.UNKNOWN_TARGET,
                f"site {backend.name} offers no instance type {d.vm_type!r} (types: {', '.join(names)})",
            )
        vm_type = names.index(d.vm_type)
    images = site.vm_images
    image = 0
    if d.image is not None:
        found = [i for i, im in enumerate(images) if im.named(d.image)]
        if not found:
            offered = ", ".join(im.name for im in images) or "none declared"
            raise Refused(
                StatusCode.UNKNOWN_TARGET, f"site {backend.name} offers no image {d.image!r} (images: {offered})"
            )
        image = found[0]
    if d.user is not None and not d.user:
        raise Refused(StatusCode.INVALID, "a lease for a user needs the user's name")
    return vm_type, image


register(LeaseKind())
