"""StartJob: start a queued job on a site now (optionally with a runtime limit, TAGS)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from isthmus.engine.backend import CloudBackend, SiteBackend
from isthmus.engine.clock import EV_LIMIT, PRIO_LIMIT
from isthmus.engine.kinds import register
from isthmus.engine.runs import schedule_walltime
from isthmus.engine.state import JobEntry
from isthmus.model.decisions import StartJob
from isthmus.model.events import EventKind
from isthmus.model.states import JobState
from isthmus.model.status import Refused, StatusCode
from isthmus.model.vmtypes import describe

if TYPE_CHECKING:
    from isthmus.engine.ops import EngineOps

_QUEUED = JobState.QUEUED
_START = int(EventKind.START)


class StartKind:
    """Valid when the job is queued, the site exists, belongs to the job's queue, is in its
    availability window and has enough free processors."""

    decision = StartJob

    def validate(self, ops: EngineOps, d: StartJob) -> tuple[JobEntry, SiteBackend]:
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
            check_vm_match(entry, backend, d.share)
        return entry, backend

    def apply(self, ops: EngineOps, d: StartJob, ctx: tuple[JobEntry, SiteBackend]) -> None:
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
            for vm_id, at in ops.ledger.started(ops, entry.job.id, d.site):
                ops.billing.schedule(at, d.site, vm_id)
        log = ops.log
        log.add(now, _START, entry.job.id, d.site, entry.job.size, entry.run, log.policy_index(d.by or ops.deciding))
        if d.limit is not None and not backend.ends_by(entry, now + d.limit):
            ops.schedule(now + d.limit, PRIO_LIMIT, EV_LIMIT, entry.job.id, entry.run)
        if ops.enforce_walltime:
            schedule_walltime(ops, entry, now)
        if ops.why_not:
            ops.why_not.pop(entry.job.id, None)
        if entry.chain:
            ops.forwarding.notify_origin(entry)


def check_vm_match(entry: JobEntry, backend: SiteBackend, share: bool) -> None:
    """Refused unless the site has enough free processors on VMs that may take the job (its VM
    requirements, the user a VM serves, retiring VMs): Cloud Scheduler runs a job only on a VM
    that matches it (cloud-scheduler-uvic.txt, Appendix I). A job with VM requirements runs on
    no cluster."""
    job = entry.job
    if not isinstance(backend, CloudBackend):
        raise Refused(
            StatusCode.NOT_ALLOWED,
            f"job {job.id} asks for a VM ({describe(job.vm) if job.vm else ''}); site {backend.name} is a cluster",
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
