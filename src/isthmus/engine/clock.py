"""Clocks: the one event loop that drives engines, on simulated or wall time.

`SimClock` owns time: an event heap keyed by (time, priority, sequence), so equal-time events
keep a stable order and runs replay exactly (SimPy's core). Only the clock sets `now`: `step()`
takes the earliest event, moves `now` to its time and hands it to the engine that scheduled it;
`run()` steps until nothing is left to do. Several engines may share one clock (peer managers in
one simulation): each registers a handler and schedules its events with its own target number.

Trace arrivals are fed to the clock as sorted sequences (`feed`), merged with the heap without
pushing every arrival onto it: a 100,000-job trace costs no heap operations for its arrivals.

`RealtimeClock` differs only in how it waits (SimPy's RealtimeEnvironment): it handles each
event when the wall clock reaches its time, sleeping until then unless an external event
(a submission, a pilot report) wakes it early. Its `now` never goes backwards.
"""

from __future__ import annotations

import heapq
import itertools
import math
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from mypy_extensions import mypyc_attr

if TYPE_CHECKING:  # asyncio is imported by the live loop only (simulations start faster)
    import asyncio

# Priorities of events at the same instant: completions free resources before the
# scheduling round looks at them; the round comes last, but for billing boundaries: a VM the
# round releases at the very end of an increment does not start (nor pay) the next one.
PRIO_END = 0
PRIO_LIMIT = 1
PRIO_VM = 2
PRIO_WAKE = 3
PRIO_SUBMIT = 4  # trace arrivals: after completions, VM changes and wake-ups, before the round
PRIO_ARRIVAL_FIRST = -1  # trace arrivals with per-event rounds: before completions
PRIO_ROUND = 9
PRIO_BILLING = 10

EV_END = 0
EV_LIMIT = 1
EV_VM_READY = 2
EV_VM_GONE = 3
EV_WAKE = 4
EV_ROUND = 5
EV_BILLING = 6
EV_TIMEOUT = 7
EV_VM_FAILED = 8
EV_WINDOW_END = 9

#: (time, priority, sequence, target, kind, a, b)
Entry = tuple[float, int, int, int, int, int, int]
Handler = Callable[[int, int, int], None]
Schedule = Callable[[float, int, int, int, int], None]
"""at(time, priority, kind, a, b): schedule an event for one engine (see `SimClock.scheduler`)."""


class _Feed:
    """A sorted sequence of items arriving at `times[i]`, each handed to `fire(item)`."""

    __slots__ = ("fire", "i", "items", "n", "prio", "time_of")

    def __init__(self, items: Sequence[Any], time_of: Callable[[Any], float], fire: Callable[[Any], Any], prio: int):
        self.items = items
        self.time_of = time_of
        self.fire = fire
        self.prio = prio
        self.i = 0
        self.n = len(items)

    def next_time(self) -> float:
        return self.time_of(self.items[self.i]) if self.i < self.n else math.inf


@mypyc_attr(allow_interpreted_subclasses=True)  # tests/engine/test_held_rounds.py extends it
class SimClock:
    """Virtual time over a heap of events and sorted arrival feeds."""

    __slots__ = ("_due", "_handlers", "_holding", "_seq", "background", "feeds", "heap", "now")

    def __init__(self, start: float = 0.0) -> None:
        self.now = start
        self.heap: list[Entry] = []
        self._seq = itertools.count()
        self._handlers: list[Handler] = []
        self.feeds: list[_Feed] = []
        #: Events in the heap that alone do not keep a run going (billing boundaries of idle VMs).
        self.background = 0
        # While the one-engine loop runs (`_run_one_feed`), an event at `now` with PRIO_ROUND
        # (`now_at_round_priority`) is held here, (kind, a, b), instead of going through the heap.
        self._holding = False
        self._due: tuple[int, int, int] | None = None

    def register(self, handler: Handler) -> int:
        """Add an engine's event handler; returns the target number its events carry."""
        self._handlers.append(handler)
        return len(self._handlers) - 1

    def scheduler(self, target: int) -> Schedule:
        """The `at(time, prio, kind, a, b)` function that schedules events for `target`."""
        push = heapq.heappush
        heap = self.heap
        seq = self._seq

        def at(t: float, prio: int, kind: int, a: int = -1, b: int = -1) -> None:
            now = self.now
            push(heap, (t if t > now else now, prio, next(seq), target, kind, a, b))

        return at

    def now_at_round_priority(self, target: int, kind: int, a: int = -1, b: int = -1) -> None:
        """Schedule event `kind` for `target` now, with PRIO_ROUND: after every event at this
        instant with a lower priority, before those with a higher one (an engine's round).

        With one engine on the clock, the loop of `run` holds it aside rather than in the heap
        and hands it over as soon as no event at this instant with a lower priority is left:
        the same order, as the only other events at an instant with PRIO_ROUND are that
        engine's own (a round event whose round already ran, or ran at another time, which
        the engine ignores). A second one while one is held goes through the heap."""
        if self._holding and self._due is None:
            self._due = (kind, a, b)
            return
        heapq.heappush(self.heap, (self.now, PRIO_ROUND, next(self._seq), target, kind, a, b))

    def at(self, time: float, prio: int, kind: int, a: int = -1, b: int = -1, target: int = 0) -> None:
        """Schedule event `kind` with arguments (a, b) for `target` at `time` (never before now)."""
        heapq.heappush(self.heap, (max(time, self.now), prio, next(self._seq), target, kind, a, b))

    def feed(
        self, items: Sequence[Any], time_of: Callable[[Any], float], fire: Callable[[Any], Any], prio: int = PRIO_SUBMIT
    ) -> None:
        """Deliver `items` (sorted by `time_of`) to `fire` at their times; ValueError if unsorted."""
        self.feeds.append(_Feed(items, time_of, fire, prio))

    def next_time(self) -> float:
        """Time of the earliest scheduled event or arrival, or +inf."""
        t = self.heap[0][0] if self.heap else math.inf
        for f in self.feeds:
            t = min(t, f.next_time())
        return t

    def _dispatch(self, entry: Entry) -> None:
        self.now = entry[0]
        self._handlers[entry[3]](entry[4], entry[5], entry[6])

    def step(self) -> bool:
        """Handle the earliest event or arrival; False when there is none."""
        heap = self.heap
        best: _Feed | None = None
        bt = math.inf
        for f in self.feeds:
            t = f.next_time()
            if t < bt or (t == bt and best is not None and f.prio < best.prio):
                best, bt = f, t
        if best is not None and (not heap or bt < heap[0][0] or (bt == heap[0][0] and heap[0][1] > best.prio)):
            self._fire(best, bt)
            return True
        if heap:
            self._dispatch(heapq.heappop(heap))
            return True
        return False

    def _fire(self, f: _Feed, t: float) -> None:
        if t < self.now:
            raise ValueError(f"arrivals are not sorted by time: item {f.i} at {t} after {self.now}")
        self.now = t
        item = f.items[f.i]
        f.i += 1
        f.fire(item)

    def run(
        self,
        until: float = math.inf,
        idle: Callable[[], bool] | None = None,
        progress: Callable[[int], None] | None = None,
    ) -> None:
        """Step until nothing is left, the next event is after `until`, or only background events
        remain and `idle()` says every engine is done. `progress(n)` is called now and then with
        the number of items fed so far."""
        if len(self.feeds) == 1:
            self._run_one_feed(until, idle, progress)
            return
        heap = self.heap
        while True:
            t = self.next_time()
            if t > until or t == math.inf:
                break
            if (
                len(heap) == self.background
                and all(f.i >= f.n for f in self.feeds)
                and (idle is None or idle())
                and heap
            ):
                break
            self.step()

    def _run_one_feed(
        self, until: float, idle: Callable[[], bool] | None, progress: Callable[[int], None] | None
    ) -> None:
        # The simulator's hot loop: one sorted arrival feed merged with the heap, no per-event
        # indirection beyond the handler call; with one engine, its rounds are held aside
        # (`now_at_round_priority`) rather than pushed onto and popped off the heap.
        self._holding = len(self._handlers) == 1
        try:
            self._loop_one_feed(until, idle, progress)
        finally:
            self._holding = False
            due = self._due
            if due is not None:  # left by an error: into the heap, where any later run finds it
                self._due = None
                heapq.heappush(self.heap, (self.now, PRIO_ROUND, next(self._seq), 0, *due))

    def _loop_one_feed(
        self, until: float, idle: Callable[[], bool] | None, progress: Callable[[int], None] | None
    ) -> None:
        (feed,) = self.feeds
        heap = self.heap
        handlers = self._handlers
        pop = heapq.heappop
        items, time_of, fire, fprio = feed.items, feed.time_of, feed.fire, feed.prio
        n = feed.n
        i = feed.i
        inf = math.inf
        item = items[i] if i < n else None  # the next arrival, read once (a JobTable builds it)
        next_t = time_of(item) if i < n else inf
        step = max(1, n // 200)
        first_round = fprio < PRIO_ROUND  # an arrival at this instant comes before a round
        while True:
            if heap:
                top = heap[0]
                ht = top[0]
            else:
                top = None
                ht = inf
            due = self._due
            if due is not None:
                # the held round event, once no event of this instant comes before it
                now = self.now
                if not ((next_t == now and first_round) or (top is not None and ht == now and top[1] < PRIO_ROUND)):
                    self._due = None
                    handlers[0](*due)
                    continue
            if next_t < ht or (next_t == ht and top is not None and top[1] > fprio):
                if next_t > until:
                    break
                if next_t < self.now:
                    raise ValueError(f"arrivals are not sorted by time: item {i} at {next_t} after {self.now}")
                self.now = next_t
                i += 1
                feed.i = i
                fire(item)
                if i < n:
                    item = items[i]
                    next_t = time_of(item)
                else:
                    next_t = inf
                if progress is not None and i % step == 0:
                    progress(i)
            elif top is not None:
                if ht > until:
                    break
                if self.background == len(heap) and i >= n and (idle is None or idle()):
                    break  # only background events (billing boundaries of idle leases) remain
                pop(heap)
                self.now = ht
                handlers[top[3]](top[4], top[5], top[6])
            else:
                break
        feed.i = i


class RealtimeClock(SimClock):
    """The same heap on wall time: each event is handled when the wall clock reaches it.

    `catch_up()` handles every due event at its own time, then brings `now` to the wall clock
    (never backwards). `run_forever()` is the live daemon's loop: it catches up, calls `after`
    (persistence, housekeeping), and sleeps until the next event's time or until `wake()`.
    """

    __slots__ = ("_stopped", "_wake", "max_sleep", "wall")

    def __init__(self, wall: Callable[[], float] = time.time, max_sleep: float = 0.5) -> None:
        super().__init__(wall())
        self.wall = wall
        self.max_sleep = max_sleep
        self._wake: asyncio.Event | None = None
        self._stopped = False

    def catch_up(self) -> None:
        """Handle every event due by the wall time (at its own time), then set `now` to the wall time."""
        heap = self.heap
        while heap and heap[0][0] <= self.wall():
            self._dispatch(heapq.heappop(heap))
        w = self.wall()
        self.now = max(self.now, w)

    def _dispatch(self, entry: Entry) -> None:
        self.now = max(self.now, entry[0])
        self._handlers[entry[3]](entry[4], entry[5], entry[6])

    def wake(self) -> None:
        """An external event happened: let the loop run now instead of sleeping on."""
        if self._wake is not None:
            self._wake.set()

    def stop(self) -> None:
        """End `run_forever` at its next turn."""
        self._stopped = True
        self.wake()

    async def run_forever(self, after: Callable[[], None], on_error: Callable[[BaseException], None]) -> None:
        """Catch up, call `after()`, sleep until the next event or a wake-up; until `stop()`."""
        import asyncio

        self._wake = asyncio.Event()
        while not self._stopped:
            try:
                self.catch_up()
                after()
            except Exception as exc:  # keep the daemon alive; the caller logs it
                on_error(exc)
            delay = min(self.next_time() - self.wall(), self.max_sleep)
            self._wake.clear()
            if delay > 0:
                try:  # noqa: SIM105
                    await asyncio.wait_for(self._wake.wait(), delay)
                except TimeoutError:
                    pass
            else:
                await asyncio.sleep(0)
