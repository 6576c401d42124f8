"""The manager's side of the pilot protocol, in process: report answers carry the next runs, the
long poll does not repeat them unless they stay unacknowledged, an exit goes by the long poll.

A real manager (engine, SQLite file, wall clock) plays against a scripted pilot: no pilot
process is started, so the test decides exactly what the pilot sends and when.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
from livekit import in_process

from isthmus.live import pilots as live_pilots
from isthmus.live.manager import Manager

ENV = """
name = "protocol"
round_interval = "event"
[[sites]]
name = "c"
nodes = 1
cores_per_node = 1
[policies]
allocation = "fcfs"
provisioning = "none"
"""

NODE = "0/n0"


def _run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, body: Callable[[Manager, str], Awaitable[None]]) -> None:
    async def one_pilot(m: Manager, ids: dict[str, str]) -> None:
        await body(m, ids[NODE])

    in_process(tmp_path, monkeypatch, ENV, [NODE], one_pilot)


async def _submit(m: Manager, n: int) -> list[int]:
    spec = {"command": "true", "args": [], "size": 1, "priority": "high", "env": {}}
    ids = [m.submit("admin", dict(spec)) for _ in range(n)]
    await m.committed()
    await asyncio.sleep(0.05)  # the driver runs the round
    return ids


def _ended(job: int, run: int = 1) -> list[dict[str, Any]]:
    now = time.time()
    return [
        {"job": job, "run": run, "event": "started", "time": now},
        {"job": job, "run": run, "event": "ended", "time": now, "exit_code": 0, "runtime": 0.01},
    ]


def test_report_answer_carries_the_next_run_and_the_poll_does_not_repeat_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async def body(m: Manager, pid: str) -> None:
        a, b = await _submit(m, 2)
        cmds = await m.poll(NODE, pid, 0, 0)
        assert [(c["seq"], c["op"], c["job"]) for c in cmds] == [(1, "start", a)]
        answer = m.report(NODE, pid, {"pilot_id": pid, "ack": 1, "reports": _ended(a)})
        assert [(c["seq"], c["op"], c["job"]) for c in answer] == [(2, "start", b)]
        assert m.store.job(a)["state"] == "completed"  # stored before the answer
        assert m.store.job(b)["state"] == "starting"
        t0 = time.monotonic()
        await m.poll(NODE, pid, 1, 0.4)  # already handed out: the poll waits its full time
        assert time.monotonic() - t0 >= 0.35
        assert await m.poll(NODE, pid, 2, 0.1) == []  # acknowledged: nothing left
        answer = m.report(NODE, pid, {"pilot_id": pid, "ack": 2, "reports": _ended(b)})
        assert answer == []
        assert m.store.job(b)["state"] == "completed"

    _run(tmp_path, monkeypatch, body)


def test_unacknowledged_report_answer_is_resent_by_the_poll(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(live_pilots, "RESEND_AFTER", 0.3)

    async def body(m: Manager, pid: str) -> None:
        a, b = await _submit(m, 2)
        await m.poll(NODE, pid, 0, 0)
        m.report(NODE, pid, {"pilot_id": pid, "ack": 1, "reports": _ended(a)})  # answer lost
        t0 = time.monotonic()
        cmds = await m.poll(NODE, pid, 1, 10)
        assert 0.25 <= time.monotonic() - t0 < 5
        assert [(c["seq"], c["job"]) for c in cmds] == [(2, b)]
        # a retried report (same events) answers the same command again
        again = m.report(NODE, pid, {"pilot_id": pid, "ack": 1, "reports": _ended(a)})
        assert [(c["seq"], c["job"]) for c in again] == [(2, b)]

    _run(tmp_path, monkeypatch, body)


def test_exit_is_left_to_the_long_poll(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    async def body(m: Manager, pid: str) -> None:
        (a,) = await _submit(m, 1)
        await m.poll(NODE, pid, 0, 0)
        m.begin_shutdown("kill")
        assert m.report(NODE, pid, {"pilot_id": pid, "ack": 1, "reports": _ended(a)}) == []
        cmds = await m.poll(NODE, pid, 1, 5)
        assert [c["op"] for c in cmds] == ["exit"]

    _run(tmp_path, monkeypatch, body)
