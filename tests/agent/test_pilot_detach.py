"""How long a detached pilot waits for a manager (no manager: its address is unreachable)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from isthmus.agent.pilot import EXIT_OK, EXIT_UNREACHABLE, Pilot, PilotConfig


def _pilot(patience: float) -> Pilot:
    p = Pilot(PilotConfig(url="http://127.0.0.1:9", node="0/n0", token="t", slots=1, timeout=patience))
    p.pilot_id = "reg-1"
    return p


def _sleep(tmp: Path, seq: int, seconds: float) -> dict[str, Any]:
    spool = tmp / "7"
    return {
        "seq": seq,
        "op": "start",
        "job": 7,
        "run": 1,
        "command": "sh",
        "args": ["-c", f"sleep {seconds}; echo done"],
        "env": {},
        "spool": str(spool),
        "stdout": str(spool / "run1.out"),
        "stderr": str(spool / "run1.err"),
        "nodefile": str(spool / "run1.nodes"),
        "hosts": [["node-a", 1]],
    }


def _detach(seq: int, wait: float) -> dict[str, Any]:
    return {"seq": seq, "op": "detach", "wait": wait, "reason": "manager stopping"}


def test_an_idle_pilot_told_to_detach_exits() -> None:
    p = _pilot(30.0)
    assert p._obey([_detach(1, 3600.0)], "reg-1", exit_ok=False) is None  # a report answer: left to the poll
    assert p.last_seq == 0
    assert p._obey([_detach(1, 3600.0)], "reg-1") == EXIT_OK
    assert p.cfg.timeout == 30.0


def test_a_detached_run_is_held_the_detach_wait_then_killed(tmp_path: Path) -> None:
    p = _pilot(0.5)
    assert p._obey([_sleep(tmp_path, 1, 30), _detach(2, 2.0)], "reg-1") is None
    assert p.cfg.timeout == 2.0
    t0 = time.monotonic()
    assert p.run() == EXIT_UNREACHABLE
    took = time.monotonic() - t0
    assert 1.5 < took < 8.0, took  # the detach wait, not the patience (0.5 s) nor the run (30 s)
    assert not (tmp_path / "7" / "run1.out").read_text()  # killed before it ended


def test_a_pilot_whose_detached_run_ended_waits_only_its_patience(tmp_path: Path) -> None:
    p = _pilot(1.0)
    assert p._obey([_sleep(tmp_path, 1, 2), _detach(2, 3600.0)], "reg-1") is None
    t0 = time.monotonic()
    assert p.run() == EXIT_UNREACHABLE
    took = time.monotonic() - t0
    assert 1.5 < took < 8.0, took  # the run's end, then at most the patience: not the hour
    assert (tmp_path / "7" / "run1.out").read_text() == "done\n"
    assert p.cfg.timeout == 1.0
