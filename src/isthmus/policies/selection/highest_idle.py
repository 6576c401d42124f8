"""HighestIdle forwarding."""

from __future__ import annotations

from typing import ClassVar

from isthmus.policies.selection.common import Candidate, ScoredSelection


class HighestIdle(ScoredSelection):
    """HighestIdle: forward each new job to the manager with the most idle processors.

    Villegas dissertation §4.5.2 ("the site with higher number of unused machines") and §7.3.2 ("the
    highest number of idle VMs"). The candidates are this manager and its peers, as known from their
    latest resource data plus this round's own placements; ties go to this manager, then to peers in
    their configured order.
    """

    name: ClassVar[str] = "highest-idle"
    seed: ClassVar[str] = "Villegas dissertation §4.5.2, §7.3.2"

    def key(self, c: Candidate, size: int) -> float:
        """Lower is better."""
        return float(-c.idle)
