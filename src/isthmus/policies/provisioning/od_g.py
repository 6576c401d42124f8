"""OD-G: On-Demand, geometric (Villegas dissertation §6.3.1, Table 6.1 policy 3)."""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import ClassVar

from pydantic import BaseModel, ConfigDict, Field

from isthmus.decisions import Decision
from isthmus.decisions.wake import WakeUp
from isthmus.policies.api import CloudInfo, View
from isthmus.policies.provisioning.common import Allowance, Demand, idle_release, queue_demand, usable_clouds
from isthmus.policies.provisioning.od_s import idle_seconds


class OdGParams(BaseModel):
    """Parameters of OD-G."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    increase: int = Field(
        2, ge=1, description="increase parameter n: successive leases (releases) of n^0, n^1, ... VMs"
    )
    period: float = Field(20.0, gt=0, description="seconds between two decisions (the seed: 20 s)")
    idle_time: float | None = Field(
        None, ge=0, description="seconds a VM must be idle before it may be released; default: the site's"
    )


class OnDemandGeometric:
    """OD-G: OD-S with geometric provisioning: successive leases of n^0, n^1, n^2, ... VMs.

    Villegas dissertation §6.3.1, Table 6.1 policy 3: "when new instances are needed this policy
    provisions n^0, n^1, n^2, ... machines in successive leases, where n is the increase
    parameter. Similarly, this policy releases increasing amounts of instances. [...] we use a
    period of 20 seconds and (re)lease again whenever there is at least one queued job/idle VM".

    The policy decides once per `period` (it asks to be woken at the next period while jobs are
    queued or VMs idle). At a decision where OD-S would lease (some queued job fits neither on
    free processors nor on booting VMs), it leases n^k VMs, k counting the consecutive lease
    decisions from 0, at most as many as OD-S would lease and within the cloud's maximum (the
    seed does not say whether the sequence may overshoot the need: it does not here, so the
    ramp-up is what slows OD-G down, §6.5.4). A decision without a lease resets k. Releases go
    the same way: n^j idle VMs (idle for at least `idle_time`, the idle time OD-G inherits from
    OD-S; not claimed by the queue) at the j-th consecutive release decision, j reset by a
    decision that releases nothing. Default n = 2 (the seed gives none).
    """

    name: ClassVar[str] = "od-g"
    seed: ClassVar[str] = "Villegas dissertation §6.3.1, Table 6.1 policy 3 (OD-Geometric)"
    Params = OdGParams

    def __init__(self, params: OdGParams | None = None) -> None:
        self.params = params or OdGParams()
        self._next_at = -math.inf
        self._lease_step: dict[int, int] = {}
        self._release_step: dict[int, int] = {}

    def decide(self, view: View) -> Iterable[Decision]:
        """At most once per period: a geometric lease or release step per cloud."""
        clouds, out = usable_clouds(view, self.name)
        if not clouds:
            return out
        now = view.now
        n = self.params.increase
        demand = queue_demand(view, clouds)
        allowance = Allowance(view)
        need = {i: allowance.take(c, demand.lease[i]) for i, c in clouds.items()}
        if now < self._next_at - 1e-9:
            # between decisions: come back at the next one if there will be something to do
            due = self._next_release(view, clouds, demand)
            if any(need.values()):
                out.append(WakeUp(self._next_at, by=self.name))
            elif due < math.inf:
                out.append(WakeUp(max(self._next_at, due), by=self.name))
            return out
        self._next_at = now + self.params.period
        stepped = False
        for i, c in clouds.items():
            if need[i] > 0:
                k = self._lease_step.get(i, 0)
                out.extend(demand.lease_decisions(c, min(need[i], n**k), self.name))
                self._lease_step[i] = k + 1
                self._release_step[i] = 0
                stepped = True
                continue
            self._lease_step[i] = 0
            j = self._release_step.get(i, 0)
            idle = idle_seconds(c, self.params.idle_time)
            release, _ = idle_release(c, now, idle, demand.kept(i), self.name, limit=n**j)
            if release is not None:
                out.append(release)
                self._release_step[i] = j + 1
                stepped = True
            else:
                self._release_step[i] = 0
        if stepped:
            # the sequence goes on at the next decision (more to lease or to release, or the
            # counters to reset): look again then
            out.append(WakeUp(self._next_at, by=self.name))
        else:
            due = self._next_release(view, clouds, demand)
            if due < math.inf:
                out.append(WakeUp(max(self._next_at, due), by=self.name))
        return out

    def _next_release(self, view: View, clouds: dict[int, CloudInfo], demand: Demand) -> float:
        """When the next idle VM becomes releasable (now if one already is; inf if none)."""
        due = math.inf
        for i, c in clouds.items():
            idle = idle_seconds(c, self.params.idle_time)
            release, at = idle_release(c, view.now, idle, demand.kept(i), self.name)
            due = min(due, view.now if release is not None else at)
        return due
