"""WakeUp: a policy asks for a scheduling round at a later time."""

from __future__ import annotations

from typing import TYPE_CHECKING

from isthmus.engine.kinds import register
from isthmus.model.decisions import WakeUp

if TYPE_CHECKING:
    from isthmus.engine.engine import Engine


class WakeKind:
    """Always valid; a time not after now asks for nothing."""

    decision = WakeUp

    def validate(self, engine: Engine, d: WakeUp) -> None:
        """Nothing to check."""

    def apply(self, engine: Engine, d: WakeUp, ctx: None) -> None:
        """Make sure a round runs at `d.time`."""
        if d.time > engine.clock.now:
            engine.request_round(d.time)


register(WakeKind())
