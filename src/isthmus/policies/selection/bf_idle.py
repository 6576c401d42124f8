"""BFIdle forwarding."""

from __future__ import annotations

from typing import ClassVar

from isthmus.policies.selection.common import Candidate, ScoredSelection, best_fit


class BestFitIdle(ScoredSelection):
    """BFIdle: forward each new job to the manager whose idle processors are closest to the job's size.

    Villegas dissertation §7.3.2: "selects the site with the closest number of idle VMs to the size
    of the job" (best fit, as BFCap). The candidates are this manager and its peers, as known from
    their latest resource data plus this round's own placements; ties go to this manager, then to
    peers in their configured order.
    """

    name: ClassVar[str] = "bf-idle"
    seed: ClassVar[str] = "Villegas dissertation §7.3.2"

    def key(self, c: Candidate, size: int) -> float:
        """Best fit."""
        return best_fit(c.idle, size)
