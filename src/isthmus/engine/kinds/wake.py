"""WakeUp: a policy asks for a scheduling round at a later time."""

from __future__ import annotations

from typing import TYPE_CHECKING

from isthmus.engine.kinds import register
from isthmus.model.decisions import WakeUp

if TYPE_CHECKING:
    from isthmus.engine.ops import EngineOps


class WakeKind:
    """Always valid; a time not after now asks for nothing."""

    decision = WakeUp

    def validate(self, ops: EngineOps, d: WakeUp) -> None:
        """Nothing to check."""

    def apply(self, ops: EngineOps, d: WakeUp, ctx: None) -> None:
        """Make sure a round runs at `d.time`."""
        if d.time > ops.clock.now:
            ops.request_round(d.time)


register(WakeKind())
