"""What the forwarding policies share: the candidates a job may go to, and a tally of this
round's own placements.

A candidate is this manager (peer -1) or a peer that is up, a provider to this manager and has
sent its resource data; a job may go to those with a site large enough for it that it did not
visit and that did not hand it back. Figures come from the latest resource data (a peer's may be stale:
"information aging", Villegas §4.2.2); within one round the tally adds the jobs this policy
has already sent to each candidate, so that one round's arrivals do not all go to the same
place. A job that no candidate can take stays here.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import ClassVar

from isthmus.decisions import Decision
from isthmus.decisions.forward import ForwardJob
from isthmus.model.peers import ResourceData
from isthmus.policies.api import JobInfo, NoParams, View

LOCAL = -1
"""The peer index standing for this manager."""


@dataclass(slots=True)
class Candidate:
    """One place a job may go: this manager (`peer` = LOCAL) or a peer, with its figures as
    known now plus this round's placements."""

    peer: int
    name: str
    distance: float
    data: ResourceData
    jobs: int = 0
    processors: int = 0
    used: int = 0
    claimed: int = 0

    @property
    def queued_jobs(self) -> int:
        """Waiting jobs, with those sent here this round that could not start at once."""
        return self.data.queued_jobs + self.jobs

    @property
    def queued_processors(self) -> int:
        """Processors requested by the waiting jobs (with this round's)."""
        return self.data.queued_processors + self.processors

    @property
    def idle(self) -> int:
        """Idle processors, less those this round's jobs took."""
        return self.data.idle - self.used

    @property
    def capacity(self) -> int:
        """Idle plus potential processors, less those this round's jobs claimed."""
        return self.data.capacity - self.claimed

    @property
    def load(self) -> int:
        """Queued processors minus idle ones (Villegas §4.5.2)."""
        return self.queued_processors - self.idle

    def take(self, size: int) -> None:
        """Count a job of `size` processors sent here: it starts at once if enough are idle,
        else it waits; either way it claims that much of the capacity."""
        self.claimed += size
        if size <= self.idle:
            self.used += size
        else:
            self.jobs += 1
            self.processors += size


def round_candidates(view: View) -> list[Candidate]:
    """This manager first, then the peers that are up, providers to this manager and have sent
    their resource data, in their configured order (one list per round: the tallies live in it)."""
    out = [Candidate(LOCAL, view.manager, 0.0, view.local_resources())]
    for p in view.peers:
        if p.up and p.role.provides and p.data is not None:
            out.append(Candidate(p.index, p.name, p.distance, p.data))
    return out


def eligible(found: list[Candidate], job: JobInfo) -> list[Candidate]:
    """The candidates `job` may go to: a site there can hold it, it did not visit them (the
    IBM seed's visited-schedulers filter) and they did not hand it back (failed resource)."""
    size = job.job.size
    return [
        c
        for c in found
        if c.data.largest >= size and (c.peer == LOCAL or (c.name not in job.chain and c.name not in job.failed))
    ]


def route(job: JobInfo, to: Candidate, by: str) -> list[Decision]:
    """The decision sending `job` to `to` (none when it stays here); counts it in the tally."""
    to.take(job.job.size)
    return [] if to.peer == LOCAL else [ForwardJob(job.job.id, to.peer, by=by)]


class ScoredSelection:
    """A forwarding policy that sends each new job to the candidate with the best score
    (lowest `key`; ties go to this manager, then to peers in their configured order)."""

    name: ClassVar[str]
    seed: ClassVar[str]
    Params = NoParams

    def __init__(self, params: NoParams | None = None) -> None:
        self.params = params

    def key(self, c: Candidate, size: int) -> float:
        """Lower is better."""
        raise NotImplementedError

    def decide(self, view: View) -> Iterable[Decision]:
        """For each job not routed yet, in arrival order: the best-scored candidate."""
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
            best = min(found, key=lambda c: self.key(c, size))
            out.extend(route(job, best, self.name))
        return out


def best_fit(value: int, size: int) -> float:
    """Best fit of a job of `size` on a candidate offering `value` processors: the smallest
    value that holds the job first (0 <= key < 1e9), then, when none holds it, the largest."""
    return float(value - size) if value >= size else 1e9 + (size - value)
