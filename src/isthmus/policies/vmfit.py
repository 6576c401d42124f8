"""VM requirements as provisioning policies read them: which instance type a job needs leased
and which VMs (ready or booting) may take it, from the read-only view alone.

Cloud Scheduler (cloud-scheduler-uvic.txt, Appendix I; §3.2 "starts and stops VMs based on the
information in the JobPool"): a job's attributes name the VM it needs; the scheduler boots such
a VM. Here the cheapest instance type of the cloud that meets the job's requirements is leased
(`isthmus.model.vmtypes.cheapest_type`), with the image it names (or the default one).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from isthmus.decisions.lease import LeaseVms
from isthmus.model.job import Job
from isthmus.model.vmtypes import InstanceType, VmImage, cheapest_type, site_misfit, type_misfit, vms_needed
from isthmus.policies.api import CloudInfo, VmInfo


@dataclass(frozen=True, slots=True)
class LeasePlan:
    """What to lease on one cloud for one job: `count` VMs of type index `vm_type` booting image
    index `image` (-1: the site declares no image, the provider's default)."""

    vm_type: int
    image: int
    count: int

    def decision(self, cloud: CloudInfo, by: str, user: str | None = None, count: int | None = None) -> LeaseVms:
        """The LeaseVms carrying this plan's type and image (by name) on `cloud`."""
        site = cloud.site
        images = site.vm_images
        image = images[self.image].name if images and self.image >= 0 else None
        return LeaseVms(
            cloud.index,
            self.count if count is None else count,
            by=by,
            vm_type=site.types[self.vm_type].name,
            image=image,
            user=user,
        )


def planned_vm_meets(t: InstanceType, image: VmImage | None, job: Job) -> bool:
    """Whether a VM of type `t` booting `image` (None: the provider's default), planned this
    round, meets `job`'s VM requirements (type, image; networks are the site's, checked when the
    job was admitted)."""
    req = job.vm
    if req is None:
        return True
    if type_misfit(req, t):
        return False
    return req.image is None or (image is not None and image.named(req.image))


def lease_plan(cloud: CloudInfo, job: Job) -> LeasePlan | None:
    """The cheapest VMs of `cloud` that can run `job` (its VM requirements, its size), None when
    the cloud can never serve it."""
    site = cloud.site
    if job.vm is not None and site_misfit(job.vm, site.types, site.vm_images, site.networks):
        return None
    t, im = cheapest_type(job.vm, site.types, site.vm_images, job.size)
    if t < 0:
        return None
    return LeasePlan(t, im if site.vm_images else -1, vms_needed(job.size, site.types[t]))


class PaperVms:
    """The VMs of one cloud placed on paper: free processors of each ready VM, all processors of
    each booting VM (it will be free when it boots; none with `ready_only`, what an allocation
    policy may start jobs on now; cores bags of tasks hold count as free unless `ready_only`),
    counted down as jobs are placed. VMs reserved for a job are left to the engine's own check."""

    def __init__(self, cloud: CloudInfo, vms: Sequence[VmInfo] | None = None, *, ready_only: bool = False) -> None:
        self.cloud = cloud
        self.vms: list[VmInfo] = [
            v for v in (cloud.vms() if vms is None else vms) if not v.retiring and (v.ready or not ready_only)
        ]
        # cores that bags of tasks hold count as free when provisioning (bags are preempted for
        # queued jobs, never a reason to lease), not when allocating now (`ready_only`)
        self.free: dict[int, int] = {
            v.id: (v.free + (0 if ready_only else v.bagged) if v.ready else v.cores) for v in self.vms
        }
        #: VMs some job was placed on
        self.claimed: set[int] = set()
        #: processors left on VMs planned this round, by (type, image)
        self.spare: dict[tuple[int, int], int] = {}

    def place(self, job: Job) -> bool:
        """Place `job` on VMs that accept it, if their free processors add up to its size."""
        fits = [
            v
            for v in self.vms
            if self.free[v.id] > 0 and v.reserved_for in (-1, job.id) and self.cloud.vm_accepts(v, job)
        ]
        if sum(self.free[v.id] for v in fits) < job.size:
            return False
        need = job.size
        for v in fits:
            take = min(need, self.free[v.id])
            self.free[v.id] -= take
            self.claimed.add(v.id)
            need -= take
            if not need:
                break
        return True

    def topped_up(self, plan: LeasePlan, job: Job) -> LeasePlan:
        """`plan` cut to the VMs `job` still needs once the free processors of VMs that accept it
        are counted (KOALA-C's On-Demand leases only what is missing); `plan` itself when that
        saves no VM."""
        have = sum(
            self.free[v.id]
            for v in self.vms
            if self.free[v.id] > 0 and v.reserved_for in (-1, job.id) and self.cloud.vm_accepts(v, job)
        )
        cores = self.cloud.site.types[plan.vm_type].cores
        count = max(1, -(-(job.size - have) // cores))
        return plan if count >= plan.count else LeasePlan(plan.vm_type, plan.image, count)

    def take_planned(self, plan: LeasePlan, job: Job) -> bool:
        """Place `job` on processors left over by VMs planned this round (a VM leased for a
        smaller job can hold the next one): of `plan`'s type and image first, else of any type
        and image meeting the job's requirements (a job without any fits on a VM leased for a
        job with some)."""
        key = (plan.vm_type, plan.image)
        if self.spare.get(key, 0) >= job.size:
            self.spare[key] -= job.size
            return True
        site = self.cloud.site
        for (t, im), left in self.spare.items():
            if left >= job.size and planned_vm_meets(site.types[t], site.vm_images[im] if im >= 0 else None, job):
                self.spare[(t, im)] = left - job.size
                return True
        return False

    def plan(self, plan: LeasePlan, job: Job) -> None:
        """Count the VMs of `plan` (leased this round) as taken by `job`, keeping what is left;
        a plan cut by `topped_up` takes the free processors of the VMs that accept the job first."""
        key = (plan.vm_type, plan.image)
        cores = self.cloud.site.types[plan.vm_type].cores
        rest = job.size
        if plan.count * cores < rest:
            for v in self.vms:
                free = self.free[v.id]
                if free > 0 and v.reserved_for in (-1, job.id) and self.cloud.vm_accepts(v, job):
                    take = min(free, rest - plan.count * cores)
                    self.free[v.id] -= take
                    self.claimed.add(v.id)
                    rest -= take
                    if rest <= plan.count * cores:
                        break
        self.spare[key] = self.spare.get(key, 0) + plan.count * cores - rest
