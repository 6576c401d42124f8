"""The live manager: the engine driven by the wall clock, with pilots, persistence and recovery.

Real-time driving follows SimPy's RealtimeEnvironment: the same (time, priority, seq) heap as
the simulation, but the driver sleeps until the wall-clock time of the next event or until an
external event (a submission, a pilot report) wakes it. Everything - API handlers, the
driver, pilot messages - runs on one asyncio event loop thread, so the engine needs no locks.

Before a decision can reach a pilot, its effect is in the database: every engine step ends
with `_persist()`, which turns the new rows of the engine's event log into job, history, VM
and event rows in one transaction, and pilots receive commands only when the loop next runs a
poll handler, after that commit. After a crash the database therefore never says less than
what pilots were told, which is what recovery (`_recover`) relies on.
"""

from __future__ import annotations

import asyncio
import heapq
import json
import logging
import math
import os
import secrets
import signal
import socket
import subprocess
import time
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sqlalchemy import delete, insert, select, update

from isthmus.agent.fresh import remove_pools
from isthmus.backends.local import (
    LocalCloud,
    LocalCluster,
    Slot,
    cluster_node_key,
    kill_group,
    pid_is_pilot,
    spawn_pilot,
    vm_node_key,
)
from isthmus.engine.backend import CloudBackend, SiteBackend, Vm, VmState
from isthmus.engine.clock import EV_VM_GONE, EV_VM_READY, EV_WAKE, SimClock
from isthmus.engine.engine import Engine
from isthmus.engine.policies import build_policies
from isthmus.engine.state import JobEntry, JobState
from isthmus.model.decisions import StartJob
from isthmus.model.environment import Environment
from isthmus.model.events import EventKind, KillCause
from isthmus.model.job import Job, PriorityClass, VmRequirements
from isthmus.server import store as db
from isthmus.server.auth import hash_token, new_token

log = logging.getLogger("isthmus.live")

_KILL_NAMES = {int(c): c.name.lower() for c in KillCause}
DEFAULT_ESTIMATE = 3600.0
"""Runtime assumed for a job submitted without a requested runtime (for backfilling and predictions)."""
RESEND_AFTER = 2.0
"""Seconds a command handed out in a report answer may stay unacknowledged before the long poll repeats it."""


class RequestError(Exception):
    """A request the manager refuses; `status` is the HTTP status to answer with."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


@dataclass
class ManagerConfig:
    """How a manager runs. Times in seconds."""

    env: Environment
    db_url: str
    state_dir: Path
    host: str = "127.0.0.1"
    port: int = 8750
    poll_wait: float = 10.0
    pilot_timeout: float = 30.0  # pilots exit when the manager is unreachable this long
    heartbeat_timeout: float = 20.0  # a silent pilot is lost after this long
    reattach_timeout: float = 15.0  # after a restart, how long pilots have to re-register
    spawn_timeout: float = 30.0  # a started pilot must register within this
    round_interval: float | str | None = "env"  # "env": the environment's
    default_estimate: float = DEFAULT_ESTIMATE
    stop_pilots_on_exit: bool = True
    tag: str | None = None  # copied to ISTHMUS_TAG in pilots and jobs (lets tests find leftovers)
    max_body_bytes: int = 8 * 1024 * 1024  # larger request bodies get 413 (a 10,000-job batch fits)
    max_batch_jobs: int = 10_000  # larger POST /jobs/batch get 413

    @property
    def url(self) -> str:
        """The URL pilots use to reach the manager."""
        return f"http://{self.host}:{self.port}"


@dataclass
class Assignment:
    """Where the current run of a job is: its slots, launched by the pilot of the first slot."""

    job: int
    run: int
    site: int
    slots: list[Slot]
    delivered: bool = False

    @property
    def launcher(self) -> str:
        """Node key of the pilot that runs the command."""
        return self.slots[0][0]


@dataclass
class Node:
    """One pilot position: a cluster node or a cloud VM; at most one pilot process serves it."""

    key: str
    site: int
    slots: int
    vm: int | None = None
    state: str = "down"  # down | spawned | awaiting | registered | exiting
    pilot_id: str | None = None
    pid: int | None = None
    proc: subprocess.Popen[bytes] | None = None
    deadline: float = math.inf
    last_seen: float = 0.0
    seq: int = 0
    outbox: list[tuple[int, dict[str, Any]]] = field(default_factory=list)
    waiter: asyncio.Event | None = None
    host: str = ""
    # highest command sequence number handed out in a report answer, and when: the long poll
    # does not repeat those commands unless they stay unacknowledged for RESEND_AFTER seconds
    sent: int = 0
    sent_at: float = 0.0

    def send(self, cmd: dict[str, Any]) -> int:
        """Queue a command for the pilot; returns its sequence number."""
        self.seq += 1
        self.outbox.append((self.seq, cmd))
        if self.waiter is not None:
            self.waiter.set()
        return self.seq


class Manager:
    """Engine + wall clock + pilots + database. Create, then `await start()`, then `await stop()`."""

    def __init__(self, config: ManagerConfig) -> None:
        self.config = config
        self.env = config.env
        self.store = db.Store(config.db_url)
        self.state_dir = Path(config.state_dir)
        self.spool = self.state_dir / "spool"
        self.clock = SimClock(time.time())
        self.nodes: dict[str, Node] = {}
        self.assign: dict[int, Assignment] = {}
        self.specs: dict[int, dict[str, Any]] = {}
        self.users: dict[int, str] = {}
        self._started: deque[tuple[int, int, int, list[Slot], float | None]] = deque()
        self._ended: dict[tuple[int, int], dict[str, Any]] = {}
        self._persisted = 0
        self._next_job_id = 1
        #: Bumped whenever pilot tokens are deleted; the API's token cache is valid per generation.
        self.token_generation = 0
        self._new_jobs: list[dict[str, Any]] = []  # job rows submitted, not yet written
        self._new_history: list[dict[str, Any]] = []
        self._commit_future: asyncio.Future[None] | None = None
        self._lost_reasons: dict[tuple[int, int], str] = {}
        self._recovering = False
        self._wake: asyncio.Event | None = None
        self._driver_task: asyncio.Task[None] | None = None
        self._stopping = False
        self._incarnation = secrets.token_hex(3)
        self._pilot_counter = 0
        self._timers: list[asyncio.TimerHandle] = []
        self._last_housekeeping = 0.0
        self.admin_token: str | None = None
        self.engine = self._build_engine()

    # ------------------------------------------------------------------------ construction

    def _build_engine(self) -> Engine:
        env = self.env
        policies = build_policies(env.allocation, env.provisioning)
        backends: list[SiteBackend] = []
        for i, site in enumerate(env.sites):
            if site.is_cloud:
                backends.append(LocalCloud(i, site, self))
            else:
                backends.append(LocalCluster(i, site, self))
                for n in range(site.nodes):
                    key = cluster_node_key(i, n)
                    self.nodes[key] = Node(key, i, site.cores_per_node)
        interval = env.round_interval if self.config.round_interval == "env" else self.config.round_interval
        assert interval is None or isinstance(interval, (int, float))
        return Engine(
            env,
            policies.allocation,
            policies.provisioning,
            policies.predictor,
            backends,
            self.clock.at,
            round_interval=float(interval) if interval else None,
        )

    # --------------------------------------------------------------------------- lifecycle

    async def start(self) -> None:
        """Open the database, recover the previous state, start pilots and the driver."""
        self.state_dir.mkdir(parents=True, exist_ok=True)
        self.spool.mkdir(parents=True, exist_ok=True)
        self.store.create()
        self._next_job_id = self.store.max_job_id() + 1
        self._first_start()
        self._wake = asyncio.Event()
        self._recover()
        self._driver_task = asyncio.create_task(self._driver(), name="isthmus-driver")

    def begin_shutdown(self) -> None:
        """Graceful stop requested (signal): stop scheduling and, if configured, tell pilots to exit now."""
        self._stopping = True
        self._wake_up()
        if self.config.stop_pilots_on_exit:
            for node in self.nodes.values():
                if node.state in ("registered", "awaiting", "spawned"):
                    node.send({"op": "exit", "reason": "manager shutting down"})

    async def stop(self) -> None:
        """Stop the driver; unless configured otherwise, tell pilots to exit and kill them."""
        self._stopping = True
        for t in self._timers:
            t.cancel()
        if self._driver_task is not None:
            self._wake_up()
            self._driver_task.cancel()
            try:  # noqa: SIM105
                await self._driver_task
            except (asyncio.CancelledError, Exception):
                pass
        if self.config.stop_pilots_on_exit:
            self.begin_shutdown()
            await asyncio.sleep(0.3)
            deadline = time.time() + 3.0
            for node in self.nodes.values():
                if node.pid is None or not _still_pilot(node.pid, node.proc):
                    continue
                kill_group(node.pid, signal.SIGTERM)
            while time.time() < deadline and any(n.pid is not None and _alive(n) for n in self.nodes.values()):
                await asyncio.sleep(0.05)
            for node in self.nodes.values():
                if node.pid is not None:
                    if _still_pilot(node.pid, node.proc):
                        kill_group(node.pid, signal.SIGKILL)
                    if node.proc is not None:
                        try:  # noqa: SIM105
                            node.proc.wait(timeout=2)
                        except subprocess.TimeoutExpired:
                            pass
                    self._set_pilot_row(node, "exited")
        self.store.close()

    def _first_start(self) -> None:
        token_file = self.state_dir / "admin.token"
        with self.store.begin() as conn:
            has_users = conn.execute(select(db.users.c.name).limit(1)).first() is not None
            if not has_users:
                token = new_token()
                self.store.ensure_user(conn, "admin", admin=True)
                self.store.add_token(conn, hash_token(token), user="admin", kind="user")
                fd = os.open(token_file, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
                with os.fdopen(fd, "w") as f:
                    f.write(token + "\n")
                os.chmod(token_file, 0o600)
                self.admin_token = token
            self.store.set_meta(conn, "environment", self.env.name)
            self.store.set_meta(conn, "sites", json.dumps([s.name for s in self.env.sites]))

    # -------------------------------------------------------------------------- the driver

    def _wake_up(self) -> None:
        if self._wake is not None:
            self._wake.set()

    def advance(self) -> None:
        """Handle every clock event due by now (at its own time), then bring `now` to the wall clock."""
        heap = self.clock.heap
        engine = self.engine
        while heap and heap[0][0] <= time.time():
            t, _prio, _seq, kind, a, b = heapq.heappop(heap)
            self.clock.now = engine.now = t
            engine.handle(kind, a, b)
        w = time.time()
        if w > engine.now:
            self.clock.now = engine.now = w

    async def _driver(self) -> None:
        assert self._wake is not None
        while not self._stopping:
            try:
                self.advance()
                self._persist()
                self._housekeeping()
            except Exception:  # keep the manager alive; the failure is logged
                log.exception("driver step failed")
            nxt = self.clock.next_time()
            delay = min(nxt - time.time(), 0.5)
            self._wake.clear()
            if delay > 0:
                try:  # noqa: SIM105
                    await asyncio.wait_for(self._wake.wait(), delay)
                except TimeoutError:
                    pass
            else:
                await asyncio.sleep(0)

    def _external(self) -> None:
        """Before an external event: handle due events, set now to the wall clock."""
        self.advance()

    def _after(self) -> None:
        """After an external event: run what became due (with event-triggered rounds, the round it
        asked for), persist it all in one transaction and wake the driver for the rest."""
        self.advance()
        self._persist()
        self._wake_up()

    # ------------------------------------------------------------------------ submissions

    def submit(self, user: str, spec: dict[str, Any]) -> int:
        """Submit a validated job request for `user`; returns the job id.

        The job is in the engine at once; its rows are written by the next persist (await
        `committed()` before acknowledging it).
        """
        size = int(spec["size"])
        self.check_size(size)
        self._external()
        now = self.engine.now
        name = spec.get("name") or Path(spec["command"]).name
        job_id = self._next_job_id  # ids are allocated here (one writer): one INSERT, no UPDATE
        self._next_job_id += 1
        self._new_jobs.append(
            {
                "id": job_id,
                "user": user,
                "name": name[:128],
                "spec": json.dumps(spec),
                "size": size,
                "priority": spec.get("priority", "high"),
                "requested_runtime": spec.get("requested_runtime"),
                "state": "queued",
                "stage": 0,
                "run": 0,
                "restarts": 0,
                "submit_time": now,
                "spool": str(self.spool / str(job_id)),
            }
        )
        self._new_history.append({"job_id": job_id, "time": now, "state": "queued", "run": 0, "detail": "submitted"})
        self.specs[job_id] = spec
        self.users[job_id] = user
        self.engine.submit(self._job(job_id, user, spec, now))
        self._wake_up()
        return job_id

    async def committed(self) -> None:
        """Wait until every job submitted so far is in the database (group commit).

        `submit` only queues a job's rows; the first caller of `committed` in an event-loop turn
        schedules one transaction for everything pending, and every caller waits for it. So N
        concurrent submissions cost one commit, and a submission is acknowledged only once it is
        stored. Any earlier persist (a driver step, a pilot report) writes pending rows too.
        """
        if not self._new_jobs and len(self.engine.log) == self._persisted:
            return
        fut = self._commit_future
        if fut is None:
            loop = asyncio.get_running_loop()
            fut = self._commit_future = loop.create_future()
            loop.call_soon(self._group_commit)
        await asyncio.shield(fut)

    def _group_commit(self) -> None:
        try:
            self._persist()
        except Exception:
            log.exception("group commit failed")
            self._resolve_commit(RuntimeError("the submission could not be stored"))

    def _resolve_commit(self, exc: BaseException | None = None) -> None:
        fut, self._commit_future = self._commit_future, None
        if fut is not None and not fut.done():
            if exc is None:
                fut.set_result(None)
            else:
                fut.set_exception(exc)

    def check_size(self, size: int) -> None:
        """RequestError (400) when no site can ever offer `size` processors."""
        env = self.env
        if size > env.max_processors:
            largest = max(env.sites, key=lambda s: s.max_processors)
            raise RequestError(
                400,
                f"size {size} is larger than any site can offer: the largest ({largest.name}) has "
                f"{largest.max_processors} processors",
            )

    def _job(self, job_id: int, user: str, spec: dict[str, Any], submit: float) -> Job:
        req = spec.get("requested_runtime")
        vm = spec.get("vm")
        return Job(
            id=job_id,
            submit=submit,
            size=int(spec["size"]),
            runtime=float(req) if req is not None else self.config.default_estimate,
            requested_runtime=float(req) if req is not None else None,
            user=user,
            priority=PriorityClass.parse(spec.get("priority", "high")),
            vm=VmRequirements(**vm) if vm else None,
        )

    def cancel(self, job_id: int) -> bool:
        """Cancel a queued or running job; False when it already ended."""
        self._external()
        ok = self.engine.cancel(job_id)
        self._after()
        return ok

    def why(self, job_id: int) -> str | None:
        """The engine's explanation for an active job, None for a job it no longer holds."""
        if job_id not in self.engine.entries:
            return None
        return self.engine.why(job_id)

    # ------------------------------------------------------------------ backend callbacks

    def launch(self, entry: JobEntry, site: int, slots: Sequence[Slot]) -> None:
        """PilotHub: send a run to the pilot of its first slot (after the step's commit)."""
        job_id = entry.job.id
        a = Assignment(job_id, entry.run, site, [tuple(s) for s in slots])  # type: ignore[misc]
        self.assign[job_id] = a
        self._started.append((job_id, entry.run, site, a.slots, entry.limit))
        if self._recovering:
            a.delivered = True
            return
        node = self.nodes.get(a.launcher)
        if node is None:
            log.error("job %s: no node %s", job_id, a.launcher)
            return
        node.send(self._start_command(a))

    def _start_command(self, a: Assignment) -> dict[str, Any]:
        spec = self.specs.get(a.job, {})
        spool = self.spool / str(a.job)
        hosts = [f"{key.replace('/', '-')}" for key, _ in a.slots]
        env = {str(k): str(v) for k, v in (spec.get("env") or {}).items()}
        env.update(
            {
                "ISTHMUS_JOB_ID": str(a.job),
                "ISTHMUS_RUN": str(a.run),
                "ISTHMUS_NPROCS": str(len(a.slots)),
                "ISTHMUS_SLOTS": ",".join(f"{k}:{c}" for k, c in a.slots),
                "ISTHMUS_HOSTS": ",".join(hosts),
                "ISTHMUS_SITE": self.env.sites[a.site].name,
            }
        )
        if self.config.tag:
            env["ISTHMUS_TAG"] = self.config.tag
        return {
            "op": "start",
            "job": a.job,
            "run": a.run,
            "command": spec.get("command", "true"),
            "args": list(spec.get("args") or []),
            "env": env,
            "cwd": spec.get("cwd") or str(spool),
            "spool": str(spool),
            "stdout": str(spool / f"run{a.run}.out"),
            "stderr": str(spool / f"run{a.run}.err"),
            "nodefile": str(spool / f"run{a.run}.nodes"),
            "hosts": hosts,
        }

    def kill(self, entry: JobEntry) -> None:
        """PilotHub: tell the launcher pilot to kill the current run."""
        a = self.assign.get(entry.job.id)
        if a is None or a.run != entry.run:
            return
        node = self.nodes.get(a.launcher)
        if node is None:
            return
        if not a.delivered:
            # never delivered: withdraw the start command instead of killing
            node.outbox = [(s, c) for s, c in node.outbox if not (c.get("job") == a.job and c.get("run") == a.run)]
        node.send({"op": "kill", "job": a.job, "run": a.run})

    def released(self, entry: JobEntry) -> None:
        """PilotHub: the run ended; forget its assignment."""
        a = self.assign.get(entry.job.id)
        if a is not None and a.run == entry.run:
            del self.assign[entry.job.id]

    def vm_boot(self, site: int, vm: Vm, delay: float) -> None:
        """PilotHub: start the VM's pilot after the boot delay."""
        key = vm_node_key(site, vm.id)
        self.nodes[key] = Node(key, site, vm.cores, vm=vm.id)
        self._later(delay, self._boot_vm, key)

    def _boot_vm(self, key: str) -> None:
        node = self.nodes.get(key)
        if node is None or node.state != "down":
            return
        self._spawn(node)

    def vm_shutdown(self, site: int, vm: Vm, delay: float) -> None:
        """PilotHub: stop the VM's pilot after the shutdown delay, then report it gone."""
        self._later(delay, self._shutdown_vm, site, vm.id)

    def _shutdown_vm(self, site: int, vm_id: int) -> None:
        key = vm_node_key(site, vm_id)
        node = self.nodes.pop(key, None)
        if node is not None:
            self._retire(node, "VM released")
            # the pilot removes its spool pool when it exits; this catches one that was killed
            self._later(10.0, self._sweep_pools)
        self._external()
        self.engine.handle(EV_VM_GONE, site, vm_id)
        self._after()

    def _sweep_pools(self) -> None:
        """Remove the spool pools (see isthmus.agent.fresh) of nodes this manager no longer has."""
        remove_pools(self.spool, set(self.nodes))

    def _later(self, delay: float, fn: Any, *args: Any) -> None:
        loop = asyncio.get_running_loop()
        self._timers.append(loop.call_later(max(0.0, delay), fn, *args))
        if len(self._timers) > 256:
            self._timers = [t for t in self._timers if not t.cancelled() and t.when() > loop.time()]

    # -------------------------------------------------------------------------- pilots

    def _spawn(self, node: Node) -> None:
        token = new_token()
        self.token_generation += 1  # the API forgets cached pilot tokens
        with self.store.begin() as conn:
            conn.execute(delete(db.tokens).where(db.tokens.c.node == node.key))
            self.store.add_token(conn, hash_token(token), user=None, kind="pilot", node=node.key)
        extra = {"ISTHMUS_TAG": self.config.tag} if self.config.tag else {}
        proc = spawn_pilot(
            url=self.config.url,
            node=node.key,
            slots=node.slots,
            token=token,
            log_dir=self.state_dir / "pilots",
            pilot_timeout=self.config.pilot_timeout,
            extra_env=extra,
        )
        node.proc = proc
        node.pid = proc.pid
        node.state = "spawned"
        node.pilot_id = None
        node.deadline = time.time() + self.config.spawn_timeout
        self._set_pilot_row(node, "spawned")

    def _retire(self, node: Node, reason: str) -> None:
        node.send({"op": "exit", "reason": reason})
        node.state = "exiting"
        pid, proc = node.pid, node.proc
        self._later(2.0, self._terminate, pid, proc)
        self.token_generation += 1  # the API forgets cached pilot tokens
        with self.store.begin() as conn:
            conn.execute(delete(db.tokens).where(db.tokens.c.node == node.key))
        self._set_pilot_row(node, "exited")

    def _terminate(self, pid: int | None, proc: subprocess.Popen[bytes] | None) -> None:
        """SIGTERM a pilot's group now (it kills its runs), SIGKILL it 3 s later; never blocks."""
        if pid is None or not _still_pilot(pid, proc):
            return
        kill_group(pid, signal.SIGTERM)

        def _hard() -> None:
            if _still_pilot(pid, proc):
                kill_group(pid, signal.SIGKILL)
            if proc is not None:
                proc.poll()

        self._later(3.0, _hard)

    def _set_pilot_row(self, node: Node, state: str) -> None:
        now = time.time()
        values = {
            "site": node.site,
            "slots": node.slots,
            "pid": node.pid,
            "host": node.host or None,
            "state": state,
            "last_seen": node.last_seen or None,
        }
        with self.store.begin() as conn:
            if conn.execute(select(db.pilots.c.node).where(db.pilots.c.node == node.key)).first() is None:
                conn.execute(insert(db.pilots).values(node=node.key, registered_at=None, **values))
            else:
                if state == "registered":
                    values["registered_at"] = now
                conn.execute(update(db.pilots).where(db.pilots.c.node == node.key).values(**values))

    def register(self, node_key: str, body: dict[str, Any]) -> dict[str, Any]:
        """A pilot (re)registers: reconcile what it runs with what the manager assigned."""
        node = self.nodes.get(node_key)
        if node is None or node.state == "exiting":
            raise RequestError(410, f"node {node_key} is not part of this manager any more")
        self._external()
        now = time.time()
        self._pilot_counter += 1
        node.pilot_id = f"{self._incarnation}-{self._pilot_counter}"
        node.pid = int(body.get("pid") or 0) or node.pid
        node.host = str(body.get("host") or "")
        node.last_seen = now
        node.deadline = math.inf
        node.state = "registered"
        running = {(int(t["job"]), int(t["run"])) for t in body.get("running", [])}
        # rebuild the outbox: re-send undelivered starts, drop everything else
        old = node.outbox
        node.outbox = []
        node.seq = 0
        node.sent = 0
        for a in [a for a in self.assign.values() if a.launcher == node.key]:
            if (a.job, a.run) in running:
                a.delivered = True
                continue
            if any(r["job"] == a.job and r["run"] == a.run for r in body.get("reports", [])):
                continue
            if not a.delivered and any(c.get("job") == a.job and c.get("run") == a.run for _, c in old):
                node.send(self._start_command(a))
                continue
            self._lose(a, f"pilot of {node.key} does not know run {a.run}")
        for job, run in running:
            current = self.assign.get(job)
            if current is None or current.run != run or current.launcher != node.key:
                node.send({"op": "kill", "job": job, "run": run})
                self._history_note(job, run, "stray run on a re-registered pilot killed")
        self._reports(node, body.get("reports", []))
        self._set_pilot_row(node, "registered")
        if node.vm is not None:
            backend = self.engine.backends[node.site]
            assert isinstance(backend, CloudBackend)
            vm = backend.vms.get(node.vm)
            if vm is not None and vm.state is VmState.BOOTING:
                self.engine.handle(EV_VM_READY, node.site, node.vm)
        self._after()
        return {
            "pilot_id": node.pilot_id,
            "poll_wait": self.config.poll_wait,
            "pilot_timeout": self.config.pilot_timeout,
            "spool": str(self.spool),
        }

    def _history_note(self, job: int, run: int, detail: str) -> None:
        row = self.store.job(job)
        if row is None:
            return
        with self.store.begin() as conn:
            conn.execute(
                insert(db.job_history).values(job_id=job, time=time.time(), state=row["state"], run=run, detail=detail)
            )

    def _node_for(self, node_key: str, pilot_id: str) -> Node:
        node = self.nodes.get(node_key)
        if node is None or node.state == "exiting":
            raise RequestError(410, f"node {node_key} is not part of this manager any more")
        if node.pilot_id != pilot_id:
            raise RequestError(409, "unknown pilot registration; register again")
        node.last_seen = time.time()
        return node

    async def poll(self, node_key: str, pilot_id: str, ack: int, wait: float) -> list[dict[str, Any]]:
        """Long poll: commands after `ack` for the pilot, waiting up to `wait` seconds for one.

        Commands the pilot already got in a report answer (see `report`) do not end the wait
        unless they stay unacknowledged for RESEND_AFTER seconds (that answer was lost).
        """
        node = self._node_for(node_key, pilot_id)
        self._drop_acked(node, ack)
        deadline = time.monotonic() + wait
        while not self._news(node, ack):
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                break
            ev = asyncio.Event()
            node.waiter = ev
            try:
                await asyncio.wait_for(ev.wait(), min(remaining, RESEND_AFTER))
            except TimeoutError:
                pass
            finally:
                if node.waiter is ev:
                    node.waiter = None
            node = self._node_for(node_key, pilot_id)
        self._persist()  # a command never reaches a pilot before what it implies is stored
        return self._commands_after(node, ack)

    @staticmethod
    def _news(node: Node, ack: int) -> bool:
        """Whether the pilot has commands after `ack` it has not been handed yet (or handed too long ago)."""
        if not node.outbox or node.outbox[-1][0] <= ack:
            return False
        return node.outbox[-1][0] > node.sent or time.monotonic() - node.sent_at > RESEND_AFTER

    @staticmethod
    def _commands_after(node: Node, ack: int, *, upto_exit: bool = False) -> list[dict[str, Any]]:
        """The outbox after `ack` as the pilot receives it; with `upto_exit`, only the commands
        before the first ``exit`` (which is left to the long poll)."""
        out = []
        for seq, cmd in node.outbox:
            if seq <= ack:
                continue
            if upto_exit and cmd.get("op") == "exit":
                break
            out.append({"seq": seq, **cmd})
        return out

    def _drop_acked(self, node: Node, ack: int) -> None:
        if not node.outbox or node.outbox[0][0] > ack:
            return
        keep = []
        for seq, cmd in node.outbox:
            if seq <= ack:
                if cmd.get("op") == "start":
                    a = self.assign.get(int(cmd["job"]))
                    if a is not None and a.run == cmd["run"]:
                        a.delivered = True
            else:
                keep.append((seq, cmd))
        node.outbox = keep

    def report(self, node_key: str, pilot_id: str, body: dict[str, Any]) -> list[dict[str, Any]]:
        """A pilot reports task events (started, ended); answers its commands after its ack.

        The answer carries the commands the reports led to (an end frees slots, the round it
        triggers starts the next runs on them), so a pilot gets its next run without waiting for
        its long poll to return and be sent again: one round trip per end instead of two. A
        pilot that never reads them still gets them from its long poll after RESEND_AFTER seconds.
        """
        node = self._node_for(node_key, pilot_id)
        ack = int(body.get("ack", 0))
        self._drop_acked(node, ack)
        self._external()
        self._reports(node, body.get("reports", []))
        self._after()  # persists: what the commands imply is stored before they are answered
        cmds = self._commands_after(node, ack, upto_exit=True)
        if cmds and cmds[-1]["seq"] > node.sent:
            node.sent = cmds[-1]["seq"]
            node.sent_at = time.monotonic()
        return cmds

    def _reports(self, node: Node, reports: Sequence[dict[str, Any]]) -> None:
        started: list[tuple[int, int, float]] = []
        for r in reports:
            job, run = int(r["job"]), int(r["run"])
            if r.get("event") == "started":
                started.append((job, run, float(r.get("time", time.time()))))
                a = self.assign.get(job)
                if a is not None and a.run == run:
                    a.delivered = True
            elif r.get("event") == "ended":
                code = int(r.get("exit_code", -1))
                self._ended[(job, run)] = r
                self.engine.job_ended(job, run, code)
        if started:
            with self.store.begin() as conn:
                history = []
                for job, run, t in started:
                    res = conn.execute(db.UPDATE_JOB_RUNNING, {"b_id": job, "b_run": run})
                    if res.rowcount:
                        history.append(
                            {"job_id": job, "time": t, "state": "running", "run": run, "detail": f"pilot {node.key}"}
                        )
                if history:
                    conn.execute(db.INSERT_HISTORY, history)

    def _lose(self, a: Assignment, why: str) -> None:
        """The run of `a` was lost (its pilot died or forgot it): kill it as LOST and requeue it."""
        entry = self.engine.entries.get(a.job)
        if entry is None or entry.state is not JobState.RUNNING or entry.run != a.run:
            self.assign.pop(a.job, None)
            return
        log.warning("job %s run %s lost: %s", a.job, a.run, why)
        self._lost_reasons[(a.job, a.run)] = why
        self.engine.lost(entry.job.id, entry.run)

    def _housekeeping(self) -> None:
        now = time.time()
        if now - self._last_housekeeping < 0.25:
            return
        self._last_housekeeping = now
        changed = False
        for node in list(self.nodes.values()):
            if node.state == "registered" and now - node.last_seen > self.config.heartbeat_timeout:
                changed |= self._node_lost(node, "no heartbeat")
            elif node.state in ("spawned", "awaiting") and now > node.deadline:
                changed |= self._node_lost(node, "did not register in time")
            elif node.state in ("spawned", "registered") and node.proc is not None and node.proc.poll() is not None:
                changed |= self._node_lost(node, f"pilot exited with {node.proc.returncode}")
        if changed:
            self._after()

    def _node_lost(self, node: Node, why: str) -> bool:
        self._external()
        log.warning("pilot of %s lost: %s", node.key, why)
        for a in [a for a in self.assign.values() if a.launcher == node.key]:
            self._lose(a, f"pilot of {node.key} lost ({why})")
        self._terminate(node.pid, node.proc)
        node.proc = None
        node.pid = None
        node.outbox = []
        node.pilot_id = None
        self._set_pilot_row(node, "lost")
        if not self._stopping:
            self._spawn(node)  # the node (cluster node or leased VM) is still there: new pilot
        return True

    # ----------------------------------------------------------------------- persistence

    def _persist(self) -> None:
        """Write the submissions and engine events since the last call (and what they imply) in one transaction."""
        n = len(self.engine.log)
        if n == self._persisted and not self._new_jobs:
            return
        with self.store.begin() as conn:
            if self._new_jobs:  # before the events: their START updates need the rows
                conn.execute(db.INSERT_JOB, self._new_jobs)
                conn.execute(db.INSERT_HISTORY, self._new_history)
            self._persist_in(conn, n)
        self._new_jobs = []
        self._new_history = []
        self._persisted = n
        self._resolve_commit()

    def _persist_in(self, conn: Any, n: int) -> None:
        log_ = self.engine.log
        cols = log_.columns()
        t_, k_, j_, s_, v_, x_ = (cols[c] for c in ("time", "kind", "job", "site", "vm", "value"))
        rows = []
        history: list[dict[str, Any]] = []  # job history rows, inserted at once (in order) at the end
        J = db.jobs  # noqa: N806
        for i in range(self._persisted, n):
            t, kind, job, site, vm, value = t_[i], k_[i], j_[i], s_[i], v_[i], x_[i]
            rows.append({"time": t, "kind": kind, "job": job, "site": site, "vm": vm, "value": value})
            if kind == EventKind.START:
                sjob, run, _site, slots, limit = self._started.popleft()
                assert sjob == job, (sjob, job)
                conn.execute(
                    db.UPDATE_JOB_START,
                    {
                        "b_id": job,
                        "b_site": site,
                        "b_slots": json.dumps(slots),
                        "b_run": run,
                        "b_limit": limit,
                        "b_time": t,
                    },
                )
                where = self.env.sites[site].name
                nodes = sorted({k for k, _ in slots})
                history.append(
                    {
                        "job_id": job,
                        "time": t,
                        "state": "starting",
                        "run": run,
                        "detail": f"{where}: {len(slots)} slots on {', '.join(nodes)}",
                    }
                )
            elif kind in (EventKind.END, EventKind.FAIL):
                run = self._run_of(conn, job)
                info = self._ended.pop((job, run), {})
                state = "completed" if kind == EventKind.END else "failed"
                code = 0 if kind == EventKind.END else int(value)
                conn.execute(
                    db.UPDATE_JOB_END,
                    {"b_id": job, "b_state": state, "b_code": code, "b_time": t, "b_runtime": info.get("runtime")},
                )
                self.specs.pop(job, None)
                self.users.pop(job, None)
                detail = f"exit code {code}" + (f": {info['error']}" if info.get("error") else "")
                history.append({"job_id": job, "time": t, "state": state, "run": run, "detail": detail})
            elif kind == EventKind.KILL:
                run = self._run_of(conn, job)
                cause = _KILL_NAMES.get(int(value), str(value))
                detail = f"killed ({cause})"
                why = self._lost_reasons.pop((job, run), None)
                if why:
                    detail += f": {why}"
                history.append({"job_id": job, "time": t, "state": "killed", "run": run, "detail": detail})
                conn.execute(update(J).where(J.c.id == job).values(end_time=t))
            elif kind == EventKind.REQUEUE:
                run = self._run_of(conn, job)
                conn.execute(
                    update(J)
                    .where(J.c.id == job)
                    .values(state="queued", stage=int(value), site=None, slots=None, restarts=J.c.restarts + 1)
                )
                history.append(
                    {
                        "job_id": job,
                        "time": t,
                        "state": "queued",
                        "run": run,
                        "detail": f"requeued (queue {int(value)})",
                    }
                )
            elif kind == EventKind.CANCEL:
                run = self._run_of(conn, job)
                conn.execute(update(J).where(J.c.id == job).values(state="cancelled", end_time=t))
                history.append({"job_id": job, "time": t, "state": "cancelled", "run": run, "detail": "cancelled"})
                self.specs.pop(job, None)
                self.users.pop(job, None)
            elif kind == EventKind.REJECT:
                reason = log_.reasons.get(job, "rejected")
                conn.execute(update(J).where(J.c.id == job).values(state="rejected", reason=reason, end_time=t))
                history.append({"job_id": job, "time": t, "state": "rejected", "run": 0, "detail": reason})
            elif kind == EventKind.VM_LEASE:
                backend = self.engine.backends[site]
                cores = backend.site.cores_per_node
                conn.execute(insert(db.vms).values(site=site, vm=vm, state="booting", cores=cores, leased_at=t))
            elif kind == EventKind.VM_READY:
                conn.execute(
                    update(db.vms).where(db.vms.c.site == site, db.vms.c.vm == vm).values(state="ready", ready_at=t)
                )
            elif kind == EventKind.VM_RELEASE:
                conn.execute(
                    update(db.vms)
                    .where(db.vms.c.site == site, db.vms.c.vm == vm)
                    .values(state="releasing", released_at=t)
                )
            elif kind == EventKind.VM_GONE:
                conn.execute(
                    update(db.vms).where(db.vms.c.site == site, db.vms.c.vm == vm).values(state="gone", gone_at=t)
                )
        if history:
            conn.execute(db.INSERT_HISTORY, history)
        self.store.insert_events(conn, rows)

    @staticmethod
    def _run_of(conn: Any, job: int) -> int:
        return int(conn.execute(db.SELECT_RUN, {"b_id": job}).scalar() or 0)

    # -------------------------------------------------------------------------- recovery

    def _recover(self) -> None:
        """Rebuild the engine from the database after a (possibly unclean) stop.

        Queued jobs are submitted again at their original submit times; runs recorded as
        starting or running are re-attached on their recorded slots and wait for their pilot to
        re-register (else they are lost: killed with cause LOST and requeued, a recorded
        restart). Leased VMs are restored with their lease times, so billing continues.
        """
        engine = self.engine
        self._recovering = True
        now = time.time()
        # VMs
        max_vm: dict[int, int] = {}
        for row in self.store.vm_rows():
            max_vm[row["site"]] = max(max_vm.get(row["site"], -1), row["vm"])
        pilot_rows = {r["node"]: r for r in self.store.pilot_rows()}
        for row in self.store.vm_rows(live_only=True):
            backend = engine.backends[row["site"]]
            if not isinstance(backend, LocalCloud):
                continue
            state = {"booting": VmState.BOOTING, "ready": VmState.READY, "releasing": VmState.RELEASING}[row["state"]]
            vm = backend.restore_vm(row["vm"], state, row["leased_at"], row["ready_at"], row["released_at"])
            key = vm_node_key(row["site"], vm.id)
            if state is VmState.RELEASING:
                old = pilot_rows.get(key)
                if old and old.get("pid") and pid_is_pilot(old["pid"]):
                    self._terminate(old["pid"], None)
                done = (row["released_at"] or now) + backend.site.shutdown_time
                self._later(done - now, self._shutdown_vm, row["site"], vm.id)
                continue
            self.nodes[key] = Node(key, row["site"], vm.cores, vm=vm.id)
        for i, b in enumerate(engine.backends):
            if isinstance(b, CloudBackend):  # VM ids are never reused (they key VM rows and pilots)
                b.reserve_vm_ids(max_vm.get(i, -1) + 1)
        # jobs
        active = self.store.active_jobs()
        for row in active:
            job_id = row["id"]
            self.specs[job_id] = row["spec"]
            self.users[job_id] = row["user"]
            engine.now = self.clock.now = row["submit_time"]
            engine.restore(
                self._job(job_id, row["user"], row["spec"], row["submit_time"]),
                stage=row["stage"] or 0,
                run=row["run"],
                restarts=row["restarts"],
            )
        running = sorted(
            (r for r in active if r["state"] in ("starting", "running")), key=lambda r: r["start_time"] or 0.0
        )
        for row in running:
            job_id = row["id"]
            entry = engine.entries.get(job_id)
            if entry is None:
                continue
            backend = engine.backends[row["site"]]
            slots = [tuple(s) for s in row["slots"]]
            if isinstance(backend, LocalCluster):
                backend.reattach[job_id] = slots
            elif isinstance(backend, LocalCloud):
                alloc: dict[int, int] = {}
                for key, _c in slots:
                    vm_id = int(str(key).split("/vm", 1)[1])
                    alloc[vm_id] = alloc.get(vm_id, 0) + 1
                backend.reattach[job_id] = tuple(alloc.items())
            entry.run = row["run"] - 1
            engine.now = self.clock.now = row["start_time"] or now
            why = engine.apply(StartJob(job_id, row["site"], limit=row["limit_s"]))
            if why is not None:
                log.error("could not re-attach job %s: %s", job_id, why)
        self._started.clear()
        self._persisted = len(engine.log)
        self._recovering = False
        engine.now = self.clock.now = max(now, engine.now)
        # pilots: wait for live ones to re-register, start the others
        for key, node in self.nodes.items():
            old = pilot_rows.get(key)
            if old and old["state"] in ("spawned", "registered") and old.get("pid") and pid_is_pilot(old["pid"]):
                node.pid = old["pid"]
                node.state = "awaiting"
                node.deadline = now + self.config.reattach_timeout
            elif node.vm is not None and engine.backends[node.site].vms[node.vm].state is VmState.BOOTING:  # type: ignore[attr-defined]
                vm = engine.backends[node.site].vms[node.vm]  # type: ignore[attr-defined]
                self._later(vm.leased_at + engine.backends[node.site].site.boot_time - now, self._boot_vm, key)
            else:
                # its running jobs (if any) are lost: handled when the engine runs, below
                for a in [a for a in self.assign.values() if a.launcher == key]:
                    self._lose(a, f"pilot of {key} gone while the manager was down")
                self._spawn(node)
        self._sweep_pools()  # of VMs gone while the manager was down
        engine.handle(EV_WAKE, -1, -1)  # a round at once (keeps clouds at their minimum)
        self._persist()


def _still_pilot(pid: int, proc: subprocess.Popen[bytes] | None) -> bool:
    """True while `pid` is still the pilot: signalling its group cannot hit an unrelated process.

    A pilot this manager started is its child: its pid stays reserved until it is reaped, so
    Popen.poll() (which reaps) tells whether it is still ours. A pilot of an earlier incarnation
    is checked by its command line. Once a pid is reaped it can be reused at once, e.g. by a job
    that is the leader of its own process group: a delayed SIGKILL must not reach it.
    """
    if proc is not None:
        return proc.poll() is None
    return pid_is_pilot(pid)


def _alive(node: Node) -> bool:
    if node.proc is not None:
        return node.proc.poll() is None
    return node.pid is not None and pid_is_pilot(node.pid)


def free_port() -> int:
    """A free TCP port on 127.0.0.1."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])
