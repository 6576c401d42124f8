"""OD-2Q: two-pool on-demand provisioning (Villegas dissertation §6.3.1, Table 6.1 policy 8)."""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import ClassVar

from pydantic import BaseModel, ConfigDict, Field

from isthmus.decisions import Decision
from isthmus.decisions.wake import WakeUp
from isthmus.policies.api import View
from isthmus.policies.provisioning.common import Allowance, idle_release, queue_demand, usable_clouds


class Od2QParams(BaseModel):
    """Parameters of OD-2Q."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    short_idle_time: float = Field(
        600.0, ge=0, description="seconds a VM of the short-job pool may stay idle before it is shut down"
    )
    long_idle_time: float = Field(
        0.0, ge=0, description="seconds a VM of the long-job pool may stay idle before it is shut down"
    )


class OnDemand2Q:
    """OD-2Q: OD-S over two pools of VMs, one for short and one for long jobs, each with its own
    idle time; works with the FCFS-2Q allocation policy.

    Villegas dissertation §6.3.1, Table 6.1 policy 8 (trigger: queue size; job duration:
    partial): "a bi-queue on-demand provisioning policy that leases VM instances and assigns them
    to one of two pools. The two pools effectively implement two OD-S queues with separate idle
    time parameters; here, we use longer idle times for VMs that will run short jobs, so that
    thrashing is reduced."

    The pools are the sites of the allocation policy's two queues (FCFS-2Q: queue 0 short, queue
    1 long); each pool runs OD-S (`od-s`): one VM for each of its queue's jobs that cannot be
    assigned, and idle VMs shut down after the pool's idle time. The seed gives no values: a
    short-pool VM is kept idle for 600 s (the seed simulator's VM boot time, §6.5.5: as long as
    a new VM would take), a long-pool VM is shut down as soon as it is idle ("VMs for long jobs
    are almost immediately shut down", §6.5.3). Used with a one-queue allocation policy it
    refuses to decide (ValueError), as it cannot tell the pools apart.
    """

    name: ClassVar[str] = "od-2q"
    seed: ClassVar[str] = "Villegas dissertation §6.3.1, Table 6.1 policy 8 (OD-2Q)"
    Params = Od2QParams
    #: a pool of VMs per queue: the allocation policy keeps short jobs in queue 0, long ones in 1
    queues_needed: ClassVar[int] = 2

    def __init__(self, params: Od2QParams | None = None) -> None:
        self.params = params or Od2QParams()

    def decide(self, view: View) -> Iterable[Decision]:
        """Per pool: leases for its queue's unassigned jobs, releases after the pool's idle time."""
        if view.stages != self.queues_needed:
            raise ValueError(
                f"od-2q needs an allocation policy with a short and a long queue (fcfs-2q); this one has {view.stages}"
            )
        clouds, out = usable_clouds(view, self.name)
        if not clouds:
            return out
        short = set(view.stage_sites(0)) - set(view.stage_sites(1))
        demand = queue_demand(view, clouds)
        allowance = Allowance(view)
        wake = math.inf
        for i, c in clouds.items():
            n = allowance.take(c, demand.lease[i])
            if n > 0:
                out.extend(demand.lease_decisions(c, n, self.name))
                continue
            idle = self.params.short_idle_time if i in short else self.params.long_idle_time
            release, at = idle_release(c, view.now, idle, demand.kept(i), self.name)
            if release is not None:
                out.append(release)
            wake = min(wake, at)
        if wake < math.inf:
            out.append(WakeUp(wake, by=self.name))
        return out
