"""A local EC2-compatible server (moto) and a harness that plays its VMs, for the cloud tests.

moto's instances execute nothing. `VmPlayer` stands in for the VMs: whenever the server reports
an instance running, it reads the instance's user data and runs it as a local process (in its
own session, tagged for cleanup), and when the instance is terminated it kills that process.
The product only talks EC2 to the server; nothing in it knows the server is a test one.
"""

from __future__ import annotations

import base64
import contextlib
import logging
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
from moto.server import ThreadedMotoServer

AMI = "ami-12c6146b"  # one of moto's default images
CREDENTIALS = {"ISTHMUS_TEST_EC2_KEY": "testing", "ISTHMUS_TEST_EC2_SECRET": "testing"}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextlib.contextmanager
def ec2_server() -> Iterator[str]:
    """A moto EC2 server of this test on a free port; yields its endpoint URL."""
    logging.getLogger("werkzeug").setLevel(logging.ERROR)
    port = _free_port()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    # moto keeps its state per process, shared by every server in it: start from nothing
    urllib.request.urlopen(urllib.request.Request(f"http://127.0.0.1:{port}/moto-api/reset", method="POST"))
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.stop()


def ec2_client(endpoint: str) -> Any:
    """A boto3 EC2 client of the server (the harness's own view of the instances)."""
    return boto3.client(
        "ec2",
        endpoint_url=endpoint,
        region_name="us-east-1",
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
    )


class VmPlayer:
    """Runs the user data of every running instance of the server as a local process."""

    def __init__(self, endpoint: str, work: Path, tag: str, *, refuse: set[str] | None = None) -> None:
        self.ec2 = ec2_client(endpoint)
        self.work = work
        self.tag = tag
        self.procs: dict[str, subprocess.Popen[bytes]] = {}
        self.played: set[str] = set()
        #: instance ids whose "VM" never boots (their user data is not run): error VMs
        self.refuse = refuse if refuse is not None else set()
        self.dead_on_arrival = 0  # how many of the next instances never boot
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="vm-player", daemon=True)

    def __enter__(self) -> VmPlayer:
        self.work.mkdir(parents=True, exist_ok=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=10)
        for proc in self.procs.values():
            _kill(proc)

    def instances(self) -> list[dict[str, Any]]:
        """Every instance the server holds."""
        out = []
        for r in self.ec2.describe_instances()["Reservations"]:
            out.extend(r["Instances"])
        return out

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                self._step()
            except Exception as exc:  # the server stopping under us at teardown
                print(f"vm-player: {exc}", file=sys.stderr)
            self._stop.wait(0.2)

    def _step(self) -> None:
        for inst in self.instances():
            iid, state = inst["InstanceId"], inst["State"]["Name"]
            if state == "running" and iid not in self.played:
                self.played.add(iid)
                if self.dead_on_arrival > 0:
                    self.dead_on_arrival -= 1
                    self.refuse.add(iid)
                if iid in self.refuse:
                    continue
                attr = self.ec2.describe_instance_attribute(InstanceId=iid, Attribute="userData")
                script = base64.b64decode(attr["UserData"]["Value"])
                path = self.work / f"{iid}.sh"
                path.write_bytes(script)
                env = {
                    **os.environ,
                    "ISTHMUS_TAG": self.tag,
                    "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}",
                }
                with open(self.work / f"{iid}.log", "ab") as log:
                    self.procs[iid] = subprocess.Popen(
                        ["sh", str(path)], stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True
                    )
            elif state in ("shutting-down", "terminated", "stopped") and iid in self.procs:
                _kill(self.procs.pop(iid))


def _kill(proc: subprocess.Popen[bytes]) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=5)


def wait_until(pred: Any, timeout: float = 30.0, what: str = "condition") -> Any:
    """Poll `pred` until truthy; its value, or AssertionError after `timeout` seconds."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        value = pred()
        if value:
            return value
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")
