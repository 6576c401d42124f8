"""KOALA-C Highest-SlowDown-First."""

from __future__ import annotations

import heapq
from collections.abc import Iterable, Iterator, Sequence
from typing import ClassVar

import numpy as np
from pydantic import Field

from isthmus.decisions import Decision
from isthmus.decisions.start import start_job
from isthmus.model.environment import Environment
from isthmus.policies.allocation.common import (
    all_sites,
    any_free,
    first_fit,
    fitting_candidates,
    free_processors,
    list_schedule,
)
from isthmus.policies.api import AllocationDefaults, QueueHeadsView, View
from isthmus.policies.prediction.choice import PredictorParams
from isthmus.policies.prediction.wait import earliest_starts


class HsdfParams(PredictorParams):
    """Parameters of `hsdf` (and its runtime `predictor`)."""

    blocking: bool = Field(
        True,
        description=(
            "true (default): the first job in slowdown order that fits on no site holds back every job "
            "behind it until a later round; false: it is skipped (list scheduling, as FF and SJF)"
        ),
    )


def estimated_slowdown(predicted_wait: float, predicted_runtime: float) -> float:
    """(predicted wait + predicted runtime) / predicted runtime; inf when the wait is unbounded."""
    return (predicted_wait + predicted_runtime) / predicted_runtime


class HighestSlowdownFirst(AllocationDefaults):
    """HSDF: the queued job with the highest estimated slowdown first, on the first site where it fits.

    KOALA-C §IV-A(4): "similar to SJF except that it also uses job wait-time prediction in
    order to allocate the job with the highest estimated slowdown first"; the runtime and
    wait-time predictors are those of §III-B. A queued job's estimated slowdown is
    (predicted wait + predicted runtime) / predicted runtime, where the predicted runtime is
    the arrival-time prediction (`isthmus.policies.prediction.runtime`) and the predicted wait
    is the time it has waited in its queue (now - queued_at) plus the time until its best site
    has enough free processors on the availability profile of running jobs' estimated ends
    (`isthmus.policies.prediction.wait`; per round, one walk per site along its running jobs'
    estimated ends, as far as the largest queued size needs). Ties keep queue order. The queue
    is ranked from the heads of its groups of equal (size, predicted runtime) when queue order
    is queued_at order (`_ranked_by_groups`), else over every queued job's row.

    Blocking. "Allocate the job with the highest estimated slowdown first" is read as a
    priority order the round keeps: by default (`blocking = true`) the whole queue is ranked
    and jobs start in that order while they fit; the first that fits on no site stops the
    round, so a job whose predicted wait is long is not overtaken by jobs ranked below it. This
    is where the wait prediction matters (docs/simulation.md shows a hand-computed schedule in
    which it changes the order). `blocking = false` places every job that fits, in slowdown
    order, as FF and SJF place theirs ("the first site in which it fits", §IV-A(1), (3)); then
    the prediction cannot change which jobs start: a job that fits nowhere at the start of a
    round fits nowhere later in it (free processors only decrease) and is skipped wherever it
    ranks, and a job that fits now has a predicted time-to-fit of 0, so only those are ranked
    (by elapsed wait and predicted runtime).
    """

    name: ClassVar[str] = "hsdf"
    seed: ClassVar[str] = "KOALA-C §IV-A(4), §III-B (runtime and wait-time prediction)"
    uses_size_index: ClassVar[bool] = True
    uses_queue_columns: ClassVar[bool] = True
    uses_prediction: ClassVar[bool] = True
    Params = HsdfParams

    def __init__(self, params: HsdfParams | None = None) -> None:
        self.params = params or HsdfParams()

    def stage_sites(self, env: Environment) -> list[tuple[int, ...]]:
        """One queue over every site."""
        return all_sites(env)

    def decide(self, view: View) -> Iterable[Decision]:
        """Start queued jobs highest-estimated-slowdown first."""
        if not view.queued or not any_free(view):
            return []
        now = view.now
        if not self.params.blocking:
            # Every job that fits now has predicted time-to-fit 0 (see the class docstring).
            jobs = sorted(fitting_candidates(view), key=lambda e: -estimated_slowdown(now - e.queued_at, e.predicted))
            return list_schedule(view, jobs, self.name)
        return self._blocking(view)

    def _blocking(self, view: View) -> list[Decision]:
        """Whole queue in estimated-slowdown order; stop at the first job that fits nowhere.

        A job's predicted start is the earliest time its best site has room on this round's
        profile (>= now), so its predicted wait is that start minus when it joined the queue;
        a job no site's profile can ever fit (a cloud not yet grown) ranks first, with an
        unbounded predicted wait. A job that fits nowhere while nothing runs or boots on its
        sites is passed over instead of stopping the round (nothing could make it fit by
        waiting; a hypothesis-found stall with On-Demand).
        """
        order = view.stage_sites(0)
        free = free_processors(view)
        # Waiting for a job that fits nowhere only helps while something on its sites can free
        # or add processors (running jobs, booting VMs). Otherwise it is passed over this round:
        # provisioning (On-Demand plans in queue order, not in slowdown order) may be waiting
        # for the jobs ranked behind it, and holding them would stall the queue for good.
        can_change = any(view.sites[i].running for i in order) or any(
            (c := view.cloud(i)) is not None and c.booting for i in order
        )
        heads = view.queue_heads(0) if can_change else None
        if heads is not None:
            ranked = _ranked_by_groups(heads, _predicted_starts(view, order, heads.sizes))
        else:
            cols = view.queue_columns(0)
            # The whole queue's estimated slowdowns in one vectorised step (the same arithmetic
            # as estimated_slowdown, so the same floats).
            present = np.flatnonzero(np.bincount(cols.size)).tolist() if len(cols) else []
            starts = _predicted_starts(view, order, present)
            slowdown = (starts[cols.size] - cols.queued_at + cols.predicted) / cols.predicted
            ids, job_sizes = cols.ids, cols.size
            ranked = ((int(ids[k]), int(job_sizes[k])) for k in _ranked(-slowdown, cols.seq))
        out: list[Decision] = []
        for job_id, size in ranked:
            i = first_fit(free, order, size)
            if i < 0:
                if not can_change and any(free[j] > 0 for j in order):
                    continue
                break  # or nothing is free any more: no job behind can start either
            free[i] -= size
            out.append(start_job(job_id, i, None, self.name))
        return out


def _predicted_starts(view: View, order: Sequence[int], sizes: Sequence[int]) -> np.ndarray:
    """Predicted start (availability profile of `order`) indexed by job size, for the distinct
    `sizes` (ascending; one look-up each); 0 at the other indexes."""
    starts = np.zeros(sizes[-1] + 1 if sizes else 1, dtype=np.float64)
    starts[list(sizes)] = earliest_starts(view, order, sizes)
    return starts


def _ranked_by_groups(heads: QueueHeadsView, starts: np.ndarray) -> Iterator[tuple[int, int]]:
    """(job id, size) of the queued jobs in ascending -estimated slowdown, ties in queue order:
    the order `_ranked` gives over every row of the queue's columns, from the group heads.

    Within a group (equal size and predicted runtime, in queue order, which is queued_at order
    when `heads` is given) the estimated slowdown (start - queued_at + predicted) / predicted
    never rises along the group (each operation is monotone in queued_at), so every group is
    already in (key, seq) order: the groups' heads are ranked in one vectorised step, and a
    group's next job joins a heap only once the job before it has been taken (a k-way merge)."""
    key = -((starts[heads.size] - heads.queued_at + heads.predicted) / heads.predicted)
    head_rows = _ranked_lazily(key, heads.seq)
    row = next(head_rows, None)
    head_key = (float(key[row]), int(heads.seq[row])) if row is not None else None
    # (key, seq, job id, group row, the group's remaining jobs)
    heap: list[tuple[float, int, int, int, Iterator[tuple[int, tuple[int, float]]]]] = []
    while head_key is not None or heap:
        if head_key is not None and (not heap or head_key < heap[0][:2]):
            assert row is not None
            g, job_id = row, int(heads.ids[row])
            rest = iter(heads.group(row).items())
            next(rest)  # the head itself
            row = next(head_rows, None)
            head_key = (float(key[row]), int(heads.seq[row])) if row is not None else None
        else:
            _, _, job_id, g, rest = heapq.heappop(heap)
        size = int(heads.size[g])
        yield job_id, size
        following = next(rest, None)
        if following is not None:
            predicted = float(heads.predicted[g])
            start = float(starts[size])
            nxt, (seq, queued_at) = following
            heapq.heappush(heap, (-((start - queued_at + predicted) / predicted), seq, nxt, g, rest))


def _ranked_lazily(key: np.ndarray, seq: np.ndarray, first: int = 4) -> Iterator[int]:
    """`_ranked(key, seq)`, found one row at a time for the `first` rows (a round usually takes
    one or two: a minimum costs less than a partition), then by `_ranked` for the rest."""
    n = key.size
    work = key
    taken: list[int] = []
    for _ in range(min(n, first)):
        least = work.min()
        tied = np.flatnonzero(work == least)
        row = int(tied[0]) if tied.size == 1 else int(tied[np.argmin(seq[tied])])
        yield row
        if work is key:
            work = key.copy()
        work[row] = np.inf  # a key is never +inf: a slowdown is never -inf
        taken.append(row)
    if n > first:
        for row in _ranked(key, seq):
            if row not in taken:
                yield row


def _ranked(key: np.ndarray, seq: np.ndarray, head: int = 64) -> Iterator[int]:
    """Row numbers in ascending `key` order, ties in `seq` order, as Python ints. A round usually
    stops after a few jobs, so the rows are ranked in two steps: the rows whose key is at most
    the `head`-th smallest (every tie included), then, only if the round gets that far, the rest."""
    n = key.size
    if n <= 4 * head:
        yield from np.lexsort((seq, key)).tolist()
        return
    bound = np.partition(key, head)[head]
    first = np.flatnonzero(key <= bound)
    yield from first[np.lexsort((seq[first], key[first]))].tolist()
    rest = np.flatnonzero(key > bound)
    yield from rest[np.lexsort((seq[rest], key[rest]))].tolist()
