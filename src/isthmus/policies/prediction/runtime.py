"""Runtime predictors (KOALA-C §III-B, "auxiliary predictor module").

The default, `user-last-two`, predicts a newly arrived job's runtime as the mean of the
runtimes of the last two finished jobs of the same user (Tsafrir et al., cited as [18] in
KOALA-C). When the user has no finished job yet it falls back to the job's requested runtime,
then to the mean runtime of all jobs finished so far, then to the `default` parameter.
"""

from __future__ import annotations

from typing import ClassVar

from pydantic import BaseModel, ConfigDict, Field

from isthmus.model.job import Job
from isthmus.policies.api import NoParams, View


class UserLastTwoParams(BaseModel):
    """Parameters of `user-last-two`."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    default: float = Field(600.0, gt=0, description="prediction (s) when nothing else is known")


class UserLastTwo:
    """Mean runtime of the user's last two finished jobs; then requested runtime; then global mean."""

    name: ClassVar[str] = "user-last-two"
    needs_true_runtimes: ClassVar[bool] = False
    seed: ClassVar[str] = "KOALA-C §III-B (mean of the user's last two runtimes)"
    Params = UserLastTwoParams

    def __init__(self, params: UserLastTwoParams | None = None) -> None:
        self.params = params or UserLastTwoParams()

    def predict(self, view: View, job: Job) -> float:
        """Predicted runtime of `job` (seconds, > 0)."""
        last = view.user_runtimes(job.user)
        if last:
            return max(1.0, sum(last) / len(last))
        if job.requested_runtime is not None and job.requested_runtime > 0:
            return job.requested_runtime
        mean = view.mean_runtime
        if mean is not None and mean > 0:
            return mean
        return self.params.default


class RequestedRuntime:
    """The user's requested runtime (the estimate batch schedulers use); else the default."""

    name: ClassVar[str] = "requested"
    needs_true_runtimes: ClassVar[bool] = False
    seed: ClassVar[str] = "IBM meta-schedulers seed §3.1 (backfill uses the user's requested runtime)"
    Params = UserLastTwoParams

    def __init__(self, params: UserLastTwoParams | None = None) -> None:
        self.params = params or UserLastTwoParams()

    def predict(self, view: View, job: Job) -> float:
        """The requested runtime, or the `default` parameter when it is unknown."""
        req = job.requested_runtime
        return req if req is not None and req > 0 else self.params.default


class ExactRuntime:
    """The job's actual runtime (perfect knowledge; simulation only, as SJF-ideal assumes)."""

    name: ClassVar[str] = "exact"
    needs_true_runtimes: ClassVar[bool] = True
    seed: ClassVar[str] = "KOALA-C §IV-A(3) (perfect knowledge, as SJF-ideal)"
    Params = NoParams

    def __init__(self, params: NoParams | None = None) -> None:
        self.params = params

    def predict(self, view: View, job: Job) -> float:
        """The recorded runtime."""
        return max(job.runtime, 1e-9)
