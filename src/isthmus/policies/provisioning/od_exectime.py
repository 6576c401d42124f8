"""OD-ExecTime (Villegas dissertation §6.3.1, Table 6.1 policy 4)."""

from __future__ import annotations

from typing import ClassVar

from isthmus.policies.api import JobInfo, View
from isthmus.policies.provisioning.threshold import ThresholdParams, ThresholdProvisioning


class OnDemandExecTime(ThresholdProvisioning):
    """OD-ExecTime: lease a VM when the known execution time of the queued jobs exceeds 5 x the
    observed mean provisioning-plus-boot time.

    Villegas dissertation §6.3.1, Table 6.1 policy 4 (trigger: execution time; job duration
    known; increase parameter 1): "uses the future execution time of queued jobs, which is
    assumed to be known a priori, to decide on leasing or releasing VM instances. The decision
    to lease is adaptive to the cloud, in that the execution time of queued jobs must exceed
    the average time needed to provision and boot a VM instance (as observed for previously
    leased VMs) by a specified factor, which is set in this work to 5."

    A job's execution time "known a priori" is its requested runtime when the workload gives
    one, else (in simulation) its actual runtime: the engine's `estimated_runtime`. The
    threshold, release and liveness rules are `ThresholdProvisioning`'s.
    """

    name: ClassVar[str] = "od-exectime"
    seed: ClassVar[str] = "Villegas dissertation §6.3.1, Table 6.1 policy 4 (OD-ExecTime)"
    Params: ClassVar[type[ThresholdParams]] = ThresholdParams

    def quantity(self, view: View, job: JobInfo) -> float:
        """The job's known execution time."""
        return job.estimated_runtime
