"""A workload kept as columns: a sequence of jobs whose `Job` objects exist only while used.

A trace of 300,000 jobs as frozen `Job` objects takes about 100 MB; as NumPy columns it takes
about 20. :class:`JobTable` is a ``Sequence[Job]`` over such columns: indexing builds the
`Job` (the simulator's arrival feed asks for each job when it arrives, and the engine drops it
when it ends), so only the jobs in the system (queued or running) exist as objects at a time,
not the whole workload. :class:`JobsById` is
the same table as a ``Mapping[int, Job]`` by job id (what a simulation result offers).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from math import isnan
from typing import overload

import numpy as np
from numpy.typing import NDArray

from isthmus.model.job import Job, rigid_job

#: Jobs built together when the table is indexed (see JobTable).
BLOCK = 1024

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
    every job has priority HIGH, no VM requirements and one task. Indexing builds the jobs of
    `BLOCK` positions from there at once and keeps them until a position outside is asked for:
    reading in order (the arrival feed reads a job's time, then the job, then the next) builds
    each job once, and at most `BLOCK` jobs are held by the table.
    """

    __slots__ = ("_block", "_block_len", "_block_start", "_names", "cols")

    def __init__(self, cols: JobColumnsData) -> None:
        self.cols = cols
        self._names: dict[int, str] = {}
        # the jobs of positions _block_start... built together (a feed reads them in order)
        self._block_start = 0
        self._block: list[Job] = []
        self._block_len = 0

    def __len__(self) -> int:
        return int(self.cols.ids.size)

    def _name(self, ident: int) -> str:
        name = self._names.get(ident)
        if name is None:
            name = self._names[ident] = str(ident)
        return name

    @overload
    def __getitem__(self, index: int) -> Job: ...

    @overload
    def __getitem__(self, index: slice) -> JobTable: ...

    def __getitem__(self, index: int | slice) -> Job | JobTable:
        if type(index) is int:  # the arrival feed's call: kept short
            k = index - self._block_start
            if 0 <= k < self._block_len:
                return self._block[k]
        elif isinstance(index, slice):
            return JobTable(self.cols.take(index))
        n = len(self)
        i = int(index) + n if index < 0 else int(index)
        if not 0 <= i < n:
            raise IndexError(f"job index {index} out of range for {n} jobs")
        self._block_start = i
        self._block = self._rows(i, min(n, i + BLOCK))
        self._block_len = len(self._block)
        return self._block[0]

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
        return self._rows(0, len(self))

    def _rows(self, lo: int, hi: int) -> list[Job]:
        """The jobs of positions `lo` to `hi` (exclusive), built from the columns."""
        c = self.cols
        name = self._name
        return [
            rigid_job(i, s, z, r, None if isnan(q) else q, name(u), name(g), None if isnan(m) else m)
            for i, s, z, r, q, u, g, m in zip(
                c.ids[lo:hi].tolist(),
                c.submit[lo:hi].tolist(),
                c.size[lo:hi].tolist(),
                c.runtime[lo:hi].tolist(),
                c.requested[lo:hi].tolist(),
                c.user[lo:hi].tolist(),
                c.group[lo:hi].tolist(),
                c.memory[lo:hi].tolist(),
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
