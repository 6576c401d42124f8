"""KOALA-C First-Fit."""

from __future__ import annotations

from collections.abc import Iterable
from typing import ClassVar

from isthmus.decisions import Decision
from isthmus.policies.allocation.common import SingleSetPolicy, first_fit_in_order
from isthmus.policies.api import View


class FirstFit(SingleSetPolicy):
    """FF: serve the global queue in FCFS order, each job to the first site where it fits.

    KOALA-C §IV-A(1). Jobs run to completion without preemption. A job that fits nowhere now
    stays queued while later jobs that fit are placed (KOALA's placement queue is scanned as
    a whole every round, KOALA-CS thesis §2.2.3); use `fcfs` for the blocking variant.
    """

    name: ClassVar[str] = "ff"
    seed: ClassVar[str] = "KOALA-C §IV-A(1); KOALA-CS thesis §2.2.3"
    uses_size_index: ClassVar[bool] = True

    def decide(self, view: View) -> Iterable[Decision]:
        """Place queued jobs in arrival order on the first site with room."""
        return first_fit_in_order(view, self.name)
