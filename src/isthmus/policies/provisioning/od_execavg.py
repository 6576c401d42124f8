"""OD-ExecAvg (Villegas dissertation §6.3.1, Table 6.1 policy 5)."""

from __future__ import annotations

from typing import ClassVar

from pydantic import Field

from isthmus.policies.api import JobInfo, View
from isthmus.policies.provisioning.threshold import ThresholdParams, ThresholdProvisioning


class ExecAvgParams(ThresholdParams):
    """Parameters of OD-ExecAvg."""

    initial_runtime: float = Field(
        47.0, gt=0, description="runtime estimate before any job completed, seconds (default: the seed's 47 s mean)"
    )


class OnDemandExecAvg(ThresholdProvisioning):
    """OD-ExecAvg: OD-ExecTime with each queued job's execution time estimated as the mean runtime
    of all jobs completed so far.

    Villegas dissertation §6.3.1, Table 6.1 policy 5 (job duration not needed): "the execution
    time for each queued job is estimated as the average execution time of all the jobs that
    have already completed. An initial prediction of the average job run-time must be provided
    by the user" (`initial_runtime`; its default is the 47 s mean runtime of the seed's
    workloads, §6.4.3). The mean is the engine's (`View.mean_runtime`, exact). Threshold,
    release and liveness rules: `ThresholdProvisioning`.
    """

    name: ClassVar[str] = "od-execavg"
    seed: ClassVar[str] = "Villegas dissertation §6.3.1, Table 6.1 policy 5 (OD-ExecAvg)"
    Params: ClassVar[type[ThresholdParams]] = ExecAvgParams

    def quantity(self, view: View, job: JobInfo) -> float:
        """The mean runtime of completed jobs (the initial estimate before the first)."""
        mean = view.mean_runtime
        if mean is not None:
            return mean
        assert isinstance(self.params, ExecAvgParams)
        return self.params.initial_runtime
