"""Pieces shared by the allocation policies over one set of sites."""

from __future__ import annotations

import heapq
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any, ClassVar

from mypy_extensions import mypyc_attr
from pydantic import BaseModel

from isthmus.decisions import Decision
from isthmus.decisions.start import start_job
from isthmus.model.environment import Environment
from isthmus.model.job import Job
from isthmus.policies.api import AllocationDefaults, JobInfo, NoParams, RuntimeKey, View, runtime_order
from isthmus.policies.vmfit import PaperVms


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


def first_fit_held(free: list[int], order: Sequence[int], size: int, held: Mapping[int, int]) -> int:
    """Index of the first site in `order` where a job of `size` processors fits on the free ones
    and those held for it there (`held`, from `View.holds`), or -1."""
    for i in order:
        if free[i] + held.get(i, 0) >= size:
            return i
    return -1


def take(free: list[int], i: int, size: int, held: Mapping[int, int] | None) -> int:
    """Count down site `i` of `free` for a job of `size` processors that uses the processors
    held for it there first (`held`, None: none); returns how many free ones it took."""
    own = min(size, held.get(i, 0)) if held else 0
    free[i] -= size - own
    return size - own


class Placer:
    """First fit that respects VM matching (Cloud Scheduler, Appendix I): while the view says VMs
    are not interchangeable (`View.vm_matching`), a cloud takes a job only if its ready VMs that
    accept the job (requirements, the user a VM serves, retiring VMs) have the job's size free
    on paper, and a job with VM requirements goes to no cluster. Otherwise it is `first_fit`."""

    def __init__(self, view: View) -> None:
        self.view = view
        self.matching = view.vm_matching
        self._papers: dict[int, PaperVms] = {}

    def first_fit(self, free: list[int], order: Sequence[int], job: Job, held: Mapping[int, int] | None = None) -> int:
        """Index of the first site of `order` that can take `job` now (on the free processors and
        those `held` for it on clusters), or -1 (the caller counts `free` down; the VMs taken on
        paper are counted here)."""
        if held:
            return first_fit_held(free, order, job.size, held)
        if not self.matching:
            return first_fit(free, order, job.size)
        for i in order:
            if free[i] < job.size:
                continue
            cloud = self.view.cloud(i)
            if cloud is None:
                if job.vm is None:
                    return i
                continue
            paper = self._papers.get(i)
            if paper is None:
                paper = self._papers[i] = PaperVms(cloud, ready_only=True)
            if paper.place(job):
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
    if view.holding:  # a job may fit on processors held for it (not in `free`): every job
        yield from view.queue(stage)
        return
    bound = max([free[i] for i in order]) if order else 0
    if bound <= 0:
        return
    by_size = view.queue_by_size(stage)
    queue = view.queue(stage)
    if len(queue) <= 4 * len(by_size):
        # A short queue: scanning it is cheaper than merging its size buckets.
        yield from _while_fitting(queue, order, free, bound)
        return
    yield from _merge_fitting({s: b.values() for s, b in by_size.items()}, lambda e: e.seq, order, free, bound)


def queue_fitting_by_runtime(view: View, stage: int, free: list[int], key: RuntimeKey) -> Iterator[JobInfo]:
    """Jobs of queue `stage` that fit on some site when reached, shortest runtime first (ties in
    queue order): what sorting `queue_fitting` by runtime gives, without visiting the jobs that
    cannot start. The policy declares `runtime_index = key` and `uses_size_index`; `free` is
    counted down by the caller as it places jobs.
    """
    order = view.stage_sites(stage)
    if view.holding:  # a job may fit on processors held for it (not in `free`): every job
        yield from sorted(view.queue(stage), key=lambda e: runtime_order(e, key))
        return
    bound = max([free[i] for i in order]) if order else 0
    if bound <= 0:
        return
    groups = view.queue_by_runtime(stage)
    queue = view.queue(stage)
    if len(queue) <= 4 * len(groups):
        # A short queue: sorting the jobs that fit now is cheaper than merging the groups (the
        # same order: runtime, then queue sequence, both unique together)
        fitting = sorted([e for e in queue if e.job.size <= bound], key=lambda e: runtime_order(e, key))
        yield from _while_fitting(fitting, order, free, bound)
        return
    yield from _merge_fitting(groups, lambda e: runtime_order(e, key), order, free, bound)


def _while_fitting(jobs: Iterable[JobInfo], order: Sequence[int], free: list[int], bound: int) -> Iterator[JobInfo]:
    """The jobs of `jobs`, in their order, no larger than the most free processors on a site of
    `order` when reached (`free` is counted down by the caller between jobs)."""
    for entry in jobs:
        if entry.job.size <= bound:
            yield entry
            bound = max([free[i] for i in order])
            if bound <= 0:
                return


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
    holds = view.holds() if view.holding else None
    placer = Placer(view) if view.vm_matching or holds else None  # None: every free processor fits any job
    for e in queue_fitting(view, stage, free):
        held = holds.get(e.job.id) if holds else None
        i = placer.first_fit(free, order, e.job, held) if placer else first_fit(free, order, e.job.size)
        if i >= 0:
            if held:
                take(free, i, e.job.size, held)
            else:
                free[i] -= e.job.size
            out.append(start_job(e.job.id, i, limit, name))
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
    holds = view.holds() if view.holding else None
    placer = Placer(view) if view.vm_matching or holds else None  # None: every free processor fits any job
    for e in jobs:
        size = e.job.size
        held = holds.get(e.job.id) if holds else None
        if not held:
            if total <= 0:
                if holds:
                    continue
                break
            if size > total:
                continue
        i = placer.first_fit(free, order, e.job, held) if placer else first_fit(free, order, size)
        if i >= 0:
            if held:
                total -= take(free, i, size, held)
            else:
                free[i] -= size
                total -= size
            out.append(start_job(e.job.id, i, limit, name))
    return out


@mypyc_attr(allow_interpreted_subclasses=True)  # the other policies over one set of sites are not compiled
class SingleSetPolicy(AllocationDefaults):
    """Base of policies over one set of all sites, without parameters."""

    Params: ClassVar[type[BaseModel]] = NoParams

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
