"""The threshold-triggered provisioning policies of the dissertation (§6.3.1, Table 6.1 policies
4-7): OD-ExecTime, OD-ExecAvg, OD-ExecKN and OD-Wait share this rule and differ only in the
per-job quantity they add up over the queue."""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import ClassVar

from pydantic import BaseModel, ConfigDict, Field

from isthmus.decisions import Decision
from isthmus.decisions.wake import WakeUp
from isthmus.policies.api import CloudInfo, JobInfo, View
from isthmus.policies.provisioning.common import (
    Allowance,
    BootObserver,
    idle_release,
    queue_demand,
    usable_clouds,
)
from isthmus.policies.provisioning.od_s import idle_seconds


class ThresholdParams(BaseModel):
    """Parameters shared by the threshold-triggered policies."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    factor: float = Field(
        5.0, gt=0, description="lease when the queued quantity exceeds this many mean provisioning-plus-boot times"
    )
    idle_time: float | None = Field(
        None, ge=0, description="seconds a VM must be idle before it is released; default: the site's"
    )


class ThresholdProvisioning:
    """Lease one VM when the queue's total quantity exceeds `factor` x the observed mean
    provisioning-plus-boot time; release idle VMs when it does not.

    The rule of §6.3.1, policy 4: "the execution time of queued jobs must exceed the average
    time needed to provision and boot a VM instance (as observed for previously leased VMs) by
    a specified factor, which is set in this work to 5"; increase parameter 1 (Table 6.1), so
    one VM per decision (per round). The quantity is `quantity(view, job)` summed over every
    queued job. The mean boot time is observed (`BootObserver`); before the first VM is seen
    the site's boot time stands in for it.

    What the seed leaves unstated, chosen here:

    - release: when the rule does not ask for a lease, an idle VM is released once idle for
      `idle_time` (the site's idle release time by default), except the idle VMs the queue
      claims and the cloud's minimum;
    - liveness: the threshold alone could leave a short queue waiting forever, so when the head
      job of a queue cannot run even on every VM leased (none leased, or a parallel job larger
      than the leased VMs) the policy leases the VMs it lacks, as OD-S would.
    """

    name: ClassVar[str] = ""
    seed: ClassVar[str] = ""
    Params: ClassVar[type[ThresholdParams]] = ThresholdParams

    def __init__(self, params: ThresholdParams | None = None) -> None:
        self.params: ThresholdParams = params if params is not None else self.Params()
        self._boots = BootObserver()

    def quantity(self, view: View, job: JobInfo) -> float:
        """What one queued job adds to the trigger (seconds)."""
        raise NotImplementedError

    def crossing(self, view: View, total: float, threshold: float) -> float:
        """When the queue's quantity will pass `threshold` if nothing else happens (inf: never)."""
        return math.inf

    def observe(self, view: View) -> None:
        """Update the policy's memory from the view before deciding (nothing by default)."""

    def decide(self, view: View) -> Iterable[Decision]:
        """One lease when the queue's quantity passes the threshold, else idle releases."""
        clouds, out = usable_clouds(view, self.name)
        for c in clouds.values():
            self._boots.observe(c, view.now)
        self.observe(view)
        if not clouds:
            return out
        demand = queue_demand(view, clouds)
        target = self._target(view, clouds)
        wake = math.inf
        leased_on: set[int] = set()
        allowance = Allowance(view)
        if target is not None and not allowance.take(target, 1):
            target = None  # the budget pays for no more VMs there
        threshold = self.params.factor * self._boots.mean(target) if target is not None else math.inf
        # with no cloud to lease on (or no budget) the threshold is infinite and the total unused
        total = self._total(view, threshold) if threshold < math.inf else 0.0
        if total > threshold and target is not None:
            out.extend(demand.lease_decisions(target, 1, self.name))
            leased_on.add(target.index)
            if view.round_interval:
                # one VM per decision: look again next round even if nothing else happens
                wake = view.now + view.round_interval
        else:
            if threshold < math.inf:
                wake = self.crossing(view, total, threshold)
            allowance = Allowance(view)
            for i, n in self._starving(view, clouds).items():
                n = allowance.take(clouds[i], n)
                if n > 0:
                    out.extend(demand.lease_decisions(clouds[i], n, self.name))
                    leased_on.add(i)
        for i, c in clouds.items():
            if i in leased_on:
                continue
            idle = idle_seconds(c, self.params.idle_time)
            release, at = idle_release(c, view.now, idle, demand.kept(i), self.name)
            if release is not None:
                out.append(release)
            wake = min(wake, at)
        if wake < math.inf:
            out.append(WakeUp(wake, by=self.name))
        return out

    def _total(self, view: View, threshold: float) -> float:
        """The queue's quantity, added up in queue order until it passes `threshold` (the
        quantities are never negative nor NaN: the rest could not bring it back under)."""
        total = 0.0
        for stage in range(view.stages):
            for e in view.queue(stage):
                total += self.quantity(view, e)
                if total > threshold:
                    return total
        return total

    def _target(self, view: View, clouds: dict[int, CloudInfo]) -> CloudInfo | None:
        """The cloud a lease goes to: the first cloud of the first queue below its maximum."""
        for stage in range(view.stages):
            for i in view.stage_sites(stage):
                c = clouds.get(i)
                if c is not None and c.leased < c.site.max_vms:
                    return c
        return None

    def _starving(self, view: View, clouds: dict[int, CloudInfo]) -> dict[int, int]:
        """VMs to lease so that each queue's head job could run on the VMs leased (liveness)."""
        lease: dict[int, int] = {}
        for stage in range(view.stages):
            head = next(iter(view.queue(stage)), None)
            if head is None:
                continue
            order = view.stage_sites(stage)
            size = head.job.size
            if any(view.sites[i].site.max_processors >= size and view.cloud(i) is None for i in order):
                continue  # a cluster of the queue can hold it
            best = 0
            for i in order:
                c = clouds.get(i)
                if c is None:
                    continue
                have = (c.leased + lease.get(i, 0)) * c.site.cores_per_node
                best = max(best, have)
                if have >= size:
                    break
            if best >= size:
                continue
            for i in order:
                c = clouds.get(i)
                if c is None:
                    continue
                have = c.leased + lease.get(i, 0)
                vms = math.ceil(size / c.site.cores_per_node) - have
                if vms > 0 and have + vms <= c.site.max_vms:
                    lease[i] = lease.get(i, 0) + vms
                    break
        return lease
