"""RoundRobin forwarding."""

from __future__ import annotations

from collections.abc import Iterable
from typing import ClassVar

from isthmus.decisions import Decision
from isthmus.policies.api import NoParams, View
from isthmus.policies.selection.common import eligible, round_candidates, route


class RoundRobinForwarding:
    """RoundRobin: new jobs go in turn to this manager and each of its peers.

    Villegas dissertation §7.3.2: "a basic strategy, RoundRobin, which alternates the selected
    destination site among all the peers plus the local one" (the forwarding of §4.5.2's first
    experiment, Figs 4.9-4.10). The turn passes over a place that cannot take the job (down, too
    small, already visited); the policy remembers whose turn it is between rounds.
    """

    name: ClassVar[str] = "round-robin"
    seed: ClassVar[str] = "Villegas dissertation §4.5.2, §7.3.2"
    Params = NoParams

    def __init__(self, params: NoParams | None = None) -> None:
        self.params = params
        #: the name of the place that gets the next job
        self._turn = 0

    def decide(self, view: View) -> Iterable[Decision]:
        """Each new job to the next place in turn that can take it."""
        out: list[Decision] = []
        jobs = view.unrouted()
        if not jobs:
            return out
        everyone = round_candidates(view)  # this manager first, then peers by index
        n = len(view.peers) + 1
        for job in jobs:
            found = {c.peer + 1: c for c in eligible(everyone, job)}
            if not found:
                continue
            for step in range(n):
                slot = (self._turn + step) % n
                if slot in found:
                    self._turn = (slot + 1) % n
                    out.extend(route(job, found[slot], self.name))
                    break
        return out
