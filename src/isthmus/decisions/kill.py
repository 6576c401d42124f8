"""KillJob: a policy kills a running job, optionally requeueing it (a restart)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from isthmus.decisions import register
from isthmus.model.events import KillCause
from isthmus.model.states import JobState
from isthmus.model.status import Refused, StatusCode

if TYPE_CHECKING:
    from isthmus.decisions.ops import B, C, E, KindOps, S


@dataclass(frozen=True, slots=True)
class KillJob:
    """Kill running job `job_id`; with `requeue` it goes back to its queue (a restart)."""

    job_id: int
    reason: str
    requeue: bool = False
    by: str = ""


class KillKind:
    """Valid when the job is running."""

    decision = KillJob

    def validate(self, ops: KindOps[E, B, S, C], d: KillJob) -> E:
        """The running job's entry, or Refused."""
        entry = ops.entries.get(d.job_id)
        if entry is None or entry.state is not JobState.RUNNING:
            raise Refused(StatusCode.WRONG_STATE, f"job {d.job_id} is not running")
        return entry

    def apply(self, ops: KindOps[E, B, S, C], d: KillJob, ctx: E) -> None:
        """Kill the run (cause POLICY), requeued or failed as the decision says."""
        ops.kill(ctx, KillCause.POLICY, requeue=d.requeue)


register(KillKind())
