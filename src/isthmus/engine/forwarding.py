"""The engine's side of forwarding between peer managers (Villegas dissertation ch. 4, IBM seed §4.2).

`Forwarding` keeps what one engine knows of the jobs that cross it: the queued jobs not yet
seen by the site-selection policy (`unrouted`), the jobs sent from here and not yet ended
(`forwarded`), and the unrouted jobs no local site can run (`outsized`, rejected at the round's
end unless forwarded). Its moves are the protocol's: a job arrives from a peer (`receive`),
leaves for a peer (`forward`), comes back unstarted (`returned`), ends where it ran
(`remote_ended`), and, when every site of its queue closed its availability window, goes back
to the manager it came from (`window_ended`). The federation (`isthmus.engine.peering`) carries
the messages; this module talks to the engine only through `ForwardOps`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from isthmus.engine.clock import EV_WAKE, EV_WINDOW_END, PRIO_VM
from isthmus.engine.queues import admit
from isthmus.engine.state import JobEntry
from isthmus.model.events import EventKind
from isthmus.model.job import Job
from isthmus.model.states import JobState

if TYPE_CHECKING:
    from isthmus.engine.ops import ForwardOps

_SUBMIT = int(EventKind.SUBMIT)
_REQUEUE = int(EventKind.REQUEUE)
_REJECT = int(EventKind.REJECT)
_FORWARD = int(EventKind.FORWARD)
_RETURN = int(EventKind.RETURN)


class Forwarding:
    """The jobs crossing one engine on their way between peers, and the protocol's moves."""

    def __init__(self, ops: ForwardOps) -> None:
        self.ops = ops
        #: queued jobs not yet seen by the site-selection policy (kept only with a federation)
        self.unrouted: dict[int, JobEntry] = {}
        #: jobs forwarded from here and not yet ended, by id: (entry, peer index)
        self.forwarded: dict[int, tuple[JobEntry, int]] = {}
        #: unrouted jobs no local site can run, in no queue, by id: why they cannot run here
        self.outsized: dict[int, str] = {}

    def attached(self) -> None:
        """The engine joined a federation: a round runs when a site's availability window opens,
        and its end hands back the jobs received from peers that can no longer start here."""
        ops = self.ops
        now = ops.clock.now
        for b in ops.backends:
            start, end = b.site.available_from, b.site.available_until
            if start is not None and start > now:
                # a window opening changes what this manager offers its peers: a round looks
                # (provisioning leases, the resource data pushed shows the site)
                ops.schedule(start, PRIO_VM, EV_WAKE, -1, -1)
            if end is not None:
                ops.schedule(end, PRIO_VM, EV_WINDOW_END, b.index, -1)

    def hold_outsized(self, entry: JobEntry, reason: str) -> None:
        """Offer `entry`, which no local site can run, to the selection policy this round, in no
        local queue; it is rejected for `reason` at the round's end unless forwarded."""
        job_id = entry.job.id
        self.unrouted[job_id] = entry
        self.outsized[job_id] = reason
        self.ops.changed()

    def receive(self, job: Job, chain: tuple[str, ...]) -> JobEntry | None:
        """A job forwarded by a peer arrives now (submitJob), after visiting the managers in
        `chain` (its origin first). Logged as SUBMIT with the origin named; None when it can
        never run here (REJECT, and its origin is told) or arrived after every site of its
        queue closed (RETURN: handed back to the sender at once, IBM seed §4.2.2)."""
        if not chain:
            raise ValueError("a received job needs the chain of managers it came through")
        ops = self.ops
        now = ops.clock.now
        log = ops.log
        if job.id in ops.entries:
            raise ValueError(f"job {job.id} was already submitted")
        log.append(now, _SUBMIT, job.id, -1, -1, job.size, origin=log.origin_index(chain[0]))
        entry = admit(ops, job, now, chain)
        if entry is not None and entry.stage >= 0 and ops.queue_book.closed_stages(now)[entry.stage]:
            # it arrived after every site of its queue closed (sent on resource data older
            # than the close): it fails back at once, as if it had waited at the close
            self.hand_back([entry], now)
            return None
        if entry is None and ops.federation is not None:
            gone = JobEntry(job, now)
            gone.chain = chain
            gone.state = JobState.REJECTED
            ops.federation.notify(ops, gone, JobState.REJECTED)
        return entry

    def _leave(self, entry: JobEntry) -> None:
        """Queued `entry` leaves this manager (sent to a peer or handed back)."""
        ops = self.ops
        job_id = entry.job.id
        ops.queue_book.dequeue(entry)
        self.unrouted.pop(job_id, None)
        if ops.reserving:
            ops.drop_reservations(job_id)
        del ops.entries[job_id]
        ops.why_not.pop(job_id, None)

    def forward(self, entry: JobEntry, peer: int, policy: str) -> None:
        """Take queued `entry` out of this manager and send it to peer `peer` (applied by the
        ForwardJob kind after validation)."""
        ops = self.ops
        fed = ops.federation
        assert fed is not None
        target = fed.peers[peer]
        fed.send(ops, entry, target)
        now = ops.clock.now
        self._leave(entry)
        log = ops.log
        log.append(
            now,
            _FORWARD,
            entry.job.id,
            -1,
            -1,
            peer,
            entry.run,
            log.policy_index(policy),
            origin=log.origin_index(target.name),
        )
        log.reasons[entry.job.id] = f"forwarded to peer {target.name}"
        if entry.chain:
            self.notify_origin(entry)  # a job passing through: its origin learns where it went
        else:
            self.forwarded[entry.job.id] = (entry, peer)
        ops.changed()

    def returned(self, job_id: int, peer: str) -> bool:
        """Peer `peer` handed job `job_id`, forwarded from here, back unstarted (IBM: FAILED):
        it is queued here again, offered to the selection policy with `peer` among the failed
        resources. False when the job is not one forwarded from here."""
        item = self.forwarded.pop(job_id, None)
        if item is None:
            return False
        ops = self.ops
        entry = item[0]
        now = ops.clock.now
        entry.failed = (*entry.failed, peer)
        entry.state = JobState.QUEUED
        entry.site = -1
        entry.queued_at = now
        ops.entries[job_id] = entry
        log = ops.log
        log.reasons.pop(job_id, None)
        book = ops.queue_book
        stage = book.stage_of(entry.job)
        log.append(now, _REQUEUE, job_id, -1, -1, stage, entry.run, origin=log.origin_index(peer))
        fed = ops.federation
        hops_left = fed is not None and len(entry.chain) < fed.max_hops
        if entry.job.size > book.stage_max[stage]:
            # no site here can run it (it was forwarded for that): another peer may take it this
            # round, else it is rejected at the round's end; it never waits in a local queue
            reason = f"{book.too_large(entry.job, stage)}; handed back by {peer}"
            if hops_left:
                entry.stage = -1
                self.hold_outsized(entry, reason)
            else:
                del ops.entries[job_id]
                entry.state = JobState.REJECTED
                log.append(now, _REJECT, job_id)
                log.reasons[job_id] = reason
            return True
        book.enqueue(entry, stage)
        if hops_left:
            self.unrouted[job_id] = entry
        ops.changed()
        return True

    def remote_ended(self, job_id: int, state: JobState) -> bool:
        """A job forwarded from here reached terminal `state` where it ran (notifyJob): it is
        no longer tracked here. False when it is not one forwarded from here."""
        if not state.terminal:
            return job_id in self.forwarded
        return self.forwarded.pop(job_id, None) is not None

    def round_ended(self) -> None:
        """A round ended: the outsized jobs the selection policy did not forward are rejected,
        every job has been offered to it, and the peers hear of what changed."""
        if self.outsized:
            self._reject_outsized()
        self.unrouted.clear()
        fed = self.ops.federation
        if fed is not None:
            fed.changed(self.ops)

    def _reject_outsized(self) -> None:
        """Reject the jobs no local site can run that the selection policy did not forward."""
        ops = self.ops
        now = ops.clock.now
        log = ops.log
        for job_id, reason in self.outsized.items():
            entry = ops.entries.pop(job_id, None)
            if entry is None:  # forwarded or cancelled meanwhile
                continue
            ops.why_not.pop(job_id, None)
            log.append(now, _REJECT, job_id)
            log.reasons[job_id] = f"{reason}, and no peer took it"
            entry.state = JobState.REJECTED
            if entry.chain:
                self.notify_origin(entry)
        self.outsized.clear()

    def notify_origin(self, entry: JobEntry) -> None:
        """Tell the origin of a job received from a peer its state here (notifyJob)."""
        fed = self.ops.federation
        if fed is not None:
            fed.notify(self.ops, entry, entry.state)

    def window_ended(self) -> None:
        """A site's availability window closed: jobs received from peers that no site of their
        queue can start any more go back to the manager they came from (IBM seed §4.2.2: "those
        jobs that do not execute yet shall be reported as FAILED ... and be re-scheduled")."""
        ops = self.ops
        if ops.federation is None:
            return
        now = ops.clock.now
        book = ops.queue_book
        closed = book.closed_stages(now)
        if not any(closed):
            return
        self.hand_back([e for q, c in zip(book.queues, closed, strict=True) if c for e in q.values() if e.chain], now)

    def hand_back(self, back: list[JobEntry], now: float) -> None:
        """Send the queued jobs `back`, received from peers, back to the managers they came from."""
        ops = self.ops
        fed = ops.federation
        assert fed is not None
        log = ops.log
        for entry in back:
            self._leave(entry)
            log.append(
                now,
                _RETURN,
                entry.job.id,
                -1,
                -1,
                0.0,
                entry.run,
                origin=log.origin_index(entry.chain[-1]),
            )
            log.reasons[entry.job.id] = f"handed back to {entry.chain[-1]}: its sites here closed"
            fed.send_back(ops, entry)
        ops.changed()
