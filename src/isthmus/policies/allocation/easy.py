"""EASY backfilling."""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import ClassVar

from isthmus.model.decisions import Decision, start_job
from isthmus.policies.allocation.common import SingleSetPolicy, first_fit, first_fit_held, free_processors, take
from isthmus.policies.api import JobInfo, View
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

    Processors a cluster holds for a waiting job (bags gave them back for it, `View.holds`) are
    that job's alone: it may start on them (in order, or as a backfill under the same rules),
    no other job may. For the head's reservation they count as free (a hold never delays the
    head): a held job that would delay the head is not started, and the engine ends its hold.
    """

    name: ClassVar[str] = "easy"
    backfills_behind_reservation: ClassVar[bool] = True
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
        # processors held for waiting jobs (bags gave them back for them): only those jobs use them
        holds = view.holds() if view.holding else None
        for e in queue:
            held = holds.get(e.job.id) if holds else None
            i = first_fit_held(free, order, e.job.size, held) if held else first_fit(free, order, e.job.size)
            if i < 0:
                head = e
                break
            if held:
                total -= take(free, i, e.job.size, held)
                holds.pop(e.job.id)  # type: ignore[union-attr]
            else:
                free[i] -= e.job.size
                total -= e.job.size
            started.setdefault(i, []).append((now + e.estimated_runtime, e.job.size))
            out.append(start_job(e.job.id, i, None, self.name))
        if head is None or (total <= 0 and not holds):
            return out
        # Reservation for the head: the site where it can start earliest. Processors held for
        # waiting jobs count as free for it: a hold never delays the head (it lasts until the
        # processors being preempted for its job come free, and one round more)
        held_on = [0] * len(free)
        if holds:
            for where in holds.values():
                for i, n in where.items():
                    held_on[i] += n
        res_site, res_time, extra = -1, math.inf, 0
        sites = view.sites
        for i in order:
            t, x = earliest_fit_on(sites[i], free[i] + held_on[i], now, head.job.size, started.get(i, ()))
            if t < res_time:
                res_site, res_time, extra = i, t, x
        if holds:
            return out + _backfill_held(queue, order, free, holds, now, res_site, res_time, extra, self.name)
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
                out.append(start_job(e.job.id, i, None, self.name))
                break
        return out


def _backfill_held(
    queue: Iterator[JobInfo],
    order: Sequence[int],
    free: list[int],
    holds: Mapping[int, Mapping[int, int]],
    now: float,
    res_site: int,
    res_time: float,
    extra: int,
    name: str,
) -> list[Decision]:
    """EASY's backfilling while clusters hold processors for waiting jobs: a job may also use
    the processors held for it (`holds`), no job those held for another; the rules are EASY's
    (a job that does not end by the shadow time uses at most the processors left over then)."""
    out: list[Decision] = []
    for e in queue:
        size = e.job.size
        held = holds.get(e.job.id)
        for i in order:
            own = min(size, held.get(i, 0)) if held else 0
            if free[i] + own < size:
                continue
            if i == res_site and now + e.estimated_runtime > res_time:
                if size > extra:
                    continue
                extra -= size
            take(free, i, size, held)
            out.append(start_job(e.job.id, i, None, name))
            break
    return out
