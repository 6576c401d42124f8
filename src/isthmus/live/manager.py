"""The live manager: daemon wiring and lifecycle around the engine on a wall clock.

`Manager` builds the engine with the local site backends, owns the real-time clock that drives
it (`isthmus.engine.clock.RealtimeClock`), the database, and the roles, each in its own module:
`Intake` (submissions, group commit, cancellations), `PilotHub` (the pilot protocol and
liveness), `BagRunner` (bags' launchers), the sites behind external systems and the
`Projector` (events to rows); `recover()` rebuilds the state at start. The roles receive the
`LiveContext` (isthmus.live.context), never the manager: the manager wires them and runs the
lifecycle (start, the clock's loop, stop).
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
from pathlib import Path
from typing import Any

from sqlalchemy import select

from isthmus.backends.batch_site import BatchCluster
from isthmus.backends.cloud_site import ProviderCloud
from isthmus.backends.local import LocalCloud, LocalCluster, cluster_node_key, kill_group, pilot_alive, still_pilot
from isthmus.backends.node import Node
from isthmus.backends.pilot_jobs_site import PilotJobs
from isthmus.backends.registry import batch_system, cloud_provider
from isthmus.engine.backend import CloudBackend, SiteBackend
from isthmus.engine.bags import BagSettings
from isthmus.engine.build import PolicyChoices, build_engine
from isthmus.engine.clock import RealtimeClock
from isthmus.engine.engine import Engine
from isthmus.live.bag_tasks import BagRunner
from isthmus.live.context import DEFAULT_ESTIMATE, LiveContext, ManagerConfig, PeerHooks
from isthmus.live.errors import PersistError, RequestError
from isthmus.live.intake import Intake
from isthmus.live.pilots import PilotHub
from isthmus.live.recovery import recover
from isthmus.model.states import PilotState
from isthmus.model.status import Status
from isthmus.store import tables as db
from isthmus.store.projector import Projector
from isthmus.store.tokens import hash_token, new_token

__all__ = ["DEFAULT_ESTIMATE", "Manager", "ManagerConfig", "PersistError", "RequestError", "free_port"]

log = logging.getLogger("isthmus.live")


def protect_state(state_dir: Path, spool: Path, *, switched: bool) -> None:
    """Make the state directory the manager's alone: mode 700, and the SQLite database files in
    it 600 (the umask the server sets makes every file it creates so). When jobs run as other
    accounts (`switched`), the state directory and the spool are 711 instead: those accounts may
    pass through them to their own jobs' spool directories (each 700, the job's user's), but can
    list nothing and open nothing else."""
    passage = 0o711 if switched else 0o700
    os.chmod(state_dir, passage)
    os.chmod(spool, passage)
    for entry in state_dir.iterdir():
        if entry.name.startswith("isthmus.db") and entry.is_file() and not entry.is_symlink():
            entry.chmod(0o600)


class Manager:
    """Engine + wall clock + pilots + database. Create, then `await start()`, then `await stop()`."""

    def __init__(self, config: ManagerConfig) -> None:
        self.config = config
        self.env = config.env
        # a lock held by another process fails a write after 2 s instead of stalling the loop
        self.store = db.Store(config.db_url, busy_timeout=2.0)
        self.clock = RealtimeClock()
        #: what every role receives instead of the manager (isthmus.live.context)
        self.ctx = ctx = LiveContext(config, self.store, self.clock)
        self.state_dir = ctx.state_dir
        self.spool = ctx.spool
        #: set by the server: ends the process (used when a drain finishes or an admin stops it)
        self.request_exit: Callable[[], None] = lambda: None
        self.admin_token: str | None = None
        #: names this manager's jobs in batch systems (`isthmus:<id>:<key>`), kept in the database
        self.manager_id = ""
        #: `isthmus stop --release`: every cloud site's VMs are terminated at this stop
        self.release_at_stop = False
        self._driver_task: asyncio.Task[None] | None = None
        self.hub = ctx.hub = PilotHub(ctx)
        self.intake = ctx.intake = Intake(ctx)
        self.engine = ctx.engine = self._build_engine()
        #: the launchers of bags of tasks on the pilots (docs/bags.md)
        self.bags = ctx.bags = BagRunner(ctx, config.bag_prefetch)
        self.engine.bags.launcher = self.bags
        self.engine.bags.settings = BagSettings(preemption_time=config.bag_preemption_time, pull_latency=0.0)
        self.projector = ctx.projector = Projector(self.engine.log, self.env, self.hub, ctx.forget)
        self.projector.vm_image = self._vm_image
        self.projector.bags = self.bags

    @property
    def federation(self) -> PeerHooks | None:
        """The peer managers (None without [[peers]]; set by the server: docs/federation.md)."""
        return self.ctx.federation

    @federation.setter
    def federation(self, value: PeerHooks | None) -> None:
        self.ctx.federation = value

    @property
    def stopping(self) -> bool:
        """True once the manager stops: no new work is started."""
        return self.ctx.stopping

    @property
    def stop_mode(self) -> str | None:
        """How the current stop treats running jobs: None (running), "detach", "kill" or "drain"."""
        return self.ctx.stop_mode

    @property
    def persist_error(self) -> str | None:
        """Why the last write failed, while writes fail (the manager is unhealthy); None when they work."""
        return self.ctx.persist_error

    def _vm_image(self, site: int, vm_id: int) -> int:
        """The image index of VM `vm_id` of cloud `site` (0 once it is gone)."""
        backend = self.engine.backends[site]
        vm = backend.vms.get(vm_id) if isinstance(backend, CloudBackend) else None
        return vm.image if vm is not None else 0

    def _build_engine(self) -> Engine:
        env = self.env
        backends: list[SiteBackend] = []
        for i, site in enumerate(env.sites):
            if site.is_cloud and site.provider is not None:
                cloud = ProviderCloud(i, site, cloud_provider(site), self.ctx)
                backends.append(cloud)
                self.hub.launchers[i] = cloud
            elif site.is_cloud:
                backends.append(LocalCloud(i, site, self.hub))
            elif site.lrm is not None and site.lrm.mode == "pilot":
                pilots = PilotJobs(i, site, batch_system(site), self.ctx)
                backends.append(pilots)
                self.hub.launchers[i] = pilots
            elif site.lrm is not None:
                backends.append(BatchCluster(i, site, batch_system(site), self.ctx, site.lrm.poll_interval))
            else:
                backends.append(LocalCluster(i, site, self.hub))
                for n in range(site.nodes):
                    key = cluster_node_key(i, n)
                    self.hub.nodes[key] = Node(key, i, site.cores_per_node)
        interval = env.round_interval if self.config.round_interval == "env" else self.config.round_interval
        assert interval is None or isinstance(interval, (int, float))
        return build_engine(
            env,
            PolicyChoices.of(env, selection=env.selection if env.peers else None),
            clock=self.clock,
            backends=lambda _schedule: backends,
            true_runtimes_known=False,
            round_interval=interval,
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
        protect_state(self.state_dir, self.spool, switched=self.env.users is not None)
        self.intake.next_job_id = self.store.max_job_id() + 1
        self._first_start()
        for cap in self.engine.ledger.caps:  # limits an admin changed at run time
            value = self.store.get_meta(f"budget:{cap.cap.name}")
            if value is not None:
                cap.limit = float(value)
        recover(self.ctx)
        if self.federation is not None:
            self.federation.restore()  # forwarded and received jobs; attaches to the engine
        self.ctx.persist()
        manager_id = self.manager_id = self.store.get_meta("manager_id") or ""
        for b in self.engine.backends:
            b.begin(manager_id)  # sites behind external systems reconcile with them
        self._driver_task = asyncio.create_task(self._driver(), name="isthmus-driver")
        if self.federation is not None:
            await self.federation.start()

    def releasing_sites(self) -> list[ProviderCloud]:
        """The cloud sites whose VMs this stop terminates: every provider cloud after
        `isthmus stop --release`, else those whose provider sets `release_on_stop`."""
        return [
            b
            for b in self.engine.backends
            if isinstance(b, ProviderCloud) and (self.release_at_stop or b.settings.release_on_stop)
        ]

    def begin_shutdown(self, mode: str | None = None, release: bool = False) -> None:
        """Stop (a signal, or `isthmus stop`): stop scheduling, and

        - "detach" (the default for signals): running jobs go on; pilots are told to keep their
          runs and wait up to `detach_timeout` for a manager, and the next start re-attaches
          them, as after a crash;
        - "kill": pilots are told to exit, killing their runs (requeued at the next start);
        - "drain": no new run starts and submissions are refused; bags' launchers start no new
          task; once no run and no task is left, pilots exit and the manager stops; queued jobs
          and bags' queued tasks wait for the next start.

        With `release` (or a cloud site's `release_on_stop`) every VM of the releasing sites is
        terminated at the end of the stop, once its runs ended (drain) or were killed (kill); a
        "detach" stop then kills runs instead, since their VMs will not be there to re-attach.
        """
        mode = mode or self.config.on_stop
        if mode not in ("detach", "kill", "drain"):
            raise ValueError(f"unknown stop mode {mode!r}: expected detach, kill or drain")
        if release and self.ctx.stop_mode not in ("detach", "kill"):
            self.release_at_stop = True
        if mode == "detach" and self.releasing_sites():
            mode = "kill"
        if self.ctx.stop_mode in ("detach", "kill"):
            return  # already stopping; a later signal does not change how
        self.ctx.stop_mode = mode
        if mode == "drain":
            self.engine.paused = True  # no new decisions; runs end and are recorded
            self.engine.bags.drain()  # bags' launchers finish their running tasks only
            self.clock.wake()
            self._drained_check()
            return
        self.ctx.stopping = True
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
            self.ctx.stop_mode = None
            self.begin_shutdown("kill")
            self.request_exit()

    async def stop(self) -> None:
        """Stop the clock's loop; unless configured otherwise, tell pilots to exit and kill them."""
        self.ctx.stopping = True
        if self.federation is not None:
            await self.federation.stop()
        self.ctx.cancel_timers()
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
        for cloud in self.releasing_sites():  # after `close`: no lease or release is under way
            await asyncio.to_thread(cloud.release_all)
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
        self.ctx.persist()
        if self.stop_mode == "drain":
            self._drained_check()

    async def _driver(self) -> None:
        def failed(exc: BaseException) -> None:
            if not isinstance(exc, PersistError):  # already logged once, retried each step
                log.exception("driver step failed", exc_info=exc)

        await self.clock.run_forever(self._step, failed)

    def set_budget_limit(self, name: str, limit: float) -> None:
        """A new limit for budget cap `name`, persisted (the database keeps it across restarts);
        a round follows (a raised cap may let provisioning lease)."""
        cap = self.engine.ledger.get(name)
        if cap is None:
            raise KeyError(name)
        with self.store.begin() as conn:
            self.store.set_meta(conn, f"budget:{name}", repr(float(limit)))
        with self.ctx.external():
            cap.limit = float(limit)
            self.engine.request_round(self.clock.now)


def free_port() -> int:
    """A free TCP port on 127.0.0.1."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])
