"""Clocks. The simulated clock is an event heap keyed by (time, priority, sequence).

Equal-time events keep a stable order (priority, then insertion), so runs replay exactly,
as in SimPy's core. The wall clock (live manager) keeps the same heap but waits for real time.
"""

from __future__ import annotations

import heapq
import itertools
import math

# Priorities of events at the same instant: completions free resources before the
# scheduling round looks at them; the round always comes last.
PRIO_END = 0
PRIO_LIMIT = 1
PRIO_VM = 2
PRIO_BILLING = 2
PRIO_WAKE = 3
PRIO_ROUND = 9

EV_END = 0
EV_LIMIT = 1
EV_VM_READY = 2
EV_VM_GONE = 3
EV_WAKE = 4
EV_ROUND = 5
EV_BILLING = 6

Entry = tuple[float, int, int, int, int, int]


class SimClock:
    """Virtual time over a heap of (time, priority, seq, kind, a, b) entries."""

    __slots__ = ("_seq", "heap", "now")

    def __init__(self, start: float = 0.0) -> None:
        self.now = start
        self.heap: list[Entry] = []
        self._seq = itertools.count()

    def at(self, time: float, prio: int, kind: int, a: int = -1, b: int = -1) -> None:
        """Schedule event `kind` with arguments (a, b) at `time` (never before now)."""
        heapq.heappush(self.heap, (max(time, self.now), prio, next(self._seq), kind, a, b))

    def next_time(self) -> float:
        """Time of the earliest scheduled event, or +inf."""
        return self.heap[0][0] if self.heap else math.inf

    def pop(self) -> Entry:
        """Remove and return the earliest event (the caller advances `now`)."""
        return heapq.heappop(self.heap)
