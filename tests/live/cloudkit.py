"""A local EC2-compatible server (moto) for the cloud tests; `VmPlayer` (isthmus.live.vm_player)
plays its VMs. The product only talks EC2 to the server; nothing in it knows it is a test one.
"""

from __future__ import annotations

import contextlib
import logging
import socket
import time
import urllib.request
from collections.abc import Iterator
from typing import Any

from moto.server import ThreadedMotoServer

from isthmus.live.vm_player import VmPlayer, ec2_client

__all__ = ["AMI", "CREDENTIALS", "VmPlayer", "ec2_client", "ec2_server", "typed_ec2", "wait_until"]

AMI = "ami-12c6146b"  # one of moto's default images
CREDENTIALS = {"ISTHMUS_TEST_EC2_KEY": "testing", "ISTHMUS_TEST_EC2_SECRET": "testing"}


def typed_ec2(endpoint: str, *, small: float, large: float, boot_timeout: float) -> str:
    """The TOML of a cloud site's offers (goes after its `[[sites]]` keys): types "small" (1 core,
    1 GB, t2.micro at `small` $ an hour) and "large" (2 cores, 8 GB, t2.large at `large`), the
    image "worker" (AMI), and the provider: EC2 at `endpoint` with the test's credentials."""
    return f"""
[[sites.instance_types]]
name = "small"
cores = 1
memory_mb = 1024
arch = "x86_64"
price_per_hour = {small}
provider_size = "t2.micro"
[[sites.instance_types]]
name = "large"
cores = 2
memory_mb = 8192
arch = "x86_64"
price_per_hour = {large}
provider_size = "t2.large"
[[sites.images]]
name = "worker"
provider_id = "{AMI}"
[sites.provider]
driver = "ec2"
endpoint = "{endpoint}"
key_env = "ISTHMUS_TEST_EC2_KEY"
secret_env = "ISTHMUS_TEST_EC2_SECRET"
boot_timeout = {boot_timeout}
"""


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


def wait_until(pred: Any, timeout: float = 30.0, what: str = "condition") -> Any:
    """Poll `pred` until truthy; its value, or AssertionError after `timeout` seconds."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        value = pred()
        if value:
            return value
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")
