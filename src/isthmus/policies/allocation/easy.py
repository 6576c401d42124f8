"""EASY backfilling."""

from __future__ import annotations

import bisect
import heapq
import math
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import ClassVar

from isthmus.decisions import Decision
from isthmus.decisions.start import start_job
from isthmus.policies.allocation.common import SingleSetPolicy, first_fit, first_fit_held, free_processors, take
from isthmus.policies.api import JobInfo, RuntimeKey, SortedRuntimes, View
from isthmus.policies.prediction.wait import earliest_fit_on

#: A queue of at most this many jobs is backfilled by a plain scan (cheaper than merging its size
#: buckets); a longer one through the size and estimate indexes, which the engine keeps from
#: their first read on (a queue that never grows this long costs nothing to index).
SCAN_QUEUE_MAX = 500


class EasyBackfilling(SingleSetPolicy):
    """EASY backfilling (Lifka 1995; the IBM seed's LoadLeveler backfill, §3.1).

    Jobs start in arrival order while they fit. The first job that does not fit gets a
    reservation at its shadow time: the earliest time enough processors free up on a site if
    running jobs end at their requested runtimes. A later job may jump ahead if it fits now and
    either ends (by its requested runtime) before the shadow time or uses only the processors
    left over at the shadow time, so that it never delays the reserved job. The reservation
    is recomputed every round, as pyss and Alea do (peers/README.md). On several sites the
    reservation is on the site where the head can start earliest; other sites backfill freely.

    Processors a cluster holds for a waiting job (bags gave them back for it, `View.holds`) are
    that job's alone: it may start on them (in order, or as a backfill under the same rules),
    no other job may. For the head's reservation they count as free (a hold never delays the
    head): a held job that would delay the head is not started, and the engine ends its hold.

    A round's cost does not grow with the queue: behind the head, only the jobs that may start
    are visited (`_backfill_indexed`, through the queue's size buckets and, per size, its jobs in
    order of estimate), with the decisions of a scan of the whole queue.
    """

    name: ClassVar[str] = "easy"
    backfills_behind_reservation: ClassVar[bool] = True
    uses_size_index: ClassVar[bool] = True
    runtime_index: ClassVar[RuntimeKey | None] = "estimate"
    seed: ClassVar[str] = "IBM meta-schedulers seed §3.1 (LoadLeveler backfill; Lifka 1995)"

    def decide(self, view: View) -> Iterable[Decision]:
        """Start the head while it fits, then backfill behind its reservation."""
        order = view.stage_sites(0)
        free = free_processors(view)
        total = sum(free[i] for i in order)
        out: list[Decision] = []
        now = view.now
        queue = iter(view.queue(0))
        head = None
        started: dict[int, list[tuple[float, int]]] = {}
        # processors held for waiting jobs (bags gave them back for them): only those jobs use them
        holds = view.holds() if view.holding else None
        for e in queue:
            held = holds.get(e.job.id) if holds else None
            i = first_fit_held(free, order, e.job.size, held) if held else first_fit(free, order, e.job.size)
            if i < 0:
                head = e
                break
            if held:
                total -= take(free, i, e.job.size, held)
                holds.pop(e.job.id)  # type: ignore[union-attr]
            else:
                free[i] -= e.job.size
                total -= e.job.size
            started.setdefault(i, []).append((now + e.estimated_runtime, e.job.size))
            out.append(start_job(e.job.id, i, None, self.name))
        if head is None or (total <= 0 and not holds):
            return out
        # Reservation for the head: the site where it can start earliest. Processors held for
        # waiting jobs count as free for it: a hold never delays the head (it lasts until the
        # processors being preempted for its job come free, and one round more)
        held_on = [0] * len(free)
        if holds:
            for where in holds.values():
                for i, n in where.items():
                    held_on[i] += n
        res_site, res_time, extra = -1, math.inf, 0
        sites = view.sites
        for i in order:
            t, x = earliest_fit_on(sites[i], free[i] + held_on[i], now, head.job.size, started.get(i, ()))
            if t < res_time:
                res_site, res_time, extra = i, t, x
        if holds:
            return out + _backfill_held(queue, order, free, holds, now, res_site, res_time, extra, self.name)
        if len(view.queue(0)) > SCAN_QUEUE_MAX:
            return out + _backfill_indexed(view, head, order, free, now, res_site, res_time, extra, self.name)
        for e in queue:
            if total <= 0:
                break
            size = e.job.size
            if size > total:
                continue
            i, extra = _backfill_site(free, order, size, now + e.estimated_runtime <= res_time, res_site, extra)
            if i >= 0:
                total -= size
                out.append(start_job(e.job.id, i, None, self.name))
        return out


def _backfill_site(
    free: list[int], order: Sequence[int], size: int, ends_in_time: bool, res_site: int, extra: int
) -> tuple[int, int]:
    """EASY's rule for one job behind the head: the first site of `order` with `size` free
    processors where it does not delay the reservation (on the reservation's site, it ends by the
    shadow time or fits in the `extra` processors left over then), taken from `free`; and the
    extra processors left. -1 when there is none."""
    for i in order:
        if free[i] < size:
            continue
        if i == res_site and not ends_in_time:
            if size > extra:
                continue
            extra -= size
        free[i] -= size
        return i, extra
    return -1, extra


def _backfill_held(
    queue: Iterator[JobInfo],
    order: Sequence[int],
    free: list[int],
    holds: Mapping[int, Mapping[int, int]],
    now: float,
    res_site: int,
    res_time: float,
    extra: int,
    name: str,
) -> list[Decision]:
    """EASY's backfilling while clusters hold processors for waiting jobs: a job may also use
    the processors held for it (`holds`), no job those held for another; the rules are EASY's
    (a job that does not end by the shadow time uses at most the processors left over then)."""
    out: list[Decision] = []
    for e in queue:
        size = e.job.size
        held = holds.get(e.job.id)
        for i in order:
            own = min(size, held.get(i, 0)) if held else 0
            if free[i] + own < size:
                continue
            if i == res_site and now + e.estimated_runtime > res_time:
                if size > extra:
                    continue
                extra -= size
            take(free, i, size, held)
            out.append(start_job(e.job.id, i, None, name))
            break
    return out


def _limits(free: list[int], order: Sequence[int], res_site: int, extra: int) -> tuple[int, int]:
    """The largest job that may start now whatever its estimate (on a site other than the
    reservation's, or within the processors left over at the shadow time), and the largest that
    may start at all (it fits on some site)."""
    other = 0
    for i in order:
        if i != res_site and free[i] > other:
            other = free[i]
    at_res = free[res_site] if res_site >= 0 else 0
    return max(other, min(at_res, extra)), max(other, at_res)


def _ending_by(group: SortedRuntimes, bucket: Mapping[int, JobInfo], after: int, limit: float) -> Iterator[JobInfo]:
    """The jobs of one size queued after sequence `after` whose estimate is at most `limit`, in
    queue order (`group`: that size in order of estimate; `bucket`: the same jobs by id)."""
    found = group.upto(limit)
    for k in range(bisect.bisect_right(found, after, key=_seq_of), len(found)):
        yield bucket[found[k][2]]


def _seq_of(item: tuple[float, int, int]) -> int:
    return item[1]


# how `_backfill_indexed` visits a size: each job, in queue order; only the jobs that end by the
# shadow time, in queue order; or those, not listed yet (the key a lower bound: the size's first job)
_ANY, _SHORT, _PENDING = 0, 1, 2


def _backfill_indexed(
    view: View,
    head: JobInfo,
    order: Sequence[int],
    free: list[int],
    now: float,
    res_site: int,
    res_time: float,
    extra: int,
    name: str,
) -> list[Decision]:
    """EASY's backfilling behind `head` with the decisions of a scan of the whole queue, visiting
    only the jobs that may start.

    A job that the scan would visit and not start changes nothing, so leaving it out keeps every
    decision. Free processors and the left-over ones (`extra`) only decrease in a round, so once
    a job is larger than every site's free processors, no later job of its size starts; once it
    is larger than what it may take whatever its estimate (`_limits`), only the jobs of its size
    that end by the shadow time may start. The size buckets are merged in queue order: those
    small enough job by job, the others through their jobs in order of estimate, as far as those
    ending by the shadow time (the engine's runtime index, `runtime_index = "estimate"`), listed
    only when the merge reaches them. The rules are the scan's, applied to each job visited.
    """
    out: list[Decision] = []
    anyrt, fits = _limits(free, order, res_site, extra)
    if fits <= 0:
        return out
    # the estimates that may end by the shadow time: `now + estimate <= res_time` decides each
    # job visited; this bound, loosened past rounding, only chooses which to visit
    span = res_time - now
    limit = span + 1e-9 * (abs(res_time) + abs(now) + 1.0) if span < math.inf else math.inf
    by_estimate = view.queue_by_runtime(0)
    by_size = view.queue_by_size(0)
    head_seq = head.seq  # read after the indexes: their first read gives the queue its sequence
    heap: list[tuple[int, int, int, JobInfo | None, Iterator[JobInfo] | None]] = []
    for size in by_size:
        if size > fits:
            continue
        bucket = by_size[size]
        if size <= anyrt:
            jobs = iter(bucket.values())
            for e in jobs:  # past the head and the jobs started before it this round
                if e.seq > head_seq:
                    heap.append((e.seq, size, _ANY, e, jobs))
                    break
        else:
            heap.append((next(iter(bucket.values())).seq, size, _PENDING, None, None))
    heapq.heapify(heap)
    while heap:
        seq, size, how, entry, following = heap[0]
        if size > fits:
            heapq.heappop(heap)  # none of this size fits anywhere any more
            continue
        if how == _PENDING or (how == _ANY and size > anyrt):
            # from here on, a job of this size starts only if it ends by the shadow time
            rest = _ending_by(by_estimate[size], by_size[size], head_seq if how == _PENDING else seq - 1, limit)
            first = next(rest, None)
            if first is None:
                heapq.heappop(heap)
            else:
                heapq.heapreplace(heap, (first.seq, size, _SHORT, first, rest))
            continue
        assert entry is not None and following is not None
        i, extra = _backfill_site(free, order, size, now + entry.estimated_runtime <= res_time, res_site, extra)
        if i >= 0:
            out.append(start_job(entry.job.id, i, None, name))
            anyrt, fits = _limits(free, order, res_site, extra)
        nxt = next(following, None)
        if nxt is None:
            heapq.heappop(heap)
        else:
            heapq.heapreplace(heap, (nxt.seq, size, how, nxt, following))
    return out
