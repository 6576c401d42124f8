"""ReserveVms: hold idle VMs of a cloud for a queued job until it fits (Villegas §7.3.1)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from isthmus.decisions import register
from isthmus.model.events import EventKind
from isthmus.model.states import JobState
from isthmus.model.status import Refused, Status, StatusCode

if TYPE_CHECKING:
    from isthmus.decisions.ops import B, C, Cloud, E, KindOps, S


@dataclass(frozen=True, slots=True)
class ReserveVms:
    """Hold `count` idle VMs of cloud site `site` for queued job `job_id` (0 drops its hold).

    Villegas dissertation §7.3.1: "partially available resources need to be marked until there
    are enough to fulfill the number of required processors by a job, so that they are not
    released due to being idle". The engine keeps the VMs already held for the job and adds
    idle VMs held for no one (longest idle first) up to `count`, or as many as there are; a
    count below what is held gives back the most recently reserved ones. A reserved VM runs
    no other job and no release of it is accepted; the reservation ends when the job starts
    (on its reserved VMs first) or leaves the queue. A count lets a policy reserve in the
    round it starts other jobs, before it knows which VMs those take.
    """

    job_id: int
    site: int
    count: int
    by: str = ""


class ReserveKind:
    """Valid when the job is queued, the site is a cloud among its queue's sites and the count
    is between 0 and the cloud's maximum number of VMs."""

    decision = ReserveVms

    def validate(self, ops: KindOps[E, B, S, C], d: ReserveVms) -> tuple[E, Cloud[E]]:
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

    def apply(self, ops: KindOps[E, B, S, C], d: ReserveVms, ctx: tuple[E, Cloud[E]]) -> None:
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
