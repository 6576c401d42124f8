"""Wait-time prediction for HSDF (KOALA-C §III-B, "traditional wait-time estimation").

A queued job's predicted start is the earliest time at which one of its sites would have
enough free processors if the running jobs end at their estimated ends (start + requested
runtime, else predicted runtime) and nothing else starts first: the availability profile
used by backfilling schedulers. Its predicted wait is that start minus its submit time.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Sequence

from isthmus.policies.base import View


class AvailabilityProfile:
    """Per-site step functions of free processors over time, from estimated ends of running jobs."""

    def __init__(self, view: View, sites: Sequence[int]) -> None:
        self.now = view.now
        self._profiles: list[tuple[list[float], list[int]]] = []
        for i in sites:
            s = view.sites[i]
            times = [view.now]
            free = [s.free]
            running = s.running
            for end, job_id in s.by_estimated_end:
                e = running.get(job_id)
                if e is None:
                    continue
                t = max(end, view.now)
                if t == times[-1]:
                    free[-1] += e.job.size
                else:
                    times.append(t)
                    free.append(free[-1] + e.job.size)
            self._profiles.append((times, free))

    def earliest_start(self, size: int) -> float:
        """Earliest time any of the sites has `size` free processors (inf if never)."""
        best = math.inf
        for times, free in self._profiles:
            if free[-1] < size:
                continue
            # free is non-decreasing: binary search the first step with enough room
            k = bisect.bisect_left(free, size)
            best = min(best, times[k])
        return best


