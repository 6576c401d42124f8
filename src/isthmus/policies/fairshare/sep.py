"""Site-EquiPartition (SEP), KOALA-CS thesis §3.7.1."""

from __future__ import annotations

from isthmus.decisions import Decision
from isthmus.policies.api import BagInfo, View
from isthmus.policies.fairshare.common import EquiPartitionBase, SiteRoom, tie_keys


class SiteEquiPartition(EquiPartitionBase):
    """Site-EquiPartition: each site's idle processors are split evenly among the bags.

    KOALA-CS thesis §3.7.1: "SEP considers each cluster separately, and divides the set of idle
    nodes on each cluster over the CS jobs ... it does not grow on a cluster if that cluster is
    loaded for 80% or more. For shrinking, the SEP policy acts the same as GEP": a waiting rigid
    job that could start on a site if bags gave back processors there makes each bag on that
    site shrink an equal amount (§3.1.3). Per site, the bags' equal shares are computed over the
    processors free or held by bags there (and not claimed by waiting rigid jobs); a bag gets no
    more than the tasks it has waiting; between bags holding alike there, an odd processor goes
    to the one holding fewer elsewhere (then with fewer tasks done; `tie_keys`). With
    `rebalance` (EquiPartition: equal allocations at each time), bags above their share give back
    processors so that the others reach theirs;
    which processors is the shrink schedule's choice (§3.7.2: at random, seeded).
    """

    name = "sep"
    seed = "KOALA-CS thesis §3.7.1 (Site-EquiPartition), §3.1.3, §3.7.2"

    def share(
        self,
        view: View,
        active: list[BagInfo],
        sites: list[int],
        rooms: dict[int, SiteRoom],
        held: list[dict[int, int]],
    ) -> list[Decision]:
        """Per site in index order: grow from its idle processors, rebalance within it."""
        out: list[Decision] = []
        left = [b.unclaimed for b in active]
        for i in sites:
            room = rooms[i]
            if room.load >= self.params.max_load or room.need:
                continue
            current = [h[i] for h in held]
            wants = [c + n for c, n in zip(current, left, strict=True)]
            ties = tie_keys(held, active, i)
            grow, shrink = self.split(room.room + sum(current), current, wants, room.growable, ties)
            for k, bag in enumerate(active):
                if grow[k]:
                    out.append(self.grow(bag, i, grow[k]))
                    held[k][i] += grow[k]
                    left[k] -= grow[k]
                if shrink[k]:
                    out.append(self.shrink(bag, i, shrink[k]))
                    held[k][i] -= shrink[k]
        return out


__all__ = ["SiteEquiPartition"]
