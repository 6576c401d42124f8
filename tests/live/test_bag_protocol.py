"""The manager's side of the launcher protocol (docs/bags.md), in process: TASKS with a prefetched
local list, RESULT and FAILURE in pilot reports, only the pilot a lane was given may report on
it, a re-registering pilot's lanes are preempted and its kept results count.

A real manager (engine, SQLite file, wall clock) plays against scripted pilots: no pilot process
is started, so the test decides exactly what each pilot sends and when.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import pytest
from livekit import in_process

from isthmus.live.manager import Manager

ENV = """
name = "bag-protocol"
round_interval = "event"
[[sites]]
name = "c"
nodes = 2
cores_per_node = 1
[policies]
allocation = "fcfs"
provisioning = "none"
fairshare = "sep"
"""


def _tasks_commands(m: Manager, node: str) -> list[dict[str, Any]]:
    return [c for _, c in m.hub.nodes[node].outbox if c["op"] == "tasks"]


def _ended(bag: int, lane: int, task: int, code: int = 0) -> dict[str, Any]:
    return {"bag": bag, "lane": lane, "task": task, "event": "ended", "time": time.time(), "exit_code": code}


def test_lanes_get_their_list_and_only_their_pilot_reports_on_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async def body(m: Manager, ids: dict[str, str]) -> None:
        bag = m.submit_bag("admin", {"retries": 0, "env": {}}, [f"echo {i}" for i in range(5)])
        await m.committed()
        await asyncio.sleep(0.05)  # the driver runs the round: SEP grows the bag on both nodes
        (t0,) = _tasks_commands(m, "0/n0")
        (t1,) = _tasks_commands(m, "0/n1")
        assert [t["task"] for t in t0["tasks"]] == [0, 1] and [t["task"] for t in t1["tasks"]] == [2, 3]
        assert t0["tasks"][0]["command"] == "echo 0" and t0["out_dir"].endswith(f"/spool/{bag}/tasks")
        lane0, lane1 = t0["lane"], t1["lane"]
        # the pilot of n1 reports on n0's lane: ignored
        m.report("0/n1", ids["0/n1"], {"ack": 0, "tasks": [_ended(bag, lane0, 0)]})
        assert m.engine.bags.bags[bag].done == 0
        # RESULT on its own lane: counted; the answer tops its list up with task 4 (TASKS)
        answer = m.report("0/n0", ids["0/n0"], {"ack": 0, "tasks": [_ended(bag, lane0, 0)]})
        assert m.engine.bags.bags[bag].done == 1
        assert [(c["op"], [t["task"] for t in c["tasks"]]) for c in answer if c["op"] == "tasks"][-1] == ("tasks", [4])
        # FAILURE (no retry): task 2 fails for good; the bag goes on
        m.report("0/n1", ids["0/n1"], {"ack": 0, "tasks": [_ended(bag, lane1, 2, 5)]})
        assert m.engine.bags.bags[bag].failed == 1
        row = m.store.bag_task(bag, 2)
        assert row is not None and (row["state"], row["exit_code"]) == ("failed", 5)
        # n1 registers afresh, keeping the end of task 3 and its lane: the end counts, the lane
        # is preempted (its pilot may have lost commands), the bag's processor there is free
        m.register(
            "0/n1", {"pid": 0, "slots": 1, "lanes": [{"bag": bag, "lane": lane1}], "tasks": [_ended(bag, lane1, 3)]}
        )
        b = m.engine.bags.bags[bag]
        assert b.done == 2 and b.held(0) <= 2
        assert {"op": "preempt", "bag": bag, "lane": lane1} in [c for _, c in m.hub.nodes["0/n1"].outbox]

    in_process(tmp_path, monkeypatch, ENV, ["0/n0", "0/n1"], body)
