"""A live context and its roles without a server or a process: a manual clock, a temporary SQLite
store, and the sites a test chooses (local pilot slots, or sites on the fake batch system and the
fake cloud of isthmus.backends.fake).

`Rig` wires the roles as the daemon does (isthmus.live.manager.Manager), but every call that
`later` schedules waits in a heap until the test advances the clock (`advance`), and the engine's
clock reads the same manual wall time. Sites behind external systems still call them from their
worker thread: `settle` waits until their answers came back on the event loop.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from isthmus.backends.external import WorkerThread
from isthmus.backends.local import LocalCloud, LocalCluster, cluster_node_key
from isthmus.backends.node import Node
from isthmus.config.loader import load_environment
from isthmus.engine.backend import SiteBackend
from isthmus.engine.bags import BagSettings
from isthmus.engine.clock import RealtimeClock
from isthmus.engine.engine import Engine
from isthmus.live.bag_tasks import BagRunner
from isthmus.live.context import LiveContext, ManagerConfig
from isthmus.live.intake import Intake
from isthmus.live.pilots import PilotHub
from isthmus.model.environment import Environment, PolicyChoice
from isthmus.model.site import Site
from isthmus.policies.build import DEFAULT_PREDICTOR, build_policies
from isthmus.store import tables as db
from isthmus.store.projector import Projector

SiteFactory = Callable[[LiveContext, int, Site], SiteBackend]

MANAGER_ID = "unit0"

#: one local cluster of 2 nodes x 2 cores
LOCAL_ENV = """
name = "unit"
round_interval = "event"
[[sites]]
name = "c1"
nodes = 2
cores_per_node = 2
[policies]
allocation = "fcfs"
provisioning = "none"
"""


class ManualContext(LiveContext):
    """A `LiveContext` whose wall time and later calls move only when the test says so."""

    def __init__(self, config: ManagerConfig, store: db.Store, start: float) -> None:
        self.wall = start
        super().__init__(config, store, RealtimeClock(wall=lambda: self.wall))
        self.due: list[tuple[float, int, Callable[..., Any], tuple[Any, ...]]] = []
        self._seq = itertools.count()

    def later(self, delay: float, fn: Callable[..., Any], *args: Any) -> None:
        """Queue `fn(*args)` at the manual time `delay` seconds from now."""
        heapq.heappush(self.due, (self.wall + max(0.0, delay), next(self._seq), fn, args))

    def cancel_timers(self) -> None:
        """Drop every queued call."""
        self.due = []

    def advance(self, seconds: float = 0.0) -> None:
        """Move the wall time `seconds` on, running the queued calls due on the way, in order."""
        target = self.wall + seconds
        while self.due and self.due[0][0] <= target:
            when, _, fn, args = heapq.heappop(self.due)
            self.wall = max(self.wall, when)
            fn(*args)
        self.wall = target


def local_sites(ctx: LiveContext, index: int, site: Site) -> SiteBackend:
    """The daemon's backends without a batch system or provider: pilot slots on this machine."""
    if site.is_cloud:
        return LocalCloud(index, site, ctx.hub)
    for n in range(site.nodes):
        key = cluster_node_key(index, n)
        ctx.hub.nodes[key] = Node(key, index, site.cores_per_node)
    return LocalCluster(index, site, ctx.hub)


class Rig:
    """Every live role on one `ManualContext` (see the module docstring)."""

    def __init__(
        self,
        tmp_path: Path,
        env: str | Environment = LOCAL_ENV,
        sites: SiteFactory = local_sites,
        *,
        db_url: str | None = None,
        **config: Any,
    ) -> None:
        if isinstance(env, str):
            path = tmp_path / "env.toml"
            path.write_text(env)
            env = load_environment(path)
        cfg = ManagerConfig(
            env=env,
            db_url=db_url or f"sqlite:///{tmp_path / 'isthmus.db'}",
            state_dir=tmp_path / "state",
            **config,
        )
        store = db.Store(cfg.db_url)
        store.create()
        with store.begin() as conn:
            if store.get_meta("manager_id") is None:
                store.set_meta(conn, "manager_id", MANAGER_ID)
        self.ctx = ctx = ManualContext(cfg, store, start=time.time())
        ctx.state_dir.mkdir(parents=True, exist_ok=True)
        ctx.spool.mkdir(parents=True, exist_ok=True)
        ctx.hub = PilotHub(ctx)
        ctx.intake = Intake(ctx, store.max_job_id() + 1)
        self.backends = [sites(ctx, i, s) for i, s in enumerate(env.sites)]
        others: dict[str, PolicyChoice] = {"fairshare": env.fairshare} if env.fairshare is not None else {}
        policies = build_policies(
            env.allocation, env.provisioning, DEFAULT_PREDICTOR, others or None, true_runtimes_known=False
        )
        backends = self.backends
        ctx.engine = Engine(
            env,
            policies,
            ctx.clock,
            lambda _schedule: backends,
            round_interval=float(env.round_interval) if env.round_interval else None,
            enforce_walltime=True,
        )
        ctx.bags = BagRunner(ctx)
        ctx.engine.bags.launcher = ctx.bags
        ctx.engine.bags.settings = BagSettings(preemption_time=cfg.bag_preemption_time, pull_latency=0.0)
        ctx.projector = Projector(ctx.engine.log, env, ctx.hub, ctx.forget)
        ctx.projector.bags = ctx.bags

    @property
    def engine(self) -> Engine:
        """The live engine."""
        return self.ctx.engine

    @property
    def store(self) -> db.Store:
        """The database."""
        return self.ctx.store

    @property
    def hub(self) -> PilotHub:
        """The pilot hub."""
        return self.ctx.hub

    @property
    def intake(self) -> Intake:
        """The intake of submissions."""
        return self.ctx.intake

    def begin(self) -> None:
        """Sites behind external systems connect (the daemon's start, after recovery)."""
        for b in self.backends:
            b.begin(MANAGER_ID)

    def step(self, seconds: float = 0.0) -> None:
        """Advance the clock (running the later calls due), then what one turn of the daemon's
        loop does: handle the engine's due events and persist."""
        self.ctx.advance(seconds)
        self.ctx.clock.catch_up()
        self.ctx.persist()

    async def settle(self, timeout: float = 5.0) -> None:
        """Wait until every call sites made to their external system has answered on the loop."""
        deadline = time.monotonic() + timeout
        while True:
            await asyncio.sleep(0.01)
            busy = [b for b in self.backends if isinstance(b, WorkerThread) and b._worker and b._worker.pending]
            if not busy:
                return
            if time.monotonic() > deadline:
                raise TimeoutError(f"sites still waiting for answers: {[b.name for b in busy]}")  # type: ignore[attr-defined]

    def state(self, job: int) -> str:
        """The state of job `job` in the database."""
        row = self.store.job(job)
        assert row is not None, f"job {job} has no row"
        return str(row["state"])

    def close(self) -> None:
        """Stop the sites' worker threads and close the database."""
        for b in self.backends:
            b.close()
        self.store.close()


def spec(size: int = 1, **more: Any) -> dict[str, Any]:
    """A validated job request running `true` on `size` processors."""
    return {"command": "/bin/true", "size": size, **more}
