"""Admission of jobs with VM requirements: can any cloud of the job's queue ever serve it?

Cloud Scheduler (cloud-scheduler-uvic.txt, Appendix I) boots VMs to match a job's attributes;
a job no cloud can match would wait forever. The engine refuses it at submission with the
reason (`Engine.submit` logs REJECT with it; the live API answers 400 naming the field).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from isthmus.engine.backend import CloudBackend, SiteBackend
from isthmus.model.job import Job, VmRequirements
from isthmus.model.site import Site
from isthmus.model.vmtypes import describe, image_index, site_misfit, type_misfit


def admission_refusal(job: Job, sites: Sequence[Site]) -> str:
    """Why `job` (with VM requirements) can never run on `sites`, "" when one of them can: a
    cloud offering a type, image and network that match, with enough VMs of such a type for
    the job's size."""
    req = job.vm
    if req is None:
        return ""
    clouds = [s for s in sites if s.is_cloud]
    if not clouds:
        return f"asks for a VM ({describe(req)}) but its sites are all clusters"
    why: list[str] = []
    for s in clouds:
        misfit = site_misfit(req, s.types, s.vm_images, s.networks)
        if misfit:
            why.append(f"{s.name}: {misfit}")
            continue
        fitting = [t for t in s.types if not type_misfit(req, t) and image_index(req, s.vm_images, t) >= 0]
        most = max(t.cores for t in fitting) * s.max_vms
        if job.size <= most:
            return ""
        why.append(f"{s.name}: needs {job.size} processors, matching VMs give at most {most}")
    return f"no site can match its VM requirements ({describe(req)}): " + "; ".join(why)


def unmatched_fields(job: Job, sites: Sequence[Site]) -> list[str]:
    """The fields of `job`'s VM requirements that alone no site can ever match (e.g.
    ["memory_mb"]); empty when each can be matched alone (then only their combination cannot)."""
    req = job.vm
    if req is None:
        return []
    out = []
    for name in ("vm_type", "image", "cpu_arch", "cores", "memory_mb", "storage_gb", "network"):
        value = getattr(req, name)
        if value is None:
            continue
        alone = replace(job, vm=VmRequirements(**{name: value}))
        if admission_refusal(alone, sites):
            out.append(name)
    return out


def matching_free(backends: Sequence[SiteBackend], job: Job) -> tuple[int, str]:
    """The most free processors one of `backends` offers `job` now, and how they were counted
    ("" when every free processor counts; else " on VMs it may use" and its requirements):
    what "why is my job pending" tells about capacity."""
    if job.vm is None and not any(b.selective for b in backends):
        return max((b.free for b in backends), default=0), ""
    most = 0
    for b in backends:
        if isinstance(b, CloudBackend):
            most = max(most, b.free_matching(job))
        elif job.vm is None:
            most = max(most, b.free)
    if job.vm is None:
        return most, " on VMs it may use"
    return most, f" on VMs matching its requirements ({describe(job.vm)})"
