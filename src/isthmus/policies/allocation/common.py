"""Pieces shared by the allocation policies over one set of sites."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from isthmus.model.decisions import Decision, StartJob
from isthmus.model.site import Site
from isthmus.policies.base import JobInfo, NoParams, View


def all_sites(sites: Sequence[Site]) -> list[tuple[int, ...]]:
    """One queue that may use every site, in the environment's order."""
    return [tuple(range(len(sites)))]


def free_processors(view: View) -> list[int]:
    """Free processors per site index, as a scratch copy the policy may count down."""
    return [s.free for s in view.sites]


def first_fit(free: list[int], order: Sequence[int], size: int) -> int:
    """Index of the first site in `order` with at least `size` free processors, or -1."""
    for i in order:
        if free[i] >= size:
            return i
    return -1


def list_schedule(view: View, jobs: Iterable[JobInfo], name: str, stage: int = 0) -> list[Decision]:
    """Start every job of `jobs`, in order, on the first site where it fits; skip the others.

    Stops early once no processor is free. This is the placement step of FF, SJF and HSDF.
    """
    order = view.stage_sites(stage)
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
            out.append(StartJob(e.job.id, i, by=name))
    return out


class SingleSetPolicy:
    """Base of policies over one set of all sites, without parameters."""

    Params = NoParams

    def __init__(self, params: NoParams | None = None) -> None:
        self.params = params

    def stage_sites(self, sites: Sequence[Site]) -> list[tuple[int, ...]]:
        """One queue over every site."""
        return all_sites(sites)


def any_free(view: View, stage: int = 0) -> bool:
    """True when some site of queue `stage` has a free processor (else no job can start)."""
    sites = view.sites
    return any(sites[i].free > 0 for i in view.stage_sites(stage))
