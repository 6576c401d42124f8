"""Grid-EquiPartition (GEP), KOALA-CS thesis §3.7.1."""

from __future__ import annotations

from isthmus.decisions import Decision
from isthmus.policies.api import BagInfo, View
from isthmus.policies.fairshare.common import EquiPartitionBase, SiteRoom, take_evenly


class GridEquiPartition(EquiPartitionBase):
    """Grid-EquiPartition: the idle processors of the whole grid are split evenly among the bags.

    KOALA-CS thesis §3.7.1: "GEP considers all the idle nodes, regardless of which cluster they
    are on, as a single set that is to be divided amongst the CS jobs ... it does not consider to
    which clusters these nodes belong ... GEP does not grow any job if the total load of the grid
    is 80% or higher ... Shrinking is site-based": a waiting rigid job that could start on a site
    if bags gave back processors there makes each bag on that site shrink an equal amount
    (§3.1.3). A bag's growth is taken from the sites with the most idle processors first; with
    `rebalance` (EquiPartition: equal allocations at each time) a bag above its grid share gives
    back processors where it holds the most, chosen by the shrink schedule (§3.7.2).
    """

    name = "gep"
    seed = "KOALA-CS thesis §3.7.1 (Grid-EquiPartition), §3.1.3, §3.7.2"

    def share(
        self,
        view: View,
        active: list[BagInfo],
        sites: list[int],
        rooms: dict[int, SiteRoom],
        held: list[dict[int, int]],
    ) -> list[Decision]:
        """Grid-wide targets; growth from the sites with the most idle processors first."""
        online = sum(view.sites[i].online for i in sites)
        other = sum(rooms[i].load * view.sites[i].online for i in sites)
        if not online or other / online >= self.params.max_load:
            return []
        open_sites = [i for i in sites if not rooms[i].need]
        growable = {i: rooms[i].growable for i in open_sites}
        current = [sum(h.values()) for h in held]
        wants = [c + b.unclaimed for c, b in zip(current, active, strict=True)]
        pool = sum(rooms[i].room for i in open_sites) + sum(current)
        grow, shrink = self.split(pool, current, wants, sum(growable.values()))
        out: list[Decision] = []
        for k, bag in enumerate(active):
            need = grow[k]
            while need > 0:
                i = max(growable, key=lambda s: (growable[s], -s))
                n = min(need, growable[i])
                out.append(self.grow(bag, i, n))
                growable[i] -= n
                held[k][i] += n
                need -= n
        for k, bag in enumerate(active):
            if not shrink[k]:
                continue
            where = list(held[k])
            amounts = take_evenly(shrink[k], [held[k][i] for i in where])
            for i, n in zip(where, amounts, strict=True):
                if n:
                    out.append(self.shrink(bag, i, n))
                    held[k][i] -= n
        return out


__all__ = ["GridEquiPartition"]
