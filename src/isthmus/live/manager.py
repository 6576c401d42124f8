"""The live manager: daemon wiring and lifecycle around the engine on a wall clock.

`Manager` builds the engine with the local site backends, owns the real-time clock that drives
it (`isthmus.engine.clock.RealtimeClock`), the database, and three parts, each in its own
module: `Intake` (submissions, group commit, cancellations), `PilotHub` (the pilot protocol and
liveness) and the `Projector` (events to rows); `recover()` rebuilds the state at start.
Everything - API handlers, the clock's loop, pilot messages - runs on one asyncio event loop
thread, so the engine needs no locks.

Before a decision can reach a pilot, its effect is in the database: every step ends with
`persist()`, which writes the new submissions and events in one transaction, and pilots receive
commands only when the loop next runs a poll handler, after that commit. After a crash the
database therefore never says less than what pilots were told, which is what recovery relies on.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import secrets
import signal
import socket
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from sqlalchemy import select

from isthmus.backends.local import LocalCloud, LocalCluster, cluster_node_key, kill_group, pilot_alive, still_pilot
from isthmus.engine.backend import CloudBackend, SiteBackend
from isthmus.engine.bags import BagSettings
from isthmus.engine.budgets import ledger_snapshot
from isthmus.engine.clock import RealtimeClock
from isthmus.engine.engine import Engine
from isthmus.live.bag_tasks import BagRunner
from isthmus.live.batch import BatchCluster, batch_system
from isthmus.live.errors import PersistError, RequestError
from isthmus.live.iaas import ProviderCloud, provider_for
from isthmus.live.intake import Intake
from isthmus.live.lrm_pilots import PilotJobs
from isthmus.live.pilots import Node, PilotHub
from isthmus.live.recovery import recover
from isthmus.model.environment import Environment, PolicyChoice
from isthmus.model.states import PilotState
from isthmus.model.status import Status
from isthmus.policies.build import DEFAULT_PREDICTOR, build_policies
from isthmus.store import tables as db
from isthmus.store.projector import Projector
from isthmus.store.tokens import hash_token, new_token

__all__ = ["DEFAULT_ESTIMATE", "Manager", "ManagerConfig", "PersistError", "RequestError", "free_port"]

log = logging.getLogger("isthmus.live")

DEFAULT_ESTIMATE = 3600.0
"""Runtime assumed for a job submitted without a requested runtime (for backfilling and predictions)."""


class PeerHooks(Protocol):
    """What the manager asks of its peer managers (isthmus.federation.live.LiveFederation)."""

    @property
    def may_forward(self) -> bool:
        """True when a selection policy may forward jobs to a provider peer."""
        ...

    def pending(self) -> bool:
        """True when records or messages wait for the next transaction."""
        ...

    def write(self, conn: Any) -> None:
        """Write the pending records in transaction `conn`."""
        ...

    def committed(self) -> None:
        """The records were committed: send what depended on them."""
        ...

    def held_elsewhere(self) -> set[int]:
        """Ids of jobs forwarded to peers and not ended (recovery leaves them out of the queues)."""
        ...

    def restore(self) -> None:
        """After recovery: the forwarded and received jobs; attach to the engine."""
        ...

    async def start(self) -> None:
        """Open the connections to the peers."""
        ...

    async def stop(self) -> None:
        """Close the connections."""
        ...


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
    stop_pilots_on_exit: bool = True  # False: pilots are left alone at stop (tests of restarts)
    on_stop: str = "detach"  # what a stop signal does: "detach" (runs go on) or "kill" (see `begin_shutdown`)
    detach_timeout: float = 3600.0  # detached pilots keep their runs this long waiting for a manager
    tag: str | None = None  # copied to ISTHMUS_TAG in pilots and jobs (lets tests find leftovers)
    max_body_bytes: int = 8 * 1024 * 1024  # larger request bodies get 413 (a 10,000-job batch fits)
    max_batch_jobs: int = 10_000  # larger POST /jobs/batch get 413
    budget: float | None = None  # cap on the charged cost of all cloud leases ($), as in simulation
    enforce_walltime: bool = True  # a run reaching its job's requested runtime is killed: TIMEOUT
    bag_preemption_time: float = 10.0  # a preempted bag launcher's processor is free after this at the latest
    bag_prefetch: int = 1  # tasks a bag launcher keeps ahead of the one it runs (its local list)

    advertise_url: str | None = None  # what pilots on other machines are told; default from host/port

    @property
    def url(self) -> str:
        """The URL pilots use to reach the manager (a wildcard address becomes this machine's name)."""
        if self.advertise_url:
            return self.advertise_url.rstrip("/")
        host = socket.getfqdn() if self.host in ("0.0.0.0", "::", "") else self.host
        return f"http://[{host}]:{self.port}" if ":" in host else f"http://{host}:{self.port}"


class Manager:
    """Engine + wall clock + pilots + database. Create, then `await start()`, then `await stop()`."""

    def __init__(self, config: ManagerConfig) -> None:
        self.config = config
        self.env = config.env
        # a lock held by another process fails a write after 2 s instead of stalling the loop
        self.store = db.Store(config.db_url, busy_timeout=2.0)
        #: why the last write failed, while writes fail (the manager is unhealthy); None when they work
        self.persist_error: str | None = None
        self._persist_retry_at = 0.0
        #: the per-user budget ledger snapshot last written (isthmus.engine.budgets.ledger_snapshot)
        self._ledger_written: str | None = None
        self.state_dir = Path(config.state_dir)
        self.spool = self.state_dir / "spool"
        self.clock = RealtimeClock()
        self.stopping = False
        #: how the current stop treats running jobs: None (running), "detach", "kill" or "drain"
        self.stop_mode: str | None = None
        #: set by the server: ends the process (used when a drain finishes or an admin stops it)
        self.request_exit: Callable[[], None] = lambda: None
        self.admin_token: str | None = None
        #: names this manager's jobs in batch systems (`isthmus:<id>:<key>`), kept in the database
        self.manager_id = ""
        self._driver_task: asyncio.Task[None] | None = None
        self._timers: list[asyncio.TimerHandle] = []
        self.hub = PilotHub(self)
        self.intake = Intake(self)
        #: the peer managers (None without [[peers]]; set by the server: docs/federation.md)
        self.federation: PeerHooks | None = None
        self.engine = self._build_engine()
        #: the launchers of bags of tasks on the pilots (docs/bags.md)
        self.bags = BagRunner(self, config.bag_prefetch)
        self.engine.bags.launcher = self.bags
        self.engine.bags.settings = BagSettings(preemption_time=config.bag_preemption_time, pull_latency=0.0)
        self.projector = Projector(self.engine.log, self.env, self.hub, self._forget)
        self.projector.vm_image = self._vm_image
        self.projector.bags = self.bags

    def _vm_image(self, site: int, vm_id: int) -> int:
        """The image index of VM `vm_id` of cloud `site` (0 once it is gone)."""
        backend = self.engine.backends[site]
        vm = backend.vms.get(vm_id) if isinstance(backend, CloudBackend) else None
        return vm.image if vm is not None else 0

    def _build_engine(self) -> Engine:
        env = self.env
        others: dict[str, PolicyChoice] = {}
        if env.fairshare is not None:
            others["fairshare"] = env.fairshare
        if env.selection is not None and env.peers:
            others["selection"] = env.selection
        policies = build_policies(
            env.allocation, env.provisioning, DEFAULT_PREDICTOR, others or None, true_runtimes_known=False
        )
        backends: list[SiteBackend] = []
        for i, site in enumerate(env.sites):
            if site.is_cloud and site.provider is not None:
                cloud = ProviderCloud(i, site, provider_for(site), self)
                backends.append(cloud)
                self.hub.launchers[i] = cloud
            elif site.is_cloud:
                backends.append(LocalCloud(i, site, self.hub))
            elif site.lrm is not None and site.lrm.mode == "pilot":
                pilots = PilotJobs(i, site, batch_system(site), self)
                backends.append(pilots)
                self.hub.launchers[i] = pilots
            elif site.lrm is not None:
                backends.append(BatchCluster(i, site, batch_system(site), self, site.lrm.poll_interval))
            else:
                backends.append(LocalCluster(i, site, self.hub))
                for n in range(site.nodes):
                    key = cluster_node_key(i, n)
                    self.hub.nodes[key] = Node(key, i, site.cores_per_node)
        interval = env.round_interval if self.config.round_interval == "env" else self.config.round_interval
        assert interval is None or isinstance(interval, (int, float))
        return Engine(
            env,
            policies,
            self.clock,
            lambda _schedule: backends,
            round_interval=float(interval) if interval else None,
            budget=self.config.budget,
            enforce_walltime=self.config.enforce_walltime,
        )

    # ------------------------------------------------------------------ the API's entry points

    @property
    def token_generation(self) -> int:
        """Bumped whenever pilot tokens are deleted; the API's token cache is valid per generation."""
        return self.hub.token_generation

    def submit(self, user: str, spec: dict[str, Any]) -> int:
        """Submit a validated job request (see `Intake.submit`)."""
        return self.intake.submit(user, spec)

    async def committed(self) -> None:
        """Wait until every job submitted so far is stored (see `Intake.committed`)."""
        await self.intake.committed()

    def submit_bag(self, user: str, spec: dict[str, Any], commands: list[str]) -> int:
        """Submit a validated bag of tasks (see `Intake.submit_bag`)."""
        return self.intake.submit_bag(user, spec, commands)

    def check_size(self, size: int) -> None:
        """RequestError (400) when no site can ever offer `size` processors."""
        self.intake.check_size(size)

    def check_vm(self, user: str, spec: dict[str, Any]) -> None:
        """RequestError (400) naming the field when no site can ever match the VM requirements."""
        self.intake.check_vm(user, spec)

    def cancel(self, job_id: int) -> bool:
        """Cancel a queued or running job; False when it already ended."""
        return self.intake.cancel(job_id)

    def why(self, job_id: int) -> Status | None:
        """The engine's explanation for an active job, None for a job it no longer holds."""
        return self.intake.why(job_id)

    def register(self, node_key: str, body: dict[str, Any]) -> dict[str, Any]:
        """A pilot (re)registers (see `PilotHub.register`)."""
        return self.hub.register(node_key, body)

    async def poll(self, node_key: str, pilot_id: str, ack: int, wait: float) -> list[dict[str, Any]]:
        """A pilot's long poll (see `PilotHub.poll`)."""
        return await self.hub.poll(node_key, pilot_id, ack, wait)

    def report(self, node_key: str, pilot_id: str, body: dict[str, Any]) -> list[dict[str, Any]]:
        """A pilot reports (see `PilotHub.report`)."""
        return self.hub.report(node_key, pilot_id, body)

    # --------------------------------------------------------------------------- lifecycle

    async def start(self) -> None:
        """Open the database, recover the previous state, start pilots and the clock's loop."""
        self.state_dir.mkdir(parents=True, exist_ok=True)
        self.spool.mkdir(parents=True, exist_ok=True)
        self.store.create()
        self.intake.next_job_id = self.store.max_job_id() + 1
        self._first_start()
        for cap in self.engine.ledger.caps:  # limits an admin changed at run time
            value = self.store.get_meta(f"budget:{cap.cap.name}")
            if value is not None:
                cap.limit = float(value)
        recover(self)
        if self.federation is not None:
            self.federation.restore()  # forwarded and received jobs; attaches to the engine
        self.persist()
        manager_id = self.manager_id = self.store.get_meta("manager_id") or ""
        for b in self.engine.backends:
            b.begin(manager_id)  # sites behind external systems reconcile with them
        self._driver_task = asyncio.create_task(self._driver(), name="isthmus-driver")
        if self.federation is not None:
            await self.federation.start()

    def begin_shutdown(self, mode: str | None = None) -> None:
        """Stop (a signal, or `isthmus stop`): stop scheduling, and

        - "detach" (the default for signals): running jobs go on; pilots are told to keep their
          runs and wait up to `detach_timeout` for a manager, and the next start re-attaches
          them, as after a crash;
        - "kill": pilots are told to exit, killing their runs (requeued at the next start);
        - "drain": no new run starts and submissions are refused; bags' launchers start no new
          task; once no run and no task is left, pilots exit and the manager stops; queued jobs
          and bags' queued tasks wait for the next start.
        """
        mode = mode or self.config.on_stop
        if mode not in ("detach", "kill", "drain"):
            raise ValueError(f"unknown stop mode {mode!r}: expected detach, kill or drain")
        if self.stop_mode in ("detach", "kill"):
            return  # already stopping; a later signal does not change how
        self.stop_mode = mode
        if mode == "drain":
            self.engine.paused = True  # no new decisions; runs end and are recorded
            self.engine.bags.drain()  # bags' launchers finish their running tasks only
            self.clock.wake()
            self._drained_check()
            return
        self.stopping = True
        self.clock.wake()
        if not self.config.stop_pilots_on_exit:
            return
        for node in self.hub.nodes.values():
            if node.state in (PilotState.REGISTERED, PilotState.AWAITING, PilotState.SPAWNED):
                if mode == "kill":
                    node.send({"op": "exit", "reason": "manager shutting down"})
                else:
                    node.send({"op": "detach", "wait": self.config.detach_timeout, "reason": "manager stopping"})

    def _drained_check(self) -> None:
        """While draining: once no run and no bag's task is left, stop like "kill" (nothing is
        left to kill)."""
        if (
            self.stop_mode == "drain"
            and not any(b.running for b in self.engine.backends)
            and not self.engine.bags.running_tasks
        ):
            self.stop_mode = None
            self.begin_shutdown("kill")
            self.request_exit()

    async def stop(self) -> None:
        """Stop the clock's loop; unless configured otherwise, tell pilots to exit and kill them."""
        self.stopping = True
        if self.federation is not None:
            await self.federation.stop()
        for t in self._timers:
            t.cancel()
        self.clock.stop()
        if self._driver_task is not None:
            self._driver_task.cancel()
            try:  # noqa: SIM105
                await self._driver_task
            except (asyncio.CancelledError, Exception):
                pass
        if self.config.stop_pilots_on_exit:
            if self.stop_mode == "detach":
                await self._detach_pilots()
            else:
                await self._stop_pilots()
        for b in self.engine.backends:
            if self.stop_mode != "detach" and self.config.stop_pilots_on_exit:
                # batch jobs go with the pilots; a cloud's VMs stay leased and recorded (the
                # next start reconciles them)
                await asyncio.to_thread(b.cancel_all)
            b.close()
        self.store.close()

    async def _detach_pilots(self) -> None:
        """Leave the pilots and their runs alone: they got "detach" from their long polls, which
        the stop signal answered while the server still served them."""
        for node in self.hub.nodes.values():
            if node.pid is not None:
                self.hub.set_pilot_row(node, PilotState.DETACHED)

    async def _stop_pilots(self) -> None:
        nodes = self.hub.nodes.values()
        self.begin_shutdown()
        await asyncio.sleep(0.3)
        deadline = time.time() + 3.0
        for node in nodes:
            if node.pid is not None and still_pilot(node.pid, node.proc):
                kill_group(node.pid, signal.SIGTERM)
        while time.time() < deadline and any(n.pid is not None and pilot_alive(n.pid, n.proc) for n in nodes):
            await asyncio.sleep(0.05)
        for node in nodes:
            if node.pid is not None:
                if still_pilot(node.pid, node.proc):
                    kill_group(node.pid, signal.SIGKILL)
                if node.proc is not None:
                    try:  # noqa: SIM105
                        node.proc.wait(timeout=2)
                    except subprocess.TimeoutExpired:
                        pass
                self.hub.set_pilot_row(node, PilotState.EXITED)

    def _first_start(self) -> None:
        token_file = self.state_dir / "admin.token"
        manager_id = self.store.get_meta("manager_id")
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
            if manager_id is None:  # names this manager's jobs in batch systems
                self.store.set_meta(conn, "manager_id", secrets.token_hex(6))
            self.store.set_meta(conn, "environment", self.env.name)
            self.store.set_meta(conn, "sites", json.dumps([s.name for s in self.env.sites]))

    # ---------------------------------------------------------------------- the clock's loop

    def _step(self) -> None:
        self.hub.housekeeping()  # first: liveness is judged even while writes fail
        self.persist()
        if self.stop_mode == "drain":
            self._drained_check()

    async def _driver(self) -> None:
        def failed(exc: BaseException) -> None:
            if not isinstance(exc, PersistError):  # already logged once, retried each step
                log.exception("driver step failed", exc_info=exc)

        await self.clock.run_forever(self._step, failed)

    def external(self) -> None:
        """Before an external event: let the clock handle every due event and reach the wall time."""
        self.clock.catch_up()

    def after(self) -> None:
        """After an external event: run what became due (with event-triggered rounds, the round it
        asked for), persist it all in one transaction and wake the loop for the rest."""
        self.clock.catch_up()
        self.persist()
        self.clock.wake()

    def set_budget_limit(self, name: str, limit: float) -> None:
        """A new limit for budget cap `name`, persisted (the database keeps it across restarts);
        a round follows (a raised cap may let provisioning lease)."""
        cap = self.engine.ledger.get(name)
        if cap is None:
            raise KeyError(name)
        with self.store.begin() as conn:
            self.store.set_meta(conn, f"budget:{name}", repr(float(limit)))
        self.external()
        cap.limit = float(limit)
        self.engine.request_round(self.clock.now)
        self.after()

    def later(self, delay: float, fn: Callable[..., Any], *args: Any) -> None:
        """Call `fn(*args)` on the loop after `delay` seconds (cancelled at stop)."""
        loop = asyncio.get_running_loop()
        self._timers.append(loop.call_later(max(0.0, delay), fn, *args))
        if len(self._timers) > 256:
            self._timers = [t for t in self._timers if not t.cancelled() and t.when() > loop.time()]

    # ----------------------------------------------------------------------- persistence

    def persist(self) -> None:
        """Write the submissions and engine events since the last call (and what they imply) in one
        transaction. If it fails, nothing in memory has moved on: the next call writes them again.

        PersistError while the database refuses writes (read-only, full disk, locked): the
        manager is unhealthy (`persist_error`) and retries at most every half second until a
        write succeeds; commands that depend on unwritten events are not handed to pilots.
        """
        n = len(self.engine.log)
        fed = self.federation
        ledger = ledger_snapshot(self.engine.ledger) if self.engine.ledger.per_user else None
        if (
            n == self.projector.persisted
            and not self.intake.pending()
            and not (fed is not None and fed.pending())
            and ledger == self._ledger_written
        ):
            return
        if self.persist_error is not None and time.monotonic() < self._persist_retry_at:
            raise PersistError(self.persist_error)
        try:
            with self.store.begin() as conn:
                self.intake.write_new(conn)  # before the events: their updates need the job rows
                self.projector.project(conn, n)
                if fed is not None:
                    fed.write(conn)  # forwarded and received jobs (after the job rows)
                if ledger is not None and ledger != self._ledger_written:
                    self.store.set_meta(conn, "budget-ledger", ledger)
        except Exception as exc:
            first = self.persist_error is None
            self.persist_error = f"cannot write the database: {type(exc).__name__}: {str(exc).splitlines()[0][:300]}"
            self._persist_retry_at = time.monotonic() + 0.5
            if first:
                log.error("%s; retrying until it works (the manager answers 503 meanwhile)", self.persist_error)
            raise PersistError(self.persist_error) from exc
        self.intake.written()
        self.projector.committed(n)
        if fed is not None:
            fed.committed()  # peer messages that depended on what was just stored
        self._ledger_written = ledger
        if self.persist_error is not None:
            log.warning("database writes work again")
            self.persist_error = None

    def _forget(self, job: int) -> None:
        self.intake.forget(job)
        self.hub.forget(job)
        self.bags.forget(job)


def free_port() -> int:
    """A free TCP port on 127.0.0.1."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])
