"""The SQLite `-shm` file changed under a running manager (docs/reliability.md, "The SQLite
files"): truncated, it is extended back and nothing is lost; immutable, the manager answers 503
naming it and recovers once the flag is removed, with every job intact. The manager must not
die: SQLite maps that file, and either change kills an unguarded process with SIGBUS; a SIGBUS
that still comes leaves its name and the stacks in the manager's log."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import time
from pathlib import Path

import httpx
import pytest
from livekit import LiveServer, wait_for, wait_state, write_env

from isthmus.live.client import ApiError


def _chattr(flag: str, path: str) -> bool:
    chattr = shutil.which("chattr")
    return chattr is not None and subprocess.run([chattr, flag, path], check=False, capture_output=True).returncode == 0


def test_shm_truncated_then_immutable_the_manager_survives(tmp_path: Path, tag: str) -> None:
    db = tmp_path / "isthmus.db"
    server = LiveServer(write_env(tmp_path / "env.toml"), tmp_path / "state", f"sqlite:///{db}", tag).start()
    shm = f"{db}-shm"
    immutable = False
    try:
        c = server.client()
        ids = [c.submit(command="sleep", args=["0.3"]) for _ in range(3)]
        # idle while the file is cut: a transaction in flight at that moment still dies (the docs say so)
        wait_for(lambda: all(c.job(j)["state"] == "completed" for j in ids), timeout=30, what="first jobs completed")
        size = os.stat(shm).st_size
        os.truncate(shm, 0)
        ids.append(c.submit(command="true"))
        assert os.stat(shm).st_size == size
        assert "truncated to 0 bytes" in (tmp_path / "server-1.log").read_text()

        running = c.submit(command="sleep", args=["5"])
        ids.append(running)
        wait_state(c, running, ("running",))
        immutable = _chattr("+i", shm)
        if not immutable:
            pytest.skip("chattr +i is not possible here (needs root and a file system with the flag)")
        with pytest.raises(ApiError) as refused:
            c.jobs()
        assert refused.value.status == 503 and "isthmus.db-shm is immutable" in str(refused.value)
        health = httpx.get(server.url + "/health")
        assert health.status_code == 503 and "isthmus.db-shm is immutable" in health.json()["reason"]
        assert server.proc is not None and server.proc.poll() is None
        time.sleep(4)  # longer than the heartbeat timeout: pilots that cannot authenticate are not judged lost
        assert server.proc.poll() is None

        assert _chattr("-i", shm)
        immutable = False
        wait_for(lambda: httpx.get(server.url + "/health").status_code == 200, timeout=10, what="healthy again")
        ids.append(c.submit(command="true"))
        wait_for(lambda: all(c.job(j)["state"] == "completed" for j in ids), timeout=30, what="every job completed")
        assert [j["id"] for j in c.jobs(all_=True)] == sorted(ids)
        assert c.job(running)["run"] == 1 and c.job(running)["restarts"] == 0
        assert server.proc.poll() is None
        # a SIGBUS that does happen (a change in the middle of a transaction) is not silent
        server.kill(signal.SIGBUS)
        assert server.proc.returncode == -signal.SIGBUS
        assert "Fatal Python error: Bus error" in (tmp_path / "server-1.log").read_text()
    finally:
        if immutable:
            _chattr("-i", shm)
        server.stop()
