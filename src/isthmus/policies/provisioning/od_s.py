"""OD-S: On-Demand, single VM (Villegas dissertation §6.3.1, Table 6.1 policy 2)."""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import ClassVar

from pydantic import BaseModel, ConfigDict, Field

from isthmus.decisions import Decision
from isthmus.decisions.wake import WakeUp
from isthmus.policies.api import CloudInfo, View
from isthmus.policies.provisioning.common import Allowance, idle_release, queue_demand, usable_clouds


class OdSParams(BaseModel):
    """Parameters of OD-S."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    idle_time: float | None = Field(
        None,
        ge=0,
        description="seconds a VM may stay idle before it is shut down (0: right after its job); "
        "default: the site's idle_release_time",
    )


def idle_seconds(cloud: CloudInfo, idle_time: float | None) -> float:
    """The idle time a policy applies on `cloud`: its own parameter, else the site's."""
    return idle_time if idle_time is not None else cloud.site.idle_release_time


class OnDemandSingle:
    """OD-S: lease one VM for each queued job that cannot be assigned; shut VMs down when idle.

    Villegas dissertation §6.3.1, Table 6.1 policy 2 (trigger: queue size; increase parameter 1):
    "leases a new VM instance for each job that cannot be assigned to a resource. VMs are shut
    down when they are not used for a certain duration, determined as a parameter; by setting
    this parameter to 0 seconds, VMs are released immediately after the job is completed."

    Each round the queued jobs are placed on paper on free processors and on VMs still booting
    (so a job waiting for a booting VM does not get a second one); a job that fits nowhere gets
    one VM per processor-sized piece of it (one VM for a sequential job, §7.2.2 for parallel
    jobs) on the first cloud of its queue below its maximum. Release: an idle VM is shut down
    once idle for `idle_time` seconds, whatever the billing (the seed's OD-S is not
    billing-aware: "VMs are started and stopped reactively", §6.5.1), except the idle VMs the
    queue claims (a parallel head job waiting for more VMs keeps those it has, §7.3.1) and the
    cloud's minimum. The seed gives no default idle time: the site's `idle_release_time` is
    used unless the parameter is set.
    """

    name: ClassVar[str] = "od-s"
    seed: ClassVar[str] = "Villegas dissertation §6.3.1, Table 6.1 policy 2 (OD-S)"
    Params = OdSParams

    def __init__(self, params: OdSParams | None = None) -> None:
        self.params = params or OdSParams()

    def decide(self, view: View) -> Iterable[Decision]:
        """Leases for the jobs that fit nowhere; releases of VMs idle long enough; the next wake-up."""
        clouds, out = usable_clouds(view, self.name)
        if not clouds:
            return out
        demand = queue_demand(view, clouds)
        allowance = Allowance(view)
        wake = math.inf
        for i, c in clouds.items():
            n = allowance.take(c, demand.lease[i])
            if n > 0:
                out.extend(demand.lease_decisions(c, n, self.name))
                continue
            release, at = idle_release(c, view.now, idle_seconds(c, self.params.idle_time), demand.kept(i), self.name)
            if release is not None:
                out.append(release)
            wake = min(wake, at)
        if wake < math.inf:
            out.append(WakeUp(wake, by=self.name))
        return out
