"""KOALA-C TAGS-chain and TAGS-sets: sites with increasing runtime limits, kill and restart."""

from __future__ import annotations

import itertools
import random
from collections.abc import Iterable
from typing import ClassVar

from pydantic import BaseModel

from isthmus.decisions import Decision
from isthmus.decisions.start import start_job
from isthmus.model.environment import Environment
from isthmus.model.job import Job
from isthmus.policies.allocation.common import first_fit_in_order, free_processors
from isthmus.policies.allocation.tags_params import TagsChainParams, TagsSetsParams
from isthmus.policies.api import AllocationDefaults, View

__all__ = ["TagsChain", "TagsChainParams", "TagsSets", "TagsSetsParams"]


class TagsChain(AllocationDefaults):
    """TAGS-chain (KOALA-C §IV-B): identical chains of sites with increasing runtime limits.

    The sites of the environment, in order, form chains of len(limits) + 1 sites each (KOALA-C
    §V-A: chains of two 32-node clusters, one runtime limit). An arriving job is dispatched to
    a chain round-robin (RR) or uniformly at random (RND, seeded) and joins the queue of the
    chain's first site. Each site serves its queue in strict FCFS order. A job reaching its
    site's runtime limit is killed and appended to the queue of the next site of its chain,
    where it restarts from scratch; the last site has no limit.
    """

    name: ClassVar[str] = "tags-chain"
    head_of_line: ClassVar[bool] = True
    seed: ClassVar[str] = "KOALA-C §IV-B (TAGS-chain)"
    Params: ClassVar[type[BaseModel]] = TagsChainParams

    def __init__(self, params: TagsChainParams | None = None) -> None:
        self.params = params or TagsChainParams()
        self._length = len(self.params.limits) + 1
        self._chains = 0
        self._rr = 0
        self._rng = random.Random(self.params.seed)
        self._limit_of: list[float | None] = []  # per stage (= site): its runtime limit

    def stage_sites(self, env: Environment) -> list[tuple[int, ...]]:
        """One queue per site; sites grouped in order into chains of len(limits) + 1."""
        limits = self.params.limits
        if any(b <= a for a, b in itertools.pairwise(limits)):
            raise ValueError(f"tags-chain: runtime limits must increase along a chain, got {list(limits)}")
        n = len(env.sites)
        if n == 0 or n % self._length:
            raise ValueError(
                f"tags-chain: chains of {self._length} sites need a multiple of {self._length} sites; "
                f"environment {env.name!r} has {n}"
            )
        self._chains = n // self._length
        limits = self.params.limits
        self._limit_of = [limits[i % self._length] if i % self._length < len(limits) else None for i in range(n)]
        return [(i,) for i in range(n)]

    def arrival_stage(self, job: Job) -> int:
        """The first site of the chain the job is dispatched to."""
        if self.params.dispatch == "rr":
            chain = self._rr
            self._rr = (self._rr + 1) % self._chains
        else:
            chain = self._rng.randrange(self._chains)
        return chain * self._length

    def next_stage(self, stage: int) -> int:
        """The next site of the same chain."""
        return stage + 1 if stage % self._length < self._length - 1 else stage

    def decide(self, view: View) -> Iterable[Decision]:
        """Strict FCFS on each site, with the site's runtime limit (stage i is site i)."""
        free = free_processors(view)
        out: list[Decision] = []
        queue = view.queue
        name = self.name
        for site, limit in enumerate(self._limit_of):
            room = free[site]
            if room <= 0:
                continue  # nothing of its queue can start
            for e in queue(site):
                job = e.job
                if room < job.size:
                    break
                room -= job.size
                out.append(start_job(job.id, site, limit, name))
        return out


class TagsSets(AllocationDefaults):
    """TAGS-sets (KOALA-C §IV-C): decreasing sets of sites with increasing runtime limits.

    The environment's sets, in order: set 1 holds every site, each next set is a proper subset
    of the previous one, and the last set has no runtime limit. Jobs arrive in the queue of
    set 1. Within a set, jobs are placed First-Fit (KOALA-C §IV-A). A job reaching its set's
    runtime limit is killed and restarts from scratch in the next set. Every round scans the
    queues of the sets in increasing order, so a killed job waits behind the shorter jobs of
    the earlier sets.
    """

    name: ClassVar[str] = "tags-sets"
    seed: ClassVar[str] = "KOALA-C §IV-C (TAGS-sets)"
    uses_size_index: ClassVar[bool] = True
    Params: ClassVar[type[BaseModel]] = TagsSetsParams

    def __init__(self, params: TagsSetsParams | None = None) -> None:
        self.params = params or TagsSetsParams()
        self._limits: list[float | None] = []

    def stage_sites(self, env: Environment) -> list[tuple[int, ...]]:
        """The site indices of each set; ValueError when the sets are not properly nested."""
        if len(env.sets) < 2:
            raise ValueError(f"tags-sets: environment {env.name!r} needs at least two sets of sites")
        index = {s.name: i for i, s in enumerate(env.sites)}
        stages = [tuple(index[name] for name in s.sites) for s in env.sets]
        if set(stages[0]) != set(range(len(env.sites))):
            raise ValueError(f"tags-sets: set {env.sets[0].name!r} must hold every site of the environment")
        for prev, (cur, spec) in zip(stages, zip(stages[1:], env.sets[1:], strict=True), strict=False):
            if not set(cur) < set(prev):
                raise ValueError(f"tags-sets: set {spec.name!r} must be a proper subset of the set before it")
        limits: list[float | None] = [s.runtime_limit for s in env.sets]
        if self.params.limits is not None:
            if len(self.params.limits) != len(stages) - 1:
                raise ValueError(
                    f"tags-sets: {len(self.params.limits)} limits given for {len(stages)} sets "
                    f"(one per set but the last)"
                )
            limits = [*self.params.limits, None]
        if limits[-1] is not None:
            raise ValueError(f"tags-sets: the last set ({env.sets[-1].name!r}) must have no runtime limit")
        if any(lim is None for lim in limits[:-1]):
            raise ValueError("tags-sets: every set but the last needs a runtime limit")
        finite = [lim for lim in limits[:-1] if lim is not None]
        if any(b <= a for a, b in itertools.pairwise(finite)):
            raise ValueError(f"tags-sets: runtime limits must increase from set to set, got {finite}")
        self._limits = limits
        return stages

    def next_stage(self, stage: int) -> int:
        """The next set."""
        return min(stage + 1, len(self._limits) - 1)

    def arrival_stage(self, job: Job) -> int:
        """Every job arrives in set 1."""
        return 0

    def decide(self, view: View) -> Iterable[Decision]:
        """First-Fit within each set, sets scanned in increasing order."""
        free = free_processors(view)
        out: list[Decision] = []
        for stage in range(view.stages):
            out.extend(first_fit_in_order(view, self.name, stage, free, self._limits[stage]))
        return out
