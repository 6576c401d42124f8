"""The event log: every change the engine applies, in order, as compact columns.

Metrics and reports are computed from this log alone (DESIGN: "metrics come from the event
log"), in simulation and live alike.
"""

from __future__ import annotations

from array import array
from collections.abc import Iterator
from dataclasses import dataclass
from enum import IntEnum


class EventKind(IntEnum):
    """What happened. Columns used: job, site, vm, value (see each member)."""

    SUBMIT = 0  # job arrived; value = size
    START = 1  # job run started on site; value = size
    END = 2  # job run completed on site; value = exit code (0 in simulation)
    KILL = 3  # job run killed on site; value = KillCause
    REQUEUE = 4  # job back in a queue; value = stage it is queued in
    CANCEL = 5  # job cancelled by its user while queued or running
    FAIL = 6  # job run failed on site; value = exit code
    REJECT = 7  # job can never run here (too large, ...); reason kept beside the log
    VM_LEASE = 8  # VM leased (billing starts) on site; vm = id
    VM_READY = 9  # VM booted and usable
    VM_RELEASE = 10  # VM release requested (billing stops)
    VM_GONE = 11  # VM shut down


class KillCause(IntEnum):
    """Why a run was killed (the value column of a KILL event)."""

    LIMIT = 0  # reached its set's runtime limit
    POLICY = 1  # a policy decided to kill it
    CANCEL = 2  # the user cancelled it
    LOST = 3  # its node or pilot was lost
    BUDGET = 4  # its VM was released because the budget could not pay another billing increment


@dataclass(frozen=True, slots=True)
class Event:
    """One row of the log, as returned by iteration."""

    time: float
    kind: EventKind
    job: int
    site: int
    vm: int
    value: float


class EventLog:
    """Append-only columns: time, kind, job, site, vm, value (-1 where a column does not apply).

    Stored in `array` columns so that a million events take about 30 MB.
    """

    __slots__ = ("_job", "_kind", "_site", "_time", "_value", "_vm", "reasons")

    def __init__(self) -> None:
        self._time = array("d")
        self._kind = array("b")
        self._job = array("q")
        self._site = array("h")
        self._vm = array("i")
        self._value = array("d")
        self.reasons: dict[int, str] = {}

    def append(
        self, time: float, kind: int, job: int = -1, site: int = -1, vm: int = -1, value: float = 0.0
    ) -> None:
        """Record one event."""
        self._time.append(time)
        self._kind.append(kind)
        self._job.append(job)
        self._site.append(site)
        self._vm.append(vm)
        self._value.append(value)

    def __len__(self) -> int:
        return len(self._time)

    def __iter__(self) -> Iterator[Event]:
        for i in range(len(self._time)):
            yield Event(
                self._time[i],
                EventKind(self._kind[i]),
                self._job[i],
                self._site[i],
                self._vm[i],
                self._value[i],
            )

    def columns(self) -> dict[str, array]:  # type: ignore[type-arg]
        """The raw columns by name (zero-copy; wrap with numpy.frombuffer for vector math)."""
        return {
            "time": self._time,
            "kind": self._kind,
            "job": self._job,
            "site": self._site,
            "vm": self._vm,
            "value": self._value,
        }

    def rows(self) -> list[tuple[float, int, int, int, int, float]]:
        """All events as plain tuples (for comparing two logs exactly)."""
        return list(zip(self._time, self._kind, self._job, self._site, self._vm, self._value, strict=True))
