"""LowestQlen forwarding."""

from __future__ import annotations

from typing import ClassVar

from isthmus.policies.selection.common import Candidate, ScoredSelection


class LowestQlen(ScoredSelection):
    """LowestQlen: forward each new job to the manager with the fewest jobs waiting.

    Villegas dissertation §4.5.2 (Fig. 4.11): "sends a job to the site with the smaller number of
    jobs awaiting for execution". The candidates are this manager and its peers, as known from their
    latest resource data plus this round's own placements; ties go to this manager, then to peers in
    their configured order.
    """

    name: ClassVar[str] = "lowest-qlen"
    seed: ClassVar[str] = "Villegas dissertation §4.5.2"

    def key(self, c: Candidate, size: int) -> float:
        """Lower is better."""
        return float(c.queued_jobs)
