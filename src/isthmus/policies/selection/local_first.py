"""LocalFirst forwarding."""

from __future__ import annotations

from collections.abc import Iterable
from typing import ClassVar

from isthmus.decisions import Decision
from isthmus.policies.api import NoParams, View
from isthmus.policies.selection.common import LOCAL, eligible, round_candidates, route


class LocalFirst:
    """LocalFirst: run a new job here when this manager has enough idle processors for it now,
    else forward it to the first peer (in configured order) that has; when none has, keep it
    here to wait.

    Villegas dissertation §4.3.2: "the LocalFirst policy, which attempts to execute jobs in
    locally owned resources first, performs a match between the job requirements and the
    available resources ... to try to run the job locally, or forward it to another site
    otherwise".
    """

    name: ClassVar[str] = "local-first"
    seed: ClassVar[str] = "Villegas dissertation §4.3.2"
    Params = NoParams

    def __init__(self, params: NoParams | None = None) -> None:
        self.params = params

    def decide(self, view: View) -> Iterable[Decision]:
        """Here when it fits now, else the first peer where it fits now, else here."""
        out: list[Decision] = []
        jobs = view.unrouted()
        if not jobs:
            return out
        everyone = round_candidates(view)
        for job in jobs:
            found = eligible(everyone, job)
            if not found:
                continue
            size = job.job.size
            fits = [c for c in found if c.idle >= size]
            local = next((c for c in found if c.peer == LOCAL), None)
            target = fits[0] if fits else (local if local is not None else found[0])
            out.extend(route(job, target, self.name))
        return out
