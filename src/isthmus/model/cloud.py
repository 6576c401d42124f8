"""Settings of a cloud site reached through a real IaaS provider (an Apache Libcloud compute driver).

They come from the ``[sites.provider]`` table of an environment file (docs/clouds.md).
Credentials are never part of them: only the names of the environment variables (or the path
of a file) that hold them, read when the provider is built, so that they are never stored in
the database, written back by ``isthmus env show`` or printed.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

DRIVERS_TESTED: tuple[str, ...] = ("ec2",)
"""Drivers the test suite runs end to end against a server (a local EC2-compatible one)."""

DRIVERS_UNTESTED: tuple[str, ...] = ("openstack", "gce")
"""Drivers tested against recorded responses of their API only, never against a server."""


@dataclass(frozen=True, slots=True)
class ProviderSettings:
    """How to reach one cloud provider and what to boot there.

    `driver` is a cloud-provider driver of `isthmus.backends.registry` (a Libcloud compute driver:
    "ec2", "openstack", ...) and `driver_options` that driver's own options (an instance of its
    options model: endpoint, region, credentials for Libcloud; None: the model's defaults). A VM
    boots `image` as `instance_type` (the site's `cores_per_node` and `price_per_hour` describe
    that type). `boot_timeout` is how long a leased VM's pilot may take to register before the VM
    is an error VM (terminated; the provisioning policy leases a replacement). `agent_command`
    starts the pilot on the image. `release_on_stop`: every stop of the manager terminates the
    site's VMs once their running jobs have ended or been requeued (`isthmus stop --release`).
    `lease_patience`: a VM whose pilot has not reached its manager for that many seconds powers
    itself off and is terminated (the dead-man switch of `cloud_site.user_data`); None: off.
    """

    driver: str
    image: str
    instance_type: str
    boot_timeout: float = 300.0
    agent_command: str = "python3 -m isthmus.agent"
    driver_options: Any = None
    release_on_stop: bool = False
    lease_patience: float | None = None
