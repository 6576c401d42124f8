"""KOALA-C Round-Robin."""

from __future__ import annotations

from collections.abc import Iterable
from typing import ClassVar

from isthmus.decisions import Decision
from isthmus.decisions.start import start_job
from isthmus.policies.allocation.common import SingleSetPolicy, free_processors, queue_fitting
from isthmus.policies.api import NoParams, View


class RoundRobin(SingleSetPolicy):
    """RR: serve the queue in FCFS order, assigning jobs to sites with room in cyclic order.

    KOALA-C §IV-A(2). The search for a site starts after the site that received the previous
    job (the policy's only memory), wrapping around; a job that fits nowhere stays queued.
    """

    name: ClassVar[str] = "rr"
    seed: ClassVar[str] = "KOALA-C §IV-A(2)"
    uses_size_index: ClassVar[bool] = True

    def __init__(self, params: NoParams | None = None) -> None:
        super().__init__(params)
        self._next = 0

    def decide(self, view: View) -> Iterable[Decision]:
        """Place queued jobs in arrival order, each on the next site in the cycle with room."""
        order = view.stage_sites(0)
        n = len(order)
        free = free_processors(view)
        out: list[Decision] = []
        for e in queue_fitting(view, 0, free):
            size = e.job.size
            for k in range(n):
                pos = (self._next + k) % n
                i = order[pos]
                if free[i] >= size:
                    free[i] -= size
                    self._next = (pos + 1) % n
                    out.append(start_job(e.job.id, i, None, self.name))
                    break
        return out
