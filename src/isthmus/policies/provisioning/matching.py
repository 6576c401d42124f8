"""On-Demand's demand placed VM by VM, for clouds with VM requirements (Cloud Scheduler, Appendix I).

KOALA-C §III-B places the queue on paper on free processors and leases for the jobs that fit
nowhere; with several instance types, images, or VMs serving one user, free processors of a
cloud are not interchangeable, so each job is placed on the VMs (ready or booting) that accept
it, and a job that fits nowhere gets VMs of the cheapest instance type meeting its requirements
(cloud-scheduler-uvic.txt §3.2: the scheduler "starts ... VMs based on the information in the
JobPool"; Appendix I: the job names the VM it needs).
"""

from __future__ import annotations

from isthmus.model.decisions import Decision
from isthmus.policies.api import CloudInfo, View
from isthmus.policies.provisioning.common import demand_free
from isthmus.policies.vmfit import LeasePlan, PaperVms, lease_plan


def matching_demand(view: View, clouds: dict[int, CloudInfo], name: str) -> tuple[list[Decision], dict[int, set[int]]]:
    """The leases (typed) the queue needs on `clouds` and, per cloud, the VMs queued jobs were
    placed on (not to be released).

    Each cloud is kept at its minimum with VMs of its default type. Queued jobs, every queue in
    order, go on the first site of their queue that can take them on paper: a cluster with
    enough free processors (jobs without VM requirements only), or a cloud whose ready and
    booting VMs accepting the job have its size free, or processors left on VMs planned this
    round; a job placed nowhere gets the cheapest VMs that serve it (less the free processors
    of VMs that accept it) on the first cloud of its queue with room below its maximum whose
    per-user budget caps can pay its user's VMs (`View.user_can_pay`).
    """
    leases: dict[tuple[int, int, int], int] = {}
    planned = dict.fromkeys(clouds, 0)
    papers = {i: PaperVms(c) for i, c in clouds.items()}
    for i, c in clouds.items():
        deficit = c.site.min_vms - c.leased
        if deficit > 0:
            planned[i] = deficit
            leases[(i, 0, 0 if c.site.vm_images else -1)] = deficit
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
                if target.leased + planned[i] + plan.count > target.site.max_vms:
                    continue
                if not view.user_can_pay(i, job.user, target.site.type_price_per_increment(plan.vm_type)):
                    continue  # per-user caps refuse its user's VMs: leased, they would serve another job
                planned[i] += plan.count
                key = (i, plan.vm_type, plan.image)
                leases[key] = leases.get(key, 0) + plan.count
                papers[i].plan(plan, job)
                break
    out: list[Decision] = []
    for (i, t, im), n in leases.items():
        if n > 0:
            out.append(LeasePlan(t, im, n).decision(clouds[i], name))
    return out, {i: p.claimed for i, p in papers.items()}


__all__ = ["matching_demand"]
