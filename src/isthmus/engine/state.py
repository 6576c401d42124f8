"""The engine's per-job state.

Policies see these very objects through the view (copying 100,000 queued entries each round
would cost more than the round), typed as `policies.api.JobInfo`, whose read-only properties
make mypy reject a policy that writes to one; the purity check (tests/policies/test_policy_purity.py)
catches a write at run time.
"""

from __future__ import annotations

from isthmus.model.job import Job
from isthmus.model.states import JobState

__all__ = ["ENTRY_FIELDS", "JobEntry", "JobState"]

#: every attribute of a JobEntry (its `__slots__`; named here because a class compiled with mypyc
#: has no `__slots__` to read back)
ENTRY_FIELDS = (
    "alloc",
    "chain",
    "failed",
    "job",
    "limit",
    "predicted",
    "queued_at",
    "restarts",
    "run",
    "seq",
    "site",
    "stage",
    "started",
    "state",
)


class JobEntry:
    """A job and what the engine knows of it now.

    `stage` is the queue the job waits in (0 unless a TAGS policy moved it on after a kill
    at a runtime limit). `run` counts the runs started (a restarted job has several);
    `restarts` counts the killed ones. `seq` orders jobs by when they entered their queue
    (given with the size index, from its first read on: 0 before).
    `predicted` is the runtime predicted at arrival
    (KOALA-C §III-B), filled in when the allocation policy uses predictions. `chain` and `failed`
    are the forwarding history (Villegas §4.2.1, IBM seed §3.2).
    """

    __slots__ = ENTRY_FIELDS

    def __init__(self, job: Job, now: float) -> None:
        self.job = job
        self.state = JobState.QUEUED
        self.stage = 0
        self.site = -1
        self.started = -1.0
        self.run = 0
        self.restarts = 0
        self.queued_at = now
        self.seq = 0
        self.predicted = job.requested_runtime if job.requested_runtime is not None else job.runtime
        self.limit: float | None = None
        self.alloc: tuple[tuple[int, int], ...] = ()
        #: the managers the job passed through before this one, its origin first (empty: submitted here)
        self.chain: tuple[str, ...] = ()
        #: peer managers that handed the job back unstarted (the IBM seed's failed-resource filter)
        self.failed: tuple[str, ...] = ()

    @property
    def id(self) -> int:
        """The job's id."""
        return self.job.id

    @property
    def size(self) -> int:
        """Processors the job needs."""
        return self.job.size

    @property
    def estimated_runtime(self) -> float:
        """What a backfilling scheduler may assume: the requested runtime, else the prediction."""
        req = self.job.requested_runtime
        return req if req is not None else self.predicted

    def __repr__(self) -> str:
        return f"JobEntry(id={self.job.id}, state={self.state.name}, stage={self.stage}, site={self.site})"
