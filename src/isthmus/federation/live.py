"""Peer managers over HTTP: the live implementation of the engine's `Federation` protocol.

A live manager with ``[[peers]]`` in its environment file talks to each peer by the protocol of
the Villegas dissertation (ch. 4, Table 4.1; messages in `isthmus.federation.protocol`, routes
in `isthmus.server.routers.peers`). The selection policies that forward jobs are the very objects
the simulator runs (`isthmus.federation.simulated`); only how messages travel differs.

Network I/O never runs inside a scheduling round: the engine's calls (`send`, `send_back`,
`notify`, `changed`) only record what to send; the records are written in the manager's next
database transaction (`write`) and the messages leave as asyncio tasks once it is committed
(`committed`), so a peer never learns more than this manager has stored. Every request has a
timeout; a slow or dead peer delays only its own task, never the round or the API.

Connections: each manager opens its side to each peer (openConn: role, heartbeat interval, job
description), then sends heartbeats; a peer not heard for `missed_heartbeats` intervals is down
(`PeerState.up` False: the ForwardJob kind refuses to send it jobs) and is opened again when it
answers. Each time a peer comes up its forwarded jobs are reconciled (queryJob; a submitJob
never answered is sent again: the receiver answers a repeated one with the same id), and its
resource data is pulled in full (requestResourceData); providers push theirs when it changed
by at least `push_threshold` (sendResourceData).

Persistence: `forwarded_jobs` holds each job sent from here (peer, the peer's id for it, chain,
last known state), `received_jobs` each job received (origin, origin id, sender). A restart
restores both (`restore`): forwarded jobs are not put back in a local queue (recovery skips
them) and received jobs keep their chain, so neither is lost nor run twice.
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import json
import logging
import time
from collections.abc import Callable, Coroutine
from typing import TYPE_CHECKING, Any

import httpx
from sqlalchemy import func, insert, select, update

from isthmus.engine.peering import PeerState, resource_data
from isthmus.engine.state import JobEntry
from isthmus.federation.links import (
    MIRROR,
    Forwarded,
    InvalidFieldError,
    PeerLink,
    Received,
    ReceivedIndex,
    grant,
    load_secret,
    peer_verify,
)
from isthmus.federation.protocol import (
    JOB_DESCRIPTION,
    PEER_HEADER,
    PEER_JOB_STATES,
    RETURNED,
    JobStatus,
    NotifyConn,
    NotifyJob,
    OpenConn,
    OpenConnReply,
    ResourceDataBody,
    SubmitJob,
    SubmitJobReply,
)
from isthmus.live.errors import PersistError, RequestError
from isthmus.model.peers import FederationSettings, PeerRole, ResourceData, differs
from isthmus.model.states import JobState
from isthmus.store import tables as db

if TYPE_CHECKING:
    from isthmus.engine.engine import Engine
    from isthmus.live.manager import Manager

log = logging.getLogger("isthmus.federation")

RECONCILE_EVERY = 10
"""Heartbeats between two reconciliations of the jobs forwarded to a peer that is up (catches a
notifyJob lost on the way)."""

NOTIFY_ATTEMPTS = 5
"""Tries of one notifyJob before the origin's reconciliation is left to catch it up."""

_UNKNOWN = JobStatus(id=0, state="unknown", where="", known=False)
"""A peer's answer that it holds no such job from this manager (its 404 to queryJob or cancelJob)."""


class LiveFederation:
    """The peers of a live manager (implements `isthmus.engine.peering.Federation`)."""

    def __init__(self, manager: Manager) -> None:
        self.m = manager
        env = manager.env
        self.name = env.name
        self.settings: FederationSettings = env.federation
        self.links: list[PeerLink] = []
        for i, p in enumerate(env.peers):
            hb = p.heartbeat if p.heartbeat is not None else self.settings.heartbeat
            self.links.append(PeerLink(p, PeerState(i, p.name, p.role, 0.0, up=False), load_secret(p), hb))
        self.by_name = {link.name: link for link in self.links}
        #: how peers are verified, by their CA file ("": the trusted CAs); one HTTP client each
        self._verify = {p.ca_file: peer_verify(p) for p in env.peers}
        self._peers = [link.state for link in self.links]
        #: open forwarded jobs by their id here
        self.forwarded: dict[int, Forwarded] = {}
        #: active received jobs by their local id, and found by what their sender names them
        self.received: dict[int, Received] = {}
        self.index = ReceivedIndex()
        self._notified: dict[int, str] = {}
        self._rows: list[tuple[str, Any, Any]] = []
        self._outbox: list[Callable[[], Coroutine[Any, Any, None]]] = []
        self._tasks: set[asyncio.Task[None]] = set()
        self._clients: dict[str, httpx.AsyncClient] = {}
        self.stopping = False
        #: queued jobs no local site can run, kept out of recovery until a provider is up
        self._readmit_rows: list[dict[str, Any]] = []

    # ------------------------------------------------------------------ Federation protocol

    @property
    def peers(self) -> list[PeerState]:
        """The peers by index (the `peer` of a ForwardJob)."""
        return self._peers

    @property
    def max_hops(self) -> int:
        """Managers a job may pass through before it must run where it is."""
        return self.settings.max_hops

    @property
    def may_forward(self) -> bool:
        """True when a selection policy may forward jobs to a provider peer."""
        return self.m.env.selection is not None and any(link.settings.role.provides for link in self.links)

    def send(self, engine: Engine, entry: JobEntry, peer: PeerState) -> None:
        """submitJob to `peer`, recorded now and sent once the record is committed."""
        job_id = entry.job.id
        intake = self.m.intake
        rec = Forwarded(
            job_id,
            peer.name,
            (*entry.chain, self.name),
            intake.specs[job_id],
            intake.users[job_id].split("@", 1)[0],
            entry.job.submit,
        )
        self.forwarded[job_id] = rec
        now = time.time()
        self._rows.append(
            (
                "insert",
                db.forwarded_jobs,
                {
                    "job_id": job_id,
                    "peer": peer.name,
                    "remote_id": None,
                    "chain": json.dumps(rec.chain),
                    "state": "sending",
                    "site": None,
                    "sent_at": now,
                    "updated_at": now,
                    "open": True,
                },
            )
        )
        detail = f"forwarded to peer {peer.name} (by {engine.deciding or 'selection'})"
        self._history(job_id, "forwarded", detail, entry.run)
        self._outbox.append(lambda: self._submit(rec))

    def send_back(self, engine: Engine, entry: JobEntry) -> None:
        """Hand a received job back to its sender unstarted (notifyJob "returned")."""
        rec = self.received.get(entry.job.id)
        if rec is None:
            return
        reason = engine.log.reasons.get(entry.job.id, "handed back")
        self._set_job(rec.local_id, {"state": JobState.REJECTED.value, "reason": reason, "end_time": time.time()})
        self._history(rec.local_id, JobState.REJECTED.value, reason, entry.run)
        self._queue_notify(rec, RETURNED, reason=reason)

    def notify(self, engine: Engine, entry: JobEntry, state: JobState) -> None:
        """A received job changed state here: notifyJob to its sender after the next commit."""
        rec = self.received.get(entry.job.id)
        if rec is None:
            return
        where = ""
        fwd = self.forwarded.get(rec.local_id)
        if fwd is not None:
            where = f"forwarded to {fwd.peer}"
        self._queue_notify(rec, state.value, where=where)

    def changed(self, engine: Engine) -> None:
        """A round ended: notifyJob for received jobs that started, sendResourceData to the
        peers that may forward here when the data changed by the threshold."""
        for local_id, rec in self.received.items():
            e = engine.entries.get(local_id)
            if e is not None and self._notified.get(local_id, JobState.QUEUED.value) != e.state.value:
                self._queue_notify(rec, e.state.value)
        consumers = [link for link in self.links if link.opened and link.state.role.consumes]
        if not consumers:
            return
        data = resource_data(engine)
        for link in consumers:
            if differs(link.sent, data, self.settings.push_threshold):
                link.sent = data
                self._spawn(self._push(link, data))

    # --------------------------------------------------------------- persistence hooks

    def pending(self) -> bool:
        """True when records or messages wait for the next transaction."""
        return bool(self._rows or self._outbox)

    def write(self, conn: Any) -> None:
        """Write the pending records in the manager's transaction `conn` (after job rows)."""
        for op, table, values in self._rows:
            if op == "insert":
                conn.execute(insert(table), values)
            else:
                key, changes = values
                col = table.c.job_id if table is db.forwarded_jobs else table.c.id
                conn.execute(update(table).where(col == key).values(**changes))

    def committed(self) -> None:
        """The records were committed: send the messages that depended on them."""
        self._rows = []
        outbox, self._outbox = self._outbox, []
        for make in outbox:
            self._spawn(make())

    def _history(self, job_id: int, state: str, detail: str, run: int = 0) -> None:
        values = {"job_id": job_id, "time": time.time(), "state": state[:16], "run": max(run, 0), "detail": detail}
        self._rows.append(("insert", db.job_history, values))

    def _set_job(self, job_id: int, changes: dict[str, Any]) -> None:
        self._rows.append(("update", db.jobs, (job_id, changes)))

    def _set_forwarded(self, job_id: int, changes: dict[str, Any]) -> None:
        self._rows.append(("update", db.forwarded_jobs, (job_id, {**changes, "updated_at": time.time()})))

    # ----------------------------------------------------------------------- lifecycle

    def held_elsewhere(self) -> set[int]:
        """Ids of the jobs recovery must not queue here: those forwarded and open, and (with a
        selection policy) those still queued that no local site can run - stored, not yet
        routed when the manager stopped: they are offered to the selection policy again once
        a provider's resource data has arrived (`_readmit`), not rejected at once."""
        F, R, J = db.forwarded_jobs, db.received_jobs, db.jobs  # noqa: N806
        with self.m.store.engine.connect() as conn:
            held = {int(r[0]) for r in conn.execute(select(F.c.job_id).where(F.c.open.is_(True)))}
            if self.may_forward:
                q = select(J.c.id, J.c.user, J.c.spec, J.c.submit_time, J.c.run, J.c.restarts).where(
                    J.c.state == JobState.QUEUED.value,
                    J.c.size > self.m.env.max_processors,
                    J.c.id.not_in(select(R.c.local_id)),
                    J.c.id.not_in(select(F.c.job_id).where(F.c.open.is_(True))),
                )
                self._readmit_rows = [dict(r._mapping) for r in conn.execute(q)]
                held.update(r["id"] for r in self._readmit_rows)
        return held

    def _readmit(self) -> None:
        """Offer the jobs `held_elsewhere` kept out of recovery to the selection policy (as
        new arrivals with their recorded submit times)."""
        rows, self._readmit_rows = self._readmit_rows, []
        if not rows or self.stopping:
            return
        m, intake = self.m, self.m.intake
        with contextlib.suppress(PersistError), m.ctx.external():
            for r in rows:
                spec = json.loads(r["spec"])
                intake.specs[r["id"]] = spec
                intake.users[r["id"]] = r["user"]
                job = intake.job_of(r["id"], r["user"], spec, r["submit_time"])
                m.engine.restore(job, run=r["run"], restarts=r["restarts"])
            m.engine.request_round(m.clock.now)

    def restore(self) -> None:
        """After the engine's recovery: the open forwarded jobs and the active received jobs
        as the database recorded them; then attach to the engine."""
        engine, intake = self.m.engine, self.m.intake
        F, R, J = db.forwarded_jobs, db.received_jobs, db.jobs  # noqa: N806
        with self.m.store.engine.connect() as conn:
            rows = conn.execute(
                select(F, J.c.spec, J.c.user, J.c.submit_time).join(J, J.c.id == F.c.job_id).where(F.c.open.is_(True))
            ).all()
            received = conn.execute(
                select(R).join(J, J.c.id == R.c.local_id).where(J.c.state.not_in(db.TERMINAL))
            ).all()
            newest = select(R.c.sender, R.c.origin, func.max(R.c.origin_id)).group_by(R.c.sender, R.c.origin)
            for sender, origin, top in conn.execute(newest):
                self.index.saw(sender, origin, int(top))
            chained = {
                int(r.local_id)
                for r in conn.execute(
                    select(R.c.local_id).join(F, F.c.job_id == R.c.local_id).where(F.c.open.is_(True))
                )
            }
        for r in received:
            got = Received(
                int(r.local_id), r.origin, int(r.origin_id), r.sender, int(r.sender_id), tuple(json.loads(r.chain))
            )
            self.received[got.local_id] = got
            self.index.add(got)
            entry = engine.entries.get(got.local_id)
            if entry is not None:
                entry.chain = got.chain
        for r in rows:
            spec = json.loads(r.spec)
            chain = tuple(json.loads(r.chain))
            rec = Forwarded(
                int(r.job_id),
                r.peer,
                chain,
                spec,
                str(r.user).split("@", 1)[0],
                float(r.submit_time),
                None if r.remote_id is None else int(r.remote_id),
                r.state,
                r.site or "",
            )
            self.forwarded[rec.job_id] = rec
            intake.specs[rec.job_id] = spec
            intake.users[rec.job_id] = r.user
            link = self.by_name.get(rec.peer)
            if rec.job_id not in chained and link is not None:
                job = intake.job_of(rec.job_id, r.user, spec, rec.submit)
                entry = JobEntry(job, rec.submit)
                engine.forwarded[rec.job_id] = (entry, link.state.index)
        engine.attach(self)

    async def start(self) -> None:
        """Open the connections (one task per peer: openConn, then heartbeats)."""
        self._clients = {
            ca: httpx.AsyncClient(timeout=self.settings.timeout, trust_env=False, verify=verify)
            for ca, verify in self._verify.items()
        }
        for link in self.links:
            self._spawn(self._link_loop(link))
        if self._readmit_rows:  # no provider came up in time: the policy decides without them
            beat = max((link.heartbeat for link in self.links), default=self.settings.heartbeat)
            grace = self.settings.missed_heartbeats * beat + 2 * self.settings.timeout
            asyncio.get_running_loop().call_later(grace, self._readmit)

    async def stop(self) -> None:
        """Tell the peers this end closes (notifyConn close), stop every task."""
        self.stopping = True
        clients = list(self._clients.values())
        if clients:
            body = NotifyConn(manager=self.name, kind="close", message="manager stopping").model_dump()
            await asyncio.gather(
                *(
                    self._call(link, "POST", "/peer/notify-conn", body, timeout=1.0)
                    for link in self.links
                    if link.opened
                ),
                return_exceptions=True,
            )
        for task in list(self._tasks):
            task.cancel()
        if self._tasks:
            await asyncio.gather(*self._tasks, return_exceptions=True)
        for client in clients:
            await client.aclose()

    def _spawn(self, coro: Coroutine[Any, Any, None]) -> None:
        if self.stopping:
            coro.close()
            return
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._done)

    def _done(self, task: asyncio.Task[None]) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.error("peer task failed", exc_info=task.exception())

    # ------------------------------------------------------------- outgoing messages

    async def _call(
        self, link: PeerLink, method: str, path: str, body: Any = None, timeout: float | None = None
    ) -> httpx.Response:
        """One request to `link`'s peer, authenticated; httpx.HTTPError when it cannot be made."""
        client = self._clients[link.settings.ca_file]
        headers = {"Authorization": f"Bearer {link.secret}", PEER_HEADER: self.name}
        t0 = time.perf_counter()
        r = await client.request(
            method,
            link.settings.address + path,
            json=body,
            headers=headers,
            timeout=timeout if timeout is not None else self.settings.timeout,
        )
        if r.status_code < 500:
            link.state.distance = (time.perf_counter() - t0) / 2
            self.heard(link)
        return r

    async def _link_loop(self, link: PeerLink) -> None:
        while not self.stopping:
            try:
                if not link.opened:
                    await self._open(link)
                else:
                    r = await self._call(link, "POST", "/peer/heartbeat", {"manager": self.name, "time": time.time()})
                    if r.status_code != 200:
                        link.error = f"heartbeat answered {r.status_code}: {_detail(r)}"
                        if r.status_code in (401, 403, 409):
                            link.opened = False  # it forgot us (restarted, reconfigured): open again
            except httpx.HTTPError as exc:
                link.error = f"{type(exc).__name__}: {exc}"[:300]
            except Exception as exc:  # a peer's answer must never end this loop
                log.exception("peer %s: unexpected error", link.name)
                link.error = f"{type(exc).__name__}: {exc}"[:300]
            self._judge(link)
            link.beats += 1
            if link.state.up and link.beats % RECONCILE_EVERY == 0:
                self._spawn(self._reconcile(link))
            await asyncio.sleep(link.heartbeat)

    async def _open(self, link: PeerLink) -> None:
        body = OpenConn(
            manager=self.name,
            role=MIRROR[link.settings.role].value,
            heartbeat=link.settings.heartbeat or self.settings.heartbeat,
            job_description=[JOB_DESCRIPTION],
        ).model_dump()
        r = await self._call(link, "POST", "/peer/open", body)
        if r.status_code != 200:
            link.error = f"openConn refused ({r.status_code}): {_detail(r)}"
            return
        try:
            reply = OpenConnReply.model_validate(r.json())
        except ValueError as exc:  # not JSON, or not an openConn answer (pydantic's is a ValueError)
            link.error = f"openConn: malformed answer: {str(exc).splitlines()[0][:200]}"
            note = NotifyConn(manager=self.name, kind="error", message=link.error)
            await self._call(link, "POST", "/peer/notify-conn", note.model_dump())
            return
        if reply.manager != link.name:
            link.error = f"openConn: {link.settings.address} answers as {reply.manager!r}, not {link.name!r}"
            return
        link.state.role = MIRROR[PeerRole(reply.role)]
        link.heartbeat = max(float(reply.heartbeat), link.settings.heartbeat or self.settings.heartbeat)
        link.opened = True
        link.error = ""
        link.sent = None  # a (re)opened peer gets our full data at the next push
        self.heard(link)

    def heard(self, link: PeerLink) -> None:
        """The peer answered or sent an authenticated message now."""
        link.last_heard = time.time()
        self._judge(link)

    def _judge(self, link: PeerLink) -> None:
        silent = time.time() - link.last_heard
        up = link.opened and silent <= self.settings.missed_heartbeats * link.heartbeat
        was = link.state.up
        link.state.up = up
        if up and not was:
            log.info("peer %s is up", link.name)
            self._spawn(self._reconcile(link))
        elif was and not up:
            quiet = f"not heard for {silent:.1f} s" if link.last_heard > 0 else "connection closed"
            log.warning("peer %s is down: %s (%s)", link.name, quiet, link.error or "no answer")
        if not up and link.opened and silent > self.settings.missed_heartbeats * link.heartbeat:
            link.opened = False  # open again (negotiate anew) once it answers

    async def _reconcile(self, link: PeerLink) -> None:
        """Pull the peer's resource data; resend unanswered submitJobs; queryJob the others."""
        if link.reconciling:
            return
        link.reconciling = True
        try:
            if link.state.role.provides:
                r = await self._call(link, "GET", "/peer/resources")
                if r.status_code == 200:
                    self._take_data(link, ResourceDataBody.model_validate(r.json()))
                    self._readmit()  # a provider's data is in: held jobs may be forwarded
            for rec in [f for f in self.forwarded.values() if f.peer == link.name]:
                if rec.remote_id is None:
                    if not rec.sending:
                        self._spawn(self._submit(rec))
                    continue
                r = await self._call(link, "POST", "/peer/jobs/query", {"sender_id": rec.job_id})
                if r.status_code == 404:
                    status = _UNKNOWN
                elif r.status_code == 200:
                    status = JobStatus.model_validate(r.json())
                else:
                    continue
                if self.forwarded.get(rec.job_id) is not rec:
                    continue
                if not status.known:
                    # the peer does not hold it: it never ran there (the peer stores a job before
                    # answering submitJob): reschedule it here
                    self._apply(link, rec, RETURNED, "", None, f"peer {link.name} no longer knows it")
                elif status.state != rec.state or status.where != rec.site:
                    self._apply(link, rec, status.state, status.where, status.exit_code, status.reason)
        except httpx.HTTPError as exc:
            link.error = f"reconciliation: {type(exc).__name__}: {exc}"[:300]
        except ValueError as exc:  # a malformed answer
            link.error = f"reconciliation: malformed answer: {str(exc).splitlines()[0][:200]}"
        finally:
            link.reconciling = False

    async def _submit(self, rec: Forwarded) -> None:
        """submitJob until the peer answers (a repeated one is answered with the same id)."""
        link = self.by_name.get(rec.peer)
        if link is None:
            return  # no longer configured: the job stays forwarded (docs/federation.md)
        _, origin_id = self._origin_of(rec)
        body = {
            "origin_id": origin_id,
            "sender_id": rec.job_id,
            "chain": list(rec.chain),
            "user": rec.user,
            "submit_time": rec.submit,
            "job": rec.spec,
        }
        rec.sending = True
        delay = 0.2
        try:
            while not self.stopping:
                try:
                    r = await self._call(link, "POST", "/peer/jobs", body)
                except httpx.HTTPError as exc:
                    link.error = f"submitJob: {type(exc).__name__}: {exc}"[:300]
                    await asyncio.sleep(delay)
                    delay = min(delay * 2, max(link.heartbeat, 1.0))
                    continue
                if r.status_code in (200, 201):
                    try:
                        remote = SubmitJobReply.model_validate(r.json()).id
                    except ValueError as exc:
                        link.error = f"submitJob: malformed answer: {str(exc).splitlines()[0][:200]}"
                        await asyncio.sleep(delay)
                        continue
                    if self.forwarded.get(rec.job_id) is not rec:
                        # cancelled here meanwhile: the peer must not run it
                        self._spawn(self._cancel_quietly(link, rec.job_id))
                        return
                    if rec.remote_id is None:
                        rec.remote_id = remote
                        if rec.state == "sending":
                            rec.state = JobState.QUEUED.value
                        with contextlib.suppress(PersistError), self.m.ctx.external():
                            self._set_forwarded(rec.job_id, {"remote_id": remote, "state": rec.state})
                    return
                if r.status_code >= 500 or r.status_code == 429:
                    await asyncio.sleep(delay)
                    delay = min(delay * 2, max(link.heartbeat, 1.0))
                    continue
                if self.forwarded.get(rec.job_id) is rec:
                    self._apply(link, rec, RETURNED, "", None, f"peer {link.name} refused it: {_detail(r)}")
                return
        finally:
            rec.sending = False

    async def _cancel_quietly(self, link: PeerLink, job_id: int) -> None:
        await self._cancel_remote(link, job_id)

    async def _cancel_remote(self, link: PeerLink, job_id: int) -> JobStatus | None:
        try:
            r = await self._call(link, "POST", "/peer/jobs/cancel", {"sender_id": job_id})
            if r.status_code == 404:
                return _UNKNOWN
            return JobStatus.model_validate(r.json()) if r.status_code == 200 else None
        except (httpx.HTTPError, ValueError):
            return None

    async def _push(self, link: PeerLink, data: ResourceData) -> None:
        try:
            await self._call(link, "POST", "/peer/resources", data.to_dict())
        except httpx.HTTPError as exc:
            link.error = f"sendResourceData: {type(exc).__name__}: {exc}"[:300]
            link.sent = None  # push in full again next round

    def _queue_notify(self, rec: Received, state: str, *, where: str = "", reason: str = "") -> None:
        self._notified[rec.local_id] = state
        if state == RETURNED or JobState(state).terminal:
            self.received.pop(rec.local_id, None)
            self.index.remove(rec)
            self._notified.pop(rec.local_id, None)
        self._outbox.append(lambda: self._notify(rec, state, where, reason))

    async def _notify(self, rec: Received, state: str, where: str, reason: str) -> None:
        """notifyJob to the sender (the job's state read from the committed row)."""
        link = self.by_name.get(rec.sender)
        if link is None:
            return
        row = self.m.store.job(rec.local_id) or {}
        site = row.get("site")
        sites = self.m.env.sites
        if not where and site is not None and 0 <= site < len(sites):
            where = f"{self.name}/{sites[site].name}"
        body = NotifyJob(
            job_id=rec.sender_id,
            remote_id=rec.local_id,
            origin=rec.origin,
            origin_id=rec.origin_id,
            state=state,
            where=where or self.name,
            exit_code=row.get("exit_code") if state != RETURNED else None,
            time=time.time(),
            reason=(reason or row.get("reason") or "")[:2000],
        ).model_dump()
        delay = 0.2
        for _ in range(NOTIFY_ATTEMPTS):
            try:
                r = await self._call(link, "POST", "/peer/jobs/notify", body)
                if r.status_code < 500:
                    return
            except httpx.HTTPError as exc:
                link.error = f"notifyJob: {type(exc).__name__}: {exc}"[:300]
            await asyncio.sleep(delay)
            delay *= 2

    # ------------------------------------------------------------- incoming messages

    def authenticate(self, name: str | None, authorization: str | None) -> PeerLink:
        """The peer a request comes from, checked against the secret shared with it."""
        if not name:
            raise RequestError(401, f"missing {PEER_HEADER} header naming the peer manager")
        scheme, _, token = (authorization or "").partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            raise RequestError(401, "missing or malformed Authorization header: expected 'Bearer <peer secret>'")
        link = self.by_name.get(name)
        secret = link.secret if link is not None else ""
        # compared even for an unknown name, so timing does not tell names apart
        ok = hmac.compare_digest(token.strip().encode(), (secret or "\x00" * 32).encode())
        if link is None or not ok:
            raise RequestError(401, "unknown peer or wrong secret")
        self.heard(link)
        return link

    def on_open(self, link: PeerLink, body: OpenConn) -> OpenConnReply:
        """openConn from `link`'s peer: grant a role, agree a heartbeat and a job description."""
        if body.manager != link.name:
            raise InvalidFieldError(
                ("body", "manager"), f"the body names manager {body.manager!r}, the request comes from {link.name!r}"
            )
        if JOB_DESCRIPTION not in body.job_description:
            raise RequestError(
                409,
                f"no common job description: this manager speaks {JOB_DESCRIPTION}, the peer offers "
                f"{', '.join(body.job_description)}",
            )
        allowed = link.settings.role
        granted = grant(PeerRole(body.role), allowed)
        if granted is None:
            raise RequestError(
                409, f"role {body.role} refused: this manager is configured with {link.name} as {allowed.value}"
            )
        link.state.role = granted
        beat = max(float(body.heartbeat), link.settings.heartbeat or self.settings.heartbeat)
        self._spawn(self._reconcile(link))  # it may have restarted: our jobs there are checked
        return OpenConnReply(manager=self.name, role=granted.value, heartbeat=beat, job_description=JOB_DESCRIPTION)

    def on_notify_conn(self, link: PeerLink, body: NotifyConn) -> None:
        """notifyConn: an error or the graceful end of the connection: the peer is down."""
        link.error = f"{body.kind}: {body.message}"[:300]
        link.opened = False
        link.last_heard = -1.0
        self._judge(link)

    def resources(self) -> dict[str, Any]:
        """requestResourceData: this manager's resource data now, in full."""
        return resource_data(self.m.engine).to_dict()

    def on_push(self, link: PeerLink, body: ResourceDataBody) -> None:
        """sendResourceData from a provider."""
        if body.manager != link.name:
            raise InvalidFieldError(("body", "manager"), f"resource data of {body.manager!r} sent by {link.name!r}")
        if not link.settings.role.provides:
            raise RequestError(403, f"{link.name} is configured as a consumer of this manager: it provides nothing")
        self._take_data(link, body)

    def _take_data(self, link: PeerLink, body: ResourceDataBody) -> None:
        data = body.to_data()
        if link.state.data is None or link.state.data.time <= data.time:
            link.state.data = data
            link.state.heard_at = self.m.clock.now
            self.m.clock.wake()

    async def on_submit(self, link: PeerLink, body: SubmitJob, spec: dict[str, Any]) -> int:
        """submitJob: store the job (`spec`: its validated submit request), answer its local id
        (the same one for a repeated request)."""
        chain = tuple(body.chain)
        if chain[-1] != link.name:
            raise InvalidFieldError(
                ("body", "chain"), f"the chain must end with the sender {link.name!r}, got {' > '.join(chain)}"
            )
        if self.name in chain:
            raise RequestError(409, f"forwarding loop: the job already visited {self.name} ({' > '.join(chain)})")
        if len(chain) > self.max_hops:
            hops = self.max_hops
            raise RequestError(409, f"the job visited {len(chain)} managers; this manager accepts at most {hops}")
        if not link.state.role.consumes:
            raise RequestError(403, f"{link.name} may not forward jobs here (it is configured as a provider only)")
        known = self._received_id(link.name, chain[0], body.origin_id)
        if known is not None:
            return known
        size = int(spec["size"])
        if size > self.m.env.max_processors and not (self.may_forward and len(chain) < self.max_hops):
            raise RequestError(
                409, f"no site here can run {size} processors (the largest offers {self.m.env.max_processors})"
            )
        user = f"{body.user}@{chain[0]}"[:64]

        def register(local_id: int) -> None:
            rec = Received(local_id, chain[0], body.origin_id, link.name, body.sender_id, chain)
            self.received[local_id] = rec
            self.index.add(rec)
            self._rows.append(
                (
                    "insert",
                    db.received_jobs,
                    {
                        "local_id": local_id,
                        "origin": chain[0],
                        "origin_id": body.origin_id,
                        "sender": link.name,
                        "sender_id": body.sender_id,
                        "chain": json.dumps(chain),
                        "received_at": time.time(),
                    },
                )
            )

        local = self.m.intake.receive(user, spec, chain, register)
        await self.m.committed()
        return local

    def _received_id(self, sender: str, origin: str, origin_id: int) -> int | None:
        """The local id of the job `sender` already delivered for `origin`'s job `origin_id`
        (another sender's job with the same origin and id is not it)."""
        local = self.index.by_origin(sender, origin, origin_id)
        if local is not None:
            return local
        if not self.index.maybe_seen(sender, origin, origin_id):
            return None  # never received: no need to ask the database
        R = db.received_jobs  # noqa: N806
        with self.m.store.engine.connect() as conn:
            found = conn.execute(
                select(R.c.local_id).where(R.c.sender == sender, R.c.origin == origin, R.c.origin_id == origin_id)
            ).scalar()
        return None if found is None else int(found)

    def _local_of(self, link: PeerLink, sender_id: int) -> int:
        """The local id of the job `link`'s peer sent as its job `sender_id`; 404 when it sent
        none so (the same answer whether or not another peer's job has that id here)."""
        local = self.index.by_sender(link.name, sender_id)
        if local is not None:
            return local
        R = db.received_jobs  # noqa: N806
        with self.m.store.engine.connect() as conn:
            found = conn.execute(
                select(R.c.local_id)
                .where(R.c.sender == link.name, R.c.sender_id == sender_id)
                .order_by(R.c.local_id.desc())
            ).scalar()
        if found is None:
            raise RequestError(404, f"{link.name} sent no job {sender_id} here")
        return int(found)

    def on_notify_job(self, link: PeerLink, body: NotifyJob) -> None:
        """notifyJob: the state of a job this manager forwarded to `link`'s peer (404 for any
        other job, also one forwarded to another peer, and when the origin named is not the job's)."""
        rec = self.forwarded.get(body.job_id)
        if rec is None or rec.peer != link.name or (body.origin, body.origin_id) != self._origin_of(rec):
            raise RequestError(404, f"no job {body.job_id} forwarded from here to {link.name} is open")
        if rec.remote_id is not None and rec.remote_id != body.remote_id:
            raise RequestError(409, f"job {body.job_id} is job {rec.remote_id} at {link.name}, not {body.remote_id}")
        if rec.remote_id is None:
            rec.remote_id = body.remote_id
            self._set_forwarded(rec.job_id, {"remote_id": body.remote_id})
        self._apply(link, rec, body.state, body.where, body.exit_code, body.reason)

    def _origin_of(self, rec: Forwarded) -> tuple[str, int]:
        """The origin of a forwarded job and its id there (what its submitJob said)."""
        if len(rec.chain) > 1:
            got = self.received.get(rec.job_id)
            return rec.chain[0], got.origin_id if got is not None else rec.job_id
        return rec.chain[0], rec.job_id

    def _apply(
        self, link: PeerLink, rec: Forwarded, state: str, where: str, exit_code: int | None, reason: str
    ) -> None:
        """What the peer says of a job forwarded there: the job's state here follows it."""
        m, engine = self.m, self.m.engine
        job_id = rec.job_id
        if state not in PEER_JOB_STATES:
            log.warning("peer %s reports job %s in state %r, not one of isthmus's: ignored", link.name, job_id, state)
            return
        with contextlib.suppress(PersistError), m.ctx.external():
            relay = self.received.get(job_id)  # a job passing through here: tell its sender too
            if state == RETURNED:
                del self.forwarded[job_id]
                self._set_forwarded(job_id, {"state": RETURNED, "open": False})
                self._history(job_id, RETURNED, f"handed back by {link.name}: {reason}")
                if not engine.returned(job_id, link.name) and relay is not None:
                    self._set_job(job_id, {"state": JobState.REJECTED.value, "reason": reason, "end_time": time.time()})
                    self._queue_notify(relay, RETURNED, reason=reason)
            elif JobState(state).terminal:
                del self.forwarded[job_id]
                self._set_forwarded(job_id, {"state": state, "site": where, "open": False})
                engine.remote_ended(job_id, JobState(state))
                changes: dict[str, Any] = {"state": state, "end_time": time.time(), "exit_code": exit_code}
                if reason:
                    changes["reason"] = reason
                self._set_job(job_id, changes)
                self._history(job_id, state, f"at {where}" + (f": {reason}" if reason else ""))
                if relay is not None:
                    self._queue_notify(relay, state, where=where, reason=reason)
                m.intake.forget(job_id)
            else:
                rec.state, rec.site = state, where
                self._set_forwarded(job_id, {"state": state, "site": where})
                changes = {"state": state}
                if state == JobState.RUNNING.value:
                    changes["start_time"] = time.time()
                self._set_job(job_id, changes)
                self._history(job_id, state, f"at {where}")
                if relay is not None:
                    self._queue_notify(relay, state, where=where)

    async def on_query(self, link: PeerLink, sender_id: int) -> JobStatus:
        """queryJob: the job's state here, or where it went (following the chain)."""
        local = self._local_of(link, sender_id)
        fwd = self.forwarded.get(local)
        nxt = self.by_name.get(fwd.peer) if fwd is not None else None
        if fwd is not None and fwd.remote_id is not None and nxt is not None:
            try:
                r = await self._call(nxt, "POST", "/peer/jobs/query", {"sender_id": local})
                if r.status_code == 200:
                    status = JobStatus.model_validate(r.json())
                    if status.known:
                        return status.model_copy(update={"id": local})
            except (httpx.HTTPError, ValueError):
                pass  # what this manager last heard of it, below
        if fwd is not None:  # forwarded on: what this manager last heard of it
            return JobStatus(id=local, state=fwd.state, where=fwd.site or f"forwarded to {fwd.peer}")
        return self._status_here(local)

    def _status_here(self, local: int) -> JobStatus:
        row = self.m.store.job(local)
        if row is None:
            return JobStatus(id=local, state="unknown", where="", known=False)
        entry = self.m.engine.entries.get(local)
        state = entry.state.value if entry is not None and row["state"] not in db.TERMINAL else row["state"]
        site = row["site"]
        sites = self.m.env.sites
        where = f"{self.name}/{sites[site].name}" if site is not None and 0 <= site < len(sites) else self.name
        reason = (row["reason"] or "")[:2000]
        return JobStatus(id=local, state=state, where=where, exit_code=row["exit_code"], reason=reason)

    async def on_cancel(self, link: PeerLink, sender_id: int) -> JobStatus:
        """cancelJob: cancel the job here, or where it went (following the chain)."""
        local = self._local_of(link, sender_id)
        fwd = self.forwarded.get(local)
        if fwd is not None:
            nxt = self.by_name.get(fwd.peer)
            status = await self._cancel_remote(nxt, local) if nxt is not None else None
            if status is None or nxt is None:
                raise RequestError(503, f"peer {fwd.peer} holding the job cannot be reached: cancel again later")
            if self.forwarded.get(local) is fwd and (not status.known or status.state in db.TERMINAL):
                self._apply(
                    nxt,
                    fwd,
                    status.state if status.known else JobState.CANCELLED.value,
                    status.where,
                    status.exit_code,
                    status.reason,
                )
            return status.model_copy(update={"id": local})
        if local in self.m.engine.entries:
            self.m.cancel(local)
        return self._status_here(local)

    # --------------------------------------------------------------- users' view

    def holds(self, job_id: int) -> bool:
        """True when job `job_id` was forwarded from here and has not ended."""
        return job_id in self.forwarded

    async def refresh(self, job_id: int) -> None:
        """queryJob for a job forwarded from here (its user looks at it): its state here follows
        the peer's answer. Nothing when the peer does not answer within a second."""
        rec = self.forwarded.get(job_id)
        link = self.by_name.get(rec.peer) if rec is not None else None
        if rec is None or rec.remote_id is None or link is None:
            return
        try:
            r = await self._call(link, "POST", "/peer/jobs/query", {"sender_id": job_id}, timeout=1.0)
        except httpx.HTTPError:
            return
        if r.status_code != 200 or self.forwarded.get(job_id) is not rec:
            return
        try:
            status = JobStatus.model_validate(r.json())
        except ValueError:
            return
        if status.known and (status.state != rec.state or status.where != rec.site):
            self._apply(link, rec, status.state, status.where, status.exit_code, status.reason)

    async def cancel_forwarded(self, job_id: int) -> str:
        """Cancel a job forwarded from here at the peer holding it; its state after."""
        rec = self.forwarded[job_id]
        link = self.by_name.get(rec.peer)
        if link is None:
            raise RequestError(
                409, f"job {job_id} was forwarded to {rec.peer}, which is no longer a peer: cancel it there"
            )
        status = await self._cancel_remote(link, job_id)
        if status is None:
            raise RequestError(503, f"peer {rec.peer} holding job {job_id} cannot be reached: cancel again later")
        if self.forwarded.get(job_id) is rec:
            if not status.known:
                # not arrived there yet: ended here; a submitJob answered later is cancelled there
                self._apply(link, rec, JobState.CANCELLED.value, rec.peer, None, "cancelled before it reached the peer")
            elif status.state in db.TERMINAL:
                self._apply(link, rec, status.state, status.where, status.exit_code, status.reason)
        return status.state if status.known else JobState.CANCELLED.value

    def forwarded_info(self, job_id: int) -> dict[str, Any] | None:
        """Where a job forwarded from here went (from the database: also once it ended)."""
        F = db.forwarded_jobs  # noqa: N806
        with self.m.store.engine.connect() as conn:
            row = conn.execute(select(F).where(F.c.job_id == job_id).order_by(F.c.sent_at.desc())).first()
        if row is None:
            return None
        return {
            "peer": row.peer,
            "remote_id": row.remote_id,
            "state": row.state,
            "where": row.site,
            "chain": json.loads(row.chain),
            "open": bool(row.open),
        }

    def received_info(self, job_id: int) -> dict[str, Any] | None:
        """Where a job received here came from."""
        R = db.received_jobs  # noqa: N806
        with self.m.store.engine.connect() as conn:
            row = conn.execute(select(R).where(R.c.local_id == job_id)).first()
        if row is None:
            return None
        return {"origin": row.origin, "origin_id": row.origin_id, "sender": row.sender, "chain": json.loads(row.chain)}

    def describe(self) -> list[dict[str, Any]]:
        """Every peer as `GET /peers` shows it (never its secret)."""
        out = []
        for link in self.links:
            data = link.state.data
            out.append(
                {
                    "name": link.name,
                    "address": link.settings.address,
                    "role": link.state.role.value,
                    "configured_role": link.settings.role.value,
                    "up": link.state.up,
                    "last_heard": link.last_heard if link.last_heard > 0 else None,
                    "heartbeat": link.heartbeat,
                    "distance": link.state.distance,
                    "error": link.error,
                    "forwarded_open": sum(1 for f in self.forwarded.values() if f.peer == link.name),
                    "received_active": sum(1 for r in self.received.values() if r.sender == link.name),
                    "resources": data.to_dict() if data is not None else None,
                }
            )
        return out


def _detail(r: httpx.Response) -> str:
    try:
        body = r.json()
    except ValueError:
        return r.text[:300]
    detail = body.get("detail") if isinstance(body, dict) else body
    return (detail if isinstance(detail, str) else json.dumps(detail))[:300]
