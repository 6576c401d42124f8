"""A runtime limit kills the real process and requeues the job (a recorded restart)."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import LiveServer, tagged_pids, wait_for, wait_state, write_env


@pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)
def test_limit_kills_process_and_requeues(tmp_path: Path, db_url: str, tag: str) -> None:
    env = write_env(tmp_path / "env.toml", alloc="test-limit-ff", prov="none")
    server = LiveServer(env, tmp_path / "state", db_url, tag, module="limit_server").start()
    try:
        c = server.client()
        marker = tmp_path / "runs"
        jid = c.submit(command="sh", args=["-c", f"echo run >> {marker}; sleep 3; echo finished"])
        j = wait_state(c, jid, ("completed", "failed"), timeout=30)
        assert j["state"] == "completed" and j["run"] == 2 and j["restarts"] == 1
        states = [(h["state"], h["run"]) for h in j["history"]]
        assert states == [
            ("queued", 0),
            ("starting", 1),
            ("running", 1),
            ("killed", 1),
            ("queued", 1),
            ("starting", 2),
            ("running", 2),
            ("completed", 2),
        ]
        assert "limit" in j["history"][3]["detail"]
        assert marker.read_text() == "run\nrun\n"  # the first run really ran and was really killed
        assert c.output(jid, run=1)[0] == ""  # killed before "finished"
        assert c.output(jid, run=2)[0] == "finished\n"
        wait_for(
            lambda: (
                not any(
                    b"sleep" in Path(f"/proc/{p}/cmdline").read_bytes()
                    for p in tagged_pids(tag)
                    if Path(f"/proc/{p}").exists()
                )
            ),
            what="no sleep left",
        )
    finally:
        server.stop()
