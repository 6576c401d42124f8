"""ShrinkBag: preempt processors of a bag of tasks on one site (KOALA-CS thesis §3.5.3)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from isthmus.decisions import register
from isthmus.decisions.grow import bag_of
from isthmus.model.status import Refused, StatusCode

if TYPE_CHECKING:
    from isthmus.decisions.ops import B, C, E, KindOps, S


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


class ShrinkKind:
    """Valid when the bag is active and the slots are distinct processors the bag holds on that
    site and is not preempting already."""

    decision = ShrinkBag

    def validate(self, ops: KindOps[E, B, S, C], d: ShrinkBag) -> tuple[B, list[S]]:
        """The bag and its slots, or Refused."""
        bag = bag_of(ops, d.job_id)
        if not d.slots:
            raise Refused(StatusCode.INVALID, "a shrink names at least one processor")
        if len(set(d.slots)) != len(d.slots):
            raise Refused(StatusCode.INVALID, f"a shrink names processor(s) twice: {list(d.slots)}")
        slots: list[S] = []
        for slot_id in d.slots:
            slot: S | None = bag.slots.get(slot_id)  # B's slots are S: the engine's bags hold its slots
            if slot is None or slot.site != d.site:
                raise Refused(
                    StatusCode.UNKNOWN_TARGET, f"bag {d.job_id} holds no processor {slot_id} on site {d.site}"
                )
            if slot.leaving:
                raise Refused(StatusCode.WRONG_STATE, f"processor {slot_id} of bag {d.job_id} is already preempted")
            slots.append(slot)
        return bag, slots

    def apply(self, ops: KindOps[E, B, S, C], d: ShrinkBag, ctx: tuple[B, list[S]]) -> None:
        """Preempt the processors: their tasks go back to the queue."""
        bag, slots = ctx
        ops.bags.shrink(bag, d.site, slots, d.by or ops.deciding, d.for_job)


register(ShrinkKind())
