"""Starting a live manager in a throwaway directory, and finding or killing what it started.

Used by `isthmus validate`, the live tests and the live benchmarks: every process a manager
starts (pilots, jobs) inherits its ISTHMUS_TAG, so all of them can be found and cleaned up.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator, Sequence
from pathlib import Path

import httpx

from isthmus.live.client import Client
from isthmus.live.manager import free_port
from isthmus.model.environment import Environment


def tagged_pids(tag: str) -> list[int]:
    """Live (not zombie) processes whose environment carries ISTHMUS_TAG=tag."""
    needle = f"ISTHMUS_TAG={tag}".encode()
    out = []
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open(f"/proc/{d}/stat", "rb") as f:
                if f.read().rsplit(b")", 1)[1].split()[0] == b"Z":
                    continue
            with open(f"/proc/{d}/environ", "rb") as f:
                env = f.read()
        except (OSError, IndexError):
            continue
        if needle in env.split(b"\0"):
            out.append(int(d))
    return out


def kill_tagged(tag: str) -> int:
    """SIGKILL whatever still carries `tag` (pilots or jobs that outlived the manager); how many."""
    killed = 0
    for _ in range(3):
        pids = [p for p in tagged_pids(tag) if p != os.getpid()]
        if not pids:
            break
        for pid in pids:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
                killed += 1
        time.sleep(0.2)
    return killed


@contextlib.contextmanager
def live_manager(
    env: Environment,
    work_dir: Path,
    *,
    poll_wait: float = 5.0,
    tag: str | None = None,
    extra_args: Sequence[str] = (),
) -> Iterator[Client]:
    """Run a manager for `env` (``python -m isthmus.cli.live_entry server``) in `work_dir`; yield an admin client.

    The manager runs in its own session on a free port with a fresh SQLite state directory.
    On exit it is stopped with SIGTERM (it tells its pilots to exit and kills them); whatever
    still carries its ISTHMUS_TAG (`tag`, default a fresh unique one) afterwards is killed.
    `extra_args` are added to the server's command line.
    """
    from isthmus.config import dump_environment

    work_dir.mkdir(parents=True, exist_ok=True)
    env_file = work_dir / "env.toml"
    env_file.write_text(dump_environment(env, "toml"))
    state = work_dir / "state"
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    tag = tag or uuid.uuid4().hex
    cmd = [
        sys.executable,
        "-m",
        "isthmus.cli.live_entry",
        "server",
        "--env",
        str(env_file),
        "--state-dir",
        str(state),
        "--listen",
        f"127.0.0.1:{port}",
        "--poll-wait",
        str(poll_wait),
        *extra_args,
    ]
    with open(work_dir / "server.log", "wb") as log:
        proc = subprocess.Popen(
            cmd,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            env=dict(os.environ, ISTHMUS_TAG=tag),
            start_new_session=True,
        )
    client: Client | None = None
    try:
        deadline = time.monotonic() + 60
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"the manager exited ({proc.returncode}): {(work_dir / 'server.log').read_text()}")
            try:
                if httpx.get(url + "/health", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError("the manager did not answer /health within 60 s")
            time.sleep(0.05)
        client = Client(url, (state / "admin.token").read_text().strip())
        yield client
    finally:
        if client is not None:
            client.close()
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
        kill_tagged(tag)
