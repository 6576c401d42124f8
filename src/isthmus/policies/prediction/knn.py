"""The `knn` runtime predictor: OD-ExecKN's neighbour search (Villegas dissertation §6.3.1,
Table 6.1 policy 6) as a predictor of its own, for SJF and HSDF."""

from __future__ import annotations

from collections.abc import Iterable
from typing import ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field

from isthmus.decisions import Decision
from isthmus.model.job import Job
from isthmus.policies.api import View
from isthmus.policies.provisioning.common import CompletionObserver
from isthmus.policies.provisioning.od_execkn import job_feature, nearest_mean


class KnnParams(BaseModel):
    """Parameters of `knn`."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    k: int = Field(5, ge=1, description="number of nearest completed jobs averaged")
    feature: Literal["size", "requested_runtime"] = Field(
        "size", description="job attribute the neighbours are found on: processors, or the requested runtime"
    )
    history: int = Field(1000, ge=1, description="completed jobs remembered (most recent)")
    default: float = Field(600.0, gt=0, description="prediction (s) before any job was seen to finish")


class NearestNeighbours:
    """The mean runtime of the k completed jobs nearest to the job on one attribute.

    The neighbour search is OD-ExecKN's (`isthmus.policies.provisioning.od_execkn.nearest_mean`:
    distance on the attribute, ties to the most recently completed), over the completions
    OD-ExecKN sees (`CompletionObserver`): the predictor looks at the view each scheduling
    round (`decide`, which decides nothing) and at each prediction, so a runtime is exact with
    event-triggered rounds and up to one round interval long with periodic rounds, and a job
    that starts and ends between two looks is not counted. Before any completion it predicts `default`, then a
    job's requested runtime is used as the attribute when `feature = "requested_runtime"`
    (0 when unknown).
    """

    name: ClassVar[str] = "knn"
    needs_true_runtimes: ClassVar[bool] = False
    seed: ClassVar[str] = "Villegas dissertation §6.3.1, Table 6.1 policy 6 (OD-ExecKN's k nearest neighbours)"
    Params = KnnParams

    def __init__(self, params: KnnParams | None = None) -> None:
        self.params = params or KnnParams()
        self._key = job_feature(self.params.feature)
        self._done = CompletionObserver(self._key, keep=self.params.history)

    def decide(self, view: View) -> Iterable[Decision]:
        """Record the jobs that finished since the last round (no decision)."""
        self._done.observe(view)
        return ()

    def predict(self, view: View, job: Job) -> float:
        """The mean runtime of the k completed jobs nearest to `job`, or `default`."""
        self._done.observe(view)  # jobs that ended at this instant, before its round
        if self.params.feature == "size":
            feature = float(job.size)
        else:
            feature = float(job.requested_runtime) if job.requested_runtime is not None else 0.0
        value = nearest_mean(self._done.done, feature, self.params.k)
        return self.params.default if value is None else max(value, 1e-9)
