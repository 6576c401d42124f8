"""Pieces shared by the allocation policies over one set of sites."""

from __future__ import annotations

import heapq
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any

from isthmus.model.decisions import Decision, StartJob
from isthmus.model.environment import Environment
from isthmus.policies.api import AllocationDefaults, JobInfo, NoParams, RuntimeKey, View, runtime_order


def all_sites(env: Environment) -> list[tuple[int, ...]]:
    """One queue that may use every site, in the environment's order."""
    return [tuple(range(len(env.sites)))]


def free_processors(view: View) -> list[int]:
    """Free processors per site index, as a scratch copy the policy may count down."""
    return view.free_processors()


def first_fit(free: list[int], order: Sequence[int], size: int) -> int:
    """Index of the first site in `order` with at least `size` free processors, or -1."""
    for i in order:
        if free[i] >= size:
            return i
    return -1


def queue_fitting(view: View, stage: int, free: list[int]) -> Iterator[JobInfo]:
    """Jobs of queue `stage`, in queue order, that fit on some site of the queue when reached.

    The policy must declare `uses_size_index = True` (the engine keeps the index only then).
    `free` is the caller's scratch copy of free processors, counted down as it places jobs; a
    job larger than every site's free count is skipped, as a plain scan would skip it. Only
    the jobs that fit are visited: the queue's size buckets are merged in queue order, and a
    bucket is dropped once its size no longer fits (free processors only decrease in a round).
    """
    order = view.stage_sites(stage)
    bound = max([free[i] for i in order]) if order else 0
    if bound <= 0:
        return
    by_size = view.queue_by_size(stage)
    queue = view.queue(stage)
    if len(queue) <= 4 * len(by_size):
        # A short queue: scanning it is cheaper than merging its size buckets.
        for entry in queue:
            if entry.job.size <= bound:
                yield entry
                bound = max([free[i] for i in order])
                if bound <= 0:
                    return
        return
    yield from _merge_fitting({s: b.values() for s, b in by_size.items()}, lambda e: e.seq, order, free, bound)


def queue_fitting_by_runtime(view: View, stage: int, free: list[int], key: RuntimeKey) -> Iterator[JobInfo]:
    """Jobs of queue `stage` that fit on some site when reached, shortest runtime first (ties in
    queue order): what sorting `queue_fitting` by runtime gives, without visiting the jobs that
    cannot start. The policy declares `runtime_index = key` and `uses_size_index`; `free` is
    counted down by the caller as it places jobs.
    """
    order = view.stage_sites(stage)
    bound = max([free[i] for i in order]) if order else 0
    if bound > 0:
        yield from _merge_fitting(view.queue_by_runtime(stage), lambda e: runtime_order(e, key), order, free, bound)


def _merge_fitting(
    groups: Mapping[int, Iterable[JobInfo]],
    key: Callable[[JobInfo], Any],
    order: Sequence[int],
    free: list[int],
    bound: int,
) -> Iterator[JobInfo]:
    """Merge size groups, each already in `key` order, into one `key` order, yielding only jobs no
    larger than the most free processors on a site of `order` when reached (a group is dropped
    once its size no longer fits: free processors only decrease in a round)."""
    heap: list[tuple[Any, int, JobInfo, Iterator[JobInfo]]] = []
    for size, group in groups.items():
        if size <= bound:
            jobs = iter(group)
            first = next(jobs, None)
            if first is not None:
                heap.append((key(first), size, first, jobs))
    heapq.heapify(heap)
    while heap:
        _, size, entry, jobs = heap[0]
        bound = max([free[i] for i in order])
        if size > bound:
            heapq.heappop(heap)
            continue
        yield entry
        following = next(jobs, None)
        if following is None:
            heapq.heappop(heap)
        else:
            heapq.heapreplace(heap, (key(following), size, following, jobs))


def first_fit_in_order(
    view: View, name: str, stage: int = 0, free: list[int] | None = None, limit: float | None = None
) -> list[Decision]:
    """Start the jobs of queue `stage` in queue order, each on the first site where it fits
    (jobs that fit nowhere stay queued): the placement step of FF and TAGS-sets."""
    order = view.stage_sites(stage)
    if free is None:
        free = free_processors(view)
    out: list[Decision] = []
    for e in queue_fitting(view, stage, free):
        i = first_fit(free, order, e.job.size)
        if i >= 0:
            free[i] -= e.job.size
            out.append(StartJob(e.job.id, i, limit, by=name))
    return out


def fitting_candidates(view: View, stage: int = 0) -> list[JobInfo]:
    """Queued jobs that fit on some site of queue `stage` now, in queue order (SJF and HSDF sort
    these: a job larger than every site's free processors cannot start in this round)."""
    return list(queue_fitting(view, stage, free_processors(view)))


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
    total = sum([free[i] for i in order])
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


class SingleSetPolicy(AllocationDefaults):
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
    for i in view.stage_sites(stage):  # noqa: SIM110 (a loop: no generator frame, every round)
        if sites[i].free > 0:
            return True
    return False
