"""The IBM meta-scheduler's filter plug-ins (IBM seed §3.2, "filter" stage).

Each filter is a function (job, resource) -> True to keep the resource, with a name under
which a policy's `filters` parameter lists it; they run in the order listed.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from isthmus.model.peers import SiteSummary
from isthmus.policies.api import JobInfo


@dataclass(frozen=True, slots=True)
class Resource:
    """One site of this manager (`peer` = -1) or of a peer, as the matching stages see it."""

    peer: int
    manager: str
    site: SiteSummary
    distance: float


Filter = Callable[[JobInfo, Resource, float], bool]
"""(job, resource, cloud_short_limit) -> keep the resource."""


def parallel(job: JobInfo, r: Resource, limit: float) -> bool:
    """Parallel filter: "if the job request is a parallel job, the resource should have the
    capability to deal with it": a job of several processors needs a site that offers that many
    processors now (a cloud still booting or drained does not)."""
    return job.job.size <= 1 or r.site.processors >= job.job.size


def failed_resource(job: JobInfo, r: Resource, limit: float) -> bool:
    """Failed resource filter: a job that failed on a manager's resources (handed back
    unstarted) is not sent there again."""
    return r.manager not in job.failed


def visited(job: JobInfo, r: Resource, limit: float) -> bool:
    """Visited schedulers filter: a forwarded job is not sent back to a manager it visited."""
    return r.manager not in job.chain


def cloud_short(job: JobInfo, r: Resource, limit: float) -> bool:
    """Cloud filter: "a very short job whose expected execution time is less than 3 seconds"
    does not go to a cloud ("the overhead is too big compared to its execution time"); the
    expected time is the job's requested runtime, else its prediction."""
    return not (r.site.is_cloud and job.estimated_runtime < limit)


FILTERS: dict[str, Filter] = {
    "parallel": parallel,
    "failed-resource": failed_resource,
    "visited": visited,
    "cloud-short": cloud_short,
}
"""The filter plug-ins by name."""
