"""HoldJob: a policy explains why it did not start a queued job this round."""

from __future__ import annotations

from typing import TYPE_CHECKING

from isthmus.engine.kinds import register
from isthmus.model.decisions import HoldJob
from isthmus.model.status import Refused, StatusCode

if TYPE_CHECKING:
    from isthmus.engine.ops import EngineOps


class HoldKind:
    """Always "refused" with code HELD: the job stays queued and the reason is recorded."""

    decision = HoldJob

    def validate(self, ops: EngineOps, d: HoldJob) -> None:
        """Record the policy's reason as the job's status (code HELD)."""
        raise Refused(StatusCode.HELD, d.reason)

    def apply(self, ops: EngineOps, d: HoldJob, ctx: None) -> None:
        """Never reached: a hold changes nothing."""


register(HoldKind())
