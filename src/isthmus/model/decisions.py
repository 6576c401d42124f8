"""Decisions a policy returns to the engine. A decision is a request: the engine validates it.

Sites are named by their index in the environment's `sites` tuple (the view gives both).

Each class here is plain data that policies build; its validation and application are its kind's,
one module of `isthmus.engine.kinds` a class, found there by the engine. The dataclasses stay
here, below the policies, because policies import them and must not import the engine (whose
types, sites' backends, ledger, bags, a kind's validation works on). `Decision` is an open
protocol, not a closed union: a new kind of decision adds its class here (or, for decisions no
policy of this package builds, beside its kind) and its kind's module, and edits nothing else.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

from isthmus.model.job import reduce_by_fields, thawed_twin


@dataclass(frozen=True, slots=True)
class StartJob:
    """Start queued job `job_id` on site `site` now.

    `limit` (seconds) makes the engine kill the run when it has lasted that long and requeue
    the job in the next stage (TAGS, KOALA-C §IV-B); None lets it run to completion.
    `by` names the deciding policy, for the event log and "why" answers. With `share` the job
    may start on a cloud without enough free processors: what is missing is taken on busy VMs,
    round robin, whose processors it then shares with their runs (FCFS-NW, Villegas §6.3.2).
    """

    job_id: int
    site: int
    limit: float | None = None
    by: str = ""
    share: bool = False

    def __reduce__(self) -> tuple[type, tuple[object, ...]]:
        """Pickled as a constructor call (see `isthmus.model.job.reduce_by_fields`)."""
        return reduce_by_fields(self)


_START_TWIN = thawed_twin(StartJob)
_new_object = object.__new__


def start_job(job_id: int, site: int, limit: float | None, by: str) -> StartJob:
    """`StartJob(job_id, site, limit, by=by)`, equal to it and as immutable, built without the
    frozen dataclass's `__init__` (one `object.__setattr__` call a field) as a `thawed_twin`:
    the policies' hot path builds one a started job (docs/simulation.md, "Fast builders")."""
    if _START_TWIN is None:
        return StartJob(job_id, site, limit, by)
    d: Any = _new_object(_START_TWIN)
    d.job_id = job_id
    d.site = site
    d.limit = limit
    d.by = by
    d.share = False
    d.__class__ = StartJob
    return d  # type: ignore[no-any-return]


@dataclass(frozen=True, slots=True)
class KillJob:
    """Kill running job `job_id`; with `requeue` it goes back to its queue (a restart)."""

    job_id: int
    reason: str
    requeue: bool = False
    by: str = ""


@dataclass(frozen=True, slots=True)
class LeaseVms:
    """Lease `count` more VMs on cloud site `site`.

    `vm_type` names one of the site's instance types and `image` one of its images (None: the
    site's first, its default); with `user` the VMs serve that user alone (they run only that
    user's jobs: Cloud Scheduler's per-user VMs, cloud-scheduler-uvic.txt §3.3).
    """

    site: int
    count: int
    by: str = ""
    vm_type: str | None = None
    image: str | None = None
    user: str | None = None


@dataclass(frozen=True, slots=True)
class ReleaseVms:
    """Release the VMs `vm_ids` of cloud site `site` (each must be idle)."""

    site: int
    vm_ids: tuple[int, ...]
    by: str = ""


@dataclass(frozen=True, slots=True)
class RetireVms:
    """Retire the ready VMs `vm_ids` of cloud site `site`: each takes no new job and is released
    when its runs end (at once when idle). Cloud Scheduler's graceful rebalancing
    (cloud-scheduler-uvic.txt §3.3): "the next VM of the over-allocated type to finish its job
    can be safely shutdown without affecting running jobs"."""

    site: int
    vm_ids: tuple[int, ...]
    by: str = ""


@dataclass(frozen=True, slots=True)
class ReserveVms:
    """Hold `count` idle VMs of cloud site `site` for queued job `job_id` (0 drops its hold).

    Villegas dissertation §7.3.1: "partially available resources need to be marked until there
    are enough to fulfill the number of required processors by a job, so that they are not
    released due to being idle". The engine keeps the VMs already held for the job and adds
    idle VMs held for no one (longest idle first) up to `count`, or as many as there are; a
    count below what is held gives back the most recently reserved ones. A reserved VM runs
    no other job and no release of it is accepted; the reservation ends when the job starts
    (on its reserved VMs first) or leaves the queue. A count lets a policy reserve in the
    round it starts other jobs, before it knows which VMs those take.
    """

    job_id: int
    site: int
    count: int
    by: str = ""


@dataclass(frozen=True, slots=True)
class HoldJob:
    """Explain why a queued job was not started this round (a policy's answer to "why?")."""

    job_id: int
    reason: str
    by: str = ""


@dataclass(frozen=True, slots=True)
class WakeUp:
    """Ask for a scheduling round at `time` even if nothing else happens by then.

    Rounds run only when the state has changed, so a policy whose decisions depend on time
    alone (an idle VM reaching its release time) says when it next needs to look.
    """

    time: float
    by: str = ""


@dataclass(frozen=True, slots=True)
class ForwardJob:
    """Send queued job `job_id` to peer manager `peer` (an index into the view's `peers`).

    Villegas dissertation §4.2.1: a job "is forwarded between MSs using the same submitJob()
    interface"; the job leaves this manager's queue, keeps its id at its origin and carries the
    chain of managers it visited. The engine refuses it when the peer is down, is not a
    provider to this manager, was already visited by the job, or the job is not queued.
    """

    job_id: int
    peer: int
    by: str = ""


@dataclass(frozen=True, slots=True)
class GrowBag:
    """Give bag of tasks `job_id` `count` more free processors of site `site` (a cluster's, or
    free cores of a cloud's ready VMs, none of the VMs `avoid`: a rigid job starts on them this
    round); each pulls one task of the bag at a time (KOALA-CS thesis §3.5.2, job growth)."""

    job_id: int
    site: int
    count: int
    by: str = ""
    avoid: tuple[int, ...] = ()


@dataclass(frozen=True, slots=True)
class ShrinkBag:
    """Take processors `slots` (ids from the view's bag slots) of site `site` back from bag `job_id`:
    a task running on one goes back to the bag's queue, its work lost, and the processor is free
    once the preemption time has passed (KOALA-CS thesis §3.5.3, job shrinking). `for_job` names the
    waiting rigid job the processors are given back for (-1: another bag, rebalancing), so that the
    wait bags cause each job is read from the log."""

    job_id: int
    site: int
    slots: tuple[int, ...]
    by: str = ""
    for_job: int = -1


@dataclass(frozen=True, slots=True)
class HoldBagRelease:
    """Hold for waiting rigid job `job_id` the processors of cluster site `site` that bags are
    giving back for no waiting job (each as it comes free) and, up to its size, free ones held
    for no job (KOALA-CS thesis §3.1: a bag never delays a rigid job by more than the preemption
    time). A fair-share policy counts them for the job, so bags give back nothing for it and no
    shrink names it; without the hold another job could take them as they come free."""

    job_id: int
    site: int
    by: str = ""


@dataclass(frozen=True, slots=True)
class AbortJob:
    """Abort queued job `job_id`: it leaves the queue unrun, as cancelled, with `reason` (KOALA's
    abort after too many placement tries, KOALA-CS thesis §2.2.3)."""

    job_id: int
    reason: str
    by: str = ""


class Decision(Protocol):
    """What a policy returns: any decision object. The engine dispatches on its class to the kind
    registered for it (`isthmus.engine.kinds`: validation and application) and refuses one it
    has no kind for (INVALID), so that a new kind of decision edits no list here. Every decision
    names its deciding policy (`by`; empty: the engine names the policy that returned it)."""

    @property
    def by(self) -> str:
        """The deciding policy's name, or empty."""
        ...
