"""FCBF-Aggressive (Villegas dissertation §7.3.1)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import ClassVar

from isthmus.decisions import Decision
from isthmus.policies.allocation.common import SingleSetPolicy, any_free, first_fit_in_order
from isthmus.policies.api import View


class FcbfAggressive(SingleSetPolicy):
    """FCBF-Aggressive: in queue order, start every job for which there are enough free VMs.

    Villegas dissertation §7.3.1 (First Come Best Fit): "FCBF-Aggressive always promotes jobs to
    the front of the queue if there are enough VMs to run any of them. Otherwise, VMs are
    reserved for the first one conditionally, but this condition is revisited at every
    scheduling step." Each round the queue is scanned in arrival order and every job that fits
    on a site starts there (first fit); when none fits, the free VMs stay with the queue: the
    dissertation's provisioning policies (`od-*`, `on-demand`) never release idle VMs the queue
    claims, which is the conditional reservation, revisited at the next round. §7.5 uses this
    policy to replicate a First-In First-Fit site scheduler.
    """

    name: ClassVar[str] = "fcbf-aggr"
    seed: ClassVar[str] = "Villegas dissertation §7.3.1 (FCBF-Aggressive)"
    uses_size_index: ClassVar[bool] = True

    def decide(self, view: View) -> Iterable[Decision]:
        """Start, in queue order, every job that fits."""
        if not view.queued or not any_free(view):
            return []
        return first_fit_in_order(view, self.name)
