"""The engine's queues: one per stage (set of sites), their lazily built indexes, and admission.

`QueueBook` holds the queues in order (an OrderedDict a stage: O(1) removal anywhere, O(1)
access to the head) and, for allocation policies that declare them, the same queues split by
job size (`buckets`), each size's jobs ordered by the policy's runtime key (`sorted_buckets`)
and as NumPy columns (`columns`, HSDF). The indexes are built when a queue grows past
`INDEX_AT` jobs, or on their first read if that comes sooner (`indexes`), and kept from then on:
EASY reads them only once its queue grows long, and no round pays for a build over a long queue.

It also keeps what the engine's head-of-line shortcut needs (`stale`, `stale_all`,
`heads_blocked`): a queue given a new head since the allocation policy last decided.

`admit` puts an arriving job in its queue (or rejects it, or holds it for the selection policy
when no local site can run it); it talks to the engine through `AdmitOps`, not the engine class.
"""

from __future__ import annotations

import bisect
from collections import OrderedDict
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from sortedcontainers import SortedList

from isthmus.engine.columns import QueueColumns
from isthmus.engine.matching import admission_refusal
from isthmus.engine.state import JobEntry
from isthmus.model.events import EventKind
from isthmus.model.job import Job
from isthmus.policies.api import AllocationPolicy, runtime_order

if TYPE_CHECKING:
    from isthmus.engine.backend import SiteBackend
    from isthmus.engine.ops import AdmitOps

#: a runtime-index group longer than this becomes a SortedList (see `QueueBook.index`)
_PLAIN_GROUP_MAX = 256
#: a queue longer than this gets the declared indexes as it grows, so that no round pays for
#: building them over a long queue (shorter queues get them at the policy's first read)
INDEX_AT = 512
_REJECT = int(EventKind.REJECT)


class QueueBook:
    """The queues of one engine and their indexes (no back-pointer to the engine: it is given
    the backends and the allocation policy whose declarations decide the indexes)."""

    def __init__(
        self, allocation: AllocationPolicy, stage_sites: list[tuple[int, ...]], backends: Sequence[SiteBackend]
    ) -> None:
        self.allocation = allocation
        self.backends = backends
        self.stage_sites = stage_sites
        self.queues: list[OrderedDict[int, JobEntry]] = [OrderedDict() for _ in stage_sites]
        # The same queues split by job size (size -> jobs in queue order), so that policies can
        # visit only the jobs that fit in the processors left (queue_by_size in the view). Kept
        # only for allocation policies that declare they read it (it costs the others time), and
        # from its first read on (`indexes`).
        self.index_declared: bool = allocation.uses_size_index
        self.size_index = False  # kept now
        self.buckets: list[dict[int, OrderedDict[int, JobEntry]]] = [{} for _ in stage_sites]
        # size -> (runtime key, seq, job id) sorted, per stage: kept for policies that declare `runtime_index`
        self.runtime_key = allocation.runtime_index
        if self.runtime_key is not None and not self.index_declared:
            raise ValueError(f"policy {allocation.name!r} declares runtime_index without uses_size_index")
        self.sorted_buckets: list[dict[int, list[tuple[float, int, int]] | SortedList]] = [{} for _ in stage_sites]
        # the queues as NumPy columns, for policies that declare `uses_queue_columns` (HSDF)
        self.columns: list[QueueColumns] | None = None
        if allocation.uses_queue_columns and not self.index_declared:
            raise ValueError(f"policy {allocation.name!r} declares uses_queue_columns without uses_size_index")
        self.seq = 0
        #: the largest site of each stage (processors): a larger job can never run in it
        self.stage_max = [max((backends[i].site.max_processors for i in sites), default=0) for sites in stage_sites]
        #: the queue an arriving job joins (None: the only one)
        self.arrival_stage: Callable[[Job], int] | None = allocation.arrival_stage if len(stage_sites) > 1 else None
        #: the stages each site belongs to
        self.site_stages: list[tuple[int, ...]] = [
            tuple(q for q, sites in enumerate(stage_sites) if i in sites) for i in range(len(backends))
        ]
        # Queues given a new head or more free processors on one of their sites since the
        # head-of-line allocation policy last decided (`stale`; every queue after any other
        # change, `stale_all`): only those may start a job now (`heads_blocked`).
        self.stale: set[int] = set()
        self.stale_all = True

    def stage_of(self, job: Job) -> int:
        """The queue an arriving `job` joins."""
        return self.arrival_stage(job) if self.arrival_stage is not None else 0

    def too_large(self, job: Job, stage: int) -> str:
        """Why `job` fits on no site of queue `stage`."""
        backends = self.backends
        largest = max((backends[i] for i in self.stage_sites[stage]), key=lambda b: b.site.max_processors)
        return (
            f"needs {job.size} processors; the largest site it may use ({largest.name}) offers at most "
            f"{largest.site.max_processors}"
        )

    def enqueue(self, entry: JobEntry, stage: int) -> None:
        """Append `entry` to queue `stage` (and to its indexes)."""
        entry.stage = stage
        queue = self.queues[stage]
        queue[entry.job.id] = entry
        if len(queue) == 1:  # a new head
            self.stale.add(stage)
        if self.size_index:
            self.index(entry, stage)
        elif self.index_declared and len(queue) > INDEX_AT:
            self.indexes()

    def indexes(self) -> None:
        """Build the queue indexes the allocation policy declares (size buckets, their runtime
        order, NumPy columns) from the queues as they are, on their first read; they are kept
        from then on. ValueError when the policy declares none."""
        if self.size_index:
            return
        if not self.index_declared:
            raise ValueError(f"policy {self.allocation.name!r} declares no queue index (uses_size_index)")
        self.size_index = True
        if self.allocation.uses_queue_columns:
            self.columns = [QueueColumns() for _ in self.stage_sites]
        for stage, queue in enumerate(self.queues):
            for entry in queue.values():
                self.index(entry, stage)

    def index(self, entry: JobEntry, stage: int) -> None:
        """Give `entry`, the last job of queue `stage`, its queue sequence and its place in the indexes."""
        job_id = entry.job.id
        size = entry.job.size
        self.seq += 1
        entry.seq = self.seq
        bucket = self.buckets[stage].get(size)
        if bucket is None:
            bucket = self.buckets[stage][size] = OrderedDict()
        bucket[job_id] = entry
        if self.runtime_key is not None:
            groups = self.sorted_buckets[stage]
            group = groups.get(size)
            item = self._runtime_item(entry)
            if group is None:
                groups[size] = [item]
            elif isinstance(group, list):
                # a short group is a plain list kept sorted (C-level insort beats SortedList's
                # constant); a long one becomes a SortedList (insort would move O(n) items)
                bisect.insort(group, item)
                if len(group) > _PLAIN_GROUP_MAX:
                    groups[size] = SortedList(group)
            else:
                group.add(item)
        if self.columns is not None:
            self.columns[stage].add(entry)

    def _runtime_item(self, entry: JobEntry) -> tuple[float, int, int]:
        """The job's place in the runtime index: (runtime, queue sequence, id)."""
        assert self.runtime_key is not None
        return (*runtime_order(entry, self.runtime_key), entry.job.id)

    def dequeue(self, entry: JobEntry) -> None:
        """Remove `entry` from its queue (and its indexes); nothing for a job in no queue (one no
        local site can run, awaiting the selection policy)."""
        stage = entry.stage
        if stage < 0:
            return
        job_id = entry.job.id
        del self.queues[stage][job_id]
        self.stale.add(stage)  # maybe a new head
        if not self.size_index:
            return
        size = entry.job.size
        buckets = self.buckets[stage]
        bucket = buckets[size]
        del bucket[job_id]
        if not bucket:
            del buckets[size]
        if self.runtime_key is not None:
            # an emptied group stays (it costs more to make than to keep: sizes recur)
            group = self.sorted_buckets[stage][size]
            item = self._runtime_item(entry)
            if isinstance(group, list):
                i = bisect.bisect_left(group, item)
                if i == len(group) or group[i] != item:
                    raise AssertionError(f"job {job_id} is missing from the runtime index")
                del group[i]
            else:
                group.remove(item)
        if self.columns is not None:
            self.columns[stage].remove(job_id)

    def move(self, entry: JobEntry, stage: int) -> None:
        """Put queued `entry` at the end of queue `stage` instead (a recovered job's recorded queue)."""
        self.dequeue(entry)
        self.enqueue(entry, stage)

    def heads_blocked(self) -> bool:
        """True when no stale queue's head fits on a site of its queue now: since the head-of-line
        allocation policy last decided (or was found idle), only arrivals, ends and kills
        happened (any other change makes every queue stale), and each queue they gave a new head
        or more free processors on one of its sites (`stale`) still has a head larger than the
        free processors of every site of its queue. Clears the stale marks when True."""
        backends = self.backends
        queues = self.queues
        stage_sites = self.stage_sites
        for stage in range(len(queues)) if self.stale_all else self.stale:
            queue = queues[stage]
            if queue:
                size = next(iter(queue.values())).job.size
                for i in stage_sites[stage]:
                    if backends[i].free >= size:
                        return False
        self.stale.clear()  # `decided(True)`, inline: once per round
        self.stale_all = False
        return True

    def decided(self, all_accepted: bool) -> None:
        """The head-of-line allocation policy decided (or was found idle): every queue's head now
        waits for processors, unless one of its decisions was refused (it may decide it again)."""
        self.stale.clear()
        self.stale_all = not all_accepted

    def closed_stages(self, now: float) -> list[bool]:
        """Per queue: True when every site it may use has closed its availability window."""
        backends = self.backends
        return [
            all((u := backends[i].site.available_until) is not None and u <= now for i in sites)
            for sites in self.stage_sites
        ]


def admit(ops: AdmitOps, job: Job, now: float, chain: tuple[str, ...] = ()) -> JobEntry | None:
    """Admit arriving `job` (after visiting the managers in `chain`): queued in its arrival
    stage, or held for the selection policy in no queue when no local site can run it but a
    peer may (rejected at the round's end unless forwarded), or rejected (REJECT with its
    reason; None) when it can never run here."""
    book = ops.queue_book
    stage = book.arrival_stage(job) if book.arrival_stage is not None else 0
    if job.size > book.stage_max[stage] or job.size <= 0:
        reason = book.too_large(job, stage)
        fed = ops.federation
        if fed is not None and job.size > 0 and len(chain) < fed.max_hops:
            # no site here can run it, a peer may: offered to the selection policy this round,
            # in no local queue (where it would block the queue's head); rejected at the
            # round's end unless forwarded
            entry = JobEntry(job, now)
            entry.chain = chain
            entry.stage = -1
            ops.entries[job.id] = entry
            ops.forwarding.hold_outsized(entry, reason)
            return entry
        ops.log.append(now, _REJECT, job.id)
        ops.log.reasons[job.id] = reason
        return None
    if job.vm is not None:  # VM requirements no cloud of its queue can ever match
        why = admission_refusal(job, [book.backends[i].site for i in book.stage_sites[stage]])
        if why:
            ops.log.append(now, _REJECT, job.id)
            ops.log.reasons[job.id] = why
            return None
        ops.vm_jobs += 1
    entry = JobEntry(job, now)
    entry.chain = chain
    predictor = ops.predictor
    if predictor is not None:
        entry.predicted = predictor.predict(ops.view, job)
    ops.entries[job.id] = entry
    book.enqueue(entry, stage)
    fed = ops.federation
    if fed is not None and len(chain) < fed.max_hops:
        ops.forwarding.unrouted[job.id] = entry
    ops.round_soon()
    return entry
