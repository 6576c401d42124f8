"""kill_lost_tasks: the processes of a lost pilot's tasks are found by their environment and
killed with their process groups; processes of other bags, pilots or managers are left alone."""

from __future__ import annotations

import contextlib
import os
import subprocess
import time
from pathlib import Path

from isthmus.live.lost_runs import kill_lost_tasks


def _task(bag: int, node: str, bag_dir: str) -> subprocess.Popen[bytes]:
    """A task's process group: a shell leading a child, as a pilot's lane starts it."""
    env = {
        **os.environ,
        "ISTHMUS_JOB_ID": str(bag),
        "ISTHMUS_TASK": "0",
        "ISTHMUS_PILOT_NODE": node,
        "ISTHMUS_BAG_DIR": bag_dir,
    }
    return subprocess.Popen(["/bin/sh", "-c", "sleep 30 & wait"], env=env, start_new_session=True)


def _gone(proc: subprocess.Popen[bytes]) -> bool:
    """True once `proc` and every member of its process group have exited."""
    if proc.poll() is None:
        return False
    try:
        os.killpg(proc.pid, 0)
    except ProcessLookupError:
        return True
    return False


def test_the_tasks_of_the_lost_pilot_are_killed_and_no_others(tmp_path: Path) -> None:
    mine = str(tmp_path / "spool" / "7" / "tasks")
    lost = _task(7, "0/n0", mine)
    other_node = _task(7, "0/n1", mine)
    other_manager = _task(7, "0/n0", str(tmp_path / "other" / "7" / "tasks"))
    other_bag = _task(8, "0/n0", mine)
    kept = [other_node, other_manager, other_bag]
    try:
        time.sleep(0.2)  # the shells have started their children
        assert kill_lost_tasks([(7, mine), (7, mine)], "0/n0") >= 1  # its group goes with the first found
        deadline = time.time() + 5
        while not _gone(lost) and time.time() < deadline:
            time.sleep(0.02)
        assert _gone(lost)
        assert all(p.poll() is None for p in kept)
        assert kill_lost_tasks([], "0/n0") == 0
    finally:
        for p in [lost, *kept]:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(p.pid, 9)
            p.wait()
