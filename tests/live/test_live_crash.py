"""Crash safety: pilots of a manager that died kill their runs and exit. (The manager killed
and restarted under a workload is part of the fault campaign: test_live_fault_campaign.py.)"""

from __future__ import annotations

import signal
from pathlib import Path

import pytest
from faultkit import agents
from livekit import LiveServer, tagged_pids, wait_for, wait_state, write_env


@pytest.mark.parametrize("db_url", ["sqlite", "postgres"], indirect=True)
def test_pilots_of_a_dead_manager_exit(tmp_path: Path, db_url: str, tag: str) -> None:
    env = write_env(tmp_path / "env.toml")
    server = LiveServer(env, tmp_path / "state", db_url, tag, pilot_timeout=2.0).start()
    c = server.client()
    jid = c.submit(command="sleep", args=["60"])
    wait_state(c, jid, ("running",))
    assert len(agents(tag)) == 2
    server.kill(signal.SIGKILL)
    # pilots notice the manager is gone, kill their runs and exit: nothing is left
    wait_for(lambda: not tagged_pids(tag), timeout=15, what="pilots and jobs of a dead manager gone")
