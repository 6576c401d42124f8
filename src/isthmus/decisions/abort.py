"""AbortJob: a policy aborts a queued job (KOALA's placement-try limit, KOALA-CS thesis §2.2.3)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from isthmus.decisions import register
from isthmus.model.states import JobState
from isthmus.model.status import Refused, StatusCode

if TYPE_CHECKING:
    from isthmus.decisions.ops import B, C, E, KindOps, S


@dataclass(frozen=True, slots=True)
class AbortJob:
    """Abort queued job `job_id`: it leaves the queue unrun, as cancelled, with `reason` (KOALA's
    abort after too many placement tries, KOALA-CS thesis §2.2.3)."""

    job_id: int
    reason: str
    by: str = ""


class AbortKind:
    """Valid when the job is queued."""

    decision = AbortJob

    def validate(self, ops: KindOps[E, B, S, C], d: AbortJob) -> E:
        """The queued job's entry, or Refused."""
        entry = ops.entries.get(d.job_id)
        if entry is None or entry.state is not JobState.QUEUED:
            raise Refused(StatusCode.WRONG_STATE, f"job {d.job_id} is not queued")
        return entry

    def apply(self, ops: KindOps[E, B, S, C], d: AbortJob, ctx: E) -> None:
        """The job leaves its queue as cancelled (a CANCEL event); its reason names the policy."""
        ops.cancel(d.job_id)
        ops.log.reasons[d.job_id] = f"aborted by {d.by or ops.deciding}: {d.reason}"


register(AbortKind())
