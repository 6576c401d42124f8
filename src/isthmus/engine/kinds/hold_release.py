"""HoldBagRelease: hold for a waiting rigid job the processors bags give back for no job
(KOALA-CS thesis §3.1, unobtrusiveness; `isthmus.engine.bags`, "Holds")."""

from __future__ import annotations

from typing import TYPE_CHECKING

from isthmus.engine.backend import CloudBackend
from isthmus.engine.kinds import register
from isthmus.engine.state import JobEntry
from isthmus.model.decisions import HoldBagRelease
from isthmus.model.states import JobState
from isthmus.model.status import Refused, StatusCode

if TYPE_CHECKING:
    from isthmus.engine.ops import EngineOps


class HoldReleaseKind:
    """Valid when the job is a queued rigid job, the site a cluster among its queue's sites that
    holds bags, the job's hold there misses processors, and some processor there is being given
    back for no waiting job (the hold has one coming: a hold of free processors alone that its
    job does not start on ends after the round, and a new one would follow at once)."""

    decision = HoldBagRelease

    def validate(self, ops: EngineOps, d: HoldBagRelease) -> JobEntry:
        """The job's entry, or Refused."""
        entry = ops.entries.get(d.job_id)
        if entry is None:
            raise Refused(StatusCode.UNKNOWN_TARGET, f"job {d.job_id} does not exist")
        if entry.state is not JobState.QUEUED:
            raise Refused(StatusCode.WRONG_STATE, f"job {d.job_id} is not queued")
        if not 0 <= d.site < len(ops.backends):
            raise Refused(StatusCode.UNKNOWN_TARGET, f"site index {d.site} does not exist")
        backend = ops.backends[d.site]
        if not backend.holds_bags or isinstance(backend, CloudBackend):
            raise Refused(StatusCode.NOT_ALLOWED, f"site {backend.name} is not a cluster that holds bags of tasks")
        if d.site not in ops.stage_sites[entry.stage]:
            raise Refused(StatusCode.NOT_ALLOWED, f"site {backend.name} is not among the sites of queue {entry.stage}")
        missing, spare = ops.bags.release_room(d.site, d.job_id)
        if missing <= 0:
            raise Refused(StatusCode.OVER_LIMIT, f"job {d.job_id} already holds its {entry.job.size} processors there")
        if spare <= 0:
            raise Refused(StatusCode.NO_CAPACITY, f"site {backend.name} has no processor being given back for no job")
        return entry

    def apply(self, ops: EngineOps, d: HoldBagRelease, ctx: JobEntry) -> None:
        """Hold them (HOLD as each free one joins the hold)."""
        ops.bags.hold_release(d.site, d.job_id, d.by or ops.deciding)


register(HoldReleaseKind())
