"""FCFS-2Q: first-come-first-served over two queues, short and long jobs (Villegas dissertation
§6.3.2, Table 6.2 policy 4)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import ClassVar

from pydantic import BaseModel, ConfigDict, Field

from isthmus.decisions import Decision
from isthmus.decisions.start import start_job
from isthmus.model.environment import Environment
from isthmus.model.job import Job
from isthmus.policies.allocation.common import first_fit, free_processors
from isthmus.policies.api import AllocationDefaults, View


class Fcfs2QParams(BaseModel):
    """Parameters of FCFS-2Q."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    threshold: float = Field(300.0, gt=0, description="a job with a known runtime up to this many seconds is short")
    short_site: str | None = Field(
        None, description="the site (VM pool) of the short queue; default: the '*-short' site"
    )
    long_site: str | None = Field(None, description="the site (VM pool) of the long queue; default: the '*-long' site")


def pool_sites(env: Environment, short: str | None, long: str | None) -> tuple[int, int]:
    """Indices of the short and long pool sites of `env`; ValueError saying what is expected."""
    names = [s.name for s in env.sites]

    def find(given: str | None, suffix: str) -> int:
        if given is not None:
            if given not in names:
                raise ValueError(f"fcfs-2q: no site named {given!r}; sites: {', '.join(names)}")
            return names.index(given)
        hits = [i for i, n in enumerate(names) if n.endswith(suffix)]
        if len(hits) != 1:
            raise ValueError(
                f"fcfs-2q needs one site (VM pool) named '*{suffix}' (found {len(hits)} among {', '.join(names)}); "
                "use a two-pool environment such as villegas-das4:pools=true, or set short_site and long_site"
            )
        return hits[0]

    s, lg = find(short, "-short"), find(long, "-long")
    if s == lg:
        raise ValueError(f"fcfs-2q: the short and long pools must be different sites, both are {names[s]!r}")
    return s, lg


class Fcfs2Q(AllocationDefaults):
    """FCFS-2Q: two FCFS queues, one for short and one for long jobs, each served by its own
    pool of VMs.

    Villegas dissertation §6.3.2, Table 6.2 policy 4 (FCFS-MultiQueue with two queues; job
    duration: partial; provisioning-aware): "several FCFS queues, one for each range of job
    durations, are maintained. The simplest case considered here, FCFS-2Q, has two queues, one
    for short jobs and another for long jobs. [...] it is enough to have partial knowledge of
    it to classify jobs. This policy can work in conjunction with a provisioning policy that
    divides VMs into pools for short and long running jobs, such as OD-2Q."

    A pool is a site: queue 0 (short) runs on the short pool site, queue 1 (long) on the long
    one, so "jobs from one queue cannot reuse VMs from the other one" (§6.5.5) holds by
    construction. A job is short when its known runtime (requested runtime, else the
    workload's runtime: the classification the seed assumes known) is at most `threshold`
    seconds; the seed gives no threshold, 300 s separates its 10 s and 1 h classes (§6.5.3).
    Each queue is served strictly in order: its head job starts when it fits on its pool.
    """

    name: ClassVar[str] = "fcfs-2q"
    seed: ClassVar[str] = "Villegas dissertation §6.3.2, Table 6.2 policy 4 (FCFS-MultiQueue, FCFS-2Q)"
    Params = Fcfs2QParams

    def __init__(self, params: Fcfs2QParams | None = None) -> None:
        self.params = params or Fcfs2QParams()

    def stage_sites(self, env: Environment) -> list[tuple[int, ...]]:
        """Queue 0 on the short pool site, queue 1 on the long pool site."""
        s, lg = pool_sites(env, self.params.short_site, self.params.long_site)
        return [(s,), (lg,)]

    def arrival_stage(self, job: Job) -> int:
        """Short jobs join queue 0, long ones queue 1."""
        known = job.requested_runtime if job.requested_runtime is not None else job.runtime
        return 0 if known <= self.params.threshold else 1

    def next_stage(self, stage: int) -> int:
        """A job killed by a policy stays in its class's queue."""
        return stage

    def decide(self, view: View) -> Iterable[Decision]:
        """Each queue: start its head job while it fits on the queue's pool."""
        free = free_processors(view)
        out: list[Decision] = []
        for stage in range(view.stages):
            order = view.stage_sites(stage)
            for e in view.queue(stage):
                i = first_fit(free, order, e.job.size)
                if i < 0:
                    break
                free[i] -= e.job.size
                out.append(start_job(e.job.id, i, None, self.name))
        return out
