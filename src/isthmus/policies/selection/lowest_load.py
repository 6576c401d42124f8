"""LowestLoad forwarding."""

from __future__ import annotations

from typing import ClassVar

from isthmus.policies.selection.common import Candidate, ScoredSelection


class LowestLoad(ScoredSelection):
    """LowestLoad: forward each new job to the manager with the lowest load.

    Villegas dissertation §4.5.2: "load here as the aggregated number of CPUs in the queue *minus*
    the number of available resources". The candidates are this manager and its peers, as known from
    their latest resource data plus this round's own placements; ties go to this manager, then to
    peers in their configured order.
    """

    name: ClassVar[str] = "lowest-load"
    seed: ClassVar[str] = "Villegas dissertation §4.5.2"

    def key(self, c: Candidate, size: int) -> float:
        """Lower is better."""
        return float(c.load)
