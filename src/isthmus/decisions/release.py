"""ReleaseVms: release idle VMs of a cloud site (billing stops), never below its minimum."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from isthmus.decisions import register
from isthmus.model.events import EventKind
from isthmus.model.states import VmState
from isthmus.model.status import Refused, StatusCode

if TYPE_CHECKING:
    from isthmus.decisions.ops import B, C, Cloud, E, KindOps, S


@dataclass(frozen=True, slots=True)
class ReleaseVms:
    """Release the VMs `vm_ids` of cloud site `site` (each must be idle)."""

    site: int
    vm_ids: tuple[int, ...]
    by: str = ""


class ReleaseKind:
    """Valid when every VM is ready and idle (running no job: launchers of bags of tasks on it
    are preempted at once) and the site stays at or above its minimum."""

    decision = ReleaseVms

    def validate(self, ops: KindOps[E, B, S, C], d: ReleaseVms) -> tuple[Cloud[E], tuple[int, ...]]:
        """The cloud's backend and the distinct VM ids, or Refused."""
        backend = ops.cloud_backend(d.site)
        ids = tuple(dict.fromkeys(d.vm_ids))
        for vm_id in ids:
            vm = backend.vms.get(vm_id)
            if vm is None or vm.state is not VmState.READY:
                raise Refused(StatusCode.WRONG_STATE, f"VM {vm_id} of {backend.name} is not a ready VM")
            if vm.load:
                raise Refused(StatusCode.WRONG_STATE, f"VM {vm_id} of {backend.name} is running a job")
            if vm.reserved_for >= 0:
                raise Refused(
                    StatusCode.RESERVED, f"VM {vm_id} of {backend.name} is reserved for job {vm.reserved_for}"
                )
        if backend.leased - len(ids) < backend.site.min_vms:
            raise Refused(
                StatusCode.OVER_LIMIT,
                f"releasing {len(ids)} VMs would leave {backend.name} below its minimum of {backend.site.min_vms}",
            )
        return backend, ids

    def apply(self, ops: KindOps[E, B, S, C], d: ReleaseVms, ctx: tuple[Cloud[E], tuple[int, ...]]) -> None:
        """Release the VMs now. A cloud that was at its maximum has room to lease again: with
        jobs waiting, a round follows (the provisioning policy planned this round's leases with
        the cloud full; without that round a job needing a VM of another image could wait for
        ever, nothing else asking for one)."""
        backend, ids = ctx
        now = ops.clock.now
        was_full = backend.leased >= backend.site.max_vms
        backend.release(ids, now)
        policy = ops.log.policy_index(d.by or ops.deciding)
        for vm_id in ids:
            ops.log.append(now, int(EventKind.VM_RELEASE), -1, d.site, vm_id, 0.0, -1, policy)
        if was_full and ops.entries:
            ops.request_round(now)


register(ReleaseKind())
