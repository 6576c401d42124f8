"""WakeUp: a policy asks for a scheduling round at a later time."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from isthmus.decisions import register

if TYPE_CHECKING:
    from isthmus.decisions.ops import AnyOps


@dataclass(frozen=True, slots=True)
class WakeUp:
    """Ask for a scheduling round at `time` even if nothing else happens by then.

    Rounds run only when the state has changed, so a policy whose decisions depend on time
    alone (an idle VM reaching its release time) says when it next needs to look.
    """

    time: float
    by: str = ""


class WakeKind:
    """Always valid; a time not after now asks for nothing."""

    decision = WakeUp

    def validate(self, ops: AnyOps, d: WakeUp) -> None:
        """Nothing to check."""

    def apply(self, ops: AnyOps, d: WakeUp, ctx: None) -> None:
        """Make sure a round runs at `d.time`."""
        if d.time > ops.clock.now:
            ops.request_round(d.time)


register(WakeKind())
