"""A queue kept as columns (NumPy arrays), for policies that rank the whole queue every round.

HSDF orders every waiting job by a key that changes from round to round (the predicted wait
depends on the running jobs), so no index keeps that order; what can be made cheap is the
ranking itself: one vectorised computation over the columns instead of a Python call per job.
The engine keeps the columns of each queue in step with it (O(1) add and remove: the last row
moves into the hole) for allocation policies that declare `uses_queue_columns`.

The columns also keep the queue split into groups of equal (size, predicted runtime), each in
queue order, with the head of every group as a row of its own columns (`QueueHeads`). Within a
group every job has the same predicted time to fit and the same predicted runtime, so its
estimated slowdown (predicted start - queued_at + predicted) / predicted only falls along the
group as long as queue order is also queued_at order (the usual case: a job joins the queue
when it arrives or is requeued). Then the highest slowdowns of the whole queue are found among
the group heads and ranking costs the number of groups, not the number of jobs.
"""

from __future__ import annotations

import math
from collections import OrderedDict
from collections.abc import Mapping
from types import MappingProxyType
from typing import TYPE_CHECKING, TypeVar

import numpy as np

from isthmus.policies.api import QueueColumnsView, QueueHeadsView

Array = TypeVar("Array", bound=np.ndarray)

if TYPE_CHECKING:
    from isthmus.engine.state import JobEntry


class _Rows:
    """Rows of (id, seq, size, queued_at, predicted) in NumPy columns, `n` of them in use, that
    grow by doubling; a removed row is filled by the last one."""

    __slots__ = ("ids", "n", "predicted", "queued_at", "seq", "size")

    def __init__(self, capacity: int) -> None:
        self.ids = np.empty(capacity, dtype=np.int64)
        self.seq = np.empty(capacity, dtype=np.int64)
        self.size = np.empty(capacity, dtype=np.int64)
        self.queued_at = np.empty(capacity, dtype=np.float64)
        self.predicted = np.empty(capacity, dtype=np.float64)
        self.n = 0

    def _grow(self) -> None:
        capacity = 2 * self.ids.size
        for name in ("ids", "seq", "size", "queued_at", "predicted"):
            old = getattr(self, name)
            new = np.empty(capacity, dtype=old.dtype)
            new[: self.n] = old[: self.n]
            setattr(self, name, new)

    def _fill(self, row: int, last: int) -> None:
        """Copy row `last` into row `row`."""
        for col in (self.ids, self.seq, self.size, self.queued_at, self.predicted):
            col[row] = col[last]


class QueueColumns(_Rows):
    """The columns of one queue, kept by the engine."""

    __slots__ = ("_pos", "heads")

    def __init__(self, capacity: int = 1024) -> None:
        super().__init__(capacity)
        self._pos: dict[int, int] = {}
        self.heads = QueueHeads()

    def add(self, entry: JobEntry) -> None:
        """Add a job that just entered the queue."""
        if self.n == self.ids.size:
            self._grow()
        k = self.n
        job_id = entry.job.id
        self.ids[k] = job_id
        self.seq[k] = entry.seq
        self.size[k] = entry.job.size
        self.queued_at[k] = entry.queued_at
        self.predicted[k] = entry.predicted
        self._pos[job_id] = k
        self.n = k + 1
        self.heads.add(job_id, entry.seq, entry.job.size, entry.predicted, entry.queued_at)

    def remove(self, job_id: int) -> None:
        """Remove a job that left the queue."""
        k = self._pos.pop(job_id)
        self.heads.remove(job_id, int(self.size[k]), float(self.predicted[k]), self.n == 1)
        last = self.n - 1
        if k != last:
            self._pos[int(self.ids[last])] = k
            self._fill(k, last)
        self.n = last

    def set_queued_at(self, job_id: int, queued_at: float) -> None:
        """Record a changed queue-entry time (a job restored from a recorded state)."""
        k = self._pos[job_id]
        self.queued_at[k] = queued_at
        self.heads.set_queued_at(job_id, int(self.size[k]), float(self.predicted[k]), queued_at)

    def view(self) -> QueueColumnsView:
        """Read-only views of the rows in use (valid until the queue next changes)."""
        n = self.n
        return QueueColumnsView(
            _frozen(self.ids[:n]),
            _frozen(self.seq[:n]),
            _frozen(self.size[:n]),
            _frozen(self.queued_at[:n]),
            _frozen(self.predicted[:n]),
        )


class QueueHeads(_Rows):
    """The queue's groups of equal (size, predicted runtime), each in queue order, and the head of
    each group as columns (one row per group; O(1) add and remove, as `QueueColumns`).

    `in_order` holds while every job was added with a queued_at no earlier than the job added
    before it (queue order is then queued_at order); a changed queued_at (a job restored from a
    recorded state) that breaks this clears it until the queue is next empty."""

    __slots__ = ("_last", "_last_id", "_members", "_previous", "_sizes", "_slot", "_view", "in_order")

    def __init__(self, capacity: int = 64) -> None:
        super().__init__(capacity)
        # per row: job id -> (seq, queued_at), in queue order
        self._members: list[OrderedDict[int, tuple[int, float]]] = []
        self._slot: dict[tuple[int, float], int] = {}  # (size, predicted) -> row
        self._sizes: dict[int, int] = {}  # size -> number of groups of that size
        self._view: QueueHeadsView | None = None  # until the queue next changes
        self.in_order = True
        self._last = -math.inf  # the latest queued_at added
        self._previous = -math.inf  # the same before the last add
        self._last_id = -1  # the job added last

    def _set_head(self, row: int, job_id: int, seq: int, queued_at: float) -> None:
        self.ids[row] = job_id
        self.seq[row] = seq
        self.queued_at[row] = queued_at

    def add(self, job_id: int, seq: int, size: int, predicted: float, queued_at: float) -> None:
        """Add a job that just joined the queue (behind every job already in it)."""
        self._view = None
        if queued_at < self._last:
            self.in_order = False
        self._previous = self._last
        self._last = max(self._last, queued_at)
        self._last_id = job_id
        row = self._slot.get((size, predicted))
        if row is None:
            if self.n == self.ids.size:
                self._grow()
            row = self.n
            self.n = row + 1
            self._slot[(size, predicted)] = row
            self._members.append(OrderedDict())
            self._sizes[size] = self._sizes.get(size, 0) + 1
            self.size[row] = size
            self.predicted[row] = predicted
            self._set_head(row, job_id, seq, queued_at)
        self._members[row][job_id] = (seq, queued_at)

    def remove(self, job_id: int, size: int, predicted: float, emptied: bool) -> None:
        """Remove a job that left the queue (`emptied`: it was the last one)."""
        self._view = None
        row = self._slot[(size, predicted)]
        members = self._members[row]
        del members[job_id]
        if members:
            if self.ids[row] == job_id:
                head, (seq, queued_at) = next(iter(members.items()))
                self._set_head(row, head, seq, queued_at)
        else:
            del self._slot[(size, predicted)]
            if self._sizes[size] == 1:
                del self._sizes[size]
            else:
                self._sizes[size] -= 1
            last = self.n - 1
            if row != last:
                self._fill(row, last)
                self._members[row] = self._members[last]
                self._slot[(int(self.size[row]), float(self.predicted[row]))] = row
            self._members.pop()
            self.n = last
        if emptied:
            self.in_order = True
            self._last = self._previous = -math.inf
            self._last_id = -1

    def set_queued_at(self, job_id: int, size: int, predicted: float, queued_at: float) -> None:
        """Record a changed queue-entry time. Queue order stays queued_at order only if the job
        is the one added last and its new time is no earlier than that of the job added before
        it (a job restored from a recorded state, in the order they were queued)."""
        self._view = None
        row = self._slot[(size, predicted)]
        members = self._members[row]
        members[job_id] = (members[job_id][0], queued_at)
        if self.ids[row] == job_id:
            self.queued_at[row] = queued_at
        if job_id == self._last_id and queued_at >= self._previous:
            self._last = queued_at
        else:
            self.in_order = False

    def view(self) -> QueueHeadsView | None:
        """Read-only views of the head rows (valid until the queue next changes), or None when
        queue order is not queued_at order."""
        if not self.in_order:
            return None
        if self._view is None:
            n = self.n
            self._view = QueueHeadsView(
                _frozen(self.ids[:n]),
                _frozen(self.seq[:n]),
                _frozen(self.size[:n]),
                _frozen(self.queued_at[:n]),
                _frozen(self.predicted[:n]),
                tuple(sorted(self._sizes)),
                self._group,
            )
        return self._view

    def _group(self, row: int) -> Mapping[int, tuple[int, float]]:
        return MappingProxyType(self._members[row])


def _frozen(column: Array) -> Array:
    view = column.view()
    view.flags.writeable = False
    return view
