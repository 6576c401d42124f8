"""How a pilot runs bag lanes (docs/bags.md): TASKS run one after the other from the lane's local
list with no round trip, DROP takes a task off the list, PREEMPT kills the running task and drops
the list, a task that cannot start fails alone (no manager needed: the commands are handed to
`_obey` and the reports read from the pilot's pending list)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from isthmus.agent.pilot import Pilot, PilotConfig


@pytest.fixture
def pilot() -> Pilot:
    p = Pilot(PilotConfig(url="http://127.0.0.1:9", node="0/n0", token="t", slots=2, kill_grace=0.5))
    p.pilot_id = "reg-1"
    return p


def _tasks(tmp: Path, seq: int, lane: int, tasks: list[tuple[int, str]]) -> dict[str, Any]:
    return {
        "seq": seq,
        "op": "tasks",
        "bag": 7,
        "lane": lane,
        "out_dir": str(tmp / "out"),
        "cwd": str(tmp),
        "env": {"GREETING": "hi"},
        "tasks": [{"task": t, "command": c} for t, c in tasks],
    }


def _reports(p: Pilot, want: int, timeout: float = 10.0) -> list[dict[str, Any]]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with p._lock:
            got = list(p.pending_tasks)
        if len(got) >= want:
            return got
        time.sleep(0.01)
    return got


def test_a_lane_runs_its_list_in_order_and_reports_each_end(pilot: Pilot, tmp_path: Path) -> None:
    log = tmp_path / "order"
    cmd = f"echo $ISTHMUS_TASK >> {log}; echo $GREETING $ISTHMUS_JOB_ID"
    pilot._obey([_tasks(tmp_path, 1, 0, [(0, cmd), (1, cmd + "; exit 3")])], "reg-1")
    pilot._obey([_tasks(tmp_path, 2, 0, [(2, cmd)])], "reg-1")  # appended to the list
    reports = _reports(pilot, 3)
    assert [(r["task"], r["event"], r["exit_code"]) for r in reports] == [
        (0, "ended", 0),
        (1, "ended", 3),
        (2, "ended", 0),
    ]
    assert log.read_text().split() == ["0", "1", "2"]
    assert (tmp_path / "out" / "2.out").read_text() == "hi 7\n"
    assert all(r["runtime"] >= 0 for r in reports)


def test_drop_takes_a_task_off_the_list_and_preempt_kills_the_running_one(pilot: Pilot, tmp_path: Path) -> None:
    ran = tmp_path / "ran"
    pilot._obey([_tasks(tmp_path, 1, 3, [(0, "sleep 30"), (1, f"touch {ran}"), (2, f"touch {ran}")])], "reg-1")
    pilot._obey([{"seq": 2, "op": "drop", "bag": 7, "lane": 3, "tasks": [1]}], "reg-1")
    assert [int(t["task"]) for t in pilot.lanes[(7, 3)].todo] == [2]
    t0 = time.monotonic()
    pilot._obey([{"seq": 3, "op": "preempt", "bag": 7, "lane": 3}], "reg-1")
    (report,) = _reports(pilot, 1)
    assert report == {"bag": 7, "lane": 3, "event": "preempted", "time": report["time"]}
    assert time.monotonic() - t0 < 5  # SIGTERM ended `sleep 30` at once
    assert (7, 3) not in pilot.lanes and not ran.exists()  # the list went with it


def test_a_task_that_cannot_start_fails_alone_and_the_next_runs(pilot: Pilot, tmp_path: Path) -> None:
    cmd = _tasks(tmp_path, 1, 0, [(0, "true"), (1, "true")])
    cmd["cwd"] = str(tmp_path / "missing")
    pilot._obey([cmd], "reg-1")
    reports = _reports(pilot, 2)
    assert [(r["task"], r["exit_code"]) for r in reports] == [(0, 127), (1, 127)]
    assert "cannot start task 0" in reports[0]["error"]
    pilot._obey([_tasks(tmp_path, 2, 1, [(2, "true")])], "reg-1")
    assert [(r["task"], r["exit_code"]) for r in _reports(pilot, 3)][2] == (2, 0)
