"""What a job can reach: a pilot accepts reports only on the runs it was
given, and a job cannot read its pilot's token from the pilot's environment."""

from __future__ import annotations

import asyncio
import stat
import time
from pathlib import Path

import pytest
from livekit import LiveServer, wait_state

from isthmus.backends.node import Node
from isthmus.config import environment_from_text
from isthmus.live.manager import Manager, ManagerConfig
from isthmus.live.pilots import PilotHub

TWO_NODES = """
name = "two-nodes"
round_interval = "event"
[[sites]]
name = "c"
nodes = 2
cores_per_node = 1
[policies]
allocation = "fcfs"
provisioning = "none"
"""


def test_a_pilot_cannot_report_on_a_run_given_to_another(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def no_process(self: PilotHub, node: Node) -> None:  # the test plays both pilots
        node.state = "spawned"
        node.deadline = time.time() + 60

    monkeypatch.setattr(PilotHub, "spawn", no_process)

    async def main() -> None:
        env = environment_from_text(TWO_NODES, "toml", file="<test>")
        m = Manager(ManagerConfig(env=env, db_url=f"sqlite:///{tmp_path / 'state.db'}", state_dir=tmp_path / "state"))
        await m.start()
        try:
            ids = {key: m.register(key, {"pid": 0, "slots": 1})["pilot_id"] for key in ("0/n0", "0/n1")}
            job = m.submit("admin", {"command": "sleep", "args": ["60"], "size": 1, "priority": "high", "env": {}})
            await m.committed()
            await asyncio.sleep(0.05)
            given = m.hub.assign[job].launcher
            other = next(k for k in ids if k != given)
            now = time.time()
            forged = [
                {"job": job, "run": 1, "event": "started", "time": now},
                {"job": job, "run": 1, "event": "ended", "time": now, "exit_code": 0, "runtime": 0.0},
            ]
            m.report(other, ids[other], {"ack": 0, "reports": forged})
            assert m.engine.entries[job].state.value == "running"  # the forged end was ignored
            m.report(given, ids[given], {"ack": 0, "reports": forged})
            assert job not in m.engine.entries  # its own pilot's report ends it
        finally:
            await m.stop()

    asyncio.run(main())


def test_a_job_cannot_read_its_pilots_token(live: LiveServer, tmp_path: Path) -> None:
    c = live.client()
    out = tmp_path / "seen"
    # its parent is the wrapper that records its exit status, whose parent is the pilot
    pilot = "$(cut -d' ' -f4 /proc/$PPID/stat)"
    script = f"(tr '\\0' '\\n' < /proc/{pilot}/environ; env) | grep -c TOKEN > {out}; true"
    job = c.submit(command="sh", args=["-c", script])
    assert wait_state(c, job, ("completed",))["exit_code"] == 0
    assert out.read_text().strip() == "0"  # neither the pilot's environment nor the job's holds a token
    # the state is the manager's alone: 700 without [users], and every file the server made 600
    # (its umask), the database included when it is a file
    assert stat.S_IMODE(live.state_dir.stat().st_mode) == 0o700
    made = [live.state_dir / "admin.token", *(live.state_dir / "pilots").iterdir()]
    if live.db_url.startswith("sqlite:///"):
        made.append(Path(live.db_url.removeprefix("sqlite:///")))
    assert {str(f): oct(stat.S_IMODE(f.stat().st_mode)) for f in made} == {str(f): "0o600" for f in made}
