"""LowestQlenCpus forwarding."""

from __future__ import annotations

from typing import ClassVar

from isthmus.policies.selection.common import Candidate, ScoredSelection


class LowestQlenCpus(ScoredSelection):
    """LowestQlenCpus: forward each new job to the manager whose waiting jobs request the fewest
    processors.

    Villegas dissertation §4.5.2 (Fig. 4.11): it "considers not only the number of jobs, but the sum
    of their requested processors". The candidates are this manager and its peers, as known from
    their latest resource data plus this round's own placements; ties go to this manager, then to
    peers in their configured order.
    """

    name: ClassVar[str] = "lowest-qlen-cpus"
    seed: ClassVar[str] = "Villegas dissertation §4.5.2"

    def key(self, c: Candidate, size: int) -> float:
        """Lower is better."""
        return float(c.queued_processors)
