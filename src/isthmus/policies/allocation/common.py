"""Pieces shared by the allocation policies over one set of sites."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from isthmus.model.decisions import Decision, StartJob
from isthmus.model.environment import Environment
from isthmus.policies.base import JobInfo, NoParams, View


def all_sites(env: Environment) -> list[tuple[int, ...]]:
    """One queue that may use every site, in the environment's order."""
    return [tuple(range(len(env.sites)))]


def free_processors(view: View) -> list[int]:
    """Free processors per site index, as a scratch copy the policy may count down."""
    return [s.free for s in view.sites]


def first_fit(free: list[int], order: Sequence[int], size: int) -> int:
    """Index of the first site in `order` with at least `size` free processors, or -1."""
    for i in order:
        if free[i] >= size:
            return i
    return -1


def list_schedule(
    view: View,
    jobs: Iterable[JobInfo],
    name: str,
    stage: int = 0,
    free: list[int] | None = None,
    limit: float | None = None,
) -> list[Decision]:
    """Start every job of `jobs`, in order, on the first site of queue `stage` where it fits;
    skip the others. This is the placement step of FF, SJF, HSDF and TAGS-sets.

    `free` is a scratch copy of free processors per site shared by several calls in one round
    (it is counted down); `limit` is the runtime limit given to the started runs. Stops early
    once no processor is free.
    """
    order = view.stage_sites(stage)
    if free is None:
        free = free_processors(view)
    total = sum(free[i] for i in order)
    out: list[Decision] = []
    for e in jobs:
        if total <= 0:
            break
        size = e.job.size
        if size > total:
            continue
        i = first_fit(free, order, size)
        if i >= 0:
            free[i] -= size
            total -= size
            out.append(StartJob(e.job.id, i, limit, by=name))
    return out


class SingleSetPolicy:
    """Base of policies over one set of all sites, without parameters."""

    Params = NoParams

    def __init__(self, params: NoParams | None = None) -> None:
        self.params = params

    def stage_sites(self, env: Environment) -> list[tuple[int, ...]]:
        """One queue over every site."""
        return all_sites(env)


def any_free(view: View, stage: int = 0) -> bool:
    """True when some site of queue `stage` has a free processor (else no job can start)."""
    sites = view.sites
    return any(sites[i].free > 0 for i in view.stage_sites(stage))
