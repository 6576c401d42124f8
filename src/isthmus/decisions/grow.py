"""GrowBag: give a bag of tasks more free processors of a site (KOALA-CS thesis §3.5.2): a
cluster's, or free cores of a cloud's ready VMs."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from isthmus.decisions import register
from isthmus.model.status import Refused, StatusCode

if TYPE_CHECKING:
    from isthmus.decisions.ops import B, C, E, KindOps, S


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


def bag_of(ops: KindOps[E, B, S, C], job_id: int) -> B:
    """The active bag `job_id` a grow or shrink names, or Refused (NOT_MALLEABLE for a rigid job,
    UNKNOWN_TARGET for no job, WRONG_STATE for a bag whose tasks are all done)."""
    bag = ops.bags.get(job_id)
    if bag is None:
        if job_id in ops.entries:
            raise Refused(
                StatusCode.NOT_MALLEABLE, f"job {job_id} is a rigid job: only a bag of tasks grows and shrinks"
            )
        raise Refused(StatusCode.UNKNOWN_TARGET, f"bag {job_id} does not exist")
    if bag.finished:
        raise Refused(StatusCode.WRONG_STATE, f"bag {job_id} has completed all its tasks")
    return bag


class GrowKind:
    """Valid when the bag is active, the count is at least 1 and at most its queued tasks that no
    processor is about to pull, and the site exists, may hold bags, is in its availability window
    and has that many free processors (on a cloud, leaving out the VMs the growth avoids; naming
    VMs to avoid on a cluster is invalid)."""

    decision = GrowBag

    def validate(self, ops: KindOps[E, B, S, C], d: GrowBag) -> B:
        """The bag, or Refused."""
        bag = bag_of(ops, d.job_id)
        if d.count < 1:
            raise Refused(StatusCode.INVALID, f"a bag grows by at least 1 processor, not {d.count}")
        if not 0 <= d.site < len(ops.backends):
            raise Refused(StatusCode.UNKNOWN_TARGET, f"site index {d.site} does not exist")
        backend = ops.backends[d.site]
        if not backend.holds_bags:
            raise Refused(StatusCode.NOT_ALLOWED, f"site {backend.name} cannot hold bags of tasks")
        if not backend.available(ops.clock.now):
            raise Refused(StatusCode.OUTSIDE_WINDOW, f"site {backend.name} is outside its availability window")
        if d.count > bag.unclaimed:
            raise Refused(
                StatusCode.OVER_LIMIT,
                f"bag {d.job_id} has {bag.unclaimed} tasks waiting for a processor; it cannot use {d.count} more",
            )
        if d.avoid and ops.cloud_at(d.site) is None:
            raise Refused(StatusCode.INVALID, f"site {backend.name} has no VMs to avoid")
        room = backend.bag_room(bag.job, d.avoid)
        if d.count > room:
            held = (
                f", {backend.reserved_cores} of them held for waiting jobs"
                if backend.reserved_cores and ops.cloud_at(d.site) is None
                else ""
            )
            raise Refused(
                StatusCode.NO_CAPACITY, f"needs {d.count} processors; site {backend.name} has {room} free{held}"
            )
        return bag

    def apply(self, ops: KindOps[E, B, S, C], d: GrowBag, ctx: B) -> None:
        """Take the processors; each starts pulling tasks."""
        ops.bags.grow(ctx, d.site, d.count, d.by or ops.deciding, d.avoid)


register(GrowKind())
