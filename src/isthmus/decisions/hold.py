"""HoldJob: a policy explains why it did not start a queued job this round."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from isthmus.decisions import register
from isthmus.model.status import Refused, StatusCode

if TYPE_CHECKING:
    from isthmus.decisions.ops import AnyOps


@dataclass(frozen=True, slots=True)
class HoldJob:
    """Explain why a queued job was not started this round (a policy's answer to "why?")."""

    job_id: int
    reason: str
    by: str = ""


class HoldKind:
    """Always "refused" with code HELD: the job stays queued and the reason is recorded."""

    decision = HoldJob

    def validate(self, ops: AnyOps, d: HoldJob) -> None:
        """Record the policy's reason as the job's status (code HELD)."""
        raise Refused(StatusCode.HELD, d.reason)

    def apply(self, ops: AnyOps, d: HoldJob, ctx: None) -> None:
        """Never reached: a hold changes nothing."""


register(HoldKind())
