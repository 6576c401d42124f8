"""KOALA-C Highest-SlowDown-First."""

from __future__ import annotations

from collections.abc import Iterable
from typing import ClassVar

from isthmus.model.decisions import Decision
from isthmus.policies.allocation.common import SingleSetPolicy, any_free, fitting_candidates, list_schedule
from isthmus.policies.base import JobInfo, View
from isthmus.policies.prediction.wait import AvailabilityProfile


class HighestSlowdownFirst(SingleSetPolicy):
    """HSDF: the job with the highest estimated slowdown first, on the first site where it fits.

    KOALA-C §IV-A(4): like SJF, but ordered by estimated slowdown, which needs a runtime and a
    wait-time prediction. The estimated slowdown of a queued job is
    (predicted wait + predicted runtime) / predicted runtime, where the predicted runtime is the
    arrival-time prediction (`isthmus.policies.prediction.runtime`) and the predicted wait is
    the time from its submission to its earliest possible start on the availability profile of
    its sites (`isthmus.policies.prediction.wait`). Ties keep arrival order; jobs that fit
    nowhere now stay queued.
    """

    name: ClassVar[str] = "hsdf"
    seed: ClassVar[str] = "KOALA-C §IV-A(4), §III-B (runtime and wait-time prediction)"
    uses_size_index: ClassVar[bool] = True
    uses_prediction: ClassVar[bool] = True

    def decide(self, view: View) -> Iterable[Decision]:
        """Place queued jobs highest-estimated-slowdown first."""
        if not view.queued or not any_free(view):
            return []
        profile = AvailabilityProfile(view, view.stage_sites(0))
        starts: dict[int, float] = {}

        def key(e: JobInfo) -> float:
            size = e.job.size
            start = starts.get(size)
            if start is None:
                start = starts[size] = profile.earliest_start(size)
            wait = max(0.0, start - e.job.submit)
            return -(wait + e.predicted) / e.predicted

        return list_schedule(view, sorted(fitting_candidates(view), key=key), self.name)
