"""A workload kept as columns: a sequence of jobs whose `Job` objects exist only while used.

A trace of 300,000 jobs as frozen `Job` objects takes about 100 MB; as NumPy columns it takes
about 20. :class:`JobTable` is a ``Sequence[Job]`` over such columns: indexing builds the
`Job` (the simulator's arrival feed asks for each job when it arrives, and the engine drops it
when it ends), so the objects of a whole workload never exist at once. :class:`JobsById` is
the same table as a ``Mapping[int, Job]`` by job id (what a simulation result offers).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from math import isnan
from typing import overload

import numpy as np
from numpy.typing import NDArray

from isthmus.model.job import Job, PriorityClass

_COLUMNS = ("ids", "submit", "size", "runtime", "requested", "user", "group", "memory")


@dataclass(slots=True)
class JobColumnsData:
    """The columns of a job table, one element per job: ids, submit times, sizes, runtimes,
    requested runtimes and memory (NaN when unknown), and numeric user and group ids."""

    ids: NDArray[np.int64]
    submit: NDArray[np.float64]
    size: NDArray[np.int64]
    runtime: NDArray[np.float64]
    requested: NDArray[np.float64]
    user: NDArray[np.int64]
    group: NDArray[np.int64]
    memory: NDArray[np.float64]

    def take(self, index: NDArray[np.intp] | NDArray[np.bool_] | slice) -> JobColumnsData:
        """The rows `index` selects (positions, a mask or a slice)."""
        return JobColumnsData(*(getattr(self, name)[index] for name in _COLUMNS))


class JobTable(Sequence[Job]):
    """Rigid jobs of a trace as columns, readable as a sequence of `Job` objects built on demand.

    Users and groups are the trace's decimal ids, as text (as the trace conversion names them);
    every job has priority HIGH, no VM requirements and one task. Indexing the same position
    twice in a row returns the same object (the arrival feed reads a job's time, then the job).
    """

    __slots__ = ("_last", "_last_i", "_names", "cols")

    def __init__(self, cols: JobColumnsData) -> None:
        self.cols = cols
        self._names: dict[int, str] = {}
        self._last_i = -1
        self._last: Job | None = None

    def __len__(self) -> int:
        return int(self.cols.ids.size)

    def _name(self, ident: int) -> str:
        name = self._names.get(ident)
        if name is None:
            name = self._names[ident] = str(ident)
        return name

    def _job(self, i: int) -> Job:
        c = self.cols
        requested = float(c.requested[i])
        memory = float(c.memory[i])
        return Job(
            int(c.ids[i]),
            float(c.submit[i]),
            int(c.size[i]),
            float(c.runtime[i]),
            None if isnan(requested) else requested,
            self._name(int(c.user[i])),
            self._name(int(c.group[i])),
            None if isnan(memory) else memory,
            PriorityClass.HIGH,
        )

    @overload
    def __getitem__(self, index: int) -> Job: ...

    @overload
    def __getitem__(self, index: slice) -> JobTable: ...

    def __getitem__(self, index: int | slice) -> Job | JobTable:
        if isinstance(index, slice):
            return JobTable(self.cols.take(index))
        n = len(self)
        i = index + n if index < 0 else index
        if not 0 <= i < n:
            raise IndexError(f"job index {index} out of range for {n} jobs")
        if i == self._last_i and self._last is not None:
            return self._last
        job = self._job(i)
        self._last_i, self._last = i, job
        return job

    def __iter__(self) -> Iterator[Job]:
        for i in range(len(self)):
            yield self[i]

    def select(self, mask: NDArray[np.bool_]) -> JobTable:
        """The jobs where `mask` is true, in order."""
        return JobTable(self.cols.take(mask))

    def user_names(self) -> NDArray[np.object_]:
        """Each job's user as text (an object array, one shared string per user)."""
        unique, inverse = np.unique(self.cols.user, return_inverse=True)
        names = np.array([self._name(int(u)) for u in unique.tolist()], dtype=object)
        return names[inverse] if unique.size else np.empty(0, dtype=object)

    def to_list(self) -> list[Job]:
        """Every job as an object (the whole workload at once: for callers that need a list)."""
        c = self.cols
        name = self._name
        high = PriorityClass.HIGH
        return [
            Job(i, s, z, r, None if isnan(q) else q, name(u), name(g), None if isnan(m) else m, high)
            for i, s, z, r, q, u, g, m in zip(
                c.ids.tolist(),
                c.submit.tolist(),
                c.size.tolist(),
                c.runtime.tolist(),
                c.requested.tolist(),
                c.user.tolist(),
                c.group.tolist(),
                c.memory.tolist(),
                strict=True,
            )
        ]

    def by_id(self) -> JobsById:
        """The same jobs as a mapping by job id."""
        return JobsById(self)


class JobsById(Mapping[int, Job]):
    """A :class:`JobTable` as a read-only mapping job id -> `Job` (built on each lookup)."""

    __slots__ = ("_order", "_sorted", "table")

    def __init__(self, table: JobTable) -> None:
        self.table = table
        self._order = np.argsort(table.cols.ids, kind="stable")
        self._sorted = table.cols.ids[self._order]

    def __getitem__(self, job_id: int) -> Job:
        pos = int(np.searchsorted(self._sorted, job_id))
        if pos >= self._sorted.size or int(self._sorted[pos]) != job_id:
            raise KeyError(job_id)
        return self.table[int(self._order[pos])]

    def __iter__(self) -> Iterator[int]:
        return iter(self.table.cols.ids.tolist())

    def __len__(self) -> int:
        return len(self.table)

    def __contains__(self, job_id: object) -> bool:
        if not isinstance(job_id, int | np.integer):
            return False
        pos = int(np.searchsorted(self._sorted, job_id))
        return pos < self._sorted.size and int(self._sorted[pos]) == job_id
