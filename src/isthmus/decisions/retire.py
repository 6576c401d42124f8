"""RetireVms: a VM takes no new job and is released when its runs end (graceful rebalancing).

Cloud Scheduler (cloud-scheduler-uvic.txt §3.3), configured for graceful shutdown, keeps
pending jobs off the over-allocated VMs: "the next VM of the over-allocated type to finish its
job can be safely shutdown without affecting running jobs". An idle VM is released at once;
a busy one is marked retiring (no job starts on it: `isthmus.engine.backend.CloudBackend.vm_accepts`)
and released, with billing stopping, the moment its last run ends, whatever ended it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from isthmus.decisions import register
from isthmus.model.events import EventKind
from isthmus.model.states import VmState
from isthmus.model.status import Refused, StatusCode

if TYPE_CHECKING:
    from isthmus.decisions.ops import AnyOps, B, C, Cloud, E, KindOps, S


@dataclass(frozen=True, slots=True)
class RetireVms:
    """Retire the ready VMs `vm_ids` of cloud site `site`: each takes no new job and is released
    when its runs end (at once when idle). Cloud Scheduler's graceful rebalancing
    (cloud-scheduler-uvic.txt §3.3): "the next VM of the over-allocated type to finish its job
    can be safely shutdown without affecting running jobs"."""

    site: int
    vm_ids: tuple[int, ...]
    by: str = ""


class RetireKind:
    """Valid when every VM is ready, not retiring already and not reserved for a queued job,
    and the site stays at or above its minimum."""

    decision = RetireVms

    def validate(self, ops: KindOps[E, B, S, C], d: RetireVms) -> tuple[Cloud[E], tuple[int, ...]]:
        """The cloud's backend and the distinct VM ids, or Refused."""
        backend = ops.cloud_backend(d.site)
        ids = tuple(dict.fromkeys(d.vm_ids))
        if not ids:
            raise Refused(StatusCode.INVALID, "a retirement of no VM")
        for vm_id in ids:
            vm = backend.vms.get(vm_id)
            if vm is None or vm.state is not VmState.READY:
                raise Refused(StatusCode.WRONG_STATE, f"VM {vm_id} of {backend.name} is not a ready VM")
            if vm.retiring:
                raise Refused(StatusCode.WRONG_STATE, f"VM {vm_id} of {backend.name} is already retiring")
            if vm.reserved_for >= 0:
                raise Refused(
                    StatusCode.RESERVED, f"VM {vm_id} of {backend.name} is reserved for job {vm.reserved_for}"
                )
        retiring = sum(1 for v in backend.vms.values() if v.retiring and v.state is VmState.READY)
        if backend.leased - retiring - len(ids) < backend.site.min_vms:
            raise Refused(
                StatusCode.OVER_LIMIT,
                f"retiring {len(ids)} VMs would leave {backend.name} below its minimum of {backend.site.min_vms}",
            )
        return backend, ids

    def apply(self, ops: KindOps[E, B, S, C], d: RetireVms, ctx: tuple[Cloud[E], tuple[int, ...]]) -> None:
        """Mark the VMs retiring (VM_RETIRE); release the idle ones now, the others when their
        runs end (VM_RELEASE by the retiring policy)."""
        backend, ids = ctx
        now = ops.clock.now
        log = ops.log
        policy = d.by or ops.deciding
        index = log.policy_index(policy)
        hook = backend.retired_hook
        if not isinstance(hook, RetiredRelease):
            hook = backend.retired_hook = RetiredRelease(ops, backend)
        backend.selective = True
        for vm_id in ids:
            vm = backend.vms[vm_id]
            vm.retiring = True
            hook.by[vm_id] = policy
            log.append(now, int(EventKind.VM_RETIRE), -1, d.site, vm_id, 0.0, -1, index)
            if vm.load == 0:
                hook(vm_id, now)


class RetiredRelease:
    """Releases a retiring VM of one cloud when its last run ends (the backend's `retired_hook`)."""

    def __init__(self, ops: AnyOps, backend: Cloud[Any]) -> None:
        self.ops = ops
        self.backend = backend
        #: the policy that retired each VM not yet released
        self.by: dict[int, str] = {}

    def __call__(self, vm_id: int, now: float) -> None:
        """Release retiring VM `vm_id` now: billing stops, logged as VM_RELEASE by the policy that
        retired it; a round follows."""
        backend = self.backend
        vm = backend.vms.get(vm_id)
        if vm is None or vm.state is not VmState.READY or not vm.retiring:
            return
        backend.release((vm_id,), now)
        log = self.ops.log
        policy = log.policy_index(self.by.pop(vm_id, "retire"))
        log.append(now, int(EventKind.VM_RELEASE), -1, backend.index, vm_id, 0.0, -1, policy)
        self.ops.request_round(now)


register(RetireKind())
