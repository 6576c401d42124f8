"""A queue kept as columns (NumPy arrays), for policies that rank the whole queue every round.

HSDF orders every waiting job by a key that changes from round to round (the predicted wait
depends on the running jobs), so no index can keep that order; what can be made cheap is the
ranking itself: one vectorised computation over the columns instead of a Python call per job.
The engine keeps the columns of each queue in step with it (O(1) add and remove: the last row
moves into the hole) for allocation policies that declare `uses_queue_columns`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, TypeVar

import numpy as np

from isthmus.policies.api import QueueColumnsView

Array = TypeVar("Array", bound=np.ndarray)

if TYPE_CHECKING:
    from isthmus.engine.state import JobEntry


class QueueColumns:
    """The columns of one queue, kept by the engine."""

    __slots__ = ("_pos", "ids", "n", "predicted", "queued_at", "seq", "size")

    def __init__(self, capacity: int = 1024) -> None:
        self.ids = np.empty(capacity, dtype=np.int64)
        self.seq = np.empty(capacity, dtype=np.int64)
        self.size = np.empty(capacity, dtype=np.int64)
        self.queued_at = np.empty(capacity, dtype=np.float64)
        self.predicted = np.empty(capacity, dtype=np.float64)
        self.n = 0
        self._pos: dict[int, int] = {}

    def _grow(self) -> None:
        capacity = 2 * self.ids.size
        for name in ("ids", "seq", "size", "queued_at", "predicted"):
            old = getattr(self, name)
            new = np.empty(capacity, dtype=old.dtype)
            new[: self.n] = old[: self.n]
            setattr(self, name, new)

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

    def remove(self, job_id: int) -> None:
        """Remove a job that left the queue."""
        k = self._pos.pop(job_id)
        last = self.n - 1
        if k != last:
            moved = int(self.ids[last])
            for col in (self.ids, self.seq, self.size, self.queued_at, self.predicted):
                col[k] = col[last]
            self._pos[moved] = k
        self.n = last

    def set_queued_at(self, job_id: int, queued_at: float) -> None:
        """Record a changed queue-entry time (a job restored from a recorded state)."""
        self.queued_at[self._pos[job_id]] = queued_at

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


def _frozen(column: Array) -> Array:
    view = column.view()
    view.flags.writeable = False
    return view
