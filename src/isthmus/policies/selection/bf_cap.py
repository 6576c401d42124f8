"""BFCap forwarding."""

from __future__ import annotations

from typing import ClassVar

from isthmus.policies.selection.common import Candidate, ScoredSelection, best_fit


class BestFitCap(ScoredSelection):
    """BFCap: forward each new job to the manager whose capacity is closest to the job's size.

    Villegas dissertation §7.3.2: "assigns jobs to the site with the closest capacity to the number
    of requested processors". Closest is read as best fit: the smallest capacity that holds the job;
    when none holds it, the largest. The candidates are this manager and its peers, as known from
    their latest resource data plus this round's own placements; ties go to this manager, then to
    peers in their configured order.
    """

    name: ClassVar[str] = "bf-cap"
    seed: ClassVar[str] = "Villegas dissertation §7.3.2"

    def key(self, c: Candidate, size: int) -> float:
        """Best fit."""
        return best_fit(c.capacity, size)
