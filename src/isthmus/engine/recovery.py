"""Re-entering what a manager recorded before it restarted (the live manager's recovery).

The clock is not rewound and nothing already recorded is logged again: a recorded job re-enters
its queue with its run counts (`restore`), a recorded run is re-attached to its site after the
same validation as a StartJob (`reattach`), a VM leased before the restart has the increments it
started charged and its next billing boundary scheduled (`adopt_lease`), and a lease that ended
before the restart has its cost counted (`book_past_lease`). These functions talk to the engine
through `RecoveryOps`.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from isthmus.decisions.start import StartJob, StartKind
from isthmus.engine.clock import EV_LIMIT, PRIO_LIMIT
from isthmus.engine.queues import admit
from isthmus.engine.runs import schedule_walltime
from isthmus.engine.state import JobEntry
from isthmus.model.job import Job
from isthmus.model.states import JobState
from isthmus.model.status import ACCEPTED, Refused, Status

if TYPE_CHECKING:
    from isthmus.engine.ops import RecoveryOps

_START = StartKind()


def restore(
    ops: RecoveryOps, job: Job, *, stage: int = 0, run: int = 0, restarts: int = 0, queued_at: float | None = None
) -> JobEntry | None:
    """Re-enter a job recorded before a manager restart, queued in `stage` with its run counts.

    The clock is not rewound and no SUBMIT is logged again: the job keeps its recorded submit
    time (in `job.submit`) and `queued_at` (default: its submit time). A recorded running job is
    then re-attached by `reattach`. Returns None if the job can no longer run here.
    """
    if job.id in ops.entries:
        raise ValueError(f"job {job.id} was already submitted")
    entry = admit(ops, job, ops.clock.now)
    if entry is None or entry.stage < 0:
        return entry
    entry.queued_at = job.submit if queued_at is None else queued_at
    book = ops.queue_book
    if book.columns is not None:
        book.columns[entry.stage].set_queued_at(job.id, entry.queued_at)
    entry.run = run
    entry.restarts = restarts
    stage = min(max(stage, 0), len(book.queues) - 1)
    if stage != entry.stage:
        book.move(entry, stage)
    return entry


def reattach(ops: RecoveryOps, job_id: int, site: int, *, run: int, started: float, limit: float | None) -> Status:
    """Re-attach run `run` of queued job `job_id`, recorded as started on `site` at `started`
    before a manager restart: the same validation as a StartJob, no START logged again (it is
    recorded), the limit counted from `started`."""
    d = StartJob(job_id, site, limit, by="recovery")
    try:
        entry, backend = _START.validate(ops, d)
    except Refused as r:
        return ops.refuse(d, r, "recovery")
    ops.queue_book.dequeue(entry)
    entry.state = JobState.RUNNING
    entry.site = site
    entry.started = started
    entry.run = run
    entry.limit = limit
    schedule_walltime(ops, entry, started)
    backend.start(entry, started)
    if limit is not None:
        ops.schedule(started + limit, PRIO_LIMIT, EV_LIMIT, job_id, run)
    return ACCEPTED


def adopt_lease(ops: RecoveryOps, site: int, vm_id: int, leased_at: float) -> None:
    """Count the billing of a VM leased at `leased_at` and restored after a restart: every
    increment started so far is charged, and the next boundary is scheduled (with a budget)."""
    backend = ops.cloud_backend(site)
    if not backend.site.is_paid:
        return
    now = ops.clock.now
    ledger = ops.ledger
    billing = ops.billing
    inc = backend.site.billing_increment
    started = max(1, math.ceil((now - leased_at) / inc - 1e-9))
    user = ledger.vm_user.get((site, vm_id), "")
    price = backend.site.type_price_per_increment(backend.vms[vm_id].type)
    billing.spent += ledger.replay(site, leased_at, now, inc, price, user)
    if ledger.per_user or ledger.finishing:
        ledger.next_due[(site, vm_id)] = leased_at + started * inc
    if billing.budget is not None or ledger.covering(site):
        billing.schedule(leased_at + started * inc, site, vm_id)


def book_past_lease(
    ops: RecoveryOps, site: int, leased_at: float, released_at: float, vm_type: int = 0, user: str = ""
) -> None:
    """Count the increments of a lease (of instance type index `vm_type`) that ended (or is
    ending) before a restart, charged to `user`: the budget and the caps keep what it cost."""
    backend = ops.cloud_backend(site)
    if backend.site.is_paid:
        price = backend.site.type_price_per_increment(vm_type)
        inc = backend.site.billing_increment
        ops.billing.spent += ops.ledger.replay(site, leased_at, released_at, inc, price, user)
