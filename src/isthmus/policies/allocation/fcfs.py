"""Strict first-come-first-served."""

from __future__ import annotations

from collections.abc import Iterable
from typing import ClassVar

from isthmus.decisions import Decision
from isthmus.decisions.start import start_job
from isthmus.policies.allocation.common import Placer, SingleSetPolicy, first_fit, free_processors, take
from isthmus.policies.api import View


class StrictFcfs(SingleSetPolicy):
    """Strict FCFS: start jobs in arrival order while the first waiting job fits; never skip it.

    The baseline of batch schedulers (IBM seed §3, the LRM before backfilling is enabled) and
    the schedule other simulators agree on (peers/README.md). On several sites the head job
    goes to the first site where it fits.
    """

    name: ClassVar[str] = "fcfs"
    head_of_line: ClassVar[bool] = True
    seed: ClassVar[str] = "IBM meta-schedulers seed §3 (the LRM's FCFS before backfilling); peers/README.md"

    def decide(self, view: View) -> Iterable[Decision]:
        """Start the head of the queue, repeatedly, until it does not fit."""
        order = view.stage_sites(0)
        free = free_processors(view)
        out: list[Decision] = []
        holds = view.holds() if view.holding else None
        placer = Placer(view) if view.vm_matching or holds else None  # None: every free processor fits any job
        for e in view.queue(0):
            held = holds.get(e.job.id) if holds else None
            i = placer.first_fit(free, order, e.job, held) if placer else first_fit(free, order, e.job.size)
            if i < 0:
                break
            if held:
                take(free, i, e.job.size, held)
            else:
                free[i] -= e.job.size
            out.append(start_job(e.job.id, i, None, self.name))
        return out
