"""KOALA-C On-Demand provisioning."""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import ClassVar

from pydantic import BaseModel, ConfigDict, Field

from isthmus.decisions import Decision
from isthmus.decisions.lease import LeaseVms
from isthmus.decisions.release import ReleaseVms
from isthmus.decisions.wake import WakeUp
from isthmus.policies.api import CloudInfo, View
from isthmus.policies.provisioning.common import demand_free
from isthmus.policies.provisioning.matching import matching_demand


class OnDemandParams(BaseModel):
    """Parameters of On-Demand."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    idle_time: float | None = Field(
        None, ge=0, description="seconds a free-cloud VM may stay idle before release; default: the site's"
    )
    paid_release_window: float = Field(
        120.0,
        gt=0,
        description="release an idle paid VM only within this many seconds before its next billing boundary",
    )


class OnDemand:
    """On-Demand (OD): lease VMs to meet queued demand, release idle ones billing-aware.

    KOALA-C §III-B. Each round, queued jobs (every queue, in order) are placed on paper on the
    free processors of their sites, counting VMs still booting as capacity; for a job that
    fits nowhere, enough VMs to hold it are leased on the first cloud among its sites that can
    take them without passing its maximum. Every cloud is kept at its minimum number of VMs.
    A cloud that the queued demand needs releases nothing. Otherwise, on a free cloud an idle
    VM is released once idle for the idle time; on a paid cloud an idle VM is released only
    close to the end of its current billing increment (within `paid_release_window` seconds of
    it, "when they are close to reaching another hour of their lifetime"), so a VM is never
    given back while time already paid for remains and never starts a new increment idle.
    A cloud outside its availability window (the IBM seed's cloud) is left alone; before the
    window opens the policy asks to be woken when it does.

    With VM requirements (Cloud Scheduler, Appendix I) or VMs not every job may use, jobs are
    placed on paper VM by VM on the VMs that accept them, and a job that fits nowhere gets VMs
    of the cheapest instance type of the first cloud that can serve it
    (`isthmus.policies.provisioning.matching`); idle VMs no queued job was placed on may go.
    """

    name: ClassVar[str] = "on-demand"
    seed: ClassVar[str] = "KOALA-C §III-B (On-Demand provisioning)"
    Params = OnDemandParams
    #: its rule for idle VMs (`release_idle`) decides with a fair-share policy that leases VMs itself
    lends_release_rule: ClassVar[bool] = True

    def __init__(self, params: OnDemandParams | None = None) -> None:
        self.params = params or OnDemandParams()

    def decide(self, view: View) -> Iterable[Decision]:
        """Leases for unmet demand and the minimum; releases of idle VMs; the next wake-up."""
        now = view.now
        out: list[Decision] = []
        clouds: dict[int, CloudInfo] = {}
        # per-round copies of what the scan reads many times (plain dict reads)
        leased: dict[int, int] = {}
        max_vms: dict[int, int] = {}
        cores: dict[int, int] = {}
        planned: dict[int, int] = {}  # VMs to lease per cloud: its minimum first
        for s in view.sites:
            c = view.cloud(s.index)
            if c is None:
                continue
            site = c.site
            opens, closes = site.available_from, site.available_until
            if opens is not None and now < opens:
                out.append(WakeUp(opens, by=self.name))  # look again when the window opens
            elif closes is None or now < closes:
                i = s.index
                clouds[i] = c
                leased[i] = n = c.leased
                max_vms[i] = site.max_vms
                cores[i] = site.cores_per_node
                planned[i] = max(0, site.min_vms - n)
        if not clouds:
            return out
        if view.vm_matching:  # VM requirements or VMs not every job may use: place VM by VM
            leases, claimed = matching_demand(view, clouds, self.name)
            out.extend(leases)
            return self._releases(view, clouds, leased, set(), out, claimed)
        free = demand_free(view)
        for i, c in clouds.items():
            free[i] += (c.booting + planned[i]) * cores[i]
        needed: set[int] = set()
        for stage in range(view.stages):
            order = view.stage_sites(stage)
            if not order:
                continue
            # Clouds of this queue that may still lease; once none may, a job larger than every
            # site's free processors on paper changes nothing, and once none is free the rest of
            # the queue changes nothing: the scan stops (rounds stay short with long queues).
            growable = {i for i in order if i in clouds and leased[i] + planned[i] < max_vms[i]}
            bound = max([free[i] for i in order])
            for e in view.queue(stage):
                size = e.job.size
                if not growable:
                    if bound <= 0:
                        break
                    if size > bound:
                        continue
                placed = False
                for i in order:
                    if free[i] >= size:
                        free[i] -= size
                        placed = True
                        if i in clouds:
                            needed.add(i)
                        break
                if placed:
                    if not growable:
                        bound = max([free[i] for i in order])
                    continue
                for i in order:
                    if i not in clouds:
                        continue
                    per_vm = cores[i]
                    vms = math.ceil((size - free[i]) / per_vm)
                    if leased[i] + planned[i] + vms <= max_vms[i]:
                        planned[i] += vms
                        free[i] += vms * per_vm - size
                        needed.add(i)
                        if leased[i] + planned[i] >= max_vms[i]:
                            growable.discard(i)
                        bound = max([free[j] for j in order])
                        break
        for i, n in planned.items():
            if n > 0:
                out.append(LeaseVms(i, n, by=self.name))
        return self._releases(view, clouds, leased, needed, out)

    def release_idle(
        self,
        view: View,
        clouds: dict[int, CloudInfo],
        leased: dict[int, int],
        kept: dict[int, set[int]],
        out: list[Decision],
    ) -> list[Decision]:
        """Add to `out` the releases On-Demand's rule makes of the idle VMs of `clouds` not in
        `kept` (per cloud; `leased`: the VMs each keeps once this round's other releases are
        done), and the next wake-up (vm-share paired with On-Demand decides the rest)."""
        return self._releases(view, clouds, leased, set(), out, kept)

    def _releases(
        self,
        view: View,
        clouds: dict[int, CloudInfo],
        leased: dict[int, int],
        needed: set[int],
        out: list[Decision],
        claimed: dict[int, set[int]] | None = None,
    ) -> list[Decision]:
        """Add the releases of idle VMs on the clouds the queue does not need (with `claimed`:
        of the idle VMs no queued job was placed on), and the next wake-up."""
        now = view.now
        wake = math.inf
        for i, c in clouds.items():
            if i in needed:
                continue
            spare = leased[i] - c.site.min_vms
            if spare <= 0:
                continue
            release: list[int] = []
            # when each idle VM may go (this loop visits every idle VM of every cloud each round)
            site = c.site
            paid = site.price_per_hour > 0
            if paid:
                inc = site.billing_increment
                window = min(self.params.paid_release_window, inc)
                edge = inc - window
            else:
                idle = self.params.idle_time if self.params.idle_time is not None else site.idle_release_time
            for vm_id, leased_at, idle_since, reserved_for in c.idle_vm_times():
                if len(release) >= spare:
                    break
                if reserved_for >= 0:
                    continue  # held for a queued job (ReserveVms): never released
                if claimed is not None and vm_id in claimed[i]:
                    continue  # a queued job was placed on it
                if paid:
                    into = (now - leased_at) % inc
                    at = now if into >= edge - 1e-9 else now + (edge - into)
                else:
                    at = idle_since + idle
                if at <= now:
                    release.append(vm_id)
                elif at < wake:
                    wake = at
            if release:
                out.append(ReleaseVms(i, tuple(release), by=self.name))
        if wake < math.inf:
            out.append(WakeUp(wake, by=self.name))
        return out
