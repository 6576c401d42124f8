"""Pieces shared by the dissertation's provisioning policies (Villegas dissertation §6.3.1).

All of them are pure decisions over the read-only view: which clouds may be used now, the
queued demand placed on paper on free and booting capacity, idle-VM release after an idle
time, and two small observers kept as private memory (the provisioning-plus-boot times of the
VMs seen so far; the runtimes of jobs seen to finish). Nothing here reads a clock or a backend.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Callable, Mapping, Sequence, Set
from dataclasses import dataclass, field

from isthmus.decisions import Decision
from isthmus.decisions.lease import LeaseVms
from isthmus.decisions.release import ReleaseVms
from isthmus.decisions.wake import WakeUp
from isthmus.policies.api import CloudInfo, JobInfo, View
from isthmus.policies.vmfit import LeasePlan, PaperVms, lease_plan


def usable_clouds(view: View, name: str) -> tuple[dict[int, CloudInfo], list[Decision]]:
    """The clouds inside their availability window, by site index, and a wake-up for each cloud
    whose window has not opened yet (the policy looks again then)."""
    now = view.now
    clouds: dict[int, CloudInfo] = {}
    wakes: list[Decision] = []
    for s in view.sites:
        c = view.cloud(s.index)
        if c is None:
            continue
        opens, closes = c.site.available_from, c.site.available_until
        if opens is not None and now < opens:
            wakes.append(WakeUp(opens, by=name))
        elif closes is None or now < closes:
            clouds[s.index] = c
    return clouds, wakes


def demand_free(view: View) -> list[int]:
    """Free processors per site as provisioning counts them: the processors bags of tasks hold
    (a cluster's, a cloud VM's cores) are free too, since bags shrink for queued jobs and scavenge
    VMs leased anyway: they never cause a lease; and so are those held for a waiting job (the
    queue placed on paper holds that job, which will take them); fresh list."""
    free = [s.free for s in view.sites]
    bags = view.bags
    if bags.holding:
        for i in bags.sites:
            free[i] += bags.held(i)
    return free


@dataclass
class Demand:
    """The queue placed on paper: VMs to lease per cloud for jobs that fit nowhere (one VM per
    processor-sized piece of each such job) and the ready VMs the queue claims per cloud."""

    lease: dict[int, int] = field(default_factory=dict)
    claimed_vms: dict[int, int] = field(default_factory=dict)
    #: queued jobs that fit nowhere, even after the leases (over every cloud's maximum)
    unplaced: int = 0
    #: with VMs that are not interchangeable (`View.vm_matching`): what each cloud's VMs to lease
    #: are, in the order they were planned (the minimum first, then each job's cheapest fitting type)
    plans: dict[int, list[LeasePlan]] = field(default_factory=dict)
    #: with VMs that are not interchangeable: the VMs (ready or booting) queued jobs were placed
    #: on, per cloud; None when VMs are interchangeable (`claimed_vms` counts them instead)
    claimed_ids: dict[int, set[int]] | None = None

    def kept(self, cloud: int) -> int | Set[int]:
        """What an idle release on `cloud` must leave alone (`idle_release`'s `keep`): the VMs
        queued jobs were placed on when VMs are not interchangeable, else how many idle VMs."""
        if self.claimed_ids is not None:
            return self.claimed_ids.get(cloud, set())
        return self.claimed_vms.get(cloud, 0)

    @property
    def total_lease(self) -> int:
        """VMs to lease over all clouds."""
        return sum(self.lease.values())

    def lease_decisions(self, cloud: CloudInfo, n: int, by: str) -> list[Decision]:
        """The leases of `n` VMs on `cloud`: the first `n` planned VMs, by type and image (VM
        requirements: the cheapest type that fits each job), the rest of the default type."""
        left = n
        out: list[Decision] = []
        for plan in self.plans.get(cloud.index, ()):
            if left <= 0:
                break
            take = min(left, plan.count)
            out.append(plan.decision(cloud, by, count=take))
            left -= take
        if left > 0:
            out.append(LeaseVms(cloud.index, left, by=by))
        return out


def queue_demand(view: View, clouds: Mapping[int, CloudInfo]) -> Demand:
    """Place the queued jobs (every queue in order) on paper.

    Free processors, VMs still booting and VMs needed to reach each cloud's minimum count as
    capacity. A job that fits on no site of its queue gets enough VMs on the first cloud of the
    queue that can take them without passing its maximum. Processors the queue takes from the
    free processors of a cloud are its claimed VMs: idle VMs a release must leave alone (the
    dissertation's reservation of partially available VMs, §7.3.1, falls out of this: an idle
    VM waiting for the head job to fit is claimed by it).

    When VMs are not interchangeable (`View.vm_matching`: VM requirements, several types), the
    jobs are placed VM by VM (`place_vm_by_vm`): a job goes only on VMs that accept it, the VMs
    leased for a job are of the cheapest type of the cloud that fits it
    (`isthmus.policies.vmfit.lease_plan`, Cloud Scheduler Appendix I), kept in `Demand.plans`,
    and the claimed VMs are the ones jobs were placed on (`Demand.claimed_ids`): an idle VM no
    queued job can use is released as usual, so that a cloud at its maximum makes room.
    """
    if view.vm_matching:
        return _typed_demand(view, clouds)
    demand = Demand(lease=dict.fromkeys(clouds, 0), claimed_vms=dict.fromkeys(clouds, 0))
    ready_free = demand_free(view)
    free = list(ready_free)
    for i, c in clouds.items():
        deficit = max(0, c.site.min_vms - c.leased)
        demand.lease[i] = deficit
        free[i] += (c.booting + deficit) * c.site.cores_per_node
    claimed = [0] * len(free)
    # the VMs each cloud may still lease: its maximum less those it has and those planned
    room = {i: c.site.max_vms - c.leased - demand.lease[i] for i, c in clouds.items()}
    for stage in range(view.stages):
        order = view.stage_sites(stage)
        grow = [i for i in order if i in clouds]
        queue = view.queue(stage)
        looked = 0  # jobs of this queue looked at
        full = _full(free, order, room, grow)
        for e in queue:
            if full:
                break  # no free processor and no cloud that may grow: none of the rest is placed
            looked += 1
            size = e.job.size
            placed = False
            for i in order:
                if free[i] >= size:
                    free[i] -= size
                    claimed[i] += size
                    placed = True
                    break
            if not placed:
                for i in grow:
                    cores = clouds[i].site.cores_per_node
                    vms = math.ceil((size - free[i]) / cores)
                    if vms <= room[i]:
                        demand.lease[i] += vms
                        room[i] -= vms
                        claimed[i] += free[i]
                        free[i] += vms * cores - size
                        placed = True
                        break
            if placed:
                full = _full(free, order, room, grow)  # only a placement changes it
            else:
                demand.unplaced += 1
        demand.unplaced += len(queue) - looked
    for i, c in clouds.items():
        demand.claimed_vms[i] = math.ceil(min(claimed[i], ready_free[i]) / c.site.cores_per_node)
    return demand


def _full(free: list[int], order: Sequence[int], room: Mapping[int, int], grow: Sequence[int]) -> bool:
    """No site of `order` has a free processor and no cloud of `grow` may lease another VM: no
    job can be placed on paper any more."""
    return not any(free[i] > 0 for i in order) and not any(room[i] > 0 for i in grow)


def _typed_demand(view: View, clouds: Mapping[int, CloudInfo]) -> Demand:
    """`queue_demand` when VMs are not interchangeable: the placement VM by VM as a `Demand`."""
    placement = place_vm_by_vm(view, clouds)
    demand = Demand(
        lease=dict(placement.planned),
        claimed_vms={i: len(ids) for i, ids in placement.claimed.items()},
        unplaced=placement.unplaced,
        plans={i: [] for i in clouds},
        claimed_ids=placement.claimed,
    )
    for i, plan in placement.leases:
        demand.plans[i].append(plan)
    return demand


@dataclass
class VmPlacement:
    """The queue placed on paper VM by VM (`place_vm_by_vm`)."""

    #: VMs to lease, in the order they were planned: (cloud, what to lease); the minimum first
    leases: list[tuple[int, LeasePlan]] = field(default_factory=list)
    #: VMs to lease per cloud (the sum of its `leases`)
    planned: dict[int, int] = field(default_factory=dict)
    #: the VMs (ready or booting) of each cloud queued jobs were placed on
    claimed: dict[int, set[int]] = field(default_factory=dict)
    #: queued jobs placed nowhere, even on VMs to lease (over every cloud's maximum)
    unplaced: int = 0


def place_vm_by_vm(view: View, clouds: Mapping[int, CloudInfo]) -> VmPlacement:
    """Place the queue on paper when VMs are not interchangeable (several instance types, images,
    VM requirements, VMs serving one user; Cloud Scheduler, Appendix I and §3.2).

    Each cloud is kept at its minimum with VMs of its default type. Queued jobs, every queue in
    order, go on the first site of their queue that can take them on paper: a cluster with
    enough free processors (jobs without VM requirements only), or a cloud whose ready and
    booting VMs accepting the job have its size free, or processors left on VMs planned this
    round; a job placed nowhere gets the cheapest VMs that serve it (less the free processors
    of VMs that accept it) on the first cloud of its queue with room below its maximum whose
    per-user budget caps can pay its user's VMs (`View.user_can_pay`).
    """
    out = VmPlacement(planned=dict.fromkeys(clouds, 0))
    papers = {i: PaperVms(c) for i, c in clouds.items()}
    for i, c in clouds.items():
        deficit = c.site.min_vms - c.leased
        if deficit > 0:
            out.planned[i] = deficit
            out.leases.append((i, LeasePlan(0, 0 if c.site.vm_images else -1, deficit)))
    free = demand_free(view)
    for stage in range(view.stages):
        order = view.stage_sites(stage)
        for e in view.queue(stage):
            job = e.job
            placed = False
            plans: dict[int, LeasePlan | None] = {}
            for i in order:
                cloud = clouds.get(i)
                if cloud is None:
                    if view.cloud(i) is None and job.vm is None and free[i] >= job.size:
                        free[i] -= job.size
                        placed = True
                        break
                    continue
                paper = papers[i]
                if paper.place(job):
                    placed = True
                else:
                    plan = plans[i] = lease_plan(cloud, job)
                    placed = plan is not None and paper.take_planned(plan, job)
                if placed:
                    break
            if placed:
                continue
            for i in order:
                target = clouds.get(i)
                if target is None:
                    continue
                plan = plans[i] if i in plans else lease_plan(target, job)
                if plan is None:
                    continue
                plan = papers[i].topped_up(plan, job)
                if target.leased + out.planned[i] + plan.count > target.site.max_vms:
                    continue
                if not view.user_can_pay(i, job.user, target.site.type_price_per_increment(plan.vm_type)):
                    continue  # per-user caps refuse its user's VMs: leased, they would serve another job
                out.planned[i] += plan.count
                out.leases.append((i, plan))
                papers[i].plan(plan, job)
                placed = True
                break
            if not placed:
                out.unplaced += 1
    out.claimed = {i: p.claimed for i, p in papers.items()}
    return out


class Allowance:
    """What the budget cap still pays for in this round, counted down as leases are planned.

    The engine refuses a lease whose first increment the budget cannot pay; a policy that keeps
    asking would also keep asking to be woken, so the policies cap their leases here first.
    """

    def __init__(self, view: View) -> None:
        self.left = view.budget_left

    def take(self, cloud: CloudInfo, n: int) -> int:
        """How many of `n` VMs of `cloud` the budget pays for (and count them as spent)."""
        site = cloud.site
        if n <= 0 or self.left is None or not site.is_paid:
            return max(0, n)
        price = site.price_per_increment
        n = max(0, min(n, int((self.left + 1e-9) / price)))
        self.left -= n * price
        return n


def idle_release(
    cloud: CloudInfo, now: float, idle_time: float, keep: int | Set[int], name: str, limit: int | None = None
) -> tuple[ReleaseVms | None, float]:
    """Release the idle VMs of `cloud` idle for at least `idle_time`, longest idle first, leaving
    the idle VMs the queue claims (`keep`: how many, the most recently idle ones, when VMs are
    interchangeable; which ones otherwise, `Demand.kept`), the reserved ones (never released;
    they count among a number kept) and the cloud's minimum; at most `limit` VMs.

    Returns the release (None when nothing is due) and the earliest time another idle VM
    becomes due (inf when none), for a wake-up.
    """
    spare = cloud.leased - cloud.site.min_vms
    everything = cloud.idle_vms()
    # VMs reserved for a queued job (ReserveVms) are never released; they count among the kept
    idle = [vm for vm in everything if vm.reserved_for < 0]
    if isinstance(keep, int):
        keep = max(0, keep - (len(everything) - len(idle)))
        # the queue keeps the most recently idle VMs; the longest idle ones go first
        candidates = idle[: max(0, len(idle) - keep)]
    else:
        candidates = [vm for vm in idle if vm.id not in keep]
    budget = min(spare, len(candidates) if limit is None else min(limit, len(candidates)))
    release: list[int] = []
    wake = math.inf
    for vm in candidates:
        at = vm.idle_since + idle_time
        if at <= now + 1e-9:
            if len(release) < budget:
                release.append(vm.id)
        else:
            wake = min(wake, at)
    return (ReleaseVms(cloud.index, tuple(release), by=name) if release else None), wake


class BootObserver:
    """The mean provisioning-plus-boot time of the VMs seen so far, per cloud (OD-ExecTime's
    "average time needed to provision and boot a VM instance, as observed for previously
    leased VMs", §6.3.1).

    A VM is observed the first time it shows up ready and idle: provisioning decides first in
    every round and a VM coming up triggers a round, so that is the first round after it
    became ready; its observed time is that round's time minus its lease time (exact with
    event-triggered rounds, rounded up to the round with periodic ones, as a polling
    controller would see it). Before any observation the cloud's configured boot time is used.
    """

    def __init__(self) -> None:
        self._seen: dict[int, set[int]] = {}
        self._sum: dict[int, float] = {}
        self._count: dict[int, int] = {}

    def observe(self, cloud: CloudInfo, now: float) -> None:
        """Record the VMs of `cloud` seen ready for the first time."""
        seen = self._seen.setdefault(cloud.index, set())
        for vm in cloud.idle_vms():
            if vm.id not in seen:
                seen.add(vm.id)
                self._sum[cloud.index] = self._sum.get(cloud.index, 0.0) + max(0.0, now - vm.leased_at)
                self._count[cloud.index] = self._count.get(cloud.index, 0) + 1

    def mean(self, cloud: CloudInfo) -> float:
        """Observed mean provisioning-plus-boot time of `cloud`, its boot time before any."""
        n = self._count.get(cloud.index, 0)
        return self._sum[cloud.index] / n if n else cloud.site.boot_time

    def observed(self, cloud: CloudInfo) -> int:
        """How many VMs of `cloud` were observed."""
        return self._count.get(cloud.index, 0)


class CompletionObserver:
    """Runtimes of jobs seen to finish, with a feature of each job, most recent last (at most
    `keep`).

    A job is tracked while it runs; when it is no longer running at a later round it has
    finished, and its runtime is taken as that round's time minus its start (exact with
    event-triggered rounds, up to one round interval long with periodic rounds). Jobs that
    start and finish between two rounds are not seen.
    """

    def __init__(self, feature: Callable[[JobInfo], float], keep: int = 1000) -> None:
        self._feature = feature
        self._running: dict[int, tuple[float, float]] = {}
        self.done: deque[tuple[float, float]] = deque(maxlen=keep)

    def observe(self, view: View) -> None:
        """Update the running set from the view; record the jobs that finished since last time."""
        now = view.now
        current: dict[int, tuple[float, float]] = {}
        for s in view.sites:
            for job_id, e in s.running.items():
                current[job_id] = self._running.get(job_id) or (e.started, self._feature(e))
        for job_id, (started, feat) in self._running.items():
            if job_id not in current:
                self.done.append((feat, max(0.0, now - started)))
        self._running = current
