"""StartJob: start a queued job on a site now (optionally with a runtime limit, TAGS)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from isthmus.decisions import register
from isthmus.model.events import EventKind
from isthmus.model.job import reduce_by_fields, thawed_twin
from isthmus.model.states import JobState
from isthmus.model.status import Refused, StatusCode
from isthmus.model.vmtypes import describe

if TYPE_CHECKING:
    from isthmus.decisions.ops import B, Backend, C, E, Entry, KindOps, S


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


_QUEUED = JobState.QUEUED
_START = int(EventKind.START)


class StartKind:
    """Valid when the job is queued, the site exists, belongs to the job's queue, is in its
    availability window and has enough free processors."""

    decision = StartJob

    def validate(self, ops: KindOps[E, B, S, C], d: StartJob) -> tuple[E, Backend[E]]:
        """The job's entry and the site's backend, or Refused."""
        entry = ops.entries.get(d.job_id)
        if entry is None or entry.state is not _QUEUED:
            raise Refused(StatusCode.WRONG_STATE, f"job {d.job_id} is not queued")
        backends = ops.backends
        if not 0 <= d.site < len(backends):
            raise Refused(StatusCode.UNKNOWN_TARGET, f"site index {d.site} does not exist")
        backend = backends[d.site]
        if d.site not in ops.stage_sites[entry.stage]:
            raise Refused(StatusCode.NOT_ALLOWED, f"site {backend.name} is not among the sites of queue {entry.stage}")
        size = entry.job.size
        if size > backend.free and not (d.share and backend.can_share(size)):
            if d.share:
                raise Refused(
                    StatusCode.NO_CAPACITY,
                    f"needs {size} processors; site {backend.name} has {backend.online} on ready VMs to share",
                )
            raise Refused(
                StatusCode.NO_CAPACITY, f"needs {size} processors; site {backend.name} has {backend.free} free"
            )
        if backend.reserved_cores and size > backend.free_for(entry.job.id):
            raise Refused(
                StatusCode.RESERVED,
                f"needs {size} processors; site {backend.name} has {backend.free} free, "
                f"{backend.free - backend.free_for(entry.job.id)} of them reserved for other jobs",
            )
        if not backend.available(ops.clock.now):
            raise Refused(StatusCode.OUTSIDE_WINDOW, f"site {backend.name} is outside its availability window")
        if entry.job.vm is not None or backend.selective:
            check_vm_match(ops, entry, d.site, d.share)
        return entry, backend

    def apply(self, ops: KindOps[E, B, S, C], d: StartJob, ctx: tuple[E, Backend[E]]) -> None:
        """Dequeue the job, start its next run on the site, schedule its limit."""
        entry, backend = ctx
        now = ops.clock.now
        ops.queue_book.dequeue(entry)
        entry.state = JobState.RUNNING
        entry.site = d.site
        entry.started = now
        entry.run += 1
        entry.limit = d.limit
        if d.share:
            backend.start_shared(entry, now)
        else:
            backend.start(entry, now)
        if ops.reserving:
            ops.drop_reservations(entry.job.id)
        if entry.alloc and (ops.ledger.per_user or ops.ledger.finishing) and ops.ledger.covering(d.site):
            ops.charge_start(entry.job.id, d.site)
        log = ops.log
        log.add(now, _START, entry.job.id, d.site, entry.job.size, entry.run, log.policy_index(d.by or ops.deciding))
        if d.limit is not None and not backend.ends_by(entry, now + d.limit):
            ops.schedule_limit(entry, now + d.limit)
        if ops.enforce_walltime:
            ops.schedule_walltime(entry, now)
        if ops.why_not:
            ops.why_not.pop(entry.job.id, None)
        if entry.chain:
            ops.forwarding.notify_origin(entry)


def check_vm_match(ops: KindOps[E, B, S, C], entry: Entry, site: int, share: bool) -> None:
    """Refused unless the site has enough free processors on VMs that may take the job (its VM
    requirements, the user a VM serves, retiring VMs): Cloud Scheduler runs a job only on a VM
    that matches it (cloud-scheduler-uvic.txt, Appendix I). A job with VM requirements runs on
    no cluster."""
    job = entry.job
    backend = ops.cloud_at(site)
    if backend is None:
        raise Refused(
            StatusCode.NOT_ALLOWED,
            f"job {job.id} asks for a VM ({describe(job.vm) if job.vm else ''}); site {ops.backends[site].name} "
            "is a cluster",
        )
    if share:
        raise Refused(
            StatusCode.NOT_ALLOWED,
            f"site {backend.name} has VMs that not every job may use: a run cannot share processors there",
        )
    matching = backend.free_matching(job)
    if job.size > matching:
        what = f"VMs matching its requirements ({describe(job.vm)})" if job.vm is not None else "VMs it may use"
        raise Refused(
            StatusCode.NO_CAPACITY,
            f"needs {job.size} processors; site {backend.name} has {matching} free on {what} "
            f"({backend.free} free in all)",
        )


register(StartKind())
