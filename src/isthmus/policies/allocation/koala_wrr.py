"""KOALA's placement queues scanned by weighted round robin (KOALA-CS thesis §2.2.3)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import ClassVar

from pydantic import BaseModel, ConfigDict, Field, model_validator

from isthmus.decisions import Decision
from isthmus.decisions.abort import AbortJob
from isthmus.decisions.start import start_job
from isthmus.decisions.wake import WakeUp
from isthmus.model.environment import Environment
from isthmus.model.job import PriorityClass
from isthmus.policies.allocation.common import all_sites
from isthmus.policies.api import AllocationDefaults, JobInfo, View


class WrrParams(BaseModel):
    """Parameters of the weighted round robin over the four placement queues."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    high_scans: int = Field(1, ge=1, description="N_h: scans of the higher queues (super-high, high) per round")
    low_scans: int = Field(1, ge=1, description="N_l: scans of the lower queues (low, super-low) per round; <= N_h")
    weights: tuple[int, int, int, int] = Field(
        (1, 1, 1, 1),
        description="n1, n2: scans of super-high and high per scan of the higher queues; n3, n4: of low and "
        "super-low per scan of the lower queues (n1 >= n2 >= 1, n3 >= n4 >= 1)",
    )
    upgrade_after: int | None = Field(
        None, ge=1, description="P: placement tries in a queue before the job moves up one queue (none: never)"
    )
    max_tries: int | None = Field(None, ge=1, description="placement tries after which a job is aborted (none: never)")
    scan_interval: float = Field(
        30.0, gt=0, description="while jobs wait and tries count, a round at least this often (s)"
    )

    @model_validator(mode="after")
    def _ordered(self) -> WrrParams:
        n1, n2, n3, n4 = self.weights
        if self.high_scans < self.low_scans:
            raise ValueError(f"high_scans ({self.high_scans}) must be >= low_scans ({self.low_scans})")
        if not (n1 >= n2 >= 1 and n3 >= n4 >= 1):
            raise ValueError(f"weights must have n1 >= n2 >= 1 and n3 >= n4 >= 1, got {list(self.weights)}")
        return self


_SUPER_HIGH = int(PriorityClass.SUPER_HIGH)
_SUPER_LOW = int(PriorityClass.SUPER_LOW)


class KoalaWrr(AllocationDefaults):
    """KOALA placement queues: super-high, high, low and super-low, scanned by weighted round robin.

    KOALA-CS thesis §2.2.3: a job waits in the placement queue of its priority class. Each round
    the higher queues are scanned N_h times (each time super-high n1 times, then high n2 times)
    and then the lower queues N_l times (low n3 times, super-low n4 times). Scanning a queue tries
    to place each of its jobs in queue order, Worst Fit (the site with the most free processors);
    a job that fits nowhere is passed over (the scan moves on) and counts one *placement try*.
    After `upgrade_after` (P) tries in its queue a job moves up one queue ("the scheduler never
    upgrades jobs in the super-low queue"); after more than `max_tries` tries it is aborted
    (AbortJob: it leaves as cancelled with the reason). Both default to infinity, as the seed
    allows. Tries are counted per round: while a job waits and tries matter, the policy asks for
    a round at least every `scan_interval` seconds ("scans the queues at regular intervals").
    Within a queue, jobs keep their arrival order (an upgraded job among those of its new queue).
    The try counts are the policy's own memory (a restarted live manager starts them afresh).
    Bags of tasks live in super-low too, outside these queues: the fair-share family grows them.
    """

    name: ClassVar[str] = "wrr"
    seed: ClassVar[str] = "KOALA-CS thesis §2.2.3 (placement queues, WRR, placement tries)"
    Params = WrrParams

    def __init__(self, params: WrrParams | None = None) -> None:
        self.params = params or WrrParams()
        p = self.params
        n1, n2, n3, n4 = p.weights
        #: the queue of each scan of a round, in order
        self._plan: tuple[int, ...] = tuple(
            [c for _ in range(p.high_scans) for c in [0] * n1 + [1] * n2]
            + [c for _ in range(p.low_scans) for c in [2] * n3 + [3] * n4]
        )
        #: job id -> [placement queue, tries in that queue, tries in all]
        self._state: dict[int, list[int]] = {}

    def stage_sites(self, env: Environment) -> list[tuple[int, ...]]:
        """One queue over every site (the four placement queues are the policy's own)."""
        return all_sites(env)

    def decide(self, view: View) -> Iterable[Decision]:
        """One round of weighted round robin over the placement queues."""
        p = self.params
        entries = list(view.queue(0))
        state = {}
        queues: list[list[JobInfo]] = [[], [], [], []]
        for e in entries:
            s = self._state.get(e.job.id) or [int(e.job.priority), 0, 0]
            state[e.job.id] = s
            queues[s[0]].append(e)
        self._state = state
        free = view.free_processors()
        order = view.stage_sites(0)
        out: list[Decision] = []
        gone: set[int] = set()
        for queue in self._plan:
            for e in list(queues[queue]):
                jid = e.job.id
                s = state[jid]
                if jid in gone or s[0] != queue:
                    continue
                size = e.job.size
                site = max((i for i in order if free[i] >= size), key=lambda i: free[i], default=-1)
                if site >= 0:
                    out.append(start_job(jid, site, None, self.name))
                    free[site] -= size
                    gone.add(jid)
                    continue
                s[1] += 1
                s[2] += 1
                if p.max_tries is not None and s[2] > p.max_tries:
                    out.append(AbortJob(jid, f"{s[2]} placement tries, more than {p.max_tries}", by=self.name))
                    gone.add(jid)
                elif p.upgrade_after is not None and _SUPER_HIGH < queue < _SUPER_LOW and s[1] >= p.upgrade_after:
                    queues[queue].remove(e)
                    s[0], s[1] = queue - 1, 0
                    queues[queue - 1].append(e)
        for jid in gone:
            state.pop(jid, None)
        if state and (p.max_tries is not None or p.upgrade_after is not None):
            out.append(WakeUp(view.now + p.scan_interval, by=self.name))
        return out

    def explain(self, view: View, job: JobInfo) -> str:
        """The job's placement queue and tries so far."""
        s = self._state.get(job.job.id)
        if s is None:
            return ""
        label = PriorityClass(s[0]).label
        return (
            f"in the {label} placement queue after {s[2]} placement tries; no site has {job.job.size} free processors"
        )
