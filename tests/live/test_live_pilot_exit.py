"""How long pilots outlive their manager: idle pilots exit within seconds of a normal stop and
within their patience (`--pilot-timeout`) of a manager killed outright; a pilot holding a run
the stop detached stays until the run ends, then waits only its patience."""

from __future__ import annotations

import signal
import time
from pathlib import Path

from faultkit import agents
from livekit import LiveServer, wait_for, wait_state, write_env

PATIENCE = 4.0  # the pilots' --pilot-timeout in these tests


def _pilots(live: LiveServer, n: int) -> list[int]:
    """The manager's `n` pilot processes, once they are all up."""
    return wait_for(lambda: (p := agents(live.tag)) and len(p) == n and p, what=f"{n} pilots")


def _gone_within(live: LiveServer, seconds: float) -> float:
    """Seconds until no pilot of the manager is left; fails after `seconds`."""
    t0 = time.monotonic()
    wait_for(lambda: not agents(live.tag), timeout=seconds, interval=0.1, what="every pilot gone")
    return time.monotonic() - t0


def test_a_normal_stop_ends_idle_pilots_at_once(tmp_path: Path, db_url: str, tag: str) -> None:
    live = LiveServer(write_env(tmp_path / "env.toml"), tmp_path / "state", db_url, tag, on_stop="detach")
    live.start()
    try:
        c = live.client()
        job = c.submit(command="true")
        wait_state(c, job, ("completed",))
        _pilots(live, 2)
        live.stop()  # SIGTERM: detach, with nothing to detach
        assert _gone_within(live, 5.0) < 5.0
    finally:
        live.stop("kill")


def test_a_killed_manager_leaves_idle_pilots_only_their_patience(tmp_path: Path, db_url: str, tag: str) -> None:
    live = LiveServer(
        write_env(tmp_path / "env.toml"), tmp_path / "state", db_url, tag, pilot_timeout=PATIENCE, on_stop="detach"
    )
    live.start()
    try:
        c = live.client()
        job = c.submit(command="true")
        wait_state(c, job, ("completed",))
        _pilots(live, 2)
        live.kill(signal.SIGKILL)
        time.sleep(1.0)
        assert len(agents(live.tag)) == 2  # patient: a manager back within the timeout finds them
        assert _gone_within(live, PATIENCE + 4.0) < PATIENCE + 4.0
    finally:
        live.stop("kill")


def test_a_pilot_holding_a_detached_run_stays_until_it_ends_then_waits_its_patience(
    tmp_path: Path, db_url: str, tag: str
) -> None:
    live = LiveServer(
        write_env(tmp_path / "env.toml"), tmp_path / "state", db_url, tag, pilot_timeout=PATIENCE, on_stop="detach"
    )
    live.start()
    try:
        c = live.client()
        marker = tmp_path / "ended"
        run_for = 3 * PATIENCE
        job = c.submit(command="sh", args=["-c", f"sleep {run_for}; touch {marker}"])
        wait_state(c, job, ("running",))
        _pilots(live, 2)
        live.stop()  # SIGTERM: the run goes on, detached
        stopped = time.monotonic()
        holder = wait_for(lambda: len(agents(live.tag)) == 1, timeout=5.0, what="the idle pilot gone")
        assert holder
        # longer than its patience, while the run goes on: the pilot holding it stays
        while not marker.exists():
            assert agents(live.tag), f"the pilot left its detached run after {time.monotonic() - stopped:.1f} s"
            assert time.monotonic() - stopped < run_for + 10, "the run did not end"
            time.sleep(0.2)
        assert time.monotonic() - stopped > PATIENCE + 1.0
        # the run ended: the pilot waits for a manager its patience at most (the manager has
        # been gone longer already), then exits
        assert _gone_within(live, PATIENCE + 4.0) < PATIENCE + 4.0
    finally:
        live.stop("kill")
