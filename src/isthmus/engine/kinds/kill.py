"""KillJob: a policy kills a running job, optionally requeueing it (a restart)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from isthmus.engine.kinds import register
from isthmus.engine.state import JobEntry
from isthmus.model.decisions import KillJob
from isthmus.model.events import KillCause
from isthmus.model.states import JobState
from isthmus.model.status import Refused, StatusCode

if TYPE_CHECKING:
    from isthmus.engine.ops import EngineOps


class KillKind:
    """Valid when the job is running."""

    decision = KillJob

    def validate(self, ops: EngineOps, d: KillJob) -> JobEntry:
        """The running job's entry, or Refused."""
        entry = ops.entries.get(d.job_id)
        if entry is None or entry.state is not JobState.RUNNING:
            raise Refused(StatusCode.WRONG_STATE, f"job {d.job_id} is not running")
        return entry

    def apply(self, ops: EngineOps, d: KillJob, ctx: JobEntry) -> None:
        """Kill the run (cause POLICY), requeued or failed as the decision says."""
        ops.kill(ctx, KillCause.POLICY, requeue=d.requeue)


register(KillKind())
