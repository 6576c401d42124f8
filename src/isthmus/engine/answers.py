"""The engine's answers about its state: why a job is where it is, and the state's fingerprint.

`why_status` answers "why is my job not running?" (the last refusal of a decision about it, the
allocation policy's own explanation, or its place in the queue); `fingerprint` is everything a
policy could change if it broke its contract, compared before and after it decides when the
engine checks the policies' purity (`checked_round`). Both read the engine through `AnswerOps`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from isthmus.engine.backend import VM_FIELDS
from isthmus.engine.matching import matching_free
from isthmus.engine.state import ENTRY_FIELDS
from isthmus.model.states import JobState
from isthmus.model.status import Status, StatusCode

if TYPE_CHECKING:
    from collections.abc import Sequence

    from isthmus.engine.ops import AnswerOps
    from isthmus.policies.api import DecidingPolicy


def why_status(ops: AnswerOps, job_id: int) -> Status:
    """Why job `job_id` is where it is, as a status: for a queued job, the last refusal of a
    decision about it (its code and deciding policy) or, when none was refused, the allocation
    policy's own explanation (HELD) or the queue position (NO_CAPACITY when it fits on none of
    its sites now, HELD when it waits its turn); ACCEPTED for a running job."""
    entry = ops.entries.get(job_id)
    if entry is None:
        reason = ops.log.reasons.get(job_id)
        return Status(StatusCode.WRONG_STATE, reason if reason is not None else f"job {job_id} is not in the system")
    allocation = ops.allocation
    if entry.state is JobState.RUNNING:
        where = ops.backends[entry.site].name
        return Status(StatusCode.ACCEPTED, f"running on {where} since {entry.started:g}", allocation.name)
    explicit = ops.why_not.get(job_id)
    if explicit is not None:
        return explicit
    text = allocation.explain(ops.view, entry)
    if text:
        return Status(StatusCode.HELD, text, allocation.name)
    book = ops.queue_book
    queue = book.queues[entry.stage]
    ahead = 0
    for other in queue:
        if other == job_id:
            break
        ahead += 1
    sites = book.stage_sites[entry.stage]
    most_free, where = matching_free([ops.backends[i] for i in sites], entry.job)
    code = StatusCode.NO_CAPACITY if entry.job.size > most_free else StatusCode.HELD
    return Status(
        code,
        f"waiting in queue {entry.stage} behind {ahead} jobs; needs {entry.job.size} processors, "
        f"the most free on its sites is {most_free}{where}",
        allocation.name,
    )


def checked_round(ops: AnswerOps, deciders: Sequence[DecidingPolicy]) -> None:
    """A round that checks the policies' purity: each of `deciders` decides fully, the state's
    `fingerprint` unchanged by its deciding (AssertionError otherwise), before its decisions are
    applied; every queue's head is looked at again next round."""
    ops.queue_book.stale_all = True
    view = ops.view
    for policy in deciders:
        before = fingerprint(ops)
        decisions = list(policy.decide(view))
        if fingerprint(ops) != before:
            raise AssertionError(f"policy {policy.name!r} changed the engine state while deciding")
        for d in decisions:
            ops.apply(d, policy.name)
        if ops.bags.unsettled:
            ops.bags.settle(policy.name)


def fingerprint(ops: AnswerOps) -> tuple[object, ...]:
    """Everything a policy could change if it broke its contract (for the purity check)."""
    book = ops.queue_book
    if book.index_declared:
        book.indexes()  # built now rather than by the policy's first read while it decides
    return (
        tuple(tuple(q) for q in book.queues),
        tuple(tuple(b) for stage in book.buckets for b in stage.values()),
        tuple(tuple(getattr(e, f) for f in ENTRY_FIELDS) for e in ops.entries.values()),
        tuple((b.free, b.online, len(b.running), tuple(b.by_estimated_end), tuple(b.running)) for b in ops.backends),
        tuple(tuple(tuple(getattr(v, f) for f in VM_FIELDS) for v in b.vms.values()) for b in ops.clouds),
        tuple((u, tuple(h)) for u, h in ops.history.items()),
        (ops.billing.spent, ops.runtime_sum, ops.runtime_count, len(ops.log)),
    )
