"""What every live role receives: `LiveContext`.

The roles of the live manager - `Intake` (submissions), `PilotHub` (pilots), `BagRunner` (bags'
launchers) and `recover` - take a `LiveContext`, never the daemon (`isthmus.live.manager`). The
site backends behind external systems (isthmus.backends: `BatchCluster`, `PilotJobs`,
`ProviderCloud`) take it too, as the `isthmus.backends.host.SiteHost` it satisfies.
The context holds what they share: the configuration, the database, the wall clock and the
engine; the scheduling of later work on the event loop; the bracket around external events; the
one writer of the database (`persist`); the manager's health (stopping, failed writes); and the
other roles, which the daemon's wiring sets once they are built. A test builds a context and the
roles it needs without a server or a process (tests/live/unit).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from isthmus.agent.accounts import Account, AccountError, lookup
from isthmus.engine.budgets import ledger_snapshot
from isthmus.engine.clock import RealtimeClock
from isthmus.live.errors import PersistError
from isthmus.model.environment import Environment
from isthmus.store import tables as db

if TYPE_CHECKING:
    from isthmus.engine.engine import Engine
    from isthmus.live.bag_tasks import BagRunner
    from isthmus.live.intake import Intake
    from isthmus.live.pilots import PilotHub
    from isthmus.store.projector import Projector

__all__ = ["DEFAULT_ESTIMATE", "LiveContext", "ManagerConfig", "PeerHooks"]

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
    max_lost_runs: int = 3  # a job whose run is lost this many times fails (isthmus.live.lost_runs)

    advertise_url: str | None = None  # what pilots on other machines are told; default from host/port
    tls_cert: Path | None = None  # the API is served over HTTPS with this certificate (and tls_key)
    tls_key: Path | None = None
    pilot_ca_file: Path | None = None  # pilots verify the manager against it (None: the system's CAs)
    insecure_http: bool = False  # the operator allows plain HTTP outside loopback (pilots are told so)

    @property
    def url(self) -> str:
        """The URL pilots use to reach the manager (a wildcard address becomes this machine's name)."""
        if self.advertise_url:
            return self.advertise_url.rstrip("/")
        host = socket.getfqdn() if self.host in ("0.0.0.0", "::", "") else self.host
        scheme = "https" if self.tls_cert is not None else "http"
        return f"{scheme}://[{host}]:{self.port}" if ":" in host else f"{scheme}://{host}:{self.port}"

    def pilot_tls_args(self) -> list[str]:
        """The `isthmus agent` options every pilot is started with: the CA file to verify the
        manager against, and --insecure-http when the operator allowed plain HTTP."""
        args = ["--ca-file", str(self.pilot_ca_file)] if self.pilot_ca_file is not None else []
        return [*args, "--insecure-http"] if self.insecure_http else args


class LiveContext:
    """The configuration, database, clock, engine and roles the live roles share.

    Built first from the configuration, the database and the clock; the wiring then builds the
    roles with it and sets `hub`, `intake`, `bags`, `projector` and `engine` before anything
    runs. `federation` stays None without peers.
    """

    engine: Engine
    hub: PilotHub
    intake: Intake
    bags: BagRunner
    projector: Projector

    def __init__(self, config: ManagerConfig, store: db.Store, clock: RealtimeClock) -> None:
        self.config = config
        self.env = config.env
        self.store = store
        self.clock = clock
        self.state_dir = Path(config.state_dir)
        #: where jobs' outputs and pilots' pools live
        self.spool = self.state_dir / "spool"
        #: the peer managers (None without [[peers]]; docs/federation.md)
        self.federation: PeerHooks | None = None
        #: no new work is started: the manager is stopping
        self.stopping = False
        #: how the current stop treats running jobs: None (running), "detach", "kill" or "drain"
        self.stop_mode: str | None = None
        #: why the last write failed, while writes fail (the manager is unhealthy); None when they work
        self.persist_error: str | None = None
        self._persist_retry_at = 0.0
        #: the per-user budget ledger snapshot last written (isthmus.engine.budgets.ledger_snapshot)
        self._ledger_written: str | None = None
        self._timers: list[asyncio.TimerHandle] = []

    def run_as(self, user: str) -> dict[str, str | None]:
        """The ``user`` field of a command starting a job of isthmus user `user` on a pilot: the
        Unix account it runs as (the environment's ``[users]``; None when `user` has none, which
        the pilot refuses); empty without a ``[users]`` table (it runs as its pilot's user)."""
        users = self.env.users
        return {} if users is None else {"user": users.account_of(user)}

    def job_account(self, job: int) -> Account | None:
        """The Unix account job `job` runs as, looked up on this machine (None without a
        ``[users]`` table); AccountError when its user has none, or none here."""
        users = self.env.users
        if users is None:
            return None
        user = self.intake.users.get(job, "")
        name = users.account_of(user)
        if name is None:
            raise AccountError(f"user {user!r} has no Unix account in the environment's [users] table")
        return lookup(name)

    # ----------------------------------------------------------------- time and events

    def later(self, delay: float, fn: Callable[..., Any], *args: Any) -> None:
        """Call `fn(*args)` on the running event loop after `delay` seconds (cancelled by
        `cancel_timers`)."""
        loop = asyncio.get_running_loop()
        self._timers.append(loop.call_later(max(0.0, delay), fn, *args))
        if len(self._timers) > 256:
            self._timers = [t for t in self._timers if not t.cancelled() and t.when() > loop.time()]

    def cancel_timers(self) -> None:
        """Cancel every call `later` scheduled that has not run yet (at stop)."""
        for t in self._timers:
            t.cancel()
        self._timers = []

    def catch_up(self) -> None:
        """Before reading or changing the engine outside the clock's loop: handle every due
        event and bring the clock to the wall time. Used alone where persistence follows
        elsewhere (the group commit of submissions, or the bracket of a caller)."""
        self.clock.catch_up()

    @contextmanager
    def external(self) -> Iterator[None]:
        """Bracket an external event (an API call, a pilot's message, a site's answer).

        On entry, the clock handles every due event and reaches the wall time. On exit, also
        when the body raised, it runs what became due (with event-triggered rounds, the round
        the event asked for), persists it all in one transaction and wakes the loop for the
        rest. The body's exception wins over a failed write at exit (the loop retries it).
        """
        self.clock.catch_up()
        try:
            yield
        except BaseException:
            # the body's error is the one to report; the clock's loop retries a failed write
            with contextlib.suppress(PersistError):
                self._after()
            raise
        self._after()

    def _after(self) -> None:
        self.clock.catch_up()
        self.persist()
        self.clock.wake()

    # ----------------------------------------------------------------------- persistence

    def persist(self) -> None:
        """Write the submissions and engine events since the last call (and what they imply) in one
        transaction. If it fails, nothing in memory has moved on: the next call writes them again.

        PersistError while the database refuses writes (read-only, full disk, locked): the
        manager is unhealthy (`persist_error`) and retries at most every half second until a
        write succeeds; commands that depend on unwritten events are not handed to pilots.
        """
        engine = self.engine
        n = len(engine.log)
        fed = self.federation
        ledger = ledger_snapshot(engine.ledger) if engine.ledger.per_user else None
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

    def forget(self, job: int) -> None:
        """A job ended and is stored: every role drops what it kept of it."""
        self.intake.forget(job)
        self.hub.forget(job)
        self.bags.forget(job)
