"""ShrinkBag: preempt processors of a bag of tasks on one site (KOALA-CS thesis §3.5.3)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from isthmus.engine.bags import Bag, Slot
from isthmus.engine.kinds import register
from isthmus.engine.kinds.grow import bag_of
from isthmus.model.decisions import ShrinkBag
from isthmus.model.status import Refused, StatusCode

if TYPE_CHECKING:
    from isthmus.engine.ops import EngineOps


class ShrinkKind:
    """Valid when the bag is active and the slots are distinct processors the bag holds on that
    site and is not preempting already."""

    decision = ShrinkBag

    def validate(self, ops: EngineOps, d: ShrinkBag) -> tuple[Bag, list[Slot]]:
        """The bag and its slots, or Refused."""
        bag = bag_of(ops, d)
        if not d.slots:
            raise Refused(StatusCode.INVALID, "a shrink names at least one processor")
        if len(set(d.slots)) != len(d.slots):
            raise Refused(StatusCode.INVALID, f"a shrink names processor(s) twice: {list(d.slots)}")
        slots = []
        for slot_id in d.slots:
            slot = bag.slots.get(slot_id)
            if slot is None or slot.site != d.site:
                raise Refused(
                    StatusCode.UNKNOWN_TARGET, f"bag {d.job_id} holds no processor {slot_id} on site {d.site}"
                )
            if slot.leaving:
                raise Refused(StatusCode.WRONG_STATE, f"processor {slot_id} of bag {d.job_id} is already preempted")
            slots.append(slot)
        return bag, slots

    def apply(self, ops: EngineOps, d: ShrinkBag, ctx: tuple[Bag, list[Slot]]) -> None:
        """Preempt the processors: their tasks go back to the queue."""
        bag, slots = ctx
        ops.bags.shrink(bag, d.site, slots, d.by or ops.deciding, d.for_job)


register(ShrinkKind())
