"""The event log: every change the engine applies, in order, as compact columns.

Metrics and reports are computed from this log alone (DESIGN: "metrics come from the event
log"), in simulation and live alike. Besides what happened (time, kind, job, site, vm, value)
each event carries the run number, the slots (processors) it concerns, the deciding policy,
the origin manager of a forwarded job and the task of a bag of tasks, so that a database
projection or a report needs no side channel. Policy and origin names are interned: the
columns hold indices into `policies` and `origins` (-1: none).
"""

from __future__ import annotations

from array import array
from collections.abc import Iterator
from dataclasses import dataclass
from enum import IntEnum
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import numpy as np
    from numpy.typing import NDArray


class EventKind(IntEnum):
    """What happened. Columns used: job, site, vm, value (see each member)."""

    SUBMIT = 0  # job arrived; value = size
    START = 1  # job run started on site; value = size; run, slots, policy set
    END = 2  # job run completed on site; value = exit code (0 in simulation)
    KILL = 3  # job run killed on site; value = KillCause
    REQUEUE = 4  # job back in a queue; value = stage it is queued in
    CANCEL = 5  # job cancelled by its user while queued or running
    FAIL = 6  # job run failed on site; value = exit code
    REJECT = 7  # job can never run here (too large, ...); reason in `reasons`
    VM_LEASE = 8  # VM leased (billing starts) on site; vm = id; value = instance type index; policy set
    VM_READY = 9  # VM booted and usable
    VM_RELEASE = 10  # VM release requested (billing stops); policy set
    VM_GONE = 11  # VM shut down
    DECISION = 12  # a decision refused or held; value = StatusCode; reason in `notes`; policy set
    VM_FAILED = 13  # a VM failed (boot timeout, error state); reason in `notes`
    RESERVE = 14  # VM `vm` of site reserved for queued job (value 1) or given back (value 0); policy set
    SHARED = 15  # the run ending now shared processors (FCFS-NW); value = its runtime at full speed (simulation)
    FORWARD = 16  # queued job sent to a peer manager; value = peer index; origin = the peer's name; policy set
    RETURN = 17  # a job received from a peer handed back to it unstarted (IBM: FAILED); origin = that peer
    VM_USER = 18  # VM `vm` of site serves one user (named in `notes`), logged right after its VM_LEASE
    VM_RETIRE = 19  # VM `vm` of site retired: takes no new job, released when its runs end; policy set
    # Bags of tasks (malleable jobs, isthmus.engine.bags): `vm` holds the processor (slot) id
    BAG_SUBMIT = 20  # bag `job` arrived; value = its number of tasks
    GROW = 21  # bag given processors on site; value = how many; policy set
    SHRINK = 22  # bag ordered to give back processors on site; value = how many; task = the rigid job (-1); policy
    BAG_RELEASE = 23  # one processor (slot `vm`) of the bag given back on site (after its preemption time)
    TASK_START = 24  # task `task` of bag `job` started on slot `vm` of site
    TASK_END = 25  # task `task` completed; value = its runtime
    TASK_PREEMPT = 26  # task `task` preempted on slot `vm` (back in the bag's queue); value = seconds of work lost
    BAG_END = 27  # every task of bag `job` completed (or failed for good); value = tasks completed
    # Live bags only (task ends reported by pilots): a task run that exited non-zero
    TASK_RETRY = 28  # task `task` failed on slot `vm` and goes back to the bag's queue; value = exit code
    TASK_FAIL = 29  # task `task` failed on slot `vm` with no retry left; value = exit code
    # Cluster holds: processors bags gave back for a waiting rigid job, kept for it until it starts
    HOLD = 30  # free processors of site held for queued job `job` now (value; 0: the hold ended)


class KillCause(IntEnum):
    """Why a run was killed (the value column of a KILL event)."""

    LIMIT = 0  # reached its set's runtime limit
    POLICY = 1  # a policy decided to kill it
    CANCEL = 2  # the user cancelled it
    LOST = 3  # its node or pilot was lost
    BUDGET = 4  # its VM was released because the budget could not pay another billing increment
    TIMEOUT = 5  # it reached its requested runtime


INT64_MIN = -(2**63)
INT64_MAX = 2**63 - 1
"""Job ids (and other integer columns) must fit a signed 64-bit integer."""


@dataclass(frozen=True, slots=True)
class Event:
    """One row of the log, as returned by iteration."""

    time: float
    kind: EventKind
    job: int
    site: int
    vm: int
    value: float
    run: int = -1
    slots: int = 0
    policy: str = ""
    origin: str = ""
    task: int = -1


class EventLog:
    """Append-only columns (-1 where a column does not apply).

    Stored in `array` columns so that a million events take about 45 MB. `reasons` holds the
    reason a job was rejected (by job id); `notes` the reason of a DECISION or VM_FAILED event
    (by event index).

    The columns that most events leave empty (vm, slots, origin, task) are kept sparse while
    the log grows (index -> value) and materialized as arrays by `columns()` (vm also by
    `core_columns()`): an event costs seven appends, not eleven, on the simulator's hot path. A
    START event's slots are its size (`value`) unless given.
    """

    __slots__ = (
        "_job",
        "_kind",
        "_origin",
        "_policy",
        "_policy_ids",
        "_run",
        "_site",
        "_slots",
        "_sparse",
        "_task",
        "_time",
        "_value",
        "_vm",
        "notes",
        "origins",
        "policies",
        "reasons",
    )

    def __init__(self) -> None:
        self._time = array("d")
        self._kind = array("b")
        self._job = array("q")
        self._site = array("h")
        self._vm = array("i")
        self._value = array("d")
        self._run = array("i")
        self._policy = array("h")
        self._slots = array("i")
        self._origin = array("h")
        self._task = array("q")
        #: sparse columns while the log grows: name -> {event index: value}
        self._sparse: dict[str, dict[int, int]] = {"vm": {}, "slots": {}, "origin": {}, "task": {}}
        self.reasons: dict[int, str] = {}
        self.notes: dict[int, str] = {}
        self.policies: list[str] = []
        self.origins: list[str] = []
        self._policy_ids: dict[str, int] = {}

    def append(
        self,
        time: float,
        kind: int,
        job: int = -1,
        site: int = -1,
        vm: int = -1,
        value: float = 0.0,
        run: int = -1,
        policy: int = -1,
        *,
        slots: int = 0,
        origin: int = -1,
        task: int = -1,
    ) -> int:
        """Record one event; returns its index. `policy` and `origin` are interned indices
        (see `policy_index` and `origin_index`)."""
        self.add(time, kind, job, site, value, run, policy)
        i = len(self._time) - 1
        if vm != -1:
            self._sparse["vm"][i] = vm
        if slots:
            self._sparse["slots"][i] = slots
        if origin >= 0:
            self._sparse["origin"][i] = origin
        if task >= 0:
            self._sparse["task"][i] = task
        return i

    def add(self, time: float, kind: int, job: int, site: int, value: float, run: int, policy: int) -> None:
        """`append` with every argument given but the vm (-1), slots, origin and task (the
        simulator's hot path: arrivals, starts, ends, kills and requeues), returning nothing."""
        self._time.append(time)
        self._kind.append(kind)
        self._job.append(job)
        self._site.append(site)
        self._value.append(value)
        self._run.append(run)
        self._policy.append(policy)

    def _materialize(self) -> None:
        """Bring the vm, slots, origin and task arrays up to the log's length: -1 (slots: a
        START's size, `value`, else 0) where the sparse columns hold nothing (vectorized: a
        run's log holds hundreds of thousands of events)."""
        self._materialize_vm()
        n = len(self._time)
        start = len(self._slots)
        if start == n:
            return
        import numpy as np

        kind = np.frombuffer(self._kind, dtype=np.int8)[start:n].copy()  # copies: no buffer stays exported
        value = np.frombuffer(self._value, dtype=np.float64)[start:n].copy()
        slots = np.where(kind == int(EventKind.START), value, 0.0).astype(np.int64)  # int(): toward zero
        self._fill("slots", self._slots, slots, start)
        self._fill("origin", self._origin, np.full(n - start, -1, dtype=np.int64), start)
        self._fill("task", self._task, np.full(n - start, -1, dtype=np.int64), start)

    def _materialize_vm(self) -> None:
        """Bring the vm array up to the log's length (-1 where the sparse column holds nothing)."""
        n = len(self._time)
        start = len(self._vm)
        if start == n:
            return
        import numpy as np

        self._fill("vm", self._vm, np.full(n - start, -1, dtype=np.int64), start)

    def _fill(self, name: str, column: array, out: NDArray[np.int64], start: int) -> None:  # type: ignore[type-arg]
        """Append to `column` the events from index `start` on: `out` (an int64 NumPy array of
        the defaults) with sparse column `name`'s values written in (the dict is emptied)."""
        import numpy as np

        d = self._sparse[name]
        if d:
            out[np.fromiter(d.keys(), np.int64, len(d)) - start] = np.fromiter(d.values(), np.int64, len(d))
            d.clear()
        dtype = np.dtype(column.typecode)  # the C type of the array's own typecode
        info = np.iinfo(dtype)
        if out.size and (out.min() < info.min or out.max() > info.max):
            raise OverflowError(f"event log column {name}: a value does not fit {dtype}")
        column.frombytes(out.astype(dtype).tobytes())

    def policy_index(self, name: str) -> int:
        """The interned index of policy `name` (-1 for an empty name)."""
        i = self._policy_ids.get(name)
        if i is None:
            if not name:
                return -1
            i = self._policy_ids[name] = len(self.policies)
            self.policies.append(name)
        return i

    def origin_index(self, name: str) -> int:
        """The interned index of origin manager `name` (-1 for a local job)."""
        if not name:
            return -1
        try:
            return self.origins.index(name)
        except ValueError:
            self.origins.append(name)
            return len(self.origins) - 1

    def __len__(self) -> int:
        return len(self._time)

    def event(self, i: int) -> Event:
        """Event number `i`."""
        self._materialize()
        p, o = self._policy[i], self._origin[i]
        return Event(
            self._time[i],
            EventKind(self._kind[i]),
            self._job[i],
            self._site[i],
            self._vm[i],
            self._value[i],
            self._run[i],
            self._slots[i],
            self.policies[p] if p >= 0 else "",
            self.origins[o] if o >= 0 else "",
            self._task[i],
        )

    def __iter__(self) -> Iterator[Event]:
        self._materialize()
        for i in range(len(self._time)):
            yield self.event(i)

    def columns(self) -> dict[str, array]:  # type: ignore[type-arg]
        """The raw columns by name (zero-copy; wrap with numpy.frombuffer for vector math)."""
        self._materialize()
        return {
            **self.core_columns(),
            "run": self._run,
            "slots": self._slots,
            "policy": self._policy,
            "origin": self._origin,
            "task": self._task,
        }

    def core_columns(self) -> dict[str, array]:  # type: ignore[type-arg]
        """The columns every event sets (time, kind, job, site, vm, value), zero-copy, without
        materializing the sparse ones but vm (slots, origin, task): what the metrics read, at
        no cost in memory (materializing those adds 14 bytes an event to the log for good)."""
        self._materialize_vm()
        return {
            "time": self._time,
            "kind": self._kind,
            "job": self._job,
            "site": self._site,
            "vm": self._vm,
            "value": self._value,
        }

    def clear(self) -> None:
        """Remove every event (with the reasons and notes), giving the columns' memory back: for
        a caller done with a finished run's log (`isthmus simulate` once its records are
        computed). Interned policy and origin names stay."""
        for name in (
            "_time",
            "_kind",
            "_job",
            "_site",
            "_vm",
            "_value",
            "_run",
            "_policy",
            "_slots",
            "_origin",
            "_task",
        ):
            setattr(self, name, array(getattr(self, name).typecode))
        for d in self._sparse.values():
            d.clear()
        self.reasons = {}
        self.notes = {}

    def rows(self) -> list[tuple[float, int, int, int, int, float]]:
        """All events as (time, kind, job, site, vm, value) tuples (for comparing two logs exactly)."""
        self._materialize_vm()
        return list(zip(self._time, self._kind, self._job, self._site, self._vm, self._value, strict=True))
