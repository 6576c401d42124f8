"""ReserveVms: hold idle VMs of a cloud for a queued job until it fits (Villegas §7.3.1)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from isthmus.engine.backend import CloudBackend
from isthmus.engine.kinds import register
from isthmus.engine.state import JobEntry
from isthmus.model.decisions import ReserveVms
from isthmus.model.events import EventKind
from isthmus.model.states import JobState
from isthmus.model.status import Refused, Status, StatusCode

if TYPE_CHECKING:
    from isthmus.engine.ops import EngineOps


class ReserveKind:
    """Valid when the job is queued, the site is a cloud among its queue's sites and the count
    is between 0 and the cloud's maximum number of VMs."""

    decision = ReserveVms

    def validate(self, ops: EngineOps, d: ReserveVms) -> tuple[JobEntry, CloudBackend]:
        """The job's entry and the cloud's backend, or Refused."""
        entry = ops.entries.get(d.job_id)
        if entry is None or entry.state is not JobState.QUEUED:
            raise Refused(StatusCode.WRONG_STATE, f"job {d.job_id} is not queued")
        backend = ops.cloud_backend(d.site)
        if d.site not in ops.stage_sites[entry.stage]:
            raise Refused(StatusCode.NOT_ALLOWED, f"site {backend.name} is not among the sites of queue {entry.stage}")
        if not 0 <= d.count <= backend.site.max_vms:
            raise Refused(
                StatusCode.INVALID, f"cannot reserve {d.count} VMs: {backend.name} has at most {backend.site.max_vms}"
            )
        return entry, backend

    def apply(self, ops: EngineOps, d: ReserveVms, ctx: tuple[JobEntry, CloudBackend]) -> None:
        """Change the job's hold on the site; log each VM added (RESERVE, value 1) or given back
        (value 0) and make the hold the job's answer to "why" while it holds any."""
        entry, backend = ctx
        before = len(backend.reservations.get(d.job_id, ()))
        ops.reserving = True
        added, back = backend.reserve(d.job_id, d.count, ops.clock.now)
        held = backend.reservations.get(d.job_id, [])
        by = d.by or ops.deciding
        log = ops.log
        now = ops.clock.now
        policy = log.policy_index(by) if added or back else -1
        for vm_id in added:
            log.append(now, int(EventKind.RESERVE), d.job_id, d.site, vm_id, 1.0, -1, policy)
        for vm_id in back:
            log.append(now, int(EventKind.RESERVE), d.job_id, d.site, vm_id, 0.0, -1, policy)
        if held:
            cores = sum(backend.vms[v].cores for v in held)
            ops.why_not[d.job_id] = Status(
                StatusCode.HELD,
                f"holds {len(held)} reserved VMs ({cores} processors) of {backend.name}; needs {entry.job.size} "
                "processors and waits for the rest",
                by,
            )
        elif before:
            ops.why_not.pop(d.job_id, None)


register(ReserveKind())
