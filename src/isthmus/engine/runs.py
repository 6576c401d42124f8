"""How runs end: at their end (completed or failed), or killed (by a policy, a runtime limit,
the walltime, a lost VM or pilot, the budget), or cancelled; and what a job leaving its queue
gives back (its reservations).

A killed run is requeued (in the next stage after a runtime limit, TAGS) or ends the job as
failed (TIMEOUT at its walltime). These functions talk to the engine through `RunOps`; `ended`
is the engine's per-event path (called from its event switch, no layer in between).
"""

from __future__ import annotations

from collections import deque
from typing import TYPE_CHECKING

from isthmus.engine.clock import EV_TIMEOUT, PRIO_LIMIT
from isthmus.model.events import EventKind, KillCause
from isthmus.model.states import JobState, VmState

if TYPE_CHECKING:
    from isthmus.engine.ops import RunOps, WalltimeOps
    from isthmus.engine.state import JobEntry

_END = int(EventKind.END)
_FAIL = int(EventKind.FAIL)
_SHARED = int(EventKind.SHARED)
_KILL = int(EventKind.KILL)
_REQUEUE = int(EventKind.REQUEUE)
_RUNNING = JobState.RUNNING
_COMPLETED = JobState.COMPLETED


def record_completion(ops: RunOps, user: str, runtime: float) -> None:
    """Count a completed run of `user` lasting `runtime` seconds in the runtime predictors'
    history: the user's last two runtimes, the sum and the count (a restart replays the stored
    runs through this too: isthmus.engine.history)."""
    hist = ops.history.get(user)
    if hist is None:
        hist = ops.history[user] = deque(maxlen=2)
    hist.append(runtime)
    ops.runtime_sum += runtime
    ops.runtime_count += 1


def ended(ops: RunOps, job_id: int, run: int, exit_code: int = 0) -> None:
    """Run number `run` of job `job_id` ended now with `exit_code` (0: completed, else failed);
    nothing for a run that is no longer current (killed and restarted meanwhile)."""
    entry = ops.entries.get(job_id)
    if entry is None or entry.state is not _RUNNING or entry.run != run:
        return  # a completion of a run that was killed meanwhile
    now = ops.clock.now
    log = ops.log
    site = entry.site
    backend = ops.backends[site]
    if backend.sharing:
        if not backend.end_due(entry, now):
            return  # an end moved later since: the run shares processors
        full = backend.full_speed_runtime(entry)
        if full is not None:  # its runtime alone, for the slowdown (metrics/records.py)
            log.append(now, _SHARED, job_id, site, -1, full, run)
    backend.finished(entry, now)
    book = ops.queue_book
    book.stale.update(book.site_stages[site])  # free processors there: a head may fit
    if ops.ledger.commits:
        ops.ledger.stopped(job_id)
    if exit_code == 0:
        entry.state = _COMPLETED
        log.add(now, _END, job_id, site, 0, run, -1)
        record_completion(ops, entry.job.user, now - entry.started)
    else:
        entry.state = JobState.FAILED
        log.append(now, _FAIL, job_id, site, -1, exit_code, run)
    del ops.entries[job_id]
    if ops.why_not:
        ops.why_not.pop(job_id, None)
    if entry.chain:
        ops.forwarding.notify_origin(entry)
    ops.round_soon()


def kill(ops: RunOps, entry: JobEntry, cause: KillCause, *, requeue: bool, next_stage: bool = False) -> None:
    """Kill the current run of `entry` for `cause`; requeue it (in the next stage after a limit)
    or end it as failed."""
    now = ops.clock.now
    site = entry.site
    run = entry.run
    log = ops.log
    book = ops.queue_book
    ops.backends[site].stop(entry, now)
    book.stale.update(book.site_stages[site])  # free processors there: a head may fit
    if ops.ledger.commits:
        ops.ledger.stopped(entry.job.id)
    log.add(now, _KILL, entry.job.id, site, int(cause), run, -1)
    if requeue:
        entry.restarts += 1
        if next_stage:
            entry.stage = min(ops.allocation.next_stage(entry.stage), len(book.queues) - 1)
        entry.site = -1
        if entry.job.size > book.stage_max[entry.stage]:
            entry.state = JobState.REJECTED
            log.append(now, int(EventKind.REJECT), entry.job.id, -1, -1, 0.0, run)
            log.reasons[entry.job.id] = (
                f"killed at the runtime limit; needs {entry.job.size} processors, more than any site "
                f"of queue {entry.stage} offers"
            )
            del ops.entries[entry.job.id]
            ops.round_soon()
            return
        entry.state = JobState.QUEUED
        entry.queued_at = now
        book.enqueue(entry, entry.stage)
        log.add(now, _REQUEUE, entry.job.id, -1, entry.stage, run, -1)
    else:
        # the run's end: FAIL with the status of a process killed by SIGKILL; a FAIL right
        # after a KILL with cause TIMEOUT is the end of a job that timed out
        entry.state = JobState.TIMEOUT if cause is KillCause.TIMEOUT else JobState.FAILED
        log.append(now, int(EventKind.FAIL), entry.job.id, site, -1, -9, run)
        del ops.entries[entry.job.id]
        if entry.chain:
            ops.forwarding.notify_origin(entry)
    ops.round_soon()


def schedule_walltime(ops: WalltimeOps, entry: JobEntry, started: float) -> None:
    """With `enforce_walltime`, schedule the end of the current run of `entry` at its job's
    requested runtime after `started` (nothing when it has none)."""
    if ops.enforce_walltime and entry.job.requested_runtime is not None:
        ops.schedule(started + entry.job.requested_runtime, PRIO_LIMIT, EV_TIMEOUT, entry.job.id, entry.run)


def _current(ops: RunOps, job_id: int, run: int) -> JobEntry | None:
    """The entry of `job_id` if run `run` is its current, running one."""
    entry = ops.entries.get(job_id)
    if entry is None or entry.state is not _RUNNING or entry.run != run:
        return None
    return entry


def walltime_reached(ops: RunOps, job_id: int, run: int) -> None:
    """Run `run` of `job_id` reached its requested runtime: killed, the job ends TIMEOUT."""
    entry = _current(ops, job_id, run)
    if entry is not None:
        kill(ops, entry, KillCause.TIMEOUT, requeue=False)


def limit_reached(ops: RunOps, job_id: int, run: int) -> None:
    """Run `run` of `job_id` reached its runtime limit: killed, requeued in the next stage."""
    entry = _current(ops, job_id, run)
    if entry is not None:
        kill(ops, entry, KillCause.LIMIT, requeue=True, next_stage=True)


def lost(ops: RunOps, job_id: int, run: int) -> bool:
    """Run `run` of `job_id` was lost (its pilot or node died): kill it (cause LOST) and requeue
    it. False when that run is no longer the current one."""
    entry = _current(ops, job_id, run)
    if entry is None:
        return False
    kill(ops, entry, KillCause.LOST, requeue=True)
    return True


def vm_failed(ops: RunOps, site: int, vm_id: int, reason: str) -> bool:
    """VM `vm_id` of cloud site `site` failed now (boot timeout, error state): its runs are
    killed (cause LOST) and requeued, its billing stops and it is gone. Logged as VM_FAILED
    with `reason` in the notes, then VM_RELEASE (policy "vm-failed") and VM_GONE, so that
    leases, costs and capacity computed from the log end there. False when the VM is
    unknown or already being released."""
    backend = ops.cloud_backend(site)
    vm = backend.vms.get(vm_id)
    if vm is None or vm.state not in (VmState.BOOTING, VmState.READY):
        return False
    for entry in [e for e in backend.running.values() if any(v == vm_id for v, _ in e.alloc)]:
        kill(ops, entry, KillCause.LOST, requeue=True)
    now = ops.clock.now
    log = ops.log
    log.notes[log.append(now, int(EventKind.VM_FAILED), -1, site, vm_id)] = reason
    backend.fail_vm(vm_id, now)
    log.append(now, int(EventKind.VM_RELEASE), -1, site, vm_id, 0.0, -1, log.policy_index("vm-failed"))
    log.append(now, int(EventKind.VM_GONE), -1, site, vm_id)
    ops.changed()
    return True


def cancel(ops: RunOps, job_id: int) -> bool:
    """Cancel a queued or running job or a bag of tasks; False if it is unknown or already ended."""
    entry = ops.entries.get(job_id)
    if entry is None:
        bag = ops.bags.get(job_id)
        if bag is None or bag.finished:
            return False
        ops.bags.cancel(bag)
        return True
    now = ops.clock.now
    if entry.state is _RUNNING:
        ops.backends[entry.site].stop(entry, now)
        if ops.ledger.commits:
            ops.ledger.stopped(job_id)
        ops.log.append(now, _KILL, job_id, entry.site, -1, int(KillCause.CANCEL), entry.run)
    else:
        ops.queue_book.dequeue(entry)
        ops.forwarding.unrouted.pop(job_id, None)
        if ops.reserving:
            drop_reservations(ops, job_id)
    entry.state = JobState.CANCELLED
    ops.log.append(now, int(EventKind.CANCEL), job_id, -1, -1, 0.0, entry.run)
    del ops.entries[job_id]
    ops.why_not.pop(job_id, None)
    if entry.chain:
        ops.forwarding.notify_origin(entry)
    ops.changed()
    return True


def drop_reservations(ops: RunOps, job_id: int) -> None:
    """A queued job left its queue (started, cancelled): end what is reserved for it anywhere,
    logging each VM given back (RESERVE, value 0) and each cluster hold ended (HOLD, value 0)."""
    now = ops.clock.now
    for b in ops.backends:
        if b.reserved_cores:
            for vm_id in b.drop_reservation(job_id):
                ops.log.append(now, int(EventKind.RESERVE), job_id, b.index, vm_id, 0.0)
    bags = ops.bags
    if bags.hold_keys or bags.declined:  # holds on clusters (isthmus.engine.bags)
        bags.drop_holds(job_id)
