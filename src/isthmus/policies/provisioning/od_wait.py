"""OD-Wait (Villegas dissertation §6.3.1, Table 6.1 policy 7)."""

from __future__ import annotations

from typing import ClassVar

from isthmus.policies.api import JobInfo, View
from isthmus.policies.provisioning.threshold import ThresholdParams, ThresholdProvisioning


class OnDemandWait(ThresholdProvisioning):
    """OD-Wait: lease a VM when the total waiting time of the queued jobs exceeds 5 x the observed
    mean provisioning-plus-boot time.

    Villegas dissertation §6.3.1, Table 6.1 policy 7 (trigger: wait time; job duration not
    needed): "similar to OD-ExecTime, but it considers the waiting times of queued jobs instead
    of their future execution time". A job's waiting time is the time since it entered its
    queue. Called "QueueWait" in §6.5.1. Threshold, release and liveness rules:
    `ThresholdProvisioning`; since waiting times grow while nothing else happens, the policy
    asks to be woken when the threshold will be crossed.
    """

    name: ClassVar[str] = "od-wait"
    seed: ClassVar[str] = "Villegas dissertation §6.3.1, Table 6.1 policy 7 (OD-Wait)"
    Params: ClassVar[type[ThresholdParams]] = ThresholdParams

    def quantity(self, view: View, job: JobInfo) -> float:
        """How long the job has waited in its queue."""
        return max(0.0, view.now - job.queued_at)

    def crossing(self, view: View, total: float, threshold: float) -> float:
        """Waiting times grow by one second per second per queued job."""
        n = view.queued
        return view.now + (threshold - total) / n + 1e-6 if n else float("inf")
