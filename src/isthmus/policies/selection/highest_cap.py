"""HighestCap forwarding."""

from __future__ import annotations

from typing import ClassVar

from isthmus.policies.selection.common import Candidate, ScoredSelection


class HighestCap(ScoredSelection):
    """HighestCap: forward each new job to the manager with the highest capacity (idle plus potential
    VMs).

    Villegas dissertation §7.3.2: "the site with the highest capacity, this is, potential number of
    VMs that can be used" (a cloud that may lease 100 VMs, 50 of them busy and 20 idle: 20 idle + 30
    potential = 50). The candidates are this manager and its peers, as known from their latest
    resource data plus this round's own placements; ties go to this manager, then to peers in their
    configured order.
    """

    name: ClassVar[str] = "highest-cap"
    seed: ClassVar[str] = "Villegas dissertation §7.3.2"

    def key(self, c: Candidate, size: int) -> float:
        """Lower is better."""
        return float(-c.capacity)
