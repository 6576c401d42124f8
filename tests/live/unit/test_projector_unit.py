"""The store projector driven by a live engine: each event becomes rows (jobs, history, events)."""

from __future__ import annotations

from pathlib import Path

from rig import Rig, spec

from isthmus.model.events import EventKind


def kinds(rig: Rig, job: int) -> list[EventKind]:
    return [EventKind(kind) for _, kind, j, *_ in rig.store.event_rows() if j == job]


def test_events_of_a_run_become_its_row_history_and_event_rows(tmp_path: Path) -> None:
    rig = Rig(tmp_path)
    pilot = rig.hub.register("0/n1", {"pid": 0})["pilot_id"]
    rig.hub.register("0/n0", {"pid": 0})
    rig.intake.submit("alice", spec(2))  # takes n0
    job = rig.intake.submit("bob", spec(2, name="second"))
    submitted = rig.ctx.clock.now
    rig.step()
    row = rig.store.job(job)
    assert row is not None
    assert (row["state"], row["site"], row["run"], row["slots"]) == ("starting", 0, 1, [["0/n1", 0], ["0/n1", 1]])
    assert row["submit_time"] == submitted and row["start_time"] == submitted
    rig.ctx.advance(7.0)
    rig.hub.report("0/n1", pilot, {"ack": 1, "reports": [{"job": job, "run": 1, "event": "ended", "exit_code": 0}]})
    row = rig.store.job(job)
    assert row is not None
    assert (row["state"], row["exit_code"]) == ("completed", 0)
    assert row["end_time"] == submitted + 7.0
    assert [h["state"] for h in rig.store.history(job)] == ["queued", "starting", "completed"]
    assert kinds(rig, job) == [EventKind.SUBMIT, EventKind.START, EventKind.END]
    assert rig.ctx.projector.persisted == len(rig.engine.log)


def test_a_run_killed_at_its_requested_runtime_ends_timeout(tmp_path: Path) -> None:
    rig = Rig(tmp_path)
    pilot = rig.hub.register("0/n0", {"pid": 0})["pilot_id"]
    job = rig.intake.submit("alice", spec(2, requested_runtime=10))
    rig.step()
    start = rig.store.job(job)["start_time"]  # type: ignore[index]
    rig.hub.report("0/n0", pilot, {"ack": 1, "reports": [{"job": job, "run": 1, "event": "started"}]})
    rig.step(11.0)
    row = rig.store.job(job)
    assert row is not None
    assert (row["state"], row["exit_code"], row["end_time"]) == ("timeout", -9, start + 10.0)
    assert {"op": "kill", "job": job, "run": 1} in [c for _, c in rig.hub.nodes["0/n0"].outbox]
    assert any(h["detail"] == "killed (timeout)" for h in rig.store.history(job))


def test_a_lost_run_is_stored_as_a_restart_with_its_reason(tmp_path: Path) -> None:
    rig = Rig(tmp_path)
    pilot = rig.hub.register("0/n0", {"pid": 0})["pilot_id"]
    job = rig.intake.submit("alice", spec(2))
    rig.step()
    rig.hub.report(
        "0/n0", pilot, {"ack": 1, "reports": [{"job": job, "run": 1, "event": "ended", "lost": "killed by the LRM"}]}
    )
    row = rig.store.job(job)
    assert row is not None and row["restarts"] == 1
    assert any("killed by the LRM" in (h["detail"] or "") for h in rig.store.history(job))
    assert EventKind.KILL in kinds(rig, job)
