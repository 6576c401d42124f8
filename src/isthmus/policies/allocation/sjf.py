"""KOALA-C Shortest-Job-First, with predicted and with exact runtimes."""

from __future__ import annotations

from collections.abc import Iterable
from typing import ClassVar

from isthmus.decisions import Decision
from isthmus.model.environment import Environment
from isthmus.policies.allocation.common import (
    SingleSetPolicy,
    all_sites,
    any_free,
    free_processors,
    list_schedule,
    queue_fitting_by_runtime,
)
from isthmus.policies.api import AllocationDefaults, RuntimeKey, View
from isthmus.policies.prediction.choice import PredictorParams


class ShortestJobFirst(AllocationDefaults):
    """SJF: the job with the shortest predicted runtime first, on the first site where it fits.

    KOALA-C §IV-A(3). Runtimes are predicted when a job arrives, by default as the mean of the
    runtimes of the user's last two finished jobs (KOALA-C §III-B; see
    `isthmus.policies.prediction.runtime`); the `predictor` parameter chooses another
    predictor. Ties keep arrival order; jobs that fit nowhere stay queued.
    """

    name: ClassVar[str] = "sjf"
    seed: ClassVar[str] = "KOALA-C §IV-A(3), §III-B (user's last two runtimes)"
    uses_size_index: ClassVar[bool] = True
    runtime_index: ClassVar[RuntimeKey | None] = "predicted"
    uses_prediction: ClassVar[bool] = True
    Params = PredictorParams

    def __init__(self, params: PredictorParams | None = None) -> None:
        self.params = params or PredictorParams()

    def stage_sites(self, env: Environment) -> list[tuple[int, ...]]:
        """One queue over every site."""
        return all_sites(env)

    def decide(self, view: View) -> Iterable[Decision]:
        """Place queued jobs shortest-predicted first (visiting only the jobs that can start)."""
        if not view.queued or not any_free(view):
            return []
        free = free_processors(view)
        return list_schedule(view, queue_fitting_by_runtime(view, 0, free, "predicted"), self.name, free=free)


class ShortestJobFirstIdeal(SingleSetPolicy):
    """SJF-ideal: SJF with perfect knowledge of every job's runtime (KOALA-C §IV-A(3)).

    Only meaningful in simulation, where the workload records the actual runtimes.
    """

    name: ClassVar[str] = "sjf-ideal"
    seed: ClassVar[str] = "KOALA-C §IV-A(3) (SJF-ideal)"
    uses_size_index: ClassVar[bool] = True
    runtime_index: ClassVar[RuntimeKey | None] = "runtime"
    needs_true_runtimes: ClassVar[bool] = True

    def decide(self, view: View) -> Iterable[Decision]:
        """Place queued jobs shortest-actual-runtime first (visiting only the jobs that can start)."""
        if not view.queued or not any_free(view):
            return []
        free = free_processors(view)
        return list_schedule(view, queue_fitting_by_runtime(view, 0, free, "runtime"), self.name, free=free)
