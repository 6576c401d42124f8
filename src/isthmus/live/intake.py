"""Job intake: submissions become engine jobs and database rows, acknowledged once stored.

`submit` puts a validated request into the engine at once and queues its rows; `committed`
waits for the group commit that stores them (N concurrent submissions, one transaction).
Job ids are allocated here, by the one writer.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from isthmus.agent.accounts import Account, AccountError, lookup
from isthmus.agent.pilot import task_outputs
from isthmus.backends.jobfiles import OutputPathError, check_outputs, fill
from isthmus.engine.matching import admission_refusal, unmatched_fields
from isthmus.live.bag_tasks import out_dir
from isthmus.live.errors import PersistError, RequestError
from isthmus.model.job import Job, JobKind, PriorityClass, VmRequirements
from isthmus.model.states import JobState
from isthmus.model.status import Status
from isthmus.model.vmtypes import is_empty
from isthmus.policies import registry
from isthmus.store import tables as db

if TYPE_CHECKING:
    from isthmus.live.context import LiveContext

COMMIT_WAIT = 10.0
"""Seconds a submitter waits for its job to be stored while the database refuses writes."""

log = logging.getLogger("isthmus.live")


class Intake:
    """Submissions, cancellations and the answers about queued jobs."""

    def __init__(self, ctx: LiveContext, next_job_id: int = 1) -> None:
        self.ctx = ctx
        #: the submit request of every job not yet ended, by id
        self.specs: dict[int, dict[str, Any]] = {}
        #: the owner of every job not yet ended, by id
        self.users: dict[int, str] = {}
        self.next_job_id = next_job_id
        self._new_jobs: list[dict[str, Any]] = []  # job rows submitted, not yet written
        self._new_history: list[dict[str, Any]] = []
        self._new_tasks: list[dict[str, Any]] = []  # bag task rows submitted, not yet written
        self._new_keys: list[dict[str, Any]] = []  # Idempotency-Key rows of those, not yet written
        #: (digest, ids) of the Idempotency-Keys not yet written, by (user, key)
        self._pending_keys: dict[tuple[str, str], tuple[str, list[int]]] = {}
        self._commit_future: asyncio.Future[None] | None = None

    def submit(self, user: str, spec: dict[str, Any]) -> int:
        """Submit a validated job request for `user`; returns the job id.

        The job is in the engine at once; its rows are written by the next persist (await
        `committed()` before acknowledging it). PersistError, before anything changes, while
        the database refuses writes.
        """
        job_id, job = self._new_job(user, spec, "submitted")
        self.ctx.engine.submit(job)
        self.ctx.clock.wake()
        return job_id

    def receive(self, user: str, spec: dict[str, Any], chain: tuple[str, ...], before: Callable[[int], None]) -> int:
        """A job forwarded by peer `chain[-1]` (submitJob, origin `chain[0]`) enters this
        manager as `user`: like `submit`, but the engine receives it with its chain (it is
        offered to the selection policy only while the chain is shorter than max_hops, and its
        origin is notified of its state). `before(job_id)` runs before the engine sees it (the
        federation records where it came from). Returns the local job id."""
        job_id, job = self._new_job(user, spec, f"received from peer {chain[-1]} (origin {chain[0]})")
        before(job_id)
        self.ctx.engine.receive(job, chain)
        self.ctx.clock.wake()
        return job_id

    def submit_bag(self, user: str, spec: dict[str, Any], commands: list[str]) -> int:
        """Submit a bag of tasks for `user` (one job; `commands` are its tasks' command lines,
        stored as its task rows); returns its id. RequestError (400) when no site of the
        environment can hold bags or no fair-share policy grows them."""
        ctx = self.ctx
        self._check_open()
        fair = ctx.env.fairshare
        if fair is None or registry.info("fairshare", fair.name).cls.shares != "bags":
            bag_policies = " or ".join(f'"{n}"' for n in registry.with_capability("fairshare", "shares", "bags"))
            raise RequestError(
                400,
                f"tasks: environment {ctx.env.name!r} has no fair-share policy for bags of tasks: set "
                f"policies.fairshare = {bag_policies} (docs/bags.md)",
            )
        if not ctx.engine.bags.sites:
            raise RequestError(
                400,
                f"tasks: no site of environment {ctx.env.name!r} can hold bags of tasks "
                "(local or pilot-mode clusters, clouds)",
            )
        self.account(user)  # refused when it has no account to run its tasks as
        spec = {**spec, "kind": "bag", "tasks": len(commands), "priority": "super-low", "size": 1}
        spec.setdefault("name", f"bag of {len(commands)} tasks")
        ctx.catch_up()
        job_id = self._row(user, spec, "submitted: a bag of tasks")
        where = out_dir(str(ctx.spool), job_id)
        self._new_tasks.extend(
            {
                "bag": job_id,
                "idx": i,
                "command": c,
                "state": "queued",
                "attempts": 0,
                "failures": 0,
                "output": task_outputs(where, i)[0],
            }
            for i, c in enumerate(commands)
        )
        ctx.bags.commands[job_id] = commands
        ctx.engine.submit(self.job_of(job_id, user, spec, ctx.clock.now))
        ctx.clock.wake()
        return job_id

    def _check_open(self) -> None:
        ctx = self.ctx
        if ctx.persist_error is not None:
            raise PersistError(ctx.persist_error)
        if ctx.stop_mode is not None or ctx.stopping:
            raise RequestError(
                503, f"the manager is stopping ({ctx.stop_mode or 'stop'}): submit again once it is back"
            )

    def _new_job(self, user: str, spec: dict[str, Any], detail: str) -> tuple[int, Job]:
        ctx = self.ctx
        self._check_open()
        size = int(spec["size"])
        self.check_size(size)
        self.check_vm(user, spec)
        # %x and %u of the output files are the job's name and owner: filled in here, where both are known
        name = spec.get("name") or Path(spec["command"]).name
        spec = {**spec, **{k: fill(spec[k], {"x": name, "u": user}) for k in ("output", "error") if spec.get(k)}}
        self.check_outputs(spec, self.next_job_id, user)
        ctx.catch_up()
        job_id = self._row(user, spec, detail)
        return job_id, self.job_of(job_id, user, spec, ctx.clock.now)

    def _row(self, user: str, spec: dict[str, Any], detail: str) -> int:
        """Allocate a job id and queue the job's row and first history line; returns the id."""
        ctx = self.ctx
        now = ctx.clock.now
        name = spec.get("name") or Path(spec["command"]).name
        job_id = self.next_job_id  # ids are allocated here (one writer): one INSERT, no UPDATE
        self.next_job_id += 1
        self._new_jobs.append(
            {
                "id": job_id,
                "user": user,
                "name": name[:128],
                "spec": json.dumps(spec),
                "size": int(spec["size"]),
                "priority": spec.get("priority", "high"),
                "requested_runtime": spec.get("requested_runtime"),
                "state": JobState.QUEUED.value,
                "stage": 0,
                "run": 0,
                "restarts": 0,
                "submit_time": now,
                "spool": str(ctx.spool / str(job_id)),
            }
        )
        self._new_history.append(
            {"job_id": job_id, "time": now, "state": JobState.QUEUED.value, "run": 0, "detail": detail}
        )
        self.specs[job_id] = spec
        self.users[job_id] = user
        return job_id

    def replay(self, user: str, key: str) -> tuple[str, list[int]] | None:
        """(request digest, job ids) of `user`'s earlier submission under Idempotency-Key `key`
        (stored, or pending with its group commit), None when the key is new (or expired)."""
        found = self._pending_keys.get((user, key))
        if found is None:
            found = self.ctx.store.idempotency_key(user, key, time.time() - db.IDEMPOTENCY_TTL)
        return found

    def key_pending(self, user: str, key: str) -> bool:
        """True while `user`'s Idempotency-Key `key` waits, with its jobs, for their group commit."""
        return (user, key) in self._pending_keys

    def remember(self, user: str, key: str, digest: str, ids: list[int]) -> None:
        """Queue `user`'s Idempotency-Key `key` of the submission just made (`ids`): it is written
        in the transaction that stores those jobs, so it is stored exactly when they are."""
        self._pending_keys[(user, key)] = (digest, ids)
        self._new_keys.append(
            {"user": user, "key": key, "digest": digest, "ids": json.dumps(ids), "created": time.time()}
        )

    def pending(self) -> bool:
        """True when submitted job rows wait to be written."""
        return bool(self._new_jobs)

    def write_new(self, conn: Any) -> None:
        """Insert the pending job rows (before the events that update them), in `conn`'s transaction."""
        if self._new_jobs:
            conn.execute(db.INSERT_JOB, self._new_jobs)
            conn.execute(db.INSERT_HISTORY, self._new_history)
        if self._new_tasks:
            conn.execute(db.INSERT_BAG_TASKS, self._new_tasks)
        if self._new_keys:
            # expired keys go first: a key may be reused once its first use expired
            conn.execute(db.PURGE_IDEMPOTENCY, {"b_before": time.time() - db.IDEMPOTENCY_TTL})
            conn.execute(db.INSERT_IDEMPOTENCY, self._new_keys)

    def written(self) -> None:
        """The transaction holding the pending rows was committed: acknowledge the waiting submitters."""
        self._new_jobs = []
        self._new_history = []
        self._new_tasks = []
        self._new_keys = []
        self._pending_keys = {}
        self.resolve_commit()

    async def committed(self) -> None:
        """Wait until every job submitted so far is in the database (group commit).

        `submit` only queues a job's rows; the first caller of `committed` in an event-loop turn
        schedules one transaction for everything pending, and every caller waits for it. So N
        concurrent submissions cost one commit, and a submission is acknowledged only once it is
        stored. Any earlier persist (a driver step, a pilot report) writes pending rows too.
        PersistError when no write succeeded within COMMIT_WAIT seconds: the rows stay pending and
        a later persist stores them under the ids already allocated (the submission routes' 503
        names them), unless the manager stops first.
        """
        if not self._new_jobs and not self.ctx.projector.pending():
            return
        fut = self._commit_future
        if fut is None:
            loop = asyncio.get_running_loop()
            fut = self._commit_future = loop.create_future()
            loop.call_soon(self._group_commit)
        try:
            # a failed commit is retried by the clock's loop: wait a while for one to succeed
            await asyncio.wait_for(asyncio.shield(fut), COMMIT_WAIT)
        except TimeoutError:
            raise PersistError(self.ctx.persist_error or "the database did not confirm the write in time") from None

    def _group_commit(self) -> None:
        try:
            self.ctx.persist()
        except PersistError:
            pass  # the waiters wait for a retry that succeeds (`written` answers them), or time out
        except Exception:
            log.exception("group commit failed")
            self.resolve_commit(RuntimeError("the submission could not be stored"))

    def resolve_commit(self, exc: BaseException | None = None) -> None:
        """Answer the submitters waiting in `committed` (with `exc` if the commit failed)."""
        fut, self._commit_future = self._commit_future, None
        if fut is not None and not fut.done():
            if exc is None:
                fut.set_result(None)
            else:
                fut.set_exception(exc)

    def check_outputs(self, spec: dict[str, Any], job_id: int, user: str | None = None) -> None:
        """RequestError (400) naming the field when the output or error file of job `job_id`
        cannot be one (isthmus.backends.jobfiles.check_outputs), or, with a ``[users]`` table, when
        `user` has no Unix account or its account may not write them."""
        try:
            check_outputs(spec, job_id, self.account(user) if user is not None else None)
        except OutputPathError as exc:
            raise RequestError(400, str(exc)) from None

    def output_owner(self, user: str) -> int | None:
        """The uid that must own a file the manager reads as a job's output for `user` (its Unix
        account's), None without a ``[users]`` table. Jobs run as that account and may replace
        their output file by a link to any file: the manager, which may be root, answers only
        what the account owns. -1 (nothing is answered) when the account is unknown here."""
        try:
            account = self.account(user)
        except RequestError:
            return -1
        return None if account is None else account.uid

    def account(self, user: str) -> Account | None:
        """The Unix account `user`'s jobs run as, looked up here (None without a ``[users]``
        table); RequestError (403) when it has none, or none on this machine."""
        users = self.ctx.env.users
        if users is None:
            return None
        name = users.account_of(user)
        if name is None:
            raise RequestError(
                403, f"user {user!r} has no Unix account to run jobs as: the environment's [users] table names none"
            )
        try:
            return lookup(name)
        except AccountError as exc:
            raise RequestError(403, f"user {user!r} runs jobs as {name!r}, but {exc}") from None

    def check_size(self, size: int) -> None:
        """RequestError (400) when no site can ever offer `size` processors (here, or at a
        provider peer: a manager with a selection policy and provider peers lets its policy
        forward a job no local site can run, and rejects it at the round's end otherwise)."""
        env = self.ctx.env
        fed = self.ctx.federation
        if fed is not None and fed.may_forward:
            return
        if size > env.max_processors:
            largest = max(env.sites, key=lambda s: s.max_processors)
            raise RequestError(
                400,
                f"size {size} is larger than any site can offer: the largest ({largest.name}) has "
                f"{largest.max_processors} processors",
            )

    def check_vm(self, user: str, spec: dict[str, Any]) -> None:
        """RequestError (400) naming the field when no site can ever match the job's VM
        requirements (Cloud Scheduler, Appendix I)."""
        job = self.job_of(0, user, spec, 0.0)
        why = admission_refusal(job, self.ctx.env.sites)
        if why:
            fields = unmatched_fields(job, self.ctx.env.sites)
            where = ", ".join(f"vm.{f}" for f in fields) if fields else "vm"
            raise RequestError(400, f"{where}: {why}")

    def job_of(self, job_id: int, user: str, spec: dict[str, Any], submit: float) -> Job:
        """The engine's Job for a stored submit request (a bag of tasks: a malleable job whose
        task runtimes are unknown, reported by its launchers)."""
        if spec.get("kind") == "bag":
            return Job(
                id=job_id,
                submit=submit,
                size=1,
                runtime=0.0,
                user=user,
                priority=PriorityClass.SUPER_LOW,
                kind=JobKind.MALLEABLE,
                tasks=int(spec["tasks"]),
                retries=int(spec.get("retries", 0)),
            )
        req = spec.get("requested_runtime")
        vm = spec.get("vm")
        return Job(
            id=job_id,
            submit=submit,
            size=int(spec["size"]),
            runtime=float(req) if req is not None else self.ctx.config.default_estimate,
            requested_runtime=float(req) if req is not None else None,
            user=user,
            priority=PriorityClass.parse(spec.get("priority", "high")),
            vm=None if is_empty(req_vm := VmRequirements(**(vm or {}))) else req_vm,
        )

    def cancel(self, job_id: int) -> bool:
        """Cancel a queued or running job; False when it already ended."""
        ctx = self.ctx
        with ctx.external():
            ok = ctx.engine.cancel(job_id)
        return ok

    def why(self, job_id: int) -> Status | None:
        """The engine's explanation for an active job (code, reason, deciding policy), None for a
        job it no longer holds."""
        engine = self.ctx.engine
        if job_id not in engine.entries:
            return None
        return engine.why_status(job_id)

    def forget(self, job: int) -> None:
        """Drop the request and owner of a job whose end is stored."""
        self.specs.pop(job, None)
        self.users.pop(job, None)
