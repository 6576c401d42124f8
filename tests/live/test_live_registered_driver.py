"""A batch system defined outside the package, registered in the driver registry, runs a job of a
real manager (engine, SQLite file, wall clock) in direct mode: the environment file selects it by
its driver name and its own option reaches it."""

from __future__ import annotations

import asyncio
import subprocess
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
from livekit import in_process
from pydantic import BaseModel, ConfigDict, Field

from isthmus.backends import registry
from isthmus.backends.api import Capacity, RemoteState, RunRequest
from isthmus.backends.errors import SiteError
from isthmus.live.manager import Manager
from isthmus.model.states import JobState


class ProcessOptions(BaseModel):
    """The throwaway driver's options: a label its jobs see in their environment."""

    model_config = ConfigDict(strict=True, extra="forbid", frozen=True)
    label: str = Field(min_length=1)


class ProcessBatch:
    """A batch system of local processes: each submission is one child process."""

    def __init__(self, name: str, manager_id: str, options: ProcessOptions, lrm: Any) -> None:
        self.name = name
        self.manager_id = manager_id
        self.label = options.label
        self.procs: dict[str, tuple[str, subprocess.Popen[bytes]]] = {}
        self.submitted: list[RunRequest] = []

    def submit(self, requests: Sequence[RunRequest]) -> list[str | SiteError]:
        out: list[str | SiteError] = []
        for r in requests:
            self.submitted.append(r)
            with open(r.stdout or "/dev/null", "wb") as stdout:
                proc = subprocess.Popen(
                    r.command, cwd=r.cwd, env={**r.env, "PATH": "/usr/bin:/bin", "LABEL": self.label}, stdout=stdout
                )
            pid = str(proc.pid)
            self.procs[pid] = (r.key, proc)
            out.append(pid)
        return out

    def _state(self, pid: str) -> RemoteState:
        key, proc = self.procs[pid]
        code = proc.poll()
        if code is None:
            return RemoteState(pid, JobState.RUNNING, "running", key)
        state = JobState.COMPLETED if code == 0 else JobState.FAILED
        return RemoteState(pid, state, "exited", key, exit_code=code)

    def status(self, provider_ids: Sequence[str]) -> dict[str, RemoteState]:
        return {pid: self._state(pid) for pid in provider_ids if pid in self.procs}

    def cancel(self, provider_ids: Sequence[str]) -> dict[str, SiteError | None]:
        for pid in provider_ids:
            if pid in self.procs:
                self.procs[pid][1].kill()
        return dict.fromkeys(provider_ids)

    def capacity(self) -> Capacity:
        busy = sum(1 for _, p in self.procs.values() if p.poll() is None)
        return Capacity(total=2, usable=2, free=2 - busy)

    def find(self) -> dict[str, RemoteState]:
        return {pid: self._state(pid) for pid in self.procs}


@pytest.fixture
def opened() -> Iterator[list[ProcessBatch]]:
    """Registers the throwaway driver "processes"; the systems the manager opened, in order."""
    systems: list[ProcessBatch] = []

    def factory(name: str, manager_id: str, options: ProcessOptions, lrm: Any) -> ProcessBatch:
        systems.append(ProcessBatch(name, manager_id, options, lrm))
        return systems[-1]

    registry.register(registry.Driver("batch", "processes", factory, ProcessOptions))
    try:
        yield systems
    finally:
        registry.unregister("batch", "processes")


ENV = """
name = "outside-driver"
round_interval = "event"
[[sites]]
name = "procs"
nodes = 1
cores_per_node = 2
[sites.lrm]
driver = "processes"
mode = "direct"
poll_interval = 0.1
label = "from-the-file"
[policies]
allocation = "fcfs"
provisioning = "none"
"""


def test_a_batch_system_registered_from_outside_runs_a_job(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, opened: list[ProcessBatch]
) -> None:
    marker = tmp_path / "ran.txt"

    async def body(m: Manager, _ids: dict[str, str]) -> None:
        line = f'echo "$LABEL $ISTHMUS_JOB_ID" > {marker}'
        job = m.submit("admin", {"command": "/bin/sh", "args": ["-c", line], "size": 1, "priority": "high", "env": {}})
        await m.committed()
        deadline = time.time() + 20
        while m.store.job(job)["state"] != "completed":
            assert time.time() < deadline, m.store.job(job)
            await asyncio.sleep(0.05)
        (system,) = opened
        assert system.name == "procs" and [r.key for r in system.submitted] == [f"j{job}r1"]
        assert marker.read_text() == f"from-the-file {job}\n"

    in_process(tmp_path, monkeypatch, ENV, [], body)
