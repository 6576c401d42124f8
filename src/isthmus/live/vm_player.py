"""Play the VMs of a local EC2-compatible server (moto): run each instance's boot script here.

moto's instances execute nothing, so a cloud site pointed at it never sees a pilot register.
`VmPlayer` stands in for the hypervisor: once the server reports an instance running, it waits
the boot delay, reads the instance's user data (the script isthmus gave it: start a pilot) and
runs it as a local process in its own session; when the instance is terminated it kills that
process group. A script that powers its VM off (`shutdown -h now`) finds a `shutdown` of the
player first on its PATH, which terminates the instance at the server: what EC2 does to an
instance launched with instance-initiated shutdown behaviour "terminate". isthmus itself only
talks EC2 to the server and does not know it is a local one.

It needs boto3 (the `dev` extra, which also brings moto). Used by the cloud tests and by
`scripts/koala_c_realworld.sh`; as a command::

    python -m isthmus.live.vm_player --endpoint http://127.0.0.1:PORT --region us-east-1 \\
        --boot-delay 0.5 --work DIR [--tag TAG]
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any


def ec2_client(endpoint: str, region: str = "us-east-1") -> Any:
    """A boto3 EC2 client of the server (the player's own view of the instances)."""
    try:
        import boto3
    except ImportError as exc:  # pragma: no cover - the dev extra is missing
        raise SystemExit("the VM player needs boto3: pip install -e '.[dev]'") from exc
    return boto3.client(
        "ec2",
        endpoint_url=endpoint,
        region_name=region,
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
    )


class VmPlayer:
    """Runs the user data of every running instance of one region of the server as a local process.

    `boot_delay`: seconds between the server reporting an instance running and its script
    starting (what a real VM spends booting). `refuse`: instance ids whose VM never boots (their
    script is not run: error VMs, for fault tests); `dead_on_arrival`: how many of the next
    instances never boot; `dead_of_type`: the same per instance type.
    """

    def __init__(
        self,
        endpoint: str,
        work: Path,
        tag: str,
        *,
        region: str = "us-east-1",
        boot_delay: float = 0.0,
        refuse: set[str] | None = None,
    ) -> None:
        self.ec2 = ec2_client(endpoint, region)
        self.endpoint, self.region = endpoint, region
        self.work = work
        self.tag = tag
        self.boot_delay = boot_delay
        self.procs: dict[str, subprocess.Popen[bytes]] = {}
        self.played: set[str] = set()
        self.refuse = refuse if refuse is not None else set()
        self.dead_on_arrival = 0
        #: how many of the next instances of each instance type (provider size) never boot
        self.dead_of_type: dict[str, int] = {}
        self._booting: dict[str, float] = {}  # instance id -> when its script starts
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
        """Every instance the server holds in this region, over all pages of the listing (a
        server answers 100 reservations a page)."""
        out = []
        for page in self.ec2.get_paginator("describe_instances").paginate():
            for r in page["Reservations"]:
                out.extend(r["Instances"])
        return out

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                self._step()
            except Exception as exc:  # the server stopping under us at teardown
                print(f"vm-player: {exc}", file=sys.stderr)
            self._stop.wait(0.1)

    def _step(self) -> None:
        now = time.monotonic()
        instances = self.instances()
        listed = {inst["InstanceId"] for inst in instances}
        for iid in [i for i in self.procs if i not in listed]:  # no longer listed: gone
            _kill(self.procs.pop(iid))
        for inst in instances:
            iid, state = inst["InstanceId"], inst["State"]["Name"]
            if state == "running" and iid not in self.played:
                if iid not in self._booting:
                    self._booting[iid] = now + self.boot_delay
                if now < self._booting[iid]:
                    continue
                del self._booting[iid]
                self.played.add(iid)
                if self.dead_on_arrival > 0:
                    self.dead_on_arrival -= 1
                    self.refuse.add(iid)
                size = inst.get("InstanceType", "")
                if self.dead_of_type.get(size, 0) > 0:
                    self.dead_of_type[size] -= 1
                    self.refuse.add(iid)
                if iid in self.refuse:
                    continue
                self._boot(iid)
            elif state in ("shutting-down", "terminated", "stopped"):
                self._booting.pop(iid, None)
                if iid in self.procs:
                    _kill(self.procs.pop(iid))

    def _boot(self, iid: str) -> None:
        attr = self.ec2.describe_instance_attribute(InstanceId=iid, Attribute="userData")
        script = base64.b64decode(attr["UserData"]["Value"])
        path = self.work / f"{iid}.sh"
        path.write_bytes(script)
        bin_dir = self.work / f"{iid}.bin"
        bin_dir.mkdir(exist_ok=True)
        shutdown = bin_dir / "shutdown"
        terminate = (
            "from isthmus.live.vm_player import ec2_client; "
            f"ec2_client({self.endpoint!r}, {self.region!r}).terminate_instances(InstanceIds=[{iid!r}])"
        )
        shutdown.write_text(f'#!/bin/sh\nexec "{sys.executable}" -c "{terminate}"\n')
        shutdown.chmod(0o755)
        path_var = f"{bin_dir}:{Path(sys.executable).parent}:{os.environ['PATH']}"
        env = {**os.environ, "ISTHMUS_TAG": self.tag, "PATH": path_var}
        with open(self.work / f"{iid}.log", "ab") as log:
            self.procs[iid] = subprocess.Popen(
                ["sh", str(path)], stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True
            )


def _kill(proc: subprocess.Popen[bytes]) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=5)


def main(argv: list[str] | None = None) -> None:
    """Play one region's VMs until SIGTERM or Ctrl-C, then kill every VM process it started."""
    ap = argparse.ArgumentParser(prog="python -m isthmus.live.vm_player", description=__doc__.split("\n\n")[0])
    ap.add_argument("--endpoint", required=True, help="the EC2-compatible server's URL")
    ap.add_argument("--region", default="us-east-1", help="the region whose instances to play (default us-east-1)")
    ap.add_argument("--boot-delay", type=float, default=0.0, help="seconds from 'running' to the script's start")
    ap.add_argument("--work", type=Path, required=True, help="directory for the scripts and their output")
    ap.add_argument("--tag", default="vm-player", help="ISTHMUS_TAG given to the VM processes")
    args = ap.parse_args(argv)
    if not (args.boot_delay >= 0 and args.boot_delay < float("inf")):
        ap.error(f"--boot-delay must be a non-negative number, got {args.boot_delay}")
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    player = VmPlayer(args.endpoint, args.work, args.tag, region=args.region, boot_delay=args.boot_delay)
    with player, contextlib.suppress(KeyboardInterrupt):
        while not stop.wait(0.5):
            pass


if __name__ == "__main__":
    main()
