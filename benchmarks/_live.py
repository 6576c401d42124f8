"""Shared helper of the live benchmarks: start a manager on a throwaway state directory."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import httpx

from isthmus.live.manager import free_port


@contextlib.contextmanager
def manager(env_toml: str, *, extra: list[str] | None = None) -> Iterator[tuple[str, str]]:
    """Run `python -m isthmus.live server` on an environment text; yield (url, admin token)."""
    with tempfile.TemporaryDirectory(prefix="isthmus-bench-") as tmp:
        env_file = Path(tmp) / "env.toml"
        env_file.write_text(env_toml)
        port = free_port()
        url = f"http://127.0.0.1:{port}"
        state = Path(tmp) / "state"
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "isthmus.live",
                "server",
                "--env",
                str(env_file),
                "--state-dir",
                str(state),
                "--listen",
                f"127.0.0.1:{port}",
                *(extra or []),
            ],
            stdout=subprocess.DEVNULL,
            stderr=open(Path(tmp) / "server.log", "wb"),  # noqa: SIM115
            start_new_session=True,
        )
        try:
            for _ in range(600):
                try:
                    if httpx.get(url + "/health", timeout=1).status_code == 200:
                        break
                except httpx.HTTPError:
                    time.sleep(0.05)
            yield url, (state / "admin.token").read_text().strip()
        finally:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
