"""The read-only view of the engine's state handed to policies each round."""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from typing import TYPE_CHECKING

from isthmus.engine.backend import CloudBackend

if TYPE_CHECKING:
    from isthmus.engine.engine import Engine
    from isthmus.engine.state import JobEntry


class EngineView:
    """What policies may read of an engine. It holds no state of its own."""

    __slots__ = ("_e",)

    def __init__(self, engine: Engine) -> None:
        self._e = engine

    @property
    def now(self) -> float:
        """The current time (simulated or wall), given as data."""
        return self._e.now

    @property
    def sites(self) -> Sequence[object]:
        """The site backends, by index, read-only."""
        return self._e.backends

    @property
    def stages(self) -> int:
        """How many queues (stages) there are."""
        return len(self._e.queues)

    @property
    def round_interval(self) -> float | None:
        """The scheduling period, None when rounds are event-triggered."""
        return self._e.round_interval

    @property
    def queued(self) -> int:
        """Jobs waiting in all queues."""
        return sum(len(q) for q in self._e.queues)

    def queue(self, stage: int = 0) -> Collection[JobEntry]:
        """Jobs waiting in queue `stage`, in the order they entered it."""
        return self._e.queues[stage].values()

    def queue_by_size(self, stage: int = 0) -> Mapping[int, Mapping[int, JobEntry]]:
        """Jobs waiting in queue `stage` grouped by size: size -> {job id: entry} in queue order.

        Kept only for an allocation policy that declares `uses_size_index = True`.
        """
        if not self._e.size_index:
            name = getattr(self._e.allocation, "name", "?")
            raise RuntimeError(f"policy {name!r} reads queue_by_size but does not declare uses_size_index = True")
        return self._e.buckets[stage]

    def stage_sites(self, stage: int) -> Sequence[int]:
        """Indices of the sites jobs of queue `stage` may run on."""
        return self._e.stage_sites[stage]

    def cloud(self, index: int) -> CloudBackend | None:
        """The cloud backend at `index`, None for a cluster."""
        b = self._e.backends[index]
        return b if isinstance(b, CloudBackend) else None

    def user_runtimes(self, user: str) -> Sequence[float]:
        """Runtimes of the user's last (up to two) completed jobs, oldest first."""
        return self._e.history.get(user, ())

    @property
    def mean_runtime(self) -> float | None:
        """Mean runtime of all completed jobs so far, None before the first completes."""
        e = self._e
        return e.runtime_sum / e.runtime_count if e.runtime_count else None
