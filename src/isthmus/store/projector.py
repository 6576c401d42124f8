"""The one projection of the engine's event log into database rows.

Each event since the last projection becomes an `events` row (all its columns: run, slots,
policy, origin, task, and the reason of a refusal) and updates what it implies: the job's state
and times, its history, and VM leases. What the log does not hold is asked of the caller
through `RunDetails` (the node slots a run was given and its runtime limit, the runtime a
site measured, why a run was lost), looked up by (job, run), never by position.

`project()` writes inside the caller's transaction and changes nothing in memory; `committed()`
then advances the projection. A transaction that fails leaves the projection where it was, so
the next attempt writes the same events again: nothing is lost and nothing is written twice.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from sqlalchemy import insert, update

from isthmus.model.environment import Environment
from isthmus.model.events import EventKind, EventLog, KillCause
from isthmus.model.states import JobState, TaskState, VmState
from isthmus.store import tables as db

_KILL_NAMES = {int(c): c.name.lower() for c in KillCause}


@dataclass(frozen=True)
class RunRecord:
    """Where a run was started: its slots ((node key, slot index), ...) and runtime limit."""

    slots: Sequence[tuple[str, int]]
    limit: float | None


class RunDetails(Protocol):
    """What the projector needs to know of runs beyond the event log."""

    def run_record(self, job: int, run: int) -> RunRecord | None:
        """The slots and limit of a started run (None if unknown)."""
        ...

    def run_end(self, job: int, run: int) -> dict[str, Any]:
        """What the site reported of an ended run (e.g. its measured runtime); {} if nothing."""
        ...

    def lost_reason(self, job: int, run: int) -> str | None:
        """Why a run was lost, if it was."""
        ...


class BagDetails(Protocol):
    """What the projector needs to know of live bags' tasks beyond the event log."""

    def node(self, bag: int, slot: int) -> str | None:
        """The pilot node holding processor `slot` of `bag`."""
        ...

    def runtime(self, bag: int, task: int) -> float | None:
        """The runtime its pilot measured for the last run of a task that ended."""
        ...


_TASK_ENDS = {
    int(EventKind.TASK_END): (TaskState.DONE.value, 0),
    int(EventKind.TASK_RETRY): (TaskState.QUEUED.value, 1),
    int(EventKind.TASK_FAIL): (TaskState.FAILED.value, 1),
}


class Projector:
    """Turns new events of `log` into rows, within a transaction the caller commits."""

    def __init__(self, log: EventLog, env: Environment, details: RunDetails, forget: Callable[[int], None]) -> None:
        self.log = log
        self.env = env
        self.details = details
        self.forget = forget  # called (after the commit) with each job that reached a terminal state
        #: events already in the database
        self.persisted = 0
        self._ended: list[int] = []
        #: (job, run) killed at their requested runtime: their FAIL ends them TIMEOUT
        self._timed_out: set[tuple[int, int]] = set()
        #: the image index of a leased VM (site, vm) -> index, set by the live manager (default 0)
        self.vm_image: Callable[[int, int], int] | None = None
        #: what the live manager knows of bags' tasks (None: bag task events update no task row)
        self.bags: BagDetails | None = None

    def _vm_image(self, site: int, vm: int) -> int:
        return self.vm_image(site, vm) if self.vm_image is not None else 0

    def pending(self) -> bool:
        """True when events are waiting to be written."""
        return len(self.log) > self.persisted

    def project(self, conn: Any, n: int) -> None:
        """Write events [persisted, n) and their implications through `conn` (no commit here)."""
        cols = self.log.columns()
        names = ("time", "kind", "job", "site", "vm", "value", "run", "slots", "policy", "origin", "task")
        t_, k_, j_, s_, v_, x_, r_, sl_, p_, o_, ta_ = (cols[c] for c in names)
        policies, origins, notes = self.log.policies, self.log.origins, self.log.notes
        rows = []
        history: list[dict[str, Any]] = []
        ended: list[int] = []
        J = db.jobs  # noqa: N806
        tasks: list[tuple[Any, dict[str, Any]]] = []  # task row updates, in event order
        bags = self.bags
        for i in range(self.persisted, n):
            t, kind, job, site, vm, value, run = t_[i], k_[i], j_[i], s_[i], v_[i], x_[i], r_[i]
            rows.append(
                {
                    "time": t,
                    "kind": kind,
                    "job": job,
                    "site": site,
                    "vm": vm,
                    "value": value,
                    "run": run,
                    "slots": sl_[i],
                    "policy": policies[p_[i]] if p_[i] >= 0 else None,
                    "origin": origins[o_[i]] if o_[i] >= 0 else None,
                    "task": ta_[i],
                    "note": notes.get(i),
                }
            )
            if kind >= EventKind.GROW and bags is not None:
                self._bag_event(conn, bags, tasks, history, ended, kind, t, job, vm, value, ta_[i])
            elif kind == EventKind.START:
                rec = self.details.run_record(job, run)
                slots = list(rec.slots) if rec is not None else []
                conn.execute(
                    db.UPDATE_JOB_START,
                    {
                        "b_id": job,
                        "b_site": site,
                        "b_slots": json.dumps(slots),
                        "b_run": run,
                        "b_limit": rec.limit if rec is not None else None,
                        "b_time": t,
                    },
                )
                where = self.env.sites[site].name
                nodes = sorted({k for k, _ in slots})
                history.append(
                    {
                        "job_id": job,
                        "time": t,
                        "state": JobState.STARTING.value,
                        "run": run,
                        "detail": f"{where}: {len(slots)} slots on {', '.join(nodes)}"
                        if slots
                        else f"{where}: submitted to its batch system",
                    }
                )
            elif kind in (EventKind.END, EventKind.FAIL):
                info = self.details.run_end(job, run)
                state = JobState.COMPLETED if kind == EventKind.END else JobState.FAILED
                if kind == EventKind.FAIL and (job, run) in self._timed_out:
                    state = JobState.TIMEOUT
                code = 0 if kind == EventKind.END else int(value)
                conn.execute(
                    db.UPDATE_JOB_END,
                    {
                        "b_id": job,
                        "b_state": state.value,
                        "b_code": code,
                        "b_time": t,
                        "b_runtime": info.get("runtime"),
                    },
                )
                ended.append(job)
                detail = f"exit code {code}" + (f": {info['error']}" if info.get("error") else "")
                history.append({"job_id": job, "time": t, "state": state.value, "run": run, "detail": detail})
            elif kind == EventKind.KILL:
                if int(value) == KillCause.TIMEOUT:
                    self._timed_out.add((job, run))
                cause = _KILL_NAMES.get(int(value), str(value))
                detail = f"killed ({cause})"
                why = self.details.lost_reason(job, run)
                if why:
                    detail += f": {why}"
                history.append({"job_id": job, "time": t, "state": "killed", "run": run, "detail": detail})
                conn.execute(update(J).where(J.c.id == job).values(end_time=t))
            elif kind == EventKind.REQUEUE:
                conn.execute(
                    update(J)
                    .where(J.c.id == job)
                    .values(
                        state=JobState.QUEUED.value, stage=int(value), site=None, slots=None, restarts=J.c.restarts + 1
                    )
                )
                history.append(
                    {
                        "job_id": job,
                        "time": t,
                        "state": JobState.QUEUED.value,
                        "run": run,
                        "detail": f"requeued (queue {int(value)})",
                    }
                )
            elif kind == EventKind.CANCEL:
                conn.execute(update(J).where(J.c.id == job).values(state=JobState.CANCELLED.value, end_time=t))
                if bags is not None:  # a cancelled bag's tasks that were running are not any more
                    _flush(conn, tasks)
                    tasks.clear()
                    conn.execute(
                        update(db.bag_tasks)
                        .where(db.bag_tasks.c.bag == job, db.bag_tasks.c.state == TaskState.RUNNING.value)
                        .values(state=TaskState.QUEUED.value)
                    )
                history.append(
                    {"job_id": job, "time": t, "state": JobState.CANCELLED.value, "run": run, "detail": "cancelled"}
                )
                ended.append(job)
            elif kind == EventKind.REJECT:
                reason = self.log.reasons.get(job, "rejected")
                conn.execute(
                    update(J).where(J.c.id == job).values(state=JobState.REJECTED.value, reason=reason, end_time=t)
                )
                history.append(
                    {"job_id": job, "time": t, "state": JobState.REJECTED.value, "run": max(run, 0), "detail": reason}
                )
                ended.append(job)
            elif kind == EventKind.VM_LEASE:
                vm_type = int(value)  # the instance type's index
                cores = self.env.sites[site].types[vm_type].cores
                image = self._vm_image(site, vm)
                conn.execute(
                    insert(db.vms).values(
                        site=site,
                        vm=vm,
                        state=VmState.BOOTING.value,
                        cores=cores,
                        leased_at=t,
                        vm_type=vm_type,
                        image=image,
                    )
                )
            elif kind == EventKind.VM_USER:
                owner = self.log.notes.get(i)
                conn.execute(update(db.vms).where(db.vms.c.site == site, db.vms.c.vm == vm).values(owner=owner))
            elif kind == EventKind.VM_READY:
                conn.execute(
                    update(db.vms)
                    .where(db.vms.c.site == site, db.vms.c.vm == vm)
                    .values(state=VmState.READY.value, ready_at=t)
                )
            elif kind == EventKind.VM_RELEASE:
                conn.execute(
                    update(db.vms)
                    .where(db.vms.c.site == site, db.vms.c.vm == vm)
                    .values(state=VmState.RELEASING.value, released_at=t)
                )
            elif kind == EventKind.VM_GONE:
                conn.execute(
                    update(db.vms)
                    .where(db.vms.c.site == site, db.vms.c.vm == vm)
                    .values(state=VmState.GONE.value, gone_at=t)
                )
        _flush(conn, tasks)
        if history:
            conn.execute(db.INSERT_HISTORY, history)
        if rows:
            conn.execute(db.INSERT_EVENTS, rows)
        self._ended = ended

    def _bag_event(
        self,
        conn: Any,
        bags: BagDetails,
        tasks: list[tuple[Any, dict[str, Any]]],
        history: list[dict[str, Any]],
        ended: list[int],
        kind: int,
        t: float,
        bag: int,
        slot: int,
        value: float,
        task: int,
    ) -> None:
        """What a bag's event implies for its job row and its task rows."""
        J = db.jobs  # noqa: N806
        if kind == EventKind.GROW:
            conn.execute(
                update(J)
                .where(J.c.id == bag, J.c.state == JobState.QUEUED.value)
                .values(state=JobState.RUNNING.value, start_time=t)
            )
        elif kind == EventKind.TASK_START:
            tasks.append((db.UPDATE_TASK_START, {"b_bag": bag, "b_idx": task, "b_node": bags.node(bag, slot)}))
        elif kind in _TASK_ENDS:
            state, failed = _TASK_ENDS[kind]
            runtime = bags.runtime(bag, task)
            params = {
                "b_bag": bag,
                "b_idx": task,
                "b_state": state,
                "b_failed": failed,
                "b_code": 0 if kind == EventKind.TASK_END else int(value),
                "b_runtime": runtime if runtime is not None else (value if kind == EventKind.TASK_END else None),
                "b_time": t,
            }
            tasks.append((db.UPDATE_TASK_END, params))
        elif kind == EventKind.TASK_PREEMPT:
            tasks.append((db.UPDATE_TASK_QUEUED, {"b_bag": bag, "b_idx": task}))
        elif kind == EventKind.BAG_END:
            _flush(conn, tasks)  # the task rows first: the bag's end is read from them
            tasks.clear()
            failed = conn.execute(db.COUNT_FAILED_TASKS, {"b_bag": bag}).scalar() or 0
            state = JobState.FAILED if failed else JobState.COMPLETED
            done = int(value)
            conn.execute(
                update(J)
                .where(J.c.id == bag)
                .values(
                    state=state.value,
                    exit_code=1 if failed else 0,
                    end_time=t,
                    runtime=t - J.c.start_time,
                    reason=f"{failed} of {done + failed} tasks failed" if failed else None,
                )
            )
            detail = f"{done} tasks completed" + (f", {failed} failed" if failed else "")
            history.append({"job_id": bag, "time": t, "state": state.value, "run": 0, "detail": detail})
            ended.append(bag)

    def committed(self, n: int) -> None:
        """The transaction that wrote events up to `n` was committed."""
        self.persisted = n
        for job in self._ended:
            self.forget(job)
        if self._timed_out:
            gone = set(self._ended)
            self._timed_out = {k for k in self._timed_out if k[0] not in gone}
        self._ended = []


def _flush(conn: Any, ops: list[tuple[Any, dict[str, Any]]]) -> None:
    """Execute `ops` in order, each run of the same statement as one executemany."""
    i = 0
    while i < len(ops):
        stmt = ops[i][0]
        j = i
        while j < len(ops) and ops[j][0] is stmt:
            j += 1
        conn.execute(stmt, [params for _, params in ops[i:j]])
        i = j
