"""One vocabulary per kind of state (isthmus.model.states): every other word for a state is
derived from these enums or translated by a table, and the words stored in the database stay
what they were."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError
from sqlalchemy import insert, select

from isthmus.federation.protocol import PEER_JOB_STATES, RETURNED, NotifyJob
from isthmus.metrics.records import STATUS_STATES, UNFINISHED_LABEL, JobStatus
from isthmus.model.environment import Environment
from isthmus.model.events import EventKind, EventLog
from isthmus.model.site import Site, SiteKind
from isthmus.model.states import (
    TERMINAL,
    JobState,
    PilotState,
    TaskState,
    VmState,
)
from isthmus.store import tables as db
from isthmus.store.projector import Projector
from isthmus.store.tables import Store

# The words written in existing databases and sent over the wire: changing one breaks them.
STORED_TASK_WORDS = ("queued", "running", "done", "failed")
STORED_VM_WORDS = ("booting", "ready", "releasing", "gone")
STORED_PILOT_WORDS = ("queued", "spawned", "registered", "lost", "exited", "detached")
PILOT_WORDS = ("down", "queued", "spawned", "awaiting", "registered", "exiting", "lost", "exited", "detached")
PEER_WORDS = ("queued", "starting", "running", "completed", "failed", "timeout", "cancelled", "lost", "rejected")
RECORD_LABELS = ("completed", "failed", "cancelled", "rejected", "unfinished")


def test_the_enums_keep_the_stored_words() -> None:
    assert tuple(TaskState) == STORED_TASK_WORDS
    assert tuple(VmState) == STORED_VM_WORDS
    assert tuple(PilotState) == PILOT_WORDS
    assert {PilotState(w) for w in STORED_PILOT_WORDS} <= set(PilotState)
    for enum in (TaskState, VmState, PilotState, JobState):
        for member in enum:
            assert member == member.value and enum(member.value) is member  # a stored word reads back


def test_bag_task_states_of_the_cli_are_the_enum() -> None:
    from isthmus.cli.live.common import BAG_TASK_STATES

    assert BAG_TASK_STATES == STORED_TASK_WORDS


# --------------------------------------------------------------------- the peer protocol


def test_every_peer_job_state_word_maps_to_a_job_state_and_back() -> None:
    assert tuple(w for w in PEER_JOB_STATES if w != RETURNED) == PEER_WORDS
    assert RETURNED == "returned" and RETURNED in PEER_JOB_STATES
    for word in PEER_JOB_STATES:
        if word != RETURNED:
            assert JobState(word).value == word
    # every state a peer can know is a word of the protocol; UNKNOWN is not sent
    assert {s.value for s in JobState} - set(PEER_JOB_STATES) == {JobState.UNKNOWN.value}


def _notify(state: str) -> NotifyJob:
    return NotifyJob.model_validate(
        {"job_id": 1, "remote_id": 2, "origin": "a", "origin_id": 3, "state": state, "time": 1.0}
    )


@pytest.mark.parametrize("state", PEER_JOB_STATES)
def test_notify_job_accepts_each_word(state: str) -> None:
    assert _notify(state).state == state


@pytest.mark.parametrize("state", ["unknown", "Queued", "done", ""])
def test_notify_job_refuses_other_words(state: str) -> None:
    with pytest.raises(ValidationError, match="state"):
        _notify(state)


def test_notify_job_schema_lists_the_words() -> None:
    assert NotifyJob.model_json_schema()["properties"]["state"]["enum"] == list(PEER_JOB_STATES)


# --------------------------------------------------------------------- per-job records


def test_every_record_status_maps_to_a_terminal_job_state_or_unfinished() -> None:
    assert tuple(s.label for s in JobStatus) == RECORD_LABELS
    assert set(STATUS_STATES) == set(JobStatus)
    for status in JobStatus:
        state = status.state
        if state is None:
            assert status is JobStatus.UNFINISHED and status.label == UNFINISHED_LABEL
        else:
            assert state in TERMINAL and status.label == state.value
    mapped = [s for s in STATUS_STATES.values() if s is not None]
    assert len(mapped) == len(set(mapped))  # and back: one status per job state


# --------------------------------------------------------------------- the store's rows


class _Runs:
    def run_record(self, job: int, run: int) -> None:
        return None

    def run_end(self, job: int, run: int) -> dict[str, Any]:
        return {}

    def lost_reason(self, job: int, run: int) -> None:
        return None


class _Bags:
    def node(self, bag: int, slot: int) -> str | None:
        return "n0"

    def runtime(self, bag: int, task: int) -> float | None:
        return None


def _store(tmp_path: Path) -> Store:
    store = Store(f"sqlite:///{tmp_path / 'db'}")
    store.create()
    return store


def _project(store: Store, projector: Projector) -> None:
    with store.engine.begin() as conn:
        projector.project(conn, len(projector.log))
    projector.persisted = len(projector.log)


def test_vm_rows_hold_the_vm_states(tmp_path: Path) -> None:
    env = Environment("t", (Site("cloud", kind=SiteKind.CLOUD, max_vms=2),))
    log = EventLog()
    projector = Projector(log, env, _Runs(), lambda _job: None)
    store = _store(tmp_path)
    seen: list[str] = []
    for kind, expected in (
        (EventKind.VM_LEASE, VmState.BOOTING),
        (EventKind.VM_READY, VmState.READY),
        (EventKind.VM_RELEASE, VmState.RELEASING),
        (EventKind.VM_GONE, VmState.GONE),
    ):
        log.append(float(len(seen)), kind, site=0, vm=7)
        _project(store, projector)
        with store.engine.connect() as conn:
            word = conn.execute(select(db.vms.c.state)).scalar_one()
        assert VmState(word) is expected
        seen.append(word)
    assert tuple(seen) == STORED_VM_WORDS
    assert store.vm_rows(live_only=True) == []  # a gone VM is not live


def test_bag_task_rows_hold_the_task_states(tmp_path: Path) -> None:
    env = Environment("t", (Site("c", nodes=4),))
    log = EventLog()
    projector = Projector(log, env, _Runs(), lambda _job: None)
    projector.bags = _Bags()
    store = _store(tmp_path)
    with store.engine.begin() as conn:
        for idx in range(3):
            conn.execute(
                insert(db.bag_tasks).values(
                    bag=1, idx=idx, command="true", state=TaskState.QUEUED.value, output=f"/o/{idx}"
                )
            )
    for idx, end in ((0, EventKind.TASK_END), (1, EventKind.TASK_RETRY), (2, EventKind.TASK_FAIL)):
        log.append(1.0, EventKind.TASK_START, job=1, site=0, vm=0, task=idx)
        log.append(2.0, end, job=1, site=0, vm=0, value=0.0 if end == EventKind.TASK_END else 1.0, task=idx)
    log.append(3.0, EventKind.TASK_START, job=1, site=0, vm=0, task=1)
    _project(store, projector)
    states = {t["idx"]: TaskState(t["state"]) for t in store.bag_tasks(1)}
    assert states == {0: TaskState.DONE, 1: TaskState.RUNNING, 2: TaskState.FAILED}
    assert [t["idx"] for t in store.bag_tasks(1, states=[TaskState.FAILED])] == [2]
    assert store.bag_counts(1) == {"done": 1, "running": 1, "failed": 1}
    store.requeue_running_tasks(1)
    assert TaskState(store.bag_task(1, 1)["state"]) is TaskState.QUEUED  # type: ignore[index]
