"""The IBM meta-scheduler's multistage matching."""

from __future__ import annotations

from collections.abc import Iterable
from typing import ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field

from isthmus.decisions import Decision
from isthmus.decisions.forward import ForwardJob
from isthmus.decisions.hold import HoldJob
from isthmus.policies.api import View
from isthmus.policies.selection.common import LOCAL
from isthmus.policies.selection.ibm_filters import FILTERS, Resource

FilterName = Literal["parallel", "failed-resource", "visited", "cloud-short"]


class IbmMatchingParams(BaseModel):
    """Parameters of the IBM matching."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    filters: tuple[FilterName, ...] = Field(
        ("parallel", "failed-resource", "visited", "cloud-short"),
        description="the filter plug-ins to apply, in order (the seed's MS-A uses all four)",
    )
    cloud_short_limit: float = Field(
        3.0, ge=0, description="expected runtime (s) under which a job never goes to a cloud (cloud-short filter)"
    )


class IbmMatching:
    """IBM four-stage matching: find, filter, sort (freenode), match.

    IBM seed §3.2 (Figure 3). *Find*: every site, here or at a peer that is up and a provider,
    that is available and large enough for the job. *Filter*: the plug-ins of `filters`
    (`isthmus.policies.selection.ibm_filters`: parallel, failed resource, visited schedulers,
    cloud-short). *Sort* (freenode): priority = free nodes minus the processors requested by
    the waiting jobs; a resource with no waiting job ranks above any with waiting jobs; then
    by priority, then queue length, then distance to this manager. *Match*: the first; a site
    here keeps the job here, a peer's site forwards it there. A job with no resource left
    stays here. Within a round the chosen resource's figures count the jobs just sent to it.

    A job kept here while a filter excluded a peer's site is held with the filters' reasons
    (`HoldJob`: "why is my job pending" names the filter and the sites it excluded).
    """

    name: ClassVar[str] = "ibm-matching"
    seed: ClassVar[str] = "IBM meta-schedulers seed §3.2 (Figure 3)"
    Params = IbmMatchingParams

    def __init__(self, params: IbmMatchingParams | None = None) -> None:
        self.params = params or IbmMatchingParams()
        self._filters = [(f, FILTERS[f]) for f in self.params.filters]

    def decide(self, view: View) -> Iterable[Decision]:
        """Match each new job to the best-sorted resource that passes the filters."""
        out: list[Decision] = []
        jobs = view.unrouted()
        if not jobs:
            return out
        resources: list[Resource] = [Resource(LOCAL, view.manager, s, 0.0) for s in view.local_resources().sites]
        for p in view.peers:
            if p.up and p.role.provides and p.data is not None:
                resources.extend(Resource(p.index, p.name, s, p.distance) for s in p.data.sites)
        # this round's placements per resource: (free nodes taken, jobs queued, processors queued)
        taken = [0] * len(resources)
        queued = [0] * len(resources)
        asked = [0] * len(resources)
        limit = self.params.cloud_short_limit
        for job in jobs:
            size = job.job.size
            best: tuple[tuple[int, int, int, float], int] | None = None
            excluded: dict[str, list[str]] = {}  # filter -> the peers' sites it kept this job from
            for i, r in enumerate(resources):
                s = r.site
                if not s.available or s.max_processors < size:
                    continue  # find
                failed = next((name for name, f in self._filters if not f(job, r, limit)), None)
                if failed is not None:
                    if r.peer != LOCAL:
                        excluded.setdefault(failed, []).append(f"{r.manager}/{s.name}")
                    continue
                free = s.idle - taken[i]
                qlen = s.queued_jobs + queued[i]
                priority = free - (s.queued_processors + asked[i])
                key = (0 if qlen == 0 else 1, -priority, qlen, r.distance)
                if best is None or key < best[0]:
                    best = (key, i)
            if best is None or resources[best[1]].peer == LOCAL:
                if excluded:
                    why = "; ".join(f"filter {name} excluded {', '.join(sites)}" for name, sites in excluded.items())
                    reason = f"kept at {view.manager} by the forwarding policy: {why}"
                    out.append(HoldJob(job.job.id, reason, self.name))
                if best is None:
                    continue
            i = best[1]
            r = resources[i]
            if size <= resources[i].site.idle - taken[i]:
                taken[i] += size
            else:
                queued[i] += 1
                asked[i] += size
            if r.peer != LOCAL:
                out.append(ForwardJob(job.job.id, r.peer, by=self.name))
        return out
