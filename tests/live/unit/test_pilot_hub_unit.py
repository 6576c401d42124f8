"""The pilot hub without pilot processes: registration, reports, and a lost pilot's runs."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest
from rig import Rig, spec

from isthmus.live.errors import RequestError


class Spawned:
    """Stands for a pilot process the hub starts (none is started in these tests)."""

    pid = None
    returncode = None

    def poll(self) -> int | None:
        """Still running."""
        return None


@pytest.fixture
def spawns(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The nodes the hub started a pilot process for."""
    started: list[str] = []

    def spawn_pilot(**kw: Any) -> Spawned:
        started.append(kw["node"])
        return Spawned()

    monkeypatch.setattr("isthmus.live.pilots.spawn_pilot", spawn_pilot)
    return started


def register(rig: Rig, key: str, **body: Any) -> str:
    answer = rig.hub.register(key, {"pid": 0, "host": "h", **body})
    assert answer["spool"] == str(rig.ctx.spool)
    return str(answer["pilot_id"])


def test_registration_records_the_pilot_and_refuses_unknown_nodes(tmp_path: Path) -> None:
    rig = Rig(tmp_path)
    pid = register(rig, "0/n0")
    node = rig.hub.nodes["0/n0"]
    assert node.state == "registered" and node.pilot_id == pid and node.host == "h"
    [row] = [r for r in rig.store.pilot_rows() if r["node"] == "0/n0"]
    assert row["state"] == "registered"
    with pytest.raises(RequestError) as err:
        rig.hub.register("0/n9", {})
    assert err.value.status == 410
    with pytest.raises(RequestError) as err:
        rig.hub.report("0/n0", "not-" + pid, {"ack": 0})
    assert err.value.status == 409


def test_reports_move_a_run_to_running_then_completed(tmp_path: Path) -> None:
    rig = Rig(tmp_path)
    pid = register(rig, "0/n0")
    job = rig.intake.submit("alice", spec(2))
    rig.step()
    cmds = rig.hub.report("0/n0", pid, {"ack": 0})
    [start] = [c for c in cmds if c["op"] == "start"]
    assert start["job"] == job
    rig.hub.report(
        "0/n0", pid, {"ack": start["seq"], "reports": [{"job": job, "run": 1, "event": "started", "pid": 4242}]}
    )
    assert rig.state(job) == "running"
    assert rig.hub.assign[job].pid == 4242
    rig.ctx.advance(3.0)
    rig.hub.report(
        "0/n0", pid, {"ack": start["seq"], "reports": [{"job": job, "run": 1, "event": "ended", "exit_code": 0}]}
    )
    row = rig.store.job(job)
    assert row is not None and row["state"] == "completed" and row["exit_code"] == 0
    assert job not in rig.engine.entries and job not in rig.hub.assign and job not in rig.intake.specs


def test_a_pilot_may_not_report_on_another_nodes_run(tmp_path: Path) -> None:
    rig = Rig(tmp_path)
    register(rig, "0/n0")
    other = register(rig, "0/n1")
    job = rig.intake.submit("alice", spec(2))
    rig.step()
    assert rig.hub.assign[job].launcher == "0/n0"
    rig.hub.report("0/n1", other, {"ack": 0, "reports": [{"job": job, "run": 1, "event": "ended", "exit_code": 0}]})
    assert rig.state(job) == "starting"


def test_a_silent_pilot_is_lost_its_run_requeued_and_a_new_pilot_started(tmp_path: Path, spawns: list[str]) -> None:
    rig = Rig(tmp_path, heartbeat_timeout=20.0)
    pid = register(rig, "0/n0")
    job = rig.intake.submit("alice", spec(2))
    rig.step()
    rig.hub.report("0/n0", pid, {"ack": 1, "reports": [{"job": job, "run": 1, "event": "started"}]})
    assert rig.state(job) == "running"
    rig.hub.nodes["0/n0"].last_seen -= 21.0
    rig.hub.housekeeping()
    assert spawns == ["0/n0"]
    assert rig.hub.nodes["0/n0"].state == "spawned"
    history = rig.store.history(job)
    assert any("lost" in (h["detail"] or "") for h in history), history
    row = rig.store.job(job)
    assert row is not None and row["restarts"] == 1 and row["run"] >= 1
    # the requeued run starts again on the other node, whose pilot is alive
    assert rig.hub.assign[job].run == 2


def test_a_re_registered_pilot_that_forgot_a_run_loses_it(tmp_path: Path) -> None:
    rig = Rig(tmp_path)
    pid = register(rig, "0/n0")
    job = rig.intake.submit("alice", spec(2))
    rig.step()
    rig.hub.report("0/n0", pid, {"ack": 1, "reports": [{"job": job, "run": 1, "event": "started"}]})
    register(rig, "0/n0", running=[])  # a restarted pilot: it runs nothing
    row = rig.store.job(job)
    assert row is not None and row["restarts"] == 1
    assert rig.hub.assign[job].run == 2


def test_a_stray_run_on_a_re_registered_pilot_is_killed(tmp_path: Path) -> None:
    rig = Rig(tmp_path)
    register(rig, "0/n0")
    register(rig, "0/n0", running=[{"job": 77, "run": 1, "pid": 5}])
    assert {"op": "kill", "job": 77, "run": 1} in [c for _, c in rig.hub.nodes["0/n0"].outbox]


def test_no_pilot_is_judged_while_the_store_refuses_every_use(
    tmp_path: Path, spawns: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # pilots cannot authenticate while the store may not be read (an immutable SQLite -shm file)
    rig = Rig(tmp_path, heartbeat_timeout=20.0)
    pid = register(rig, "0/n0")
    job = rig.intake.submit("alice", spec(2))
    rig.step()
    rig.hub.report("0/n0", pid, {"ack": 1, "reports": [{"job": job, "run": 1, "event": "started"}]})
    rig.hub.nodes["0/n0"].last_seen -= 21.0
    monkeypatch.setattr("isthmus.store.tables.store_unsafe", lambda _store: "the -shm file is immutable")
    rig.hub.housekeeping()
    monkeypatch.undo()
    rig.hub._last_housekeeping = time.time() - 0.5
    rig.hub.housekeeping()
    assert spawns == [] and rig.hub.nodes["0/n0"].state == "registered" and rig.state(job) == "running"
