"""LeaseVms: lease more VMs on a cloud site, within its maximum, window and the budget caps."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, TypeAlias

from isthmus.decisions import register
from isthmus.model.events import EventKind
from isthmus.model.status import Refused, StatusCode

if TYPE_CHECKING:
    from isthmus.decisions.ops import B, C, Cloud, E, KindOps, S


@dataclass(frozen=True, slots=True)
class LeaseVms:
    """Lease `count` more VMs on cloud site `site`.

    `vm_type` names one of the site's instance types and `image` one of its images (None: the
    site's first, its default); with `user` the VMs serve that user alone (they run only that
    user's jobs: Cloud Scheduler's per-user VMs, cloud-scheduler-uvic.txt §3.3).
    """

    site: int
    count: int
    by: str = ""
    vm_type: str | None = None
    image: str | None = None
    user: str | None = None


_VM_LEASE = int(EventKind.VM_LEASE)
_VM_USER = int(EventKind.VM_USER)

#: what validation hands apply: the backend, the type and image indices, the user each VM is
#: leased for (for the budgets) and the per-user cap that refused the rest (fewer users than asked)
_Ctx: TypeAlias = "tuple[Cloud[E], int, int, list[str], C | None]"


class LeaseKind:
    """Valid for a positive count on a cloud in its window, within its maximum and the budgets."""

    decision = LeaseVms

    def validate(self, ops: KindOps[E, B, S, C], d: LeaseVms) -> _Ctx[E, C]:
        """The cloud's backend, the type and image indices, the user each VM is charged to (fewer
        than asked when a per-user cap refuses the rest: that cap last), or Refused."""
        backend = ops.cloud_backend(d.site)
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
        if not backend.available(ops.clock.now):
            raise Refused(StatusCode.OUTSIDE_WINDOW, f"site {backend.name} is outside its availability window")
        why = backend.lease_refusal(ops.clock.now)
        if why:
            raise Refused(StatusCode.NO_CAPACITY, f"site {backend.name} leases nothing now: {why}")
        price = backend.site.type_price_per_increment(vm_type) if backend.site.is_paid else 0.0
        if ops.billing.budget is not None and ops.billing.spent + d.count * price > ops.billing.budget + 1e-9:
            raise Refused(
                StatusCode.OVER_BUDGET,
                f"lease of {d.count} VMs on {backend.name} (${d.count * price:.4f} for the first increment) "
                f"exceeds the budget: ${ops.billing.spent:.4f} of ${ops.billing.budget:.4f} committed",
            )
        ledger = ops.ledger
        now = ops.clock.now
        if price and ledger.per_user and any(c.users for c in ledger.covering(d.site)):
            if d.user is not None:  # VMs leased to serve one user (vm-share) are charged to that user
                cap = ledger.refusal(d.site, d.count * price, now, d.user)
                if cap is not None:
                    cap.refused_leases += d.count
                    raise Refused(StatusCode.OVER_BUDGET, _over(ops, d, backend.name, price, cap))
                return backend, vm_type, image, [d.user] * d.count, None
            users, cap = ops.lease_users(d.site, d.count, price, backend.site.types[vm_type].cores)
            if not users and cap is not None:
                cap.refused_leases += d.count
                raise Refused(StatusCode.OVER_BUDGET, _over(ops, d, backend.name, price, cap))
            return backend, vm_type, image, users, cap
        cap = ledger.refusal(d.site, d.count * price, now) if price else None
        if cap is not None:
            cap.refused_leases += d.count
            raise Refused(StatusCode.OVER_BUDGET, _over(ops, d, backend.name, price, cap))
        return backend, vm_type, image, [d.user or ""] * d.count, None

    def apply(self, ops: KindOps[E, B, S, C], d: LeaseVms, ctx: _Ctx[E, C]) -> None:
        """Lease the VMs (for their users), pay their first billing increment, schedule the next
        boundary; the VMs a per-user cap refused are recorded as a refused lease.

        The VM_LEASE event's value is the instance type's index (0, the default type, for a
        site with one type); a VM serving one user is followed by VM_USER naming the user."""
        backend, vm_type, image, users, cap = ctx
        ops.billing.lease_churn(len(users), d.by or ops.deciding)
        now = ops.clock.now
        price = backend.site.type_price_per_increment(vm_type) if backend.site.is_paid else 0.0
        log = ops.log
        policy = log.policy_index(d.by or ops.deciding)
        ledger = ops.ledger
        capped = bool(ledger.caps)
        bill = bool(price) and (ops.billing.budget is not None or (capped and bool(ledger.covering(d.site))))
        cores = backend.site.types[vm_type].cores
        for vm_id, user in zip(backend.lease(len(users), now, vm_type, image, d.user), users, strict=True):
            log.append(now, _VM_LEASE, -1, d.site, vm_id, float(vm_type), -1, policy, slots=cores)
            if d.user is not None:
                log.notes[log.append(now, _VM_USER, -1, d.site, vm_id, 0.0, -1, policy)] = d.user
            ops.billing.spent += price
            if capped:
                ledger.pay(d.site, price, now, user)
                ledger.leased(d.site, vm_id, user, now + backend.site.billing_increment)
            if bill:
                if ops.billing.budget is None and ledger.per_user and not ledger.bills(d.site, user):
                    ledger.unbilled.add((d.site, vm_id))  # no cap covers its user (yet)
                else:
                    ops.billing.schedule(now + backend.site.billing_increment, d.site, vm_id)
        if cap is not None and len(users) < d.count:
            rest = LeaseVms(d.site, d.count - len(users), d.by, vm_type=d.vm_type, image=d.image, user=d.user)
            cap.refused_leases += rest.count
            ops.refuse(rest, Refused(StatusCode.OVER_BUDGET, _over(ops, rest, backend.name, price, cap)), d.by)


def _over(ops: KindOps[E, B, S, C], d: LeaseVms, site: str, price: float, cap: C) -> str:
    """The reason a lease is over budget `cap`."""
    now = ops.clock.now
    period = f" this {cap.cap.period}" if cap.cap.period else ""
    users = f" (users {', '.join(sorted(cap.users))})" if cap.users else ""
    committed = ops.ledger.committed(cap, now)
    spent = (
        f"${cap.spent(now):.4f} spent + ${committed:.4f} reserved for running jobs"
        if committed
        else (f"${cap.spent(now):.4f}")
    )
    return (
        f"lease of {d.count} VMs on {site} (${d.count * price:.4f} for the first increment) "
        f"exceeds budget {cap.cap.name}{users}: {spent} of ${cap.limit:.4f}{period} committed"
    )


def _type_and_image(backend: Cloud[E], d: LeaseVms) -> tuple[int, int]:
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
