"""HoldBagRelease: hold for a waiting rigid job the processors bags give back for no job
(KOALA-CS thesis §3.1, unobtrusiveness; `isthmus.engine.bags`, "Holds")."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from isthmus.decisions import register
from isthmus.model.states import JobState
from isthmus.model.status import Refused, StatusCode

if TYPE_CHECKING:
    from isthmus.decisions.ops import B, C, E, KindOps, S


@dataclass(frozen=True, slots=True)
class HoldBagRelease:
    """Hold for waiting rigid job `job_id` the processors of cluster site `site` that bags are
    giving back for no waiting job (each as it comes free) and, up to its size, free ones held
    for no job (KOALA-CS thesis §3.1: a bag never delays a rigid job by more than the preemption
    time). A fair-share policy counts them for the job, so bags give back nothing for it and no
    shrink names it; without the hold another job could take them as they come free."""

    job_id: int
    site: int
    by: str = ""


class HoldReleaseKind:
    """Valid when the job is a queued rigid job, the site a cluster among its queue's sites that
    holds bags, the job's hold there misses processors, and some processor there is being given
    back for no waiting job (the hold has one coming: a hold of free processors alone that its
    job does not start on ends after the round, and a new one would follow at once)."""

    decision = HoldBagRelease

    def validate(self, ops: KindOps[E, B, S, C], d: HoldBagRelease) -> E:
        """The job's entry, or Refused."""
        entry = ops.entries.get(d.job_id)
        if entry is None:
            raise Refused(StatusCode.UNKNOWN_TARGET, f"job {d.job_id} does not exist")
        if entry.state is not JobState.QUEUED:
            raise Refused(StatusCode.WRONG_STATE, f"job {d.job_id} is not queued")
        if not 0 <= d.site < len(ops.backends):
            raise Refused(StatusCode.UNKNOWN_TARGET, f"site index {d.site} does not exist")
        backend = ops.backends[d.site]
        if not backend.holds_bags or ops.cloud_at(d.site) is not None:
            raise Refused(StatusCode.NOT_ALLOWED, f"site {backend.name} is not a cluster that holds bags of tasks")
        if d.site not in ops.stage_sites[entry.stage]:
            raise Refused(StatusCode.NOT_ALLOWED, f"site {backend.name} is not among the sites of queue {entry.stage}")
        missing, spare = ops.bags.release_room(d.site, d.job_id)
        if missing <= 0:
            raise Refused(StatusCode.OVER_LIMIT, f"job {d.job_id} already holds its {entry.job.size} processors there")
        if spare <= 0:
            raise Refused(StatusCode.NO_CAPACITY, f"site {backend.name} has no processor being given back for no job")
        return entry

    def apply(self, ops: KindOps[E, B, S, C], d: HoldBagRelease, ctx: E) -> None:
        """Hold them (HOLD as each free one joins the hold)."""
        ops.bags.hold_release(d.site, d.job_id, d.by or ops.deciding)


register(HoldReleaseKind())
