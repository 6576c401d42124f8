"""On-Demand's demand placed VM by VM, for clouds with VM requirements (Cloud Scheduler, Appendix I).

KOALA-C §III-B places the queue on paper on free processors and leases for the jobs that fit
nowhere; with several instance types, images, or VMs serving one user, free processors of a
cloud are not interchangeable, so each job is placed on the VMs (ready or booting) that accept
it, and a job that fits nowhere gets VMs of the cheapest instance type meeting its requirements
(cloud-scheduler-uvic.txt §3.2: the scheduler "starts ... VMs based on the information in the
JobPool"; Appendix I: the job names the VM it needs).
"""

from __future__ import annotations

from isthmus.decisions import Decision
from isthmus.policies.api import CloudInfo, View
from isthmus.policies.provisioning.common import place_vm_by_vm
from isthmus.policies.vmfit import LeasePlan


def matching_demand(view: View, clouds: dict[int, CloudInfo], name: str) -> tuple[list[Decision], dict[int, set[int]]]:
    """The leases (typed) the queue needs on `clouds` and, per cloud, the VMs queued jobs were
    placed on (not to be released): `place_vm_by_vm`'s placement, one lease per cloud, type and
    image (the first planned first)."""
    placement = place_vm_by_vm(view, clouds)
    leases: dict[tuple[int, int, int], int] = {}
    for i, plan in placement.leases:
        key = (i, plan.vm_type, plan.image)
        leases[key] = leases.get(key, 0) + plan.count
    out: list[Decision] = []
    for (i, t, im), n in leases.items():
        if n > 0:
            out.append(LeasePlan(t, im, n).decision(clouds[i], name))
    return out, placement.claimed


__all__ = ["matching_demand"]
