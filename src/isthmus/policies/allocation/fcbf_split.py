"""FCBF-Split (Villegas dissertation §7.3.1)."""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import ClassVar

from pydantic import BaseModel, ConfigDict, Field

from isthmus.decisions import Decision
from isthmus.decisions.start import start_job
from isthmus.model.environment import Environment
from isthmus.policies.allocation.common import all_sites, first_fit, free_processors, queue_fitting
from isthmus.policies.api import AllocationDefaults, View


class FcbfSplitParams(BaseModel):
    """Parameters of FCBF-Split."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    head_share: float = Field(
        0.5, ge=0, le=1, description="fraction of each site's free VMs set aside for a head job that does not fit"
    )


class FcbfSplit(AllocationDefaults):
    """FCBF-Split: when the head job does not fit, split the free VMs between the head and the
    jobs behind it.

    Villegas dissertation §7.3.1: "FCBF-Split divides the available VMs for the job at the head
    and for other jobs (assigning the remaining ones at the end of the process to the head)".
    Each round, jobs at the front start in order while they fit. When the head does not fit,
    `head_share` of each site's free processors (rounded up; the seed gives no fraction, half is
    the default) is set aside for it and the jobs behind it may start first fit on the rest;
    what they leave unused is the head's as well (it stays free, claimed by the queue, so the
    dissertation's provisioning policies do not release it).
    """

    name: ClassVar[str] = "fcbf-split"
    seed: ClassVar[str] = "Villegas dissertation §7.3.1 (FCBF-Split)"
    Params = FcbfSplitParams
    # the jobs behind the head are found through the size index: only those that fit are visited
    uses_size_index: ClassVar[bool] = True

    def __init__(self, params: FcbfSplitParams | None = None) -> None:
        self.params = params or FcbfSplitParams()

    def stage_sites(self, env: Environment) -> list[tuple[int, ...]]:
        """One queue over every site."""
        return all_sites(env)

    def decide(self, view: View) -> Iterable[Decision]:
        """Start the front jobs that fit; then backfill on the others' share of free VMs."""
        order = view.stage_sites(0)
        free = free_processors(view)
        out: list[Decision] = []
        ahead: set[int] = set()  # the jobs started in order before the head, and the head
        for e in view.queue(0):
            ahead.add(e.job.id)
            i = first_fit(free, order, e.job.size)
            if i < 0:
                # the head does not fit: the others get what the head's share leaves
                others = list(free)
                for j in order:
                    others[j] = free[j] - math.ceil(free[j] * self.params.head_share)
                for rest in queue_fitting(view, 0, others):  # in queue order, those that fit when reached
                    if rest.job.id in ahead:
                        continue
                    k = first_fit(others, order, rest.job.size)
                    if k >= 0:
                        others[k] -= rest.job.size
                        out.append(start_job(rest.job.id, k, None, self.name))
                break
            free[i] -= e.job.size
            out.append(start_job(e.job.id, i, None, self.name))
        return out
