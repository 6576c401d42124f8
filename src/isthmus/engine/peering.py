"""The engine's seam to peer managers: what it knows of each peer and how it reaches them.

An engine with a `Federation` attached takes part in forwarding (Villegas dissertation ch. 4):
its site-selection policy sees the jobs that have not been routed yet and the peers' latest
resource data, and may forward a job to a peer (`ForwardJob`). How messages travel is the
federation's business: `isthmus.federation.simulated` delivers them on the simulated clock
after a latency, a live manager sends them over HTTP. The engine calls the federation only
through the methods below; the federation calls back into the engine (`Engine.receive`,
`Engine.returned`, `Engine.remote_ended`). The engine passes itself to each call: it is typed
loosely here (`Any`) so that an implementation may take the concrete engine class it is
attached to, which this module does not import (`isthmus.engine.ops.PeerOps` is what the
engine guarantees).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from isthmus.engine.state import JobEntry
from isthmus.model.peers import PeerRole, ResourceData, SiteSummary
from isthmus.model.states import JobState

if TYPE_CHECKING:
    from isthmus.engine.ops import PeerOps


@dataclass(slots=True)
class PeerState:
    """What this manager knows of one peer (kept by the federation, read by policies through
    a read-only view): its name, its role to us, whether it is up, its distance (the one-way
    message delay, seconds: the IBM seed's "distance to the meta-scheduler") and its latest
    resource data with the time it arrived."""

    index: int
    name: str
    role: PeerRole
    distance: float = 0.0
    up: bool = True
    data: ResourceData | None = None
    heard_at: float = -1.0


class Federation(Protocol):
    """How an engine reaches its peers."""

    @property
    def peers(self) -> list[PeerState]:
        """The peers of this manager, by index (the `peer` of a ForwardJob)."""
        ...

    @property
    def max_hops(self) -> int:
        """How many managers a job may pass through before it must run where it is: a job that
        has visited this many is not offered to the selection policy again."""
        ...

    def send(self, engine: Any, entry: JobEntry, peer: PeerState) -> None:
        """Forward `entry`'s job to `peer` (submitJob with the chain of visited managers).
        Raise `isthmus.model.status.Refused` when it cannot be sent."""
        ...

    def send_back(self, engine: Any, entry: JobEntry) -> None:
        """Hand `entry`'s job, received from a peer and never started here, back to the
        manager it came from (the IBM seed's FAILED, rescheduled at its origin)."""
        ...

    def notify(self, engine: Any, entry: JobEntry, state: JobState) -> None:
        """The job received from a peer changed state here (notifyJob, back along its chain)."""
        ...

    def changed(self, engine: Any) -> None:
        """A round ended: push this manager's resource data to its consumers if it changed
        by more than the threshold (sendResourceData)."""
        ...


def resource_data(engine: PeerOps, *, exclude_unrouted: bool = False) -> ResourceData:
    """The engine's resource data now, per site (see `SiteSummary`). With `exclude_unrouted`
    the jobs still awaiting a site-selection decision are not counted as queued (what the
    selection policy compares its own manager on, before deciding where they go)."""
    now = engine.clock.now
    skip = engine.forwarding.unrouted if exclude_unrouted else {}
    per_stage: list[tuple[int, int]] = []
    for queue in engine.queue_book.queues:
        n = len(queue)
        procs = sum(e.job.size for e in queue.values())
        if skip:
            gone = [e for e in skip.values() if e.job.id in queue]
            n -= len(gone)
            procs -= sum(e.job.size for e in gone)
        per_stage.append((n, procs))
    sites: list[SiteSummary] = []
    for b in engine.backends:
        jobs = procs = 0
        for stage, allowed in enumerate(engine.stage_sites):
            if b.index in allowed:
                jobs += per_stage[stage][0]
                procs += per_stage[stage][1]
        available = b.available(now)
        busy = b.online - b.free
        sites.append(
            SiteSummary(
                name=b.name,
                is_cloud=b.site.is_cloud,
                available=available,
                processors=b.online if available else 0,
                max_processors=b.site.max_processors if available else 0,
                idle=b.free if available else 0,
                busy=busy,
                queued_jobs=jobs,
                queued_processors=procs,
            )
        )
    return ResourceData(
        manager=engine.name,
        time=now,
        sites=tuple(sites),
        queued_jobs=sum(n for n, _ in per_stage),
        queued_processors=sum(p for _, p in per_stage),
    )
