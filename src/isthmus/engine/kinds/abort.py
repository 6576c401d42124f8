"""AbortJob: a policy aborts a queued job (KOALA's placement-try limit, KOALA-CS thesis §2.2.3)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from isthmus.engine.kinds import register
from isthmus.engine.state import JobEntry
from isthmus.model.decisions import AbortJob
from isthmus.model.states import JobState
from isthmus.model.status import Refused, StatusCode

if TYPE_CHECKING:
    from isthmus.engine.ops import EngineOps


class AbortKind:
    """Valid when the job is queued."""

    decision = AbortJob

    def validate(self, ops: EngineOps, d: AbortJob) -> JobEntry:
        """The queued job's entry, or Refused."""
        entry = ops.entries.get(d.job_id)
        if entry is None or entry.state is not JobState.QUEUED:
            raise Refused(StatusCode.WRONG_STATE, f"job {d.job_id} is not queued")
        return entry

    def apply(self, ops: EngineOps, d: AbortJob, ctx: JobEntry) -> None:
        """The job leaves its queue as cancelled (a CANCEL event); its reason names the policy."""
        ops.cancel(d.job_id)
        ops.log.reasons[d.job_id] = f"aborted by {d.by or ops.deciding}: {d.reason}"


register(AbortKind())
