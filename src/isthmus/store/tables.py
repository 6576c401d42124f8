"""Persistence of the live manager through SQLAlchemy 2 (Core): SQLite by default, PostgreSQL by URL.

Tables: jobs (spec, state, site, slots, run, restarts, exit code, times, output files),
job_history (every state a job went through, with its time), events (the engine's event log,
row for row), vms (leases, for billing), pilots (registered agents), users and tokens.
Every write happens in the manager's event-loop thread, one short transaction at a time.
"""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from sqlalchemy import (
    Boolean,
    Column,
    Connection,
    Engine,
    Float,
    Index,
    Integer,
    MetaData,
    String,
    Table,
    Text,
    bindparam,
    create_engine,
    delete,
    event,
    func,
    insert,
    inspect,
    select,
    update,
)
from sqlalchemy.pool import PoolProxiedConnection, QueuePool

from isthmus.model.events import EventKind, EventLog
from isthmus.model.states import TERMINAL_NAMES, JobState, TaskState, VmState
from isthmus.store.sqlite_files import ShmGuard, StoreUnavailableError, create_private, sqlite_file

metadata = MetaData()

#: engines left open at close because closing them would touch an unsafe `-shm` file (Store.close)
_UNCLOSED: list[Engine] = []

meta = Table("meta", metadata, Column("key", String(64), primary_key=True), Column("value", Text, nullable=False))

users = Table(
    "users",
    metadata,
    Column("name", String(64), primary_key=True),
    Column("admin", Boolean, nullable=False, default=False),
    Column("created", Float, nullable=False),
)

tokens = Table(
    "tokens",
    metadata,
    Column("hash", String(64), primary_key=True),
    Column("user", String(64), nullable=True),  # None for pilot tokens
    Column("kind", String(8), nullable=False),  # "user" | "pilot"
    Column("node", String(64), nullable=True),  # pilot tokens: the node key the pilot serves
    Column("created", Float, nullable=False),
    Column("expires", Float, nullable=True),  # wall time after which it is refused; None: never
)

TOKEN_ID_LENGTH = 12
"""A token is named by this many leading hex digits of its hash (never by the token itself)."""

jobs = Table(
    "jobs",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("user", String(64), nullable=False, index=True),
    Column("name", String(128), nullable=False),
    Column("spec", Text, nullable=False),  # JSON of the submit request
    Column("size", Integer, nullable=False),
    Column("priority", String(16), nullable=False),
    Column("requested_runtime", Float, nullable=True),
    Column("state", String(16), nullable=False, index=True),
    Column("stage", Integer, nullable=False, default=0),
    Column("site", Integer, nullable=True),
    Column("slots", Text, nullable=True),  # JSON list of [node key, slot index]
    Column("run", Integer, nullable=False, default=0),
    Column("limit_s", Float, nullable=True),  # runtime limit of the current run (TAGS), None: none
    Column("restarts", Integer, nullable=False, default=0),
    Column("exit_code", Integer, nullable=True),
    Column("submit_time", Float, nullable=False),
    Column("start_time", Float, nullable=True),
    Column("end_time", Float, nullable=True),
    Column("runtime", Float, nullable=True),
    Column("spool", Text, nullable=False),
    Column("reason", Text, nullable=True),
)

job_history = Table(
    "job_history",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("job_id", Integer, nullable=False),
    Column("time", Float, nullable=False),
    Column("state", String(16), nullable=False),
    Column("run", Integer, nullable=False),
    Column("detail", Text, nullable=False, default=""),
    Index("ix_job_history_job", "job_id"),
)

events = Table(
    "events",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("time", Float, nullable=False),
    Column("kind", Integer, nullable=False),
    Column("job", Integer, nullable=False),
    Column("site", Integer, nullable=False),
    Column("vm", Integer, nullable=False),
    Column("value", Float, nullable=False),
    Column("run", Integer, nullable=False, default=-1),
    Column("slots", Integer, nullable=False, default=0),
    Column("policy", String(64), nullable=True),
    Column("origin", String(128), nullable=True),
    Column("task", Integer, nullable=False, default=-1),
    Column("note", Text, nullable=True),  # the reason of a refused decision or a failed VM
)

#: Columns added to `events` after the first release, created on an older database at start.
TOKEN_COLUMNS_ADDED = {"expires": "FLOAT"}
"""Columns added to `tokens` since the first release: `Store.create` adds them to older databases."""

VM_COLUMNS_ADDED = {
    "provider_id": "VARCHAR(128)",
    "vm_type": "INTEGER NOT NULL DEFAULT 0",
    "image": "INTEGER NOT NULL DEFAULT 0",
    "owner": "VARCHAR(64)",
}
"""Columns added to `vms` since the first release (real clouds' instance ids; instance type and
image indices and the user a VM serves)."""

EVENT_COLUMNS_ADDED = {
    "run": "INTEGER NOT NULL DEFAULT -1",
    "slots": "INTEGER NOT NULL DEFAULT 0",
    "policy": "VARCHAR(64)",
    "origin": "VARCHAR(128)",
    "task": "INTEGER NOT NULL DEFAULT -1",
    "note": "TEXT",
}

vms = Table(
    "vms",
    metadata,
    Column("site", Integer, primary_key=True, autoincrement=False),
    Column("vm", Integer, primary_key=True, autoincrement=False),
    Column("state", String(12), nullable=False),  # a VmState (isthmus.model.states)
    Column("cores", Integer, nullable=False),
    Column("leased_at", Float, nullable=False),
    Column("ready_at", Float, nullable=True),
    Column("released_at", Float, nullable=True),
    Column("gone_at", Float, nullable=True),
    Column("provider_id", String(128), nullable=True),  # the provider's instance id (real clouds)
    Column("vm_type", Integer, nullable=False, default=0),  # index in the site's instance types
    Column("image", Integer, nullable=False, default=0),  # index in the site's images
    Column("owner", String(64), nullable=True),  # the user it serves (vm-share), None: anyone
)

pilots = Table(
    "pilots",
    metadata,
    Column("node", String(64), primary_key=True),  # "<site index>/n<node>" or "<site index>/vm<id>"
    Column("site", Integer, nullable=False),
    Column("slots", Integer, nullable=False),
    Column("pid", Integer, nullable=True),
    Column("host", String(128), nullable=True),
    Column("state", String(12), nullable=False),  # a PilotState (isthmus.model.states)
    Column("registered_at", Float, nullable=True),
    Column("last_seen", Float, nullable=True),
)

bag_tasks = Table(
    "bag_tasks",
    metadata,
    # one row per task of a bag of tasks (docs/bags.md): its command line, where its output goes,
    # and what became of it; the results index (KOALA-CS thesis §3.5.4) is read from here
    Column("bag", Integer, primary_key=True, autoincrement=False),
    Column("idx", Integer, primary_key=True, autoincrement=False),
    Column("command", Text, nullable=False),
    Column("state", String(12), nullable=False),  # a TaskState (isthmus.model.states)
    Column("attempts", Integer, nullable=False, default=0),  # runs started
    Column("failures", Integer, nullable=False, default=0),  # runs that exited non-zero
    Column("exit_code", Integer, nullable=True),  # of its last run that ended
    Column("runtime", Float, nullable=True),  # of its last run that ended, as its pilot measured it
    Column("end_time", Float, nullable=True),
    Column("node", String(64), nullable=True),  # the pilot node of its last run
    Column("output", Text, nullable=False),  # its stdout file (stderr: the same name ending in .err)
)

forwarded_jobs = Table(
    "forwarded_jobs",
    metadata,
    # a job forwarded from here to a peer (docs/federation.md): its id here, where it went, the
    # peer's id for it once the peer answered submitJob, its last known state there
    Column("job_id", Integer, primary_key=True, autoincrement=False),
    Column("peer", String(128), nullable=False),
    Column("remote_id", Integer, nullable=True),
    Column("chain", Text, nullable=False),  # JSON list of the managers it visited, its origin first
    Column("state", String(16), nullable=False),  # sending | a JobState value | returned
    Column("site", String(256), nullable=True),  # where it runs, as the peer says ("B/c1")
    Column("sent_at", Float, nullable=False),
    Column("updated_at", Float, nullable=False),
    Column("open", Boolean, nullable=False),  # False once it ended, was handed back or cancelled
)

received_jobs = Table(
    "received_jobs",
    metadata,
    # a job a peer forwarded here: its local id, its origin and the origin's id, who sent it
    # (sender, origin and origin id unique: a repeated submitJob from the same sender answers the
    # same local id; another sender naming the same origin id is another job), the chain
    Column("local_id", Integer, primary_key=True, autoincrement=False),
    Column("origin", String(128), nullable=False),
    Column("origin_id", Integer, nullable=False),
    Column("sender", String(128), nullable=False),
    Column("sender_id", Integer, nullable=False),
    Column("chain", Text, nullable=False),
    Column("received_at", Float, nullable=False),
    Index("ux_received_sender_origin", "sender", "origin", "origin_id", unique=True),
    Index("ix_received_sender", "sender", "sender_id"),
)

RECEIVED_INDEXES_DROPPED = ("ux_received_origin",)
"""Indexes of `received_jobs` an older database has and this schema does not: the unique one
on (origin, origin_id) alone, which merged two senders' jobs naming the same origin id."""


def upgrade_received_jobs(engine: Engine) -> None:
    """Replace the older unique index of `received_jobs` by the one keyed on the sender too
    (idempotent; existing rows satisfy the new one, which is finer)."""
    have = {ix["name"] for ix in inspect(engine).get_indexes("received_jobs")}
    stale = [name for name in RECEIVED_INDEXES_DROPPED if name in have]
    if not stale:
        return
    with engine.begin() as conn:
        for name in stale:
            conn.exec_driver_sql(f"DROP INDEX {name}")
        for ix in received_jobs.indexes:
            if ix.name not in have:
                ix.create(conn)


idempotency_keys = Table(
    "idempotency_keys",
    metadata,
    # a user's Idempotency-Key of a submission (docs/live.md), written in the transaction that
    # stores the jobs it created: a retried request answers the same ids instead of storing again
    Column("user", String(64), primary_key=True),
    Column("key", String(255), primary_key=True),
    Column("digest", String(64), nullable=False),  # SHA-256 of the route and the validated request
    Column("ids", Text, nullable=False),  # JSON list of the job ids it answered
    Column("created", Float, nullable=False),  # wall time; kept IDEMPOTENCY_TTL seconds
    Index("ix_idempotency_created", "created"),
)

IDEMPOTENCY_TTL = 24 * 3600.0
"""Seconds an Idempotency-Key is remembered after the submission it stored (then it may be reused)."""

TERMINAL = TERMINAL_NAMES
"""Job states stored for jobs that ended (the one vocabulary: isthmus.model.states)."""

# Statements built once: the hot paths (submission, start, end) execute them with parameters, so
# SQLAlchemy neither rebuilds the expression nor recomputes its cache key per call.
INSERT_JOB = insert(jobs)
INSERT_HISTORY = insert(job_history)
INSERT_EVENTS = insert(events)
SELECT_RUN = select(jobs.c.run).where(jobs.c.id == bindparam("b_id"))
UPDATE_JOB_START = (
    update(jobs)
    .where(jobs.c.id == bindparam("b_id"))
    .values(
        state=JobState.STARTING.value,
        site=bindparam("b_site"),
        slots=bindparam("b_slots"),
        run=bindparam("b_run"),
        limit_s=bindparam("b_limit"),
        start_time=bindparam("b_time"),
        end_time=None,
        exit_code=None,
        runtime=None,
    )
)
UPDATE_JOB_END = (
    update(jobs)
    .where(jobs.c.id == bindparam("b_id"))
    .values(
        state=bindparam("b_state"),
        exit_code=bindparam("b_code"),
        end_time=bindparam("b_time"),
        # what the site measured, else the time from the run's start (a batch system's own job)
        runtime=func.coalesce(
            bindparam("b_runtime", type_=Float), bindparam("b_time", type_=Float) - jobs.c.start_time
        ),
    )
)
INSERT_BAG_TASKS = insert(bag_tasks)
INSERT_IDEMPOTENCY = insert(idempotency_keys)
PURGE_IDEMPOTENCY = delete(idempotency_keys).where(idempotency_keys.c.created < bindparam("b_before"))
_TASK_KEY = (bag_tasks.c.bag == bindparam("b_bag"), bag_tasks.c.idx == bindparam("b_idx"))
UPDATE_TASK_START = (
    update(bag_tasks)
    .where(*_TASK_KEY)
    .values(state=TaskState.RUNNING.value, attempts=bag_tasks.c.attempts + 1, node=bindparam("b_node"))
)
UPDATE_TASK_END = (
    update(bag_tasks)
    .where(*_TASK_KEY)
    .values(
        state=bindparam("b_state"),
        failures=bag_tasks.c.failures + bindparam("b_failed"),
        exit_code=bindparam("b_code"),
        runtime=bindparam("b_runtime"),
        end_time=bindparam("b_time"),
    )
)
UPDATE_TASK_QUEUED = update(bag_tasks).where(*_TASK_KEY).values(state=TaskState.QUEUED.value)
COUNT_FAILED_TASKS = (
    select(func.count())
    .select_from(bag_tasks)
    .where(bag_tasks.c.bag == bindparam("b_bag"), bag_tasks.c.state == TaskState.FAILED.value)
)
UPDATE_JOB_RUNNING = (
    update(jobs)
    .where(jobs.c.id == bindparam("b_id"), jobs.c.run == bindparam("b_run"), jobs.c.state == JobState.STARTING.value)
    .values(state=JobState.RUNNING.value)
)


def normalize_url(url: str) -> str:
    """Pick the psycopg (v3) driver for plain postgresql:// URLs."""
    if url.startswith("postgresql://") or url.startswith("postgres://"):
        return "postgresql+psycopg://" + url.split("://", 1)[1]
    return url


def sqlite_url(path: str | Path) -> str:
    """The SQLAlchemy URL of an SQLite file."""
    return f"sqlite:///{Path(path).resolve()}"


def make_engine(url: str, busy_timeout: float = 30.0, guard: ShmGuard | None = None) -> Engine:
    """An SQLAlchemy engine; SQLite gets WAL journaling and relaxed fsync (crash-safe, not power-safe)
    and waits at most `busy_timeout` seconds for a lock held by another process. With `guard`, a
    connection is handed out only after `guard.check()` found the `-shm` file safe to touch
    (StoreUnavailableError otherwise, raised before the pool touches any connection: closing one
    would touch the file too)."""
    url = normalize_url(url)
    if url.startswith("sqlite"):
        kwargs: dict[str, Any] = {}
        if guard is not None:
            shm_guard = guard

            class GuardedPool(QueuePool):
                """The connection pool that asks the guard first."""

                def connect(self) -> PoolProxiedConnection:
                    """A connection, once the `-shm` file is safe to touch."""
                    shm_guard.check()
                    return super().connect()

            kwargs["poolclass"] = GuardedPool
        eng = create_engine(url, connect_args={"check_same_thread": False, "timeout": busy_timeout}, **kwargs)

        @event.listens_for(eng, "connect")
        def _pragmas(dbapi_conn: Any, _record: Any) -> None:
            cur = dbapi_conn.cursor()
            cur.execute("PRAGMA journal_mode=WAL")
            cur.execute("PRAGMA synchronous=NORMAL")
            cur.execute("PRAGMA foreign_keys=OFF")
            cur.close()

        return eng
    return create_engine(url, pool_pre_ping=True)


def store_unsafe(store: Store) -> str | None:
    """Why `store` may not be used now (its SQLite `-shm` file looked at afresh), None when it may."""
    if store.shm_guard is None:
        return None
    with contextlib.suppress(StoreUnavailableError):
        store.shm_guard.check()
    return store.shm_guard.unsafe


class Store:
    """The manager's database: schema creation and the few queries the manager and API need."""

    def __init__(self, url: str, busy_timeout: float = 30.0) -> None:
        self.url = normalize_url(url)
        database = sqlite_file(self.url)
        #: watches the SQLite `-shm` file (None for PostgreSQL and in-memory SQLite)
        self.shm_guard = ShmGuard(database) if database is not None else None
        if database is not None:
            create_private(database)
        self.engine = make_engine(self.url, busy_timeout, self.shm_guard)

    def create(self) -> None:
        """Create missing tables and the event columns an older database lacks (idempotent)."""
        metadata.create_all(self.engine)
        for table, added in (
            ("events", EVENT_COLUMNS_ADDED),
            ("tokens", TOKEN_COLUMNS_ADDED),
            ("vms", VM_COLUMNS_ADDED),
        ):
            have = {c["name"] for c in inspect(self.engine).get_columns(table)}
            missing = [(name, ddl) for name, ddl in added.items() if name not in have]
            if missing:
                with self.engine.begin() as conn:
                    for name, ddl in missing:
                        conn.exec_driver_sql(f"ALTER TABLE {table} ADD COLUMN {name} {ddl}")
        upgrade_received_jobs(self.engine)

    def close(self) -> None:
        """Release every pooled connection; while the `-shm` file may not be touched, keep them
        open instead (closing the last one checkpoints through the map: SIGBUS) and leave the
        WAL to the next start, which replays it."""
        if store_unsafe(self) is not None:
            _UNCLOSED.append(self.engine)
            return
        self.engine.dispose()

    def begin(self) -> Any:
        """A transaction context: `with store.begin() as conn: ...`."""
        return self.engine.begin()

    # ------------------------------------------------------------------ meta, users, tokens

    def get_meta(self, key: str) -> str | None:
        """A value of the meta table, None if unset."""
        with self.engine.connect() as conn:
            return conn.execute(select(meta.c.value).where(meta.c.key == key)).scalar()

    def set_meta(self, conn: Connection, key: str, value: str) -> None:
        """Set a meta value inside transaction `conn`."""
        if conn.execute(select(meta.c.key).where(meta.c.key == key)).first() is None:
            conn.execute(insert(meta).values(key=key, value=value))
        else:
            conn.execute(update(meta).where(meta.c.key == key).values(value=value))

    def ensure_user(self, conn: Connection, name: str, *, admin: bool = False) -> None:
        """Create user `name` if missing."""
        if conn.execute(select(users.c.name).where(users.c.name == name)).first() is None:
            conn.execute(insert(users).values(name=name, admin=admin, created=time.time()))

    def add_token(
        self,
        conn: Connection,
        token_hash: str,
        *,
        user: str | None,
        kind: str,
        node: str | None = None,
        expires: float | None = None,
    ) -> None:
        """Store a token's hash (and the wall time it expires at, if any)."""
        conn.execute(
            insert(tokens).values(
                hash=token_hash, user=user, kind=kind, node=node, created=time.time(), expires=expires
            )
        )

    def lookup_token(self, token_hash: str) -> tuple[str | None, str, str | None, bool, float | None] | None:
        """(user, kind, node, admin, expires) for a token hash, None if unknown."""
        with self.engine.connect() as conn:
            row = conn.execute(
                select(tokens.c.user, tokens.c.kind, tokens.c.node, users.c.admin, tokens.c.expires)
                .select_from(tokens.outerjoin(users, users.c.name == tokens.c.user))
                .where(tokens.c.hash == token_hash)
            ).first()
        if row is None:
            return None
        return row[0], row[1], row[2], bool(row[3]), row[4]

    def user_tokens(self) -> list[dict[str, Any]]:
        """Every user token: its id (the first hex digits of its hash), user, created and expires."""
        with self.engine.connect() as conn:
            rows = conn.execute(
                select(tokens.c.hash, tokens.c.user, tokens.c.created, tokens.c.expires)
                .where(tokens.c.kind == "user")
                .order_by(tokens.c.user, tokens.c.created)
            )
            return [
                {"id": r.hash[:TOKEN_ID_LENGTH], "user": r.user, "created": r.created, "expires": r.expires}
                for r in rows
            ]

    def revoke_token(self, token_id: str) -> list[str]:
        """Delete the user tokens whose hash starts with `token_id` if exactly one does; returns the
        hashes that matched (none: unknown; several: ambiguous, nothing deleted)."""
        with self.engine.begin() as conn:
            found = [
                r[0]
                for r in conn.execute(
                    select(tokens.c.hash).where(
                        tokens.c.kind == "user", tokens.c.hash.startswith(token_id, autoescape=True)
                    )
                )
            ]
            if len(found) == 1:
                conn.execute(delete(tokens).where(tokens.c.hash == found[0]))
            return found

    def list_users(self) -> list[dict[str, Any]]:
        """All users."""
        with self.engine.connect() as conn:
            return [dict(r._mapping) for r in conn.execute(select(users).order_by(users.c.name))]

    # ---------------------------------------------------------------------------- jobs

    def job(self, job_id: int) -> dict[str, Any] | None:
        """One job row as a dict (spec and slots decoded), None if unknown."""
        with self.engine.connect() as conn:
            row = conn.execute(select(jobs).where(jobs.c.id == job_id)).first()
        return _job_dict(row._mapping) if row is not None else None

    def history(self, job_id: int) -> list[dict[str, Any]]:
        """The state history of a job, oldest first."""
        with self.engine.connect() as conn:
            rows = conn.execute(
                select(job_history.c.time, job_history.c.state, job_history.c.run, job_history.c.detail)
                .where(job_history.c.job_id == job_id)
                .order_by(job_history.c.id)
            )
            return [dict(r._mapping) for r in rows]

    def list_jobs(
        self, *, user: str | None, states: Sequence[str] | None, limit: int = 1000, finished: bool = False
    ) -> list[dict[str, Any]]:
        """Jobs, newest last; only `user`'s when given; active ones unless `finished` or `states`."""
        q = select(jobs)
        if user is not None:
            q = q.where(jobs.c.user == user)
        if states:
            q = q.where(jobs.c.state.in_(list(states)))
        elif not finished:
            q = q.where(jobs.c.state.not_in(TERMINAL))
        q = q.order_by(jobs.c.id.desc()).limit(limit)
        with self.engine.connect() as conn:
            out = [_job_dict(r._mapping) for r in conn.execute(q)]
        out.reverse()
        return out

    def active_jobs(self) -> list[dict[str, Any]]:
        """Every job not in a terminal state, by id."""
        with self.engine.connect() as conn:
            rows = conn.execute(select(jobs).where(jobs.c.state.not_in(TERMINAL)).order_by(jobs.c.id))
            return [_job_dict(r._mapping) for r in rows]

    def vm_rows(self, *, live_only: bool = False) -> list[dict[str, Any]]:
        """VM leases, by site and id."""
        q = select(vms).order_by(vms.c.site, vms.c.vm)
        if live_only:
            q = q.where(vms.c.state != VmState.GONE.value)
        with self.engine.connect() as conn:
            return [dict(r._mapping) for r in conn.execute(q)]

    def set_vm_provider_id(self, site: int, vm: int, provider_id: str) -> None:
        """Record the provider's instance id of a VM (as soon as the provider answered its lease)."""
        with self.engine.begin() as conn:
            conn.execute(update(vms).where(vms.c.site == site, vms.c.vm == vm).values(provider_id=provider_id))

    def vm_provider_ids(self, site: int) -> dict[int, str]:
        """The recorded instance ids of the live VMs of `site`, by VM id."""
        q = select(vms.c.vm, vms.c.provider_id).where(
            vms.c.site == site, vms.c.state != VmState.GONE.value, vms.c.provider_id.is_not(None)
        )
        with self.engine.connect() as conn:
            return {int(vm): str(pid) for vm, pid in conn.execute(q)}

    def set_slots(self, job: int, run: int, slots: list[tuple[str, int]]) -> None:
        """Record where run `run` of `job` runs, once its site has said (a batch system's job id)."""
        with self.engine.begin() as conn:
            conn.execute(update(jobs).where(jobs.c.id == job, jobs.c.run == run).values(slots=json.dumps(slots)))

    def job_counts(self) -> dict[str, int]:
        """How many jobs are in each state (states with none are absent)."""
        q = select(jobs.c.state, func.count()).group_by(jobs.c.state)
        with self.engine.connect() as conn:
            return {state: int(n) for state, n in conn.execute(q)}

    def vm_counts(self) -> dict[int, tuple[int, int]]:
        """Per site index: (VMs ever leased, VMs whose release was requested)."""
        q = select(vms.c.site, func.count(), func.count(vms.c.released_at)).group_by(vms.c.site)
        with self.engine.connect() as conn:
            return {int(site): (int(leased), int(released)) for site, leased, released in conn.execute(q)}

    def pilot_rows(self) -> list[dict[str, Any]]:
        """Every pilot ever recorded, by node key."""
        with self.engine.connect() as conn:
            return [dict(r._mapping) for r in conn.execute(select(pilots).order_by(pilots.c.node))]

    def event_rows(self) -> list[tuple[float, int, int, int, int, float]]:
        """The persisted event log, in order."""
        with self.engine.connect() as conn:
            rows = conn.execute(
                select(events.c.time, events.c.kind, events.c.job, events.c.site, events.c.vm, events.c.value).order_by(
                    events.c.id
                )
            )
            return [tuple(r) for r in rows]

    def event_log(self) -> EventLog:
        """The persisted event log read back into an `EventLog` (runs, slots and policies too)."""
        log = EventLog()
        cols = events.c
        q = select(
            cols.time, cols.kind, cols.job, cols.site, cols.vm, cols.value, cols.run, cols.slots, cols.policy
        ).order_by(cols.id)
        with self.engine.connect() as conn:
            for t, kind, job, site, vm, value, run, slots, policy in conn.execute(q):
                log.append(t, kind, job, site, vm, value, run, log.policy_index(policy or ""), slots=slots)
        return log

    def job_owners(self) -> list[tuple[int, str, int, float, float | None]]:
        """(id, user, size, submit time, requested runtime) of every job."""
        q = select(jobs.c.id, jobs.c.user, jobs.c.size, jobs.c.submit_time, jobs.c.requested_runtime)
        with self.engine.connect() as conn:
            return [tuple(r) for r in conn.execute(q.order_by(jobs.c.id))]

    def insert_events(self, conn: Connection, rows: Iterable[Mapping[str, Any]]) -> None:
        """Append engine events."""
        rows = list(rows)
        if rows:
            conn.execute(INSERT_EVENTS, rows)

    def bag_tasks(
        self, bag: int, *, states: Sequence[str] | None = None, offset: int = 0, limit: int | None = None
    ) -> list[dict[str, Any]]:
        """The tasks of `bag` in index order (only those in `states` when given), from `offset`."""
        q = select(bag_tasks).where(bag_tasks.c.bag == bag)
        if states:
            q = q.where(bag_tasks.c.state.in_(list(states)))
        q = q.order_by(bag_tasks.c.idx).offset(offset)
        if limit is not None:
            q = q.limit(limit)
        with self.engine.connect() as conn:
            return [dict(r._mapping) for r in conn.execute(q)]

    def bag_task(self, bag: int, idx: int) -> dict[str, Any] | None:
        """One task of `bag`, None if it has no task `idx`."""
        with self.engine.connect() as conn:
            row = conn.execute(select(bag_tasks).where(bag_tasks.c.bag == bag, bag_tasks.c.idx == idx)).first()
        return dict(row._mapping) if row is not None else None

    def requeue_running_tasks(self, bag: int) -> None:
        """After a restart: the tasks of `bag` recorded as running wait in its queue again."""
        with self.engine.begin() as conn:
            conn.execute(
                update(bag_tasks)
                .where(bag_tasks.c.bag == bag, bag_tasks.c.state == TaskState.RUNNING.value)
                .values(state=TaskState.QUEUED.value)
            )

    def bag_counts(self, bag: int) -> dict[str, int]:
        """How many tasks of `bag` are in each state (states with none are absent)."""
        q = select(bag_tasks.c.state, func.count()).where(bag_tasks.c.bag == bag).group_by(bag_tasks.c.state)
        with self.engine.connect() as conn:
            return {state: int(n) for state, n in conn.execute(q)}

    def bag_span(self, bag: int) -> tuple[float | None, float | None]:
        """(first, last) end time of the tasks of `bag` that ended."""
        q = select(func.min(bag_tasks.c.end_time), func.max(bag_tasks.c.end_time)).where(bag_tasks.c.bag == bag)
        with self.engine.connect() as conn:
            row = conn.execute(q).first()
        return (row[0], row[1]) if row is not None else (None, None)

    def max_bag_slot(self) -> int:
        """The largest bag processor (launcher) id in the event log, -1 when there is none."""
        kinds = [int(EventKind.TASK_START), int(EventKind.BAG_RELEASE)]
        with self.engine.connect() as conn:
            value = conn.execute(select(func.max(events.c.vm)).where(events.c.kind.in_(kinds))).scalar()
        return int(value) if value is not None else -1

    def idempotency_key(self, user: str, key: str, since: float) -> tuple[str, list[int]] | None:
        """(request digest, job ids) of the submission `user` stored under `key` at wall time
        `since` or later; None when there is none (never used, or expired)."""
        t = idempotency_keys
        q = select(t.c.digest, t.c.ids).where(t.c.user == user, t.c.key == key, t.c.created >= since)
        with self.engine.connect() as conn:
            row = conn.execute(q).first()
        return (str(row[0]), [int(i) for i in json.loads(row[1])]) if row is not None else None

    def max_job_id(self) -> int:
        """The largest job id stored, 0 when there is none."""
        with self.engine.connect() as conn:
            return int(conn.execute(select(func.max(jobs.c.id))).scalar() or 0)


def _job_dict(row: Any) -> dict[str, Any]:
    d = dict(row)
    d["spec"] = json.loads(d["spec"])
    d["slots"] = json.loads(d["slots"]) if d.get("slots") else []
    return d
