"""VM-Share: an even share of each cloud's VMs per user with work, rebalanced gracefully or by kill.

Cloud Scheduler (cloud-scheduler-uvic.txt §3.3): "The VMs are evenly distributed among all
users with jobs in the queue. As other users submit jobs, Cloud Scheduler re-balances the VM
allocations by shutting down over-allocated VMs and starting under-allocated VMs. ... a single
user will get the full allocation of Cloud Scheduler's VMs, but once a second user submits
jobs, half of the first user's VMs will be shut down to free resources for the second user."
Rebalancing is graceful (pending jobs of the over-allocated user are kept off its VMs; "the next
VM of the over-allocated type to finish its job can be safely shutdown") or by kill ("the VMs
are shutdown immediately ... the Condor Job Scheduler re-queues the job"). §3.2: VMs are booted
to match the queued jobs' requirements (Appendix I) and shut down once no job needs them.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import ClassVar, Literal, cast

from pydantic import BaseModel, ConfigDict, Field

from isthmus.decisions import Decision
from isthmus.decisions.kill import KillJob
from isthmus.decisions.release import ReleaseVms
from isthmus.decisions.retire import RetireVms
from isthmus.policies.api import CloudInfo, IdleReleaseRule, JobInfo, View, VmInfo, capability
from isthmus.policies.provisioning.common import usable_clouds
from isthmus.policies.vmfit import LeasePlan, PaperVms, lease_plan


class VmShareParams(BaseModel):
    """Parameters of VM-Share."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    mode: Literal["graceful", "kill"] = Field(
        "graceful",
        description='"graceful": a VM over its user\'s share takes no new job and is released when its job '
        'ends; "kill": its job is killed and requeued and the VM released at once',
    )


def even_shares(wants: dict[str, int], capacity: int, held: dict[str, int]) -> dict[str, int]:
    """Split `capacity` VMs among users by max-min fairness: a user wanting no more than an even
    share gets what it wants; the others get the even split of the rest, the remainder one VM
    each to those holding most now (then by name), so that a remainder never moves a VM."""
    shares: dict[str, int] = {}
    left = capacity
    rest = sorted((u for u in wants if wants[u] > 0), key=lambda u: (wants[u], u))
    while rest:
        level = left // len(rest)
        u = rest[0]
        if wants[u] > level:
            break
        shares[u] = wants[u]
        left -= wants[u]
        rest.pop(0)
    if rest:
        level, extra = divmod(left, len(rest))
        for k, u in enumerate(sorted(rest, key=lambda u: (-held.get(u, 0), u))):
            shares[u] = level + (1 if k < extra else 0)
    return shares


class VmShare:
    """VM-Share: each cloud's VMs split evenly among the users with work, every VM serving one user.

    Cloud Scheduler §3.3 (cloud-scheduler-uvic.txt). Each round, per cloud in its window: a
    user's want is the VMs busy with its jobs plus the VMs its queued jobs need (none for those
    that fit in free processors of a cluster of their queue now; the others placed on paper
    on its idle and booting VMs that accept them, VM requirements included, then the cheapest
    instance type meeting each job's requirements). The cloud's `max_vms` is split among the
    users by max-min fairness (`even_shares`): after rebalancing, users with queued work hold
    equal shares give or take one VM. A user over its share gives VMs back: idle ones released
    at once; busy ones retired (mode graceful: RetireVms, the VM takes no new job and is released
    when its job ends) or their jobs killed and requeued (mode kill: RetireVms then KillJob, the
    VM released at once). A user under its share gets VMs leased for it (LeaseVms with the user:
    they run its jobs only), up to its share and the room left below `max_vms`. Idle VMs no queued
    job of their user needs are released. VMs not serving a user (leased by hand) are left alone.
    It leases and releases itself: the environment's provisioning policy decides nothing ("none"),
    or lends its release rule ("on-demand"; `pair`: idle VMs no job needs then go by On-Demand's
    billing-aware rule).
    """

    name: ClassVar[str] = "vm-share"
    seed: ClassVar[str] = "Cloud Scheduler §3.3 (even VM distribution among users, graceful or kill rebalancing)"
    Params = VmShareParams
    #: what it splits: each cloud's VMs among users
    shares: ClassVar[Literal["bags", "vms"]] = "vms"
    #: leases and releases VMs itself (build_policies pairs it with a provisioning policy that
    #: decides nothing or lends its release rule)
    leases_vms: ClassVar[bool] = True

    def __init__(self, params: VmShareParams | None = None) -> None:
        self.params = params or VmShareParams()
        #: the On-Demand policy whose release rule decides when idle VMs no job needs go
        self._release_rule: IdleReleaseRule | None = None

    def pair(self, provisioning: object) -> None:
        """Run with On-Demand provisioning (build_policies): On-Demand's demand is what each
        user's queued jobs need (placed VM by VM, the cheapest type that fits: the same code,
        `isthmus.policies.vmfit`), vm-share splits it by even shares and rebalances, and an idle
        VM no job of its user needs goes by On-Demand's rule (a paid VM only close to the end of
        its billing increment, a free one after the idle time) instead of at once."""
        if not capability(provisioning, "lends_release_rule"):
            raise TypeError(
                f"vm-share pairs with a provisioning policy that lends its release rule, not {provisioning!r}"
            )
        self._release_rule = cast(IdleReleaseRule, provisioning)

    def decide(self, view: View) -> Iterable[Decision]:
        """Per cloud: releases, retirements (and kills) of over-share VMs, leases for users under their share."""
        clouds, out = usable_clouds(view, self.name)
        if not clouds:
            return out
        on_clusters = self._on_clusters(view)
        for i, c in clouds.items():
            out.extend(self._cloud(view, i, c, on_clusters))
        return out

    @staticmethod
    def _on_clusters(view: View) -> set[int]:
        """Ids of the queued jobs that fit, on paper and in queue order, in free processors of a
        cluster of their queue now (as On-Demand counts them): they need no VM."""
        free = view.free_processors()
        placed: set[int] = set()
        for stage in range(view.stages):
            clusters = [i for i in view.stage_sites(stage) if view.cloud(i) is None]
            if not clusters:
                continue
            for e in view.queue(stage):
                if e.job.vm is not None:
                    continue
                for i in clusters:
                    if free[i] >= e.job.size:
                        free[i] -= e.job.size
                        placed.add(e.job.id)
                        break
        return placed

    def _cloud(self, view: View, index: int, c: CloudInfo, on_clusters: set[int]) -> list[Decision]:
        vms = [v for v in c.vms() if v.owner is not None]
        mine: dict[str, list[VmInfo]] = {}
        for v in vms:
            if not v.retiring:
                mine.setdefault(v.owner or "", []).append(v)
        queued: dict[str, list[JobInfo]] = {}
        for stage in range(view.stages):
            if index in view.stage_sites(stage):
                for e in view.queue(stage):
                    if e.job.id not in on_clusters:
                        queued.setdefault(e.job.user, []).append(e)
        wants: dict[str, int] = {}
        plans: dict[str, list[tuple[LeasePlan, JobInfo]]] = {}
        claimed: dict[str, set[int]] = {}
        for user in dict.fromkeys([*mine, *queued]):
            own = mine.get(user, [])
            paper = PaperVms(c, own)
            need: list[tuple[LeasePlan, JobInfo]] = []
            for e in queued.get(user, ()):
                if paper.place(e.job):
                    continue
                plan = lease_plan(c, e.job)
                if plan is None or paper.take_planned(plan, e.job):
                    continue
                paper.plan(plan, e.job)
                need.append((plan, e))
            busy = {v.id for v in own if v.ready and not v.idle}
            claimed[user] = paper.claimed - busy
            plans[user] = need
            wants[user] = len(busy) + len(claimed[user]) + sum(p.count for p, _ in need)
        held = {u: len(v) for u, v in mine.items()}
        shares = even_shares(wants, c.site.max_vms, held)
        out: list[Decision] = []
        release: list[int] = []
        retire: list[int] = []
        kills: list[int] = []
        # paired with On-Demand, VMs over a share are given back only as far as users under
        # theirs need the room (Cloud Scheduler rebalances "as other users submit jobs")
        short = sum(max(0, shares.get(u, 0) - len(mine.get(u, ()))) for u in plans if plans[u])
        needed = max(0, short - (c.site.max_vms - c.leased))
        for user, own in mine.items():
            share = shares.get(user, 0)
            idle = [v for v in own if v.idle and v.reserved_for < 0]
            # idle VMs no queued job of the user was placed on: not needed any more (§3.2)
            spare = [v for v in idle if v.id not in claimed[user]]
            over = len(own) - share
            if self._release_rule is None:
                gone = spare + [v for v in idle if v.id in claimed[user]][: max(0, over - len(spare))]
            else:  # what others need back now; idle VMs no job needs go by On-Demand's rule
                over = min(over, needed)
                needed -= max(0, over)
                gone = (spare + [v for v in idle if v.id in claimed[user]])[: max(0, over)]
            release.extend(v.id for v in gone)
            over -= len(gone)
            if over <= 0:
                continue
            working = [v for v in own if v.ready and v.free < v.cores]
            for v in self._latest_first(c, working)[:over]:
                retire.append(v.id)
                if self.params.mode == "kill":
                    kills.extend(j for j in self._jobs_on(c, v.id) if j not in kills)
        if release:
            out.append(ReleaseVms(index, tuple(release), by=self.name))
        if self._release_rule is not None:
            kept = set(release).union(retire, *claimed.values())
            self._release_rule.release_idle(view, {index: c}, {index: c.leased - len(release)}, {index: kept}, out)
        if retire:
            out.append(RetireVms(index, tuple(retire), by=self.name))
        for job_id in kills:
            out.append(KillJob(job_id, "over its user's VM share (vm-share, kill mode)", requeue=True, by=self.name))
        room = c.site.max_vms - c.leased + len(release)
        if self.params.mode == "kill":
            room += len(retire)
        for user in sorted(plans, key=lambda u: (len(mine.get(u, ())) - shares.get(u, 0), u)):
            have = len(mine.get(user, ())) - sum(1 for v in mine.get(user, ()) if v.id in release)
            allowed = shares.get(user, 0) - have
            for plan, _ in plans[user]:
                if not view.user_can_pay(index, user, c.site.type_price_per_increment(plan.vm_type)):
                    break  # per-user budget caps refuse this user's VMs
                n = min(plan.count, allowed, room)
                if n < plan.count:
                    break  # the job needs them all: lease nothing for it now
                out.append(plan.decision(c, self.name, user=user))
                allowed -= n
                room -= n
        return out

    @staticmethod
    def _jobs_on(c: CloudInfo, vm_id: int) -> list[int]:
        """Ids of the jobs running on VM `vm_id`."""
        return [job_id for job_id, e in c.running.items() if any(v == vm_id for v, _ in e.alloc)]

    def _latest_first(self, c: CloudInfo, busy: Sequence[VmInfo]) -> list[VmInfo]:
        """Busy VMs, those whose runs started last first (a kill loses the least work)."""
        started: dict[int, float] = {}
        for e in c.running.values():
            for v, _ in e.alloc:
                started[v] = max(started.get(v, -1.0), e.started)
        return sorted(busy, key=lambda v: (-started.get(v.id, -1.0), -v.id))


__all__ = ["VmShare", "VmShareParams", "even_shares"]
