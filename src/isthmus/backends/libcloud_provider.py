"""An IaaS cloud through an Apache Libcloud compute driver, as a `CloudProvider`.

Each VM is created with its tags in the same call (EC2 TagSpecification): `isthmus-manager`
(the manager's id) and `isthmus-vm` (the VM's key), so that `instances` finds every VM this
manager leased, even one whose lease answer a crash lost. The VM's key is also the EC2 client
token (`ex_clienttoken`): asking again for the same key returns the same instance instead of
leasing a second one.

Credentials come from the environment variables or the file the site names, read when the
driver is built, never stored or printed. The EC2 driver is built with SigV4 signing (what
AWS requires in every region, and what EC2-compatible servers understand) and reads responses
whatever the EC2 API version of their XML namespace (`_EC2Response`); other drivers
(OpenStack, OpenNebula, GCE) are built from the same settings through `get_driver`.

Provider errors are classified into the core's `SiteError`s: capacity (InsufficientInstanceCapacity),
quota (InstanceLimitExceeded, ...), authentication, invalid request (a wrong image or type),
timeouts; anything else is transient.
"""

from __future__ import annotations

import logging
import os
import re
import urllib.parse
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, model_validator
from pydantic_core import PydanticCustomError

from isthmus.backends.api import Instance, LeaseRequest
from isthmus.backends.errors import (
    AuthenticationError,
    CapacityError,
    InvalidRequestError,
    QuotaError,
    SiteError,
    SiteTimeoutError,
    TransientError,
)
from isthmus.model.cloud import ProviderSettings

log = logging.getLogger("isthmus.backends.cloud")

MANAGER_TAG = "isthmus-manager"
VM_TAG = "isthmus-vm"

_CAPACITY = ("insufficientinstancecapacity", "insufficient capacity", "no valid host", "capacity")
_QUOTA = ("instancelimitexceeded", "limitexceeded", "quota", "vcpulimitexceeded", "requestlimitexceeded")
_AUTH = ("authfailure", "unauthorized", "invalidclienttokenid", "signaturedoesnotmatch", "forbidden")
_INVALID = (
    "invalidamiid",
    "invalidparameter",
    "invalidinstancetype",
    "unsupported",
    "malformed",
    "not found",
    "notfound",
)


class LibcloudOptions(BaseModel):
    """The options of a Libcloud driver (``[sites.provider]`` beside driver, image and
    instance_type). Credentials are named, never given: ``key_env``/``secret_env`` are environment
    variables, ``credentials_file`` a file with ``key = ...`` and ``secret = ...`` lines."""

    model_config = ConfigDict(strict=True, extra="forbid", allow_inf_nan=False, frozen=True)

    region: str = Field("", max_length=64, description="Provider region (default us-east-1 on EC2).")
    endpoint: str = Field("", max_length=512, description="Endpoint URL; empty for the provider's public one.")
    key_env: str = Field("", max_length=128, description="Environment variable holding the access key or user.")
    secret_env: str = Field("", max_length=128, description="Environment variable holding the secret.")
    credentials_file: str = Field("", max_length=4096, description="File with key = ... and secret = ... lines.")
    extra: dict[str, str] = Field(default_factory=dict, description="Further driver arguments (project, tenant, ...).")

    @model_validator(mode="after")
    def _credentials_named(self) -> LibcloudOptions:
        if not self.credentials_file and not (self.key_env and self.secret_env):
            raise PydanticCustomError(
                "credentials",
                "credentials are needed: key_env and secret_env (names of environment variables) or credentials_file",
            )
        return self


def libcloud_options(settings: ProviderSettings) -> LibcloudOptions:
    """The Libcloud options of `settings`; ValueError when it holds another driver's options."""
    options = settings.driver_options
    if not isinstance(options, LibcloudOptions):
        raise ValueError(f"provider {settings.driver!r}: expected Libcloud options, got {type(options).__name__}")
    return options


def credentials(provider: ProviderSettings) -> tuple[str, str]:
    """(key, secret) from the environment variables or the file the settings name; ValueError
    naming what is missing (never the values)."""
    settings = libcloud_options(provider)
    if settings.credentials_file:
        path = Path(settings.credentials_file).expanduser()
        try:
            text = path.read_text()
        except OSError as exc:
            raise ValueError(f"credentials_file {path}: {exc.strerror}") from None
        values: dict[str, str] = {}
        for line in text.splitlines():
            k, sep, v = line.partition("=")
            if sep:
                values[k.strip()] = v.strip()
        missing = [k for k in ("key", "secret") if not values.get(k)]
        if missing:
            raise ValueError(f"credentials_file {path}: no {' or '.join(missing)} = ... line")
        return values["key"], values["secret"]
    missing = [name for name in (settings.key_env, settings.secret_env) if not os.environ.get(name)]
    if missing:
        raise ValueError(f"environment variable(s) {', '.join(missing)} (the cloud's credentials) not set")
    return os.environ[settings.key_env], os.environ[settings.secret_env]


def _ec2_driver_class() -> type[Any]:
    """Libcloud's EC2 driver, reading responses of any EC2 API namespace version."""
    from libcloud.compute.drivers.ec2 import NAMESPACE, EC2Connection, EC2NodeDriver, EC2Response

    namespace = re.compile(r'xmlns="http://ec2\.amazonaws\.com/doc/[^"]*"')

    class _EC2Response(EC2Response):
        def parse_body(self) -> Any:
            # servers answer with their own API version (with or without a trailing "/");
            # Libcloud's XPath expressions name one: read them all as that one
            if isinstance(self.body, str):
                self.body = namespace.sub(f'xmlns="{NAMESPACE}"', self.body)
            return super().parse_body()  # type: ignore[no-untyped-call]

    class _EC2Connection(EC2Connection):
        responseCls = _EC2Response  # noqa: N815 (Libcloud's name)

    class _EC2Driver(EC2NodeDriver):
        connectionCls = _EC2Connection  # noqa: N815 (Libcloud's name)

        def list_all_nodes(self, ex_filters: dict[str, str]) -> list[Any]:
            """Every instance matching `ex_filters`, following the pages of DescribeInstances
            (Libcloud's list_nodes reads the first page only: EC2-compatible servers answer 100
            reservations a page, and the VMs beyond it looked gone)."""
            from libcloud.utils.xml import findall, findtext

            params: dict[str, Any] = {
                "Action": "DescribeInstances",
                **self._build_filters(ex_filters),  # type: ignore[no-untyped-call]
            }
            nodes: list[Any] = []
            while True:
                elem = self.connection.request(self.path, params=params).object  # type: ignore[no-untyped-call]
                for rs in findall(element=elem, xpath="reservationSet/item", namespace=NAMESPACE):  # type: ignore[no-untyped-call]
                    nodes += self._to_nodes(rs, "instancesSet/item")  # type: ignore[no-untyped-call]
                token = findtext(element=elem, xpath="nextToken", namespace=NAMESPACE)  # type: ignore[no-untyped-call]
                if not token:
                    return nodes
                params = {**params, "NextToken": token}

    return _EC2Driver


@dataclass
class LibcloudProvider:
    """One cloud site's provider (see the module docstring)."""

    name: str
    manager_id: str
    settings: ProviderSettings
    timeout: float = 60.0
    _driver: Any = field(default=None, init=False, repr=False)

    @classmethod
    def open(cls, name: str, manager_id: str, options: LibcloudOptions, settings: ProviderSettings) -> LibcloudProvider:
        """The registry's factory: the provider of site `name` for manager `manager_id`."""
        if settings.driver_options is not options:
            settings = replace(settings, driver_options=options)
        return cls(name, manager_id, settings)

    def driver(self) -> Any:
        """The Libcloud driver (built on first use; InvalidRequestError/AuthenticationError when
        the settings or credentials cannot make one)."""
        if self._driver is not None:
            return self._driver
        s, o = self.settings, libcloud_options(self.settings)
        try:
            key, secret = credentials(s)
        except ValueError as exc:
            raise AuthenticationError(str(exc), site=self.name) from None
        kwargs: dict[str, Any] = dict(o.extra)
        if o.endpoint:
            u = urllib.parse.urlsplit(o.endpoint)
            if u.scheme not in ("http", "https") or not u.hostname:
                raise InvalidRequestError(f"endpoint {o.endpoint!r}: expected http(s)://HOST[:PORT]", site=self.name)
            kwargs.update(host=u.hostname, secure=u.scheme == "https")
            if u.port:
                kwargs["port"] = u.port
        try:
            if s.driver == "ec2":
                cls = _ec2_driver_class()
                self._driver = cls(
                    key, secret, region=o.region or "us-east-1", signature_version="4", timeout=self.timeout, **kwargs
                )
            else:
                from libcloud.compute.providers import get_driver

                cls = get_driver(s.driver)
                if o.region:
                    kwargs.setdefault("region", o.region)
                self._driver = cls(key, secret, **kwargs)
        except Exception as exc:  # a driver refusing its arguments
            raise InvalidRequestError(f"cannot build the {s.driver} driver: {exc}", site=self.name) from None
        return self._driver

    # ------------------------------------------------------------------------ CloudProvider

    def lease(self, requests: Sequence[LeaseRequest]) -> list[Instance | SiteError]:
        """Create each VM, tagged and with its key as client token; its instance or the error."""
        from libcloud.compute.base import NodeImage, NodeSize

        out: list[Instance | SiteError] = []
        for r in requests:
            tags = {MANAGER_TAG: self.manager_id, VM_TAG: r.key, **r.tags}
            size = NodeSize(r.instance_type, r.instance_type, 0, 0, 0, 0, driver=self.driver())
            image = NodeImage(r.image, r.image, driver=self.driver())
            kwargs: dict[str, Any] = {"ex_userdata": r.user_data, "ex_metadata": tags}
            if self.settings.driver == "ec2":
                kwargs["ex_clienttoken"] = f"{self.manager_id}-{r.key}"[:64]
            try:
                node = self._call(self.driver().create_node, f"isthmus-{r.key}", size, image, **kwargs)
            except SiteError as exc:
                out.append(exc)
                continue
            out.append(self._instance(node, tags))
        return out

    def release(self, provider_ids: Sequence[str]) -> dict[str, SiteError | None]:
        """Terminate each VM; None for success (also for one the provider no longer has)."""
        from libcloud.compute.base import Node
        from libcloud.compute.types import NodeState

        out: dict[str, SiteError | None] = {}
        for pid in provider_ids:
            node = Node(pid, pid, NodeState.UNKNOWN, [], [], self.driver())
            try:
                self._call(self.driver().destroy_node, node)
                out[pid] = None
            except InvalidRequestError as exc:
                gone = "notfound" in str(exc).lower().replace(" ", "") or "does not exist" in str(exc).lower()
                out[pid] = None if gone else exc
            except SiteError as exc:
                out[pid] = exc
        return out

    def instances(self) -> list[Instance]:
        """Every VM the provider holds tagged with this manager's id (terminated ones included:
        a VM the manager thinks alive but the provider ended shows as terminated or absent)."""
        drv = self.driver()
        if self.settings.driver == "ec2":
            nodes = self._call(drv.list_all_nodes, ex_filters={f"tag:{MANAGER_TAG}": self.manager_id})
        else:
            nodes = self._call(drv.list_nodes)
        out = []
        for node in nodes:
            tags = _tags_of(node)
            if tags.get(MANAGER_TAG) == self.manager_id:
                out.append(self._instance(node, tags))
        return out

    # ------------------------------------------------------------------------------ helpers

    def _call(self, fn: Any, *args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except SiteError:
            raise
        except TimeoutError as exc:
            raise SiteTimeoutError(f"{self.settings.driver} does not answer: {exc}", site=self.name) from None
        except OSError as exc:  # connection refused, unreachable
            raise SiteTimeoutError(f"cannot reach {self.settings.driver}: {exc}", site=self.name) from None
        except Exception as exc:
            raise classify(exc, self.name) from None

    @staticmethod
    def _instance(node: Any, tags: dict[str, str]) -> Instance:
        from libcloud.compute.types import NodeState

        state = {
            NodeState.RUNNING: "running",
            NodeState.PENDING: "pending",
            NodeState.STARTING: "pending",
            NodeState.REBOOTING: "running",
            NodeState.TERMINATED: "terminated",
            NodeState.STOPPED: "terminated",
            NodeState.STOPPING: "terminated",
            NodeState.ERROR: "error",
        }.get(node.state, "pending")
        ips = list(node.private_ips or []) + list(node.public_ips or [])
        return Instance(node.id, state, tags=tags, address=ips[0] if ips else "")


def _tags_of(node: Any) -> dict[str, str]:
    extra = node.extra or {}
    tags = extra.get("tags") or extra.get("metadata") or {}
    return {str(k): str(v) for k, v in tags.items()} if isinstance(tags, dict) else {}


def classify(exc: Exception, site: str) -> SiteError:
    """The SiteError a provider's exception means, with its own message."""
    from libcloud.common.types import InvalidCredsError

    message = str(exc).strip() or type(exc).__name__
    low = message.lower().replace(" ", "")
    if isinstance(exc, InvalidCredsError) or any(k in low for k in _AUTH):
        return AuthenticationError(message, site=site)
    if any(k.replace(" ", "") in low for k in _QUOTA):
        return QuotaError(message, site=site)
    if any(k.replace(" ", "") in low for k in _CAPACITY):
        return CapacityError(message, site=site)
    if any(k.replace(" ", "") in low for k in _INVALID):
        return InvalidRequestError(message, site=site)
    if "timeout" in low or "timedout" in low:
        return SiteTimeoutError(message, site=site)
    return TransientError(message, site=site)
