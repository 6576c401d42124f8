"""EASY backfilling."""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import ClassVar

from isthmus.model.decisions import Decision, StartJob
from isthmus.policies.allocation.common import SingleSetPolicy, first_fit, free_processors
from isthmus.policies.api import View
from isthmus.policies.prediction.wait import earliest_fit_on


class EasyBackfilling(SingleSetPolicy):
    """EASY backfilling (Lifka 1995; the IBM seed's LoadLeveler backfill, §3.1).

    Jobs start in arrival order while they fit. The first job that does not fit gets a
    reservation at its shadow time: the earliest time enough processors free up on a site if
    running jobs end at their requested runtimes. A later job may jump ahead if it fits now and
    either ends (by its requested runtime) before the shadow time or uses only the processors
    left over at the shadow time, so that it never delays the reserved job. The reservation
    is recomputed every round, as pyss and Alea do (peers/README.md). On several sites the
    reservation is on the site where the head can start earliest; other sites backfill freely.
    """

    name: ClassVar[str] = "easy"
    seed: ClassVar[str] = "IBM meta-schedulers seed §3.1 (LoadLeveler backfill; Lifka 1995)"

    def decide(self, view: View) -> Iterable[Decision]:
        """Start the head while it fits, then backfill behind its reservation."""
        order = view.stage_sites(0)
        free = free_processors(view)
        total = sum(free[i] for i in order)
        out: list[Decision] = []
        now = view.now
        queue = iter(view.queue(0))
        head = None
        started: dict[int, list[tuple[float, int]]] = {}
        for e in queue:
            i = first_fit(free, order, e.job.size)
            if i < 0:
                head = e
                break
            free[i] -= e.job.size
            total -= e.job.size
            started.setdefault(i, []).append((now + e.estimated_runtime, e.job.size))
            out.append(StartJob(e.job.id, i, by=self.name))
        if head is None or total <= 0:
            return out
        # Reservation for the head: the site where it can start earliest.
        res_site, res_time, extra = -1, math.inf, 0
        sites = view.sites
        for i in order:
            t, x = earliest_fit_on(sites[i], free[i], now, head.job.size, started.get(i, ()))
            if t < res_time:
                res_site, res_time, extra = i, t, x
        for e in queue:
            if total <= 0:
                break
            size = e.job.size
            if size > total:
                continue
            ends_in_time = now + e.estimated_runtime <= res_time
            for i in order:
                if free[i] < size:
                    continue
                if i == res_site and not ends_in_time:
                    if size > extra:
                        continue
                    extra -= size
                free[i] -= size
                total -= size
                out.append(StartJob(e.job.id, i, by=self.name))
                break
        return out
