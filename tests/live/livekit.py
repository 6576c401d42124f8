"""What the live tests share (importable by name, unlike conftest): the small test environment,
a manager process (`LiveServer`) and waits. Every process a test starts carries
ISTHMUS_TAG=<unique tag> in its environment (the manager copies it into pilots and jobs)."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any

import httpx

from isthmus.backends.node import Node
from isthmus.config import environment_from_text
from isthmus.live.client import Client
from isthmus.live.launch import tagged_pids
from isthmus.live.manager import Manager, ManagerConfig, free_port
from isthmus.live.pilots import PilotHub
from isthmus.tls import client_context

__all__ = ["PG_DSN", "LiveServer", "in_process", "ran_counts", "tagged_pids", "wait_for", "wait_state", "write_env"]

PG_DSN = os.environ.get("ISTHMUS_TEST_PG")

CLUSTER_ENV = """
name = "{name}"
round_interval = "event"
[[sites]]
name = "c1"
nodes = {nodes}
cores_per_node = {cores}
[[sites]]
name = "cloud"
kind = "cloud"
max_vms = 2
cores_per_node = 2
boot_time = {boot}
shutdown_time = 0.3
price_per_hour = {price}
billing_increment = {increment}
idle_release_time = 1.5
[policies]
allocation = "{alloc}"
provisioning = "{prov}"
"""


def write_env(
    path: Path,
    *,
    name: str = "t",
    nodes: int = 2,
    cores: int = 2,
    boot: float = 0.5,
    price: float = 0.0,
    increment: float = 3600,
    alloc: str = "ff",
    prov: str = "on-demand",
) -> Path:
    """Write a small environment file: cluster c1 (nodes × cores) and a cloud of 2 VMs × 2 cores."""
    path.write_text(
        CLUSTER_ENV.format(
            name=name, nodes=nodes, cores=cores, boot=boot, price=price, increment=increment, alloc=alloc, prov=prov
        )
    )
    return path


#: One local cluster of 2 nodes x 2 cores running bags of tasks under SEP (docs/bags.md).
BAG_ENV = """
name = "bags"
round_interval = "event"
[[sites]]
name = "c1"
nodes = 2
cores_per_node = 2
[policies]
allocation = "fcfs"
fairshare = "sep"
"""


def bag_env(path: Path, fairshare: str = "sep") -> Path:
    """One local cluster of 2 nodes x 2 cores; bags grow and shrink by `fairshare`."""
    path.write_text(BAG_ENV.replace('"sep"', f'"{fairshare}"'))
    return path


class LiveServer:
    """A manager process (`python -m isthmus.cli.live_entry server`) in its own session.

    `tls`: plain HTTP when None; "self-signed" serves HTTPS with the pair the server makes in its
    state directory; a (certificate, key) pair serves HTTPS with it. Clients verify the manager
    against `ca_file` (the certificate).
    """

    def __init__(
        self,
        env_file: Path,
        state_dir: Path,
        db_url: str,
        tag: str,
        *,
        pilot_timeout: float = 4.0,
        heartbeat_timeout: float = 3.0,
        reattach_timeout: float = 3.0,
        poll_wait: float = 1.0,
        on_stop: str = "kill",
        module: str = "isthmus.cli.live_entry",
        tls: str | tuple[Path, Path] | None = None,
    ) -> None:
        self.env_file = env_file
        self.state_dir = state_dir
        self.db_url = db_url
        self.tag = tag
        self.port = free_port()
        self.url = f"{'http' if tls is None else 'https'}://127.0.0.1:{self.port}"
        self.ca_file: Path | None = None
        tls_args: list[str] = []
        if tls == "self-signed":
            tls_args, self.ca_file = ["--self-signed"], state_dir / "tls" / "cert.pem"
        elif isinstance(tls, tuple):
            tls_args, self.ca_file = ["--tls-cert", str(tls[0]), "--tls-key", str(tls[1])], tls[0]
        self.args = [
            *tls_args,
            "--pilot-timeout",
            str(pilot_timeout),
            "--heartbeat-timeout",
            str(heartbeat_timeout),
            "--reattach-timeout",
            str(reattach_timeout),
            "--poll-wait",
            str(poll_wait),
            # tests stop their managers for good (no pilot outlives the test) unless they test detaching
            "--on-stop",
            on_stop,
        ]
        self.module = module
        self.proc: subprocess.Popen[bytes] | None = None
        self.starts = 0

    def start(self) -> LiveServer:
        """Start and wait until /health answers."""
        env = dict(
            os.environ,
            ISTHMUS_TAG=self.tag,
            PYTHONPATH=os.pathsep.join([str(Path(__file__).parent), os.environ.get("PYTHONPATH", "")]),
        )
        self.starts += 1
        log = open(self.state_dir.parent / f"server-{self.starts}.log", "wb")  # noqa: SIM115
        cmd = [
            sys.executable,
            "-m",
            self.module,
            "server",
            "--env",
            str(self.env_file),
            "--state-dir",
            str(self.state_dir),
            "--db",
            self.db_url,
            "--listen",
            f"127.0.0.1:{self.port}",
            *self.args,
        ]
        self.proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True)
        deadline = time.time() + 30
        while time.time() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(
                    f"server exited: {(self.state_dir.parent / f'server-{self.starts}.log').read_text()}"
                )
            try:
                if self.ca_file is None or self.ca_file.exists():
                    verify = client_context(self.ca_file) if self.ca_file is not None else True
                    if httpx.get(self.url + "/health", timeout=1, verify=verify).status_code == 200:
                        return self
            except httpx.HTTPError:
                pass
            time.sleep(0.05)
        raise RuntimeError("server did not come up")

    @property
    def admin_token(self) -> str:
        """The admin token written at first start."""
        return (self.state_dir / "admin.token").read_text().strip()

    def client(self, token: str | None = None) -> Client:
        """A client with `token` (default: admin)."""
        return Client(self.url, token if token is not None else self.admin_token, ca_file=self.ca_file)

    def kill(self, sig: int = signal.SIGKILL) -> None:
        """Signal the manager (only the manager process, not its pilots) and wait for it."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()

    def stop(self, mode: str | None = None) -> None:
        """Graceful stop: SIGTERM (the server's `--on-stop` mode), or `POST /admin/stop` with `mode`."""
        if mode is None or self.proc is None or self.proc.poll() is not None:
            self.kill(signal.SIGTERM)
            return
        with self.client() as c:
            c.stop(mode)
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.kill(signal.SIGTERM)


def wait_for(pred, timeout: float = 20.0, interval: float = 0.05, what: str = "condition"):  # type: ignore[no-untyped-def]
    """Poll `pred` until it returns a truthy value; fail after `timeout` seconds."""
    deadline = time.time() + timeout
    last = None
    while time.time() < deadline:
        last = pred()
        if last:
            return last
        time.sleep(interval)
    raise AssertionError(f"timed out waiting for {what} (last: {last!r})")


def ran_counts(ran: Path, n: int) -> list[int]:
    """How many times each of tasks 0..n-1 ran to its end: the lines of its file `ran/<task>.ran`
    (the live bag tests' tasks append their index there when they complete)."""
    return [len((ran / f"{i}.ran").read_text().splitlines()) if (ran / f"{i}.ran").exists() else 0 for i in range(n)]


def wait_state(c: Client, job_id: int, states: tuple[str, ...], timeout: float = 20.0) -> dict:  # type: ignore[type-arg]
    """Wait until job `job_id` is in one of `states`; return it."""
    return wait_for(
        lambda: (lambda j: j if j["state"] in states else None)(c.job(job_id)),  # noqa: PLC3002
        timeout,
        what=f"job {job_id} in {states}",
    )


def in_process(
    tmp_path: Path,
    monkeypatch: Any,
    env_toml: str,
    nodes: Sequence[str],
    body: Callable[[Manager, dict[str, str]], Awaitable[None]],
) -> None:
    """Run `body(manager, {node: registration id})` against a real manager in this process (engine,
    SQLite file, wall clock) whose pilots are the test: no pilot process is started, and `nodes`
    are registered first, so the test decides exactly what each pilot sends and when."""

    def no_process(self: PilotHub, node: Node) -> None:
        node.state = "spawned"
        node.deadline = time.time() + 60

    monkeypatch.setattr(PilotHub, "spawn", no_process)

    async def main() -> None:
        env = environment_from_text(env_toml, "toml", file="<test>")
        m = Manager(ManagerConfig(env=env, db_url=f"sqlite:///{tmp_path / 'state.db'}", state_dir=tmp_path / "state"))
        await m.start()
        try:
            ids = {}
            for node in nodes:
                reg = m.register(node, {"pid": 0, "slots": 1})
                assert reg["spool"] == str(tmp_path / "state" / "spool")
                ids[node] = reg["pilot_id"]
            await body(m, ids)
        finally:
            await m.stop()

    asyncio.run(main())
