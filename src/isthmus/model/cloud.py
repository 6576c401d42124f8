"""Settings of a cloud site reached through a real IaaS provider (an Apache Libcloud compute driver).

They come from the ``[sites.provider]`` table of an environment file (docs/clouds.md).
Credentials are never part of them: only the names of the environment variables (or the path
of a file) that hold them, read when the provider is built, so that they are never stored in
the database, written back by ``isthmus env show`` or printed.
"""

from __future__ import annotations

from dataclasses import dataclass, field

DRIVERS_TESTED: tuple[str, ...] = ("ec2",)
"""Drivers the test suite runs end to end against a server (a local EC2-compatible one)."""

DRIVERS_UNTESTED: tuple[str, ...] = ("openstack", "opennebula", "gce")
"""Drivers selectable through the same code, never run against a server by the test suite."""


@dataclass(frozen=True, slots=True)
class ProviderSettings:
    """How to reach one cloud provider and what to boot there.

    `driver` is a Libcloud compute driver name; `endpoint` an explicit URL (a private cloud, an
    EC2-compatible server), empty for the provider's public one; `region` its region.
    `key_env`/`secret_env` name the environment variables holding the credentials, or
    `credentials_file` names a file of ``key = ...`` and ``secret = ...`` lines. A VM boots
    `image` as `instance_type` (the site's `cores_per_node` and `price_per_hour` describe that
    type). `boot_timeout` is how long a leased VM's pilot may take to register before the VM is
    an error VM (terminated; the provisioning policy leases a replacement). `agent_command`
    starts the pilot on the image; `extra` holds further driver arguments as strings.
    """

    driver: str
    image: str
    instance_type: str
    region: str = ""
    endpoint: str = ""
    key_env: str = ""
    secret_env: str = ""
    credentials_file: str = ""
    boot_timeout: float = 300.0
    agent_command: str = "python3 -m isthmus.agent"
    extra: tuple[tuple[str, str], ...] = field(default_factory=tuple)
