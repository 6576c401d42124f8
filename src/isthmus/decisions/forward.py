"""ForwardJob: send a queued job to a peer manager (Villegas dissertation §4.2.1, submitJob)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from isthmus.decisions import register
from isthmus.model.states import JobState
from isthmus.model.status import Refused, StatusCode

if TYPE_CHECKING:
    from isthmus.decisions.ops import B, C, E, KindOps, Peer, S


@dataclass(frozen=True, slots=True)
class ForwardJob:
    """Send queued job `job_id` to peer manager `peer` (an index into the view's `peers`).

    Villegas dissertation §4.2.1: a job "is forwarded between MSs using the same submitJob()
    interface"; the job leaves this manager's queue, keeps its id at its origin and carries the
    chain of managers it visited. The engine refuses it when the peer is down, is not a
    provider to this manager, was already visited by the job, or the job is not queued.
    """

    job_id: int
    peer: int
    by: str = ""


class ForwardKind:
    """Valid when the engine has peers, the job is queued here, the peer exists, is up, is a
    provider to this manager, is not a manager the job already visited (the IBM seed's visited
    schedulers filter, enforced whatever the policy) nor one that handed it back, and its latest
    resource data shows a site large enough for the job."""

    decision = ForwardJob

    def validate(self, ops: KindOps[E, B, S, C], d: ForwardJob) -> tuple[E, Peer]:
        """The job's entry and the peer, or Refused."""
        fed = ops.federation
        if fed is None:
            raise Refused(StatusCode.INVALID, "this manager has no peers to forward to")
        entry = ops.entries.get(d.job_id)
        if entry is None or entry.state is not JobState.QUEUED:
            raise Refused(StatusCode.WRONG_STATE, f"job {d.job_id} is not queued here")
        peers = fed.peers
        if not 0 <= d.peer < len(peers):
            raise Refused(StatusCode.UNKNOWN_TARGET, f"peer index {d.peer} does not exist")
        peer = peers[d.peer]
        if not peer.role.provides:
            raise Refused(StatusCode.NOT_ALLOWED, f"peer {peer.name} is a consumer only: it runs no jobs from here")
        if not peer.up:
            raise Refused(StatusCode.NO_CAPACITY, f"peer {peer.name} is down (missed its heartbeats)")
        if peer.name in entry.chain or peer.name == ops.name:
            raise Refused(StatusCode.NOT_ALLOWED, f"job {d.job_id} already visited {peer.name}")
        if peer.name in entry.failed:
            raise Refused(StatusCode.NOT_ALLOWED, f"peer {peer.name} already handed job {d.job_id} back")
        if peer.data is not None and entry.job.size > peer.data.largest:
            raise Refused(
                StatusCode.NO_CAPACITY,
                f"needs {entry.job.size} processors; the largest available site of {peer.name} offers "
                f"{peer.data.largest}",
            )
        return entry, peer

    def apply(self, ops: KindOps[E, B, S, C], d: ForwardJob, ctx: tuple[E, Peer]) -> None:
        """Send the job; it leaves this manager's queue (FORWARD in the log)."""
        entry, _ = ctx
        ops.forwarding.forward(entry, d.peer, d.by or ops.deciding)


register(ForwardKind())
