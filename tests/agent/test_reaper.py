"""The pilot's reaper: one call per exited run, with pidfds and with the thread fallback."""

from __future__ import annotations

import os
import subprocess
import threading
import time

import pytest

from isthmus.agent.reaper import Reaper


@pytest.mark.parametrize("pidfd", [True, False], ids=["pidfd", "threads"])
def test_each_exit_reported_once_in_exit_order(pidfd: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    if pidfd and not hasattr(os, "pidfd_open"):
        pytest.skip("no pidfd_open on this system")
    if not pidfd:
        monkeypatch.delattr(os, "pidfd_open", raising=False)
    seen: list[tuple[str, int]] = []
    done = threading.Event()

    def on_exit(item: tuple[str, subprocess.Popen[bytes]]) -> None:
        seen.append((item[0], item[1].wait()))
        if len(seen) == 3:
            done.set()

    reaper: Reaper[tuple[str, subprocess.Popen[bytes]]] = Reaper(on_exit)
    procs = {
        "slow": subprocess.Popen(["sleep", "0.6"]),
        "fast": subprocess.Popen(["true"]),
        "failing": subprocess.Popen(["sh", "-c", "sleep 0.3; exit 3"]),
    }
    time.sleep(0.1)  # "fast" has exited before it is watched: still reported
    for name, proc in procs.items():
        reaper.watch(proc.pid, (name, proc))
    assert done.wait(10)
    time.sleep(0.2)
    assert seen == [("fast", 0), ("failing", 3), ("slow", 0)]
