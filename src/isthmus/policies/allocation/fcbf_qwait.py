"""FCBF-QWait (Villegas dissertation §7.3.1)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import ClassVar

from pydantic import BaseModel, ConfigDict, Field

from isthmus.decisions import Decision
from isthmus.decisions.start import start_job
from isthmus.model.environment import Environment
from isthmus.policies.allocation.common import all_sites, first_fit, free_processors
from isthmus.policies.api import AllocationDefaults, View


class FcbfQWaitParams(BaseModel):
    """Parameters of FCBF-QWait."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    threshold: float = Field(
        300.0, ge=0, description="seconds the head job may wait before jobs behind it stop being promoted"
    )


class FcbfQWait(AllocationDefaults):
    """FCBF-QWait: promote jobs behind the head (as FCBF-Aggressive) until the head job has waited
    longer than a threshold; from then on serve the queue strictly in order (as FCFS).

    Villegas dissertation §7.3.1: "FCBF-QWait promotes jobs in the back of the queue unless the
    job at the head accumulates a waiting time higher than the specified threshold"; §7.4.2
    sets the threshold to 300 s (the default). Each round the jobs at the front that fit start
    in order; if the head then does not fit, the jobs behind it that fit start too unless the
    head has waited more than `threshold`, in which case the free VMs stay for the head.
    """

    name: ClassVar[str] = "fcbf-qwait"
    seed: ClassVar[str] = "Villegas dissertation §7.3.1, §7.4.2 (FCBF-QWait, 300 s threshold)"
    Params = FcbfQWaitParams

    def __init__(self, params: FcbfQWaitParams | None = None) -> None:
        self.params = params or FcbfQWaitParams()

    def stage_sites(self, env: Environment) -> list[tuple[int, ...]]:
        """One queue over every site."""
        return all_sites(env)

    def decide(self, view: View) -> Iterable[Decision]:
        """Strict order once the head has waited past the threshold, first fit before."""
        order = view.stage_sites(0)
        free = free_processors(view)
        out: list[Decision] = []
        blocked_head = None
        for e in view.queue(0):
            i = first_fit(free, order, e.job.size)
            if i < 0:
                if blocked_head is None:
                    blocked_head = e
                    if view.now - e.queued_at > self.params.threshold:
                        break  # the head has waited long enough: no promotion past it
                continue
            if blocked_head is None or view.now - blocked_head.queued_at <= self.params.threshold:
                free[i] -= e.job.size
                out.append(start_job(e.job.id, i, None, self.name))
            if not any(free[j] for j in order):
                break
        return out
