"""Wait-time prediction for HSDF (KOALA-C §III-B, "traditional wait-time estimation").

A queued job's predicted start is the earliest time at which one of its sites would have
enough free processors if the running jobs end at their estimated ends (start + requested
runtime, else predicted runtime) and nothing else starts first: the availability profile
used by backfilling schedulers. Its predicted wait is that start minus its submit time.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Iterable, Iterator, Sequence

from isthmus.policies.api import SiteInfo, View


def profile_steps(
    site: SiteInfo, free: int, now: float, started: Sequence[tuple[float, int]] = ()
) -> Iterator[tuple[float, int]]:
    """Free processors of `site` over time: `free` now, growing by each running job's size at
    its estimated end (and by the (estimated end, size) pairs of runs `started` this round).

    Yields (time, free processors) steps in strictly increasing time order, one per distinct
    estimated end; free never decreases. Runs ending at the same instant are one step, so the
    processors left over at that instant count all of them (EASY's extra processors),
    and an end already past (a run outliving its estimate) counts as free now.
    """
    running = site.running
    ends: Iterable[tuple[float, int]] = ((end, running[j].job.size) for end, j in site.by_estimated_end if j in running)
    if started:
        ends = sorted([*ends, *started])
    time = now
    for end, size in ends:
        if end > time:
            yield time, free
            time = end
        free += size
    yield time, free


def earliest_fit_on(
    site: SiteInfo, free: int, now: float, size: int, started: Sequence[tuple[float, int]] = ()
) -> tuple[float, int]:
    """The first step of `profile_steps(site, free, now, started)` with `size` free processors
    and how many are left over then, (inf, 0) if none: EASY's reservation (shadow time and
    extra processors), in one loop without generators since it runs every round; with no run
    `started`, over the running jobs in place, only as far as the first fit."""
    running = site.running
    time = now
    if started:
        ends = sorted([*((end, running[j].job.size) for end, j in site.by_estimated_end if j in running), *started])
        for end, more in ends:
            if end > time:
                if free >= size:
                    return time, free - size
                time = end
            free += more
    else:
        for end, j in site.by_estimated_end:
            entry = running.get(j)
            if entry is None:
                continue
            if end > time:
                if free >= size:
                    return time, free - size
                time = end
            free += entry.job.size
    if free >= size:
        return time, free - size
    return math.inf, 0


def earliest_starts(view: View, sites: Sequence[int], sizes: Sequence[int]) -> list[float]:
    """For each of `sizes` (ascending), the earliest time any of `sites` has that many free
    processors on its availability profile (inf if never): what
    `AvailabilityProfile(view, sites).earliest_start(size)` gives, walking each site's estimated
    ends only as far as the largest size needs."""
    best = [math.inf] * len(sizes)
    wanted = len(sizes)
    for i in sites:
        site = view.sites[i]
        k = 0  # the smallest size not yet fitted on this site
        for time, free in profile_steps(site, site.free, view.now):  # lazily: stops at the break
            while k < wanted and sizes[k] <= free:
                best[k] = min(best[k], time)
                k += 1
            if k == wanted:
                break
    return best


class AvailabilityProfile:
    """Per-site step functions of free processors over time, from estimated ends of running jobs."""

    def __init__(self, view: View, sites: Sequence[int]) -> None:
        self._profiles: list[tuple[list[float], list[int]]] = []
        for i in sites:
            steps = list(profile_steps(view.sites[i], view.sites[i].free, view.now))
            self._profiles.append(([t for t, _ in steps], [f for _, f in steps]))

    def earliest_start(self, size: int) -> float:
        """Earliest time any of the sites has `size` free processors (inf if never)."""
        best = math.inf
        for times, free in self._profiles:
            if free[-1] >= size:
                best = min(best, times[bisect.bisect_left(free, size)])  # free is non-decreasing
        return best
