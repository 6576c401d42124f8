"""An IaaS cloud through an Apache Libcloud compute driver, as a `CloudProvider`.

Three drivers, each with its own options model and a small adapter that maps a `LeaseRequest`
onto that driver's own ``create_node`` signature and reads this manager's marks back from that
driver's representation of a VM:

- ``ec2`` (`Ec2Options`): the user data is ``ex_userdata``, the marks are EC2 tags given in the
  same call (TagSpecification), the key pair ``ex_keyname``, security groups and a subnet by id;
  the VM's key is also the client token (``ex_clienttoken``): asking again for the same key
  returns the same instance instead of leasing a second one. Listing asks EC2 for the instances
  tagged with this manager's id, page after page.
- ``openstack`` (`OpenStackOptions`): Keystone v3 password authentication; the image and the
  flavour are looked up by id or name (Glance and Nova), the networks by id or name (Neutron);
  user data ``ex_userdata``, marks as server metadata (``ex_metadata``), key pair ``ex_keyname``.
- ``gce`` (`GceOptions`): a service account's key file; the user data is the ``startup-script``
  metadata item, the marks are metadata items too (exact) and labels (GCE's own filter, in the
  characters labels allow); the machine type, image and network are looked up by the driver.
  A VM's name is derived from the manager and the VM's key, so asking again for the same key
  finds the VM the first call created (GCE refuses a second VM of that name).

The marks are `MANAGER_TAG` (the manager's id), `SITE_TAG` (the site's name) and `VM_TAG` (the
VM's key), so that `instances` finds every VM this manager leased, even one whose lease answer a
crash lost.

Credentials come from the environment variables or the file the site names, read when the
driver is built, never stored or printed. Provider errors are classified into the core's
`SiteError`s: capacity, quota, authentication, invalid request (a wrong image or type), timeouts;
anything else is transient.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
import urllib.parse
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, ClassVar

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
SITE_TAG = "isthmus-site"
VM_TAG = "isthmus-vm"

_CAPACITY = (
    "insufficientinstancecapacity",
    "insufficient capacity",
    "no valid host",
    "resource_pool_exhausted",
    "capacity",
)
_QUOTA = (
    "instancelimitexceeded",
    "limitexceeded",
    "quota",
    "vcpulimitexceeded",
    "requestlimitexceeded",
    "overlimit",
)
_AUTH = ("authfailure", "unauthorized", "invalidclienttokenid", "signaturedoesnotmatch", "forbidden", "invalid_grant")
_INVALID = (
    "invalidamiid",
    "invalidparameter",
    "invalidinstancetype",
    "unsupported",
    "malformed",
    "badrequest",
    "not found",
    "notfound",
    "not_found",
    "couldnotbefound",
)

_STRICT = ConfigDict(strict=True, extra="forbid", allow_inf_nan=False, frozen=True)


def _endpoint_ok(url: str, what: str) -> None:
    u = urllib.parse.urlsplit(url)
    if u.scheme not in ("http", "https") or not u.hostname:
        raise PydanticCustomError(
            "url", "{what} {url!r}: expected http(s)://HOST[:PORT][/PATH]", {"what": what, "url": url}
        )


class KeySecretOptions(BaseModel):
    """Credentials as a key and a secret, named, never given: ``key_env``/``secret_env`` are
    environment variables, ``credentials_file`` a file with ``key = ...`` and ``secret = ...`` lines."""

    model_config = _STRICT

    key_env: str = Field("", max_length=128, description="Environment variable holding the access key or user.")
    secret_env: str = Field("", max_length=128, description="Environment variable holding the secret.")
    credentials_file: str = Field("", max_length=4096, description="File with key = ... and secret = ... lines.")

    @model_validator(mode="after")
    def _credentials_named(self) -> KeySecretOptions:
        if not self.credentials_file and not (self.key_env and self.secret_env):
            raise PydanticCustomError(
                "credentials",
                "credentials are needed: key_env and secret_env (names of environment variables) or credentials_file",
            )
        return self

    def credentials(self) -> tuple[str, str]:
        """(key, secret) from the environment variables or the file named; ValueError naming
        what is missing (never the values)."""
        if self.credentials_file:
            path = Path(self.credentials_file).expanduser()
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
        missing = [name for name in (self.key_env, self.secret_env) if not os.environ.get(name)]
        if missing:
            raise ValueError(f"environment variable(s) {', '.join(missing)} (the cloud's credentials) not set")
        return os.environ[self.key_env], os.environ[self.secret_env]


class Ec2Options(KeySecretOptions):
    """The ``ec2`` driver's options: region, endpoint (an EC2-compatible server), credentials
    (access key id and secret access key), and what each instance is started with."""

    region: str = Field("", max_length=64, description="Region (default us-east-1).")
    endpoint: str = Field("", max_length=512, description="Endpoint URL; empty for the region's public one.")
    key_name: str = Field("", max_length=255, description="Key pair the instances get (empty: none).")
    subnet: str = Field("", max_length=255, description="Subnet id to start the instances in (empty: the default).")
    security_groups: list[str] = Field(default_factory=list, description="Security group ids (with a subnet).")

    @model_validator(mode="after")
    def _endpoint_is_url(self) -> Ec2Options:
        if self.endpoint:
            _endpoint_ok(self.endpoint, "endpoint")
        if self.security_groups and not self.subnet:
            raise PydanticCustomError("subnet", "security_groups (ids) are given with the subnet they belong to")
        return self


class OpenStackOptions(KeySecretOptions):
    """The ``openstack`` driver's options: Keystone v3 (auth URL, project, domains), the region
    of the catalogue to use, the user and password as credentials, and what each server is
    started with (key pair, networks, security groups, availability zone)."""

    auth_url: str = Field(..., max_length=512, description="Keystone URL, e.g. https://keystone.example.org:5000.")
    project: str = Field(..., min_length=1, max_length=255, description="Project (tenant) name.")
    user_domain: str = Field("Default", min_length=1, max_length=255, description="Domain name of the user.")
    project_domain_id: str = Field("default", min_length=1, max_length=255, description="Domain id of the project.")
    region: str = Field("", max_length=64, description="Region in the service catalogue (empty: the first).")
    key_name: str = Field("", max_length=255, description="Key pair the servers get (empty: none).")
    networks: list[str] = Field(default_factory=list, description="Networks (ids or names); empty: the default.")
    security_groups: list[str] = Field(default_factory=list, description="Security group names.")
    availability_zone: str = Field("", max_length=255, description="Availability zone (empty: the scheduler's).")

    @model_validator(mode="after")
    def _auth_url_is_url(self) -> OpenStackOptions:
        _endpoint_ok(self.auth_url, "auth_url")
        return self


class GceOptions(BaseModel):
    """The ``gce`` driver's options: project and zone, a service account's JSON key file as
    credentials, the network the instances join and their boot disk."""

    model_config = _STRICT

    project: str = Field(..., min_length=1, max_length=255, description="Project id.")
    zone: str = Field(..., min_length=1, max_length=64, description="Zone the instances run in, e.g. europe-west1-b.")
    key_file: str = Field(..., min_length=1, max_length=4096, description="Service account JSON key file.")
    network: str = Field("default", min_length=1, max_length=255, description="Network of the instances.")
    subnetwork: str = Field("", max_length=255, description="Subnetwork (empty: the network's own).")
    disk_type: str = Field("pd-balanced", min_length=1, max_length=64, description="Boot disk type.")
    disk_size: int = Field(0, ge=0, le=65536, description="Boot disk size in GB (0: the image's).")
    token_file: str = Field(
        "",
        max_length=4096,
        description="Where Libcloud caches the access token (empty: ~/.google_libcloud_auth.PROJECT).",
    )

    def credentials(self) -> tuple[str, str]:
        """(service account email, key file path), the email read from the key file; ValueError
        naming what is missing (never the key)."""
        path = Path(self.key_file).expanduser()
        try:
            doc = json.loads(path.read_text())
        except OSError as exc:
            raise ValueError(f"key_file {path}: {exc.strerror}") from None
        except ValueError:
            raise ValueError(f"key_file {path}: not a JSON service account key") from None
        if not isinstance(doc, dict) or not doc.get("client_email") or not doc.get("private_key"):
            raise ValueError(f"key_file {path}: no client_email or private_key (a service account JSON key is needed)")
        return str(doc["client_email"]), str(path)


CloudOptions = Ec2Options | OpenStackOptions | GceOptions


def driver_options(settings: ProviderSettings) -> CloudOptions:
    """The driver options of `settings`; ValueError when they are not a Libcloud driver's."""
    options = settings.driver_options
    if not isinstance(options, Ec2Options | OpenStackOptions | GceOptions):
        raise ValueError(
            f"provider {settings.driver!r}: expected Libcloud driver options, got {type(options).__name__}"
        )
    return options


def credentials(provider: ProviderSettings) -> tuple[str, str]:
    """The credentials the settings name, as the driver takes them; ValueError naming what is
    missing (never the values)."""
    return driver_options(provider).credentials()


# ---------------------------------------------------------------------------- adapters


@dataclass(frozen=True)
class Marks:
    """What a VM carries to be recognised: the manager's id, the site's name and the VM's key."""

    manager: str
    site: str
    key: str

    def tags(self) -> dict[str, str]:
        """The marks as tags."""
        return {MANAGER_TAG: self.manager, SITE_TAG: self.site, VM_TAG: self.key}

    def name(self) -> str:
        """The VM's display name: ``isthmus-<site>-<vm>`` (the key's part after the site index)."""
        return f"isthmus-{self.site}-{self.key.rpartition('/')[2]}"


class Adapter:
    """How one Libcloud driver is built, asked for a VM and read back (one subclass a driver)."""

    driver: ClassVar[str]

    def __init__(self, options: Any, site: str, timeout: float) -> None:
        self.options = options
        self.site = site
        self.timeout = timeout

    def build(self, key: str, secret: str) -> Any:
        """The Libcloud driver."""
        raise NotImplementedError

    def create(self, drv: Any, request: LeaseRequest, marks: Marks, tags: dict[str, str]) -> Any:
        """Create the VM of `request` with `tags` (the marks and the request's tags); its Node."""
        raise NotImplementedError

    def nodes(self, drv: Any, manager_id: str) -> list[Any]:
        """The VMs that may be this manager's (the caller keeps those whose tags say so)."""
        return list(drv.list_nodes())

    def tags(self, node: Any) -> dict[str, str]:
        """The tags a node carries, in this driver's representation."""
        tags = (node.extra or {}).get("metadata") or {}
        return {str(k): str(v) for k, v in tags.items()} if isinstance(tags, dict) else {}

    def provider_id(self, node: Any) -> str:
        """The id the provider's calls take for `node`."""
        return str(node.id)

    def destroy(self, drv: Any, provider_id: str) -> None:
        """Terminate VM `provider_id`."""
        from libcloud.compute.base import Node
        from libcloud.compute.types import NodeState

        drv.destroy_node(Node(provider_id, provider_id, NodeState.UNKNOWN, [], [], drv))


class Ec2Adapter(Adapter):
    """EC2 (see the module docstring)."""

    driver = "ec2"
    options: Ec2Options

    def build(self, key: str, secret: str) -> Any:
        """EC2 with SigV4 signing, reading responses of any EC2 API namespace version."""
        o = self.options
        kwargs: dict[str, Any] = {}
        if o.endpoint:
            u = urllib.parse.urlsplit(o.endpoint)
            kwargs.update(host=u.hostname, secure=u.scheme == "https")
            if u.port:
                kwargs["port"] = u.port
        cls = _ec2_driver_class()
        return cls(key, secret, region=o.region or "us-east-1", signature_version="4", timeout=self.timeout, **kwargs)

    def create(self, drv: Any, request: LeaseRequest, marks: Marks, tags: dict[str, str]) -> Any:
        """RunInstances with the image and type ids as given (EC2 takes ids; a wrong one is
        refused by the call itself), user data, tags, key pair, security groups, subnet."""
        from libcloud.compute.base import NodeImage, NodeSize
        from libcloud.compute.drivers.ec2 import EC2NetworkSubnet

        o = self.options
        size = NodeSize(request.instance_type, request.instance_type, 0, 0, 0, 0, driver=drv)
        image = NodeImage(request.image, request.image, driver=drv)
        kwargs: dict[str, Any] = {
            "ex_userdata": request.user_data,
            "ex_metadata": tags,
            "ex_clienttoken": f"{marks.manager}-{marks.key}"[:64],
            # a VM that powers itself off (the dead-man switch) is terminated, not kept stopped
            "ex_terminate_on_shutdown": True,
        }
        if o.key_name:
            kwargs["ex_keyname"] = o.key_name
        if o.security_groups:
            kwargs["ex_security_group_ids"] = list(o.security_groups)
        if o.subnet:
            kwargs["ex_subnet"] = EC2NetworkSubnet(o.subnet, o.subnet, "available")  # type: ignore[no-untyped-call]
        return drv.create_node(marks.name(), size, image, **kwargs)

    def nodes(self, drv: Any, manager_id: str) -> list[Any]:
        """DescribeInstances filtered on the manager's tag, every page."""
        return list(drv.list_all_nodes(ex_filters={f"tag:{MANAGER_TAG}": manager_id}))

    def tags(self, node: Any) -> dict[str, str]:
        """The instance's EC2 tags."""
        tags = (node.extra or {}).get("tags") or {}
        return {str(k): str(v) for k, v in tags.items()}


class OpenStackAdapter(Adapter):
    """OpenStack (see the module docstring)."""

    driver = "openstack"
    options: OpenStackOptions

    def __init__(self, options: Any, site: str, timeout: float) -> None:
        super().__init__(options, site, timeout)
        self._images: list[Any] | None = None
        self._sizes: list[Any] | None = None
        self._networks: list[Any] | None = None

    def build(self, key: str, secret: str) -> Any:
        """Libcloud's OpenStack 2 driver (Nova 2.1, Glance v2, Neutron) authenticating with Keystone v3."""
        from libcloud.compute.providers import get_driver

        o = self.options
        kwargs: dict[str, Any] = {
            "ex_force_auth_url": o.auth_url.rstrip("/"),
            "ex_force_auth_version": "3.x_password",
            "ex_tenant_name": o.project,
            "ex_domain_name": o.user_domain,
            "ex_tenant_domain_id": o.project_domain_id,
            "timeout": self.timeout,
        }
        if o.region:
            kwargs["ex_force_service_region"] = o.region
        drv: Any = get_driver("openstack")(key, secret, api_version="2.0", **kwargs)
        # Libcloud prices each flavour from its 2 MB price list, which has no OpenStack entry,
        # so it read the whole file again for every flavour listed; the site's own
        # price_per_hour is what isthmus bills
        from libcloud.pricing import PRICING_DATA, set_pricing

        if drv.api_name not in PRICING_DATA["compute"]:
            set_pricing("compute", drv.api_name, {})
        return drv

    def create(self, drv: Any, request: LeaseRequest, marks: Marks, tags: dict[str, str]) -> Any:
        """POST /servers with the looked-up flavour, image and networks, user data, metadata,
        key pair, security groups and availability zone."""
        from libcloud.compute.drivers.openstack import OpenStackSecurityGroup

        o = self.options
        if self._sizes is None:
            self._sizes = list(drv.list_sizes())
        if self._images is None:
            self._images = list(drv.list_images())
        size = _find(self._sizes, request.instance_type, "flavour", self.site)
        image = _find(self._images, request.image, "image", self.site)
        kwargs: dict[str, Any] = {"ex_userdata": request.user_data, "ex_metadata": tags}
        if o.networks:
            if self._networks is None:
                self._networks = list(drv.ex_list_networks())
            kwargs["networks"] = [_find(self._networks, n, "network", self.site) for n in o.networks]
        if o.key_name:
            kwargs["ex_keyname"] = o.key_name
        if o.security_groups:
            kwargs["ex_security_groups"] = [
                OpenStackSecurityGroup(None, None, name, "", driver=drv)  # type: ignore[no-untyped-call]
                for name in o.security_groups
            ]
        if o.availability_zone:
            kwargs["ex_availability_zone"] = o.availability_zone
        return drv.create_node(name=marks.name(), size=size, image=image, **kwargs)


class GceAdapter(Adapter):
    """Google Compute Engine (see the module docstring)."""

    driver = "gce"
    options: GceOptions

    def build(self, key: str, secret: str) -> Any:
        """Libcloud's GCE driver with service-account authentication in the options' zone."""
        from libcloud.compute.providers import get_driver

        o = self.options
        kwargs: dict[str, Any] = {"project": o.project, "auth_type": "SA", "timeout": self.timeout}
        if o.token_file:
            kwargs["credential_file"] = str(Path(o.token_file).expanduser())
        try:  # the driver exchanges the key for a token here: what fails is the key
            drv: Any = get_driver("gce")(key, secret, **kwargs)
        except OSError:
            raise
        except Exception as exc:
            raise AuthenticationError(f"service account key refused: {exc}", site=self.site) from None
        # the zone, as the driver's own datacenter argument would set it, but after the token
        zone = drv.ex_get_zone(o.zone)
        if zone is None:
            raise InvalidRequestError(f"zone {o.zone!r} not found in project {o.project!r}", site=self.site)
        drv.zone, drv.region = zone, drv._get_region_from_zone(zone)
        return drv

    def instance_name(self, marks: Marks) -> str:
        """The instance's name: ``isthmus-<site>-<vm>-<hash of manager and key>`` in the characters
        GCE allows (lower-case letters, digits, ``-``, at most 63), the same for the same key."""
        digest = hashlib.sha256(f"{marks.manager}\0{marks.key}".encode()).hexdigest()[:10]
        stem = _gce_word(f"isthmus-{marks.site}-{marks.key.rpartition('/')[2]}")[: 63 - len(digest) - 1].rstrip("-")
        return f"{stem}-{digest}"

    def create(self, drv: Any, request: LeaseRequest, marks: Marks, tags: dict[str, str]) -> Any:
        """instances.insert with the machine type, image and network (looked up by the driver),
        the user data as ``startup-script``, the tags as metadata items and labels; a VM of the
        same name already there (an earlier attempt for the same key) is that VM."""
        from libcloud.common.google import ResourceExistsError

        o = self.options
        name = self.instance_name(marks)
        metadata = {**tags, "startup-script": request.user_data}
        labels = {_gce_label(k): _gce_label(v) for k, v in tags.items() if k != VM_TAG}
        kwargs: dict[str, Any] = {
            "ex_network": o.network,
            "ex_metadata": metadata,
            "ex_labels": labels,
            "ex_disk_type": o.disk_type,
            "use_existing_disk": False,  # a disk left under this name is not this VM's
        }
        if o.disk_size:
            kwargs["ex_disk_size"] = o.disk_size
        if o.subnetwork:
            kwargs["ex_subnetwork"] = o.subnetwork
        try:
            return drv.create_node(name, request.instance_type, request.image, **kwargs)
        except ResourceExistsError:
            node = drv.ex_get_node(name, o.zone)
            if self.tags(node).get(VM_TAG) != marks.key or self.tags(node).get(MANAGER_TAG) != marks.manager:
                raise
            return node

    def nodes(self, drv: Any, manager_id: str) -> list[Any]:
        """The zone's instances."""
        return list(drv.list_nodes(ex_zone=self.options.zone))

    def tags(self, node: Any) -> dict[str, str]:
        """The instance's metadata items but its startup script."""
        items = ((node.extra or {}).get("metadata") or {}).get("items") or []
        return {str(i["key"]): str(i.get("value", "")) for i in items if i.get("key") != "startup-script"}

    def provider_id(self, node: Any) -> str:
        """The instance's name (what GCE's calls take; unique in the project's zone)."""
        return str(node.name)

    def destroy(self, drv: Any, provider_id: str) -> None:
        """instances.delete by name in the options' zone, until the operation is done."""
        from libcloud.compute.base import Node
        from libcloud.compute.types import NodeState

        node = Node(provider_id, provider_id, NodeState.UNKNOWN, [], [], drv, extra={"zone": drv.zone})
        drv.destroy_node(node)


ADAPTERS: dict[type[BaseModel], type[Adapter]] = {
    Ec2Options: Ec2Adapter,
    OpenStackOptions: OpenStackAdapter,
    GceOptions: GceAdapter,
}


def _gce_word(text: str) -> str:
    word = re.sub(r"[^a-z0-9-]+", "-", text.lower()).strip("-")
    return word if word[:1].isalpha() else f"i-{word}"


def _gce_label(text: str) -> str:
    """`text` in the characters GCE labels allow (lower-case letters, digits, ``-``, ``_``; 63)."""
    return re.sub(r"[^a-z0-9_-]", "-", text.lower())[:63]


def _find(items: Sequence[Any], wanted: str, what: str, site: str) -> Any:
    """The item whose id, else whose name, is `wanted`; InvalidRequestError naming it."""
    for item in items:
        if item.id == wanted:
            return item
    named = [item for item in items if item.name == wanted]
    if len(named) == 1:
        return named[0]
    if named:
        raise InvalidRequestError(f"{what} {wanted!r}: {len(named)} share that name; give its id", site=site)
    raise InvalidRequestError(f"{what} {wanted!r} not found (by id or name)", site=site)


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


# ---------------------------------------------------------------------------- the provider


@dataclass
class LibcloudProvider:
    """One cloud site's provider (see the module docstring)."""

    name: str
    manager_id: str
    settings: ProviderSettings
    timeout: float = 60.0
    _driver: Any = field(default=None, init=False, repr=False)
    _adapter: Adapter | None = field(default=None, init=False, repr=False)

    @classmethod
    def open(cls, name: str, manager_id: str, options: CloudOptions, settings: ProviderSettings) -> LibcloudProvider:
        """The registry's factory: the provider of site `name` for manager `manager_id`."""
        if settings.driver_options is not options:
            settings = replace(settings, driver_options=options)
        return cls(name, manager_id, settings)

    def adapter(self) -> Adapter:
        """This site's driver adapter (InvalidRequestError when the options are no driver's)."""
        if self._adapter is None:
            try:
                options = driver_options(self.settings)
            except ValueError as exc:
                raise InvalidRequestError(str(exc), site=self.name) from None
            adapter_cls = ADAPTERS[type(options)]
            if adapter_cls.driver != self.settings.driver:
                raise InvalidRequestError(
                    f"driver {self.settings.driver!r} given {adapter_cls.driver} options", site=self.name
                )
            self._adapter = adapter_cls(options, self.name, self.timeout)
        return self._adapter

    def driver(self) -> Any:
        """The Libcloud driver (built on first use; InvalidRequestError/AuthenticationError when
        the settings or credentials cannot make one)."""
        if self._driver is not None:
            return self._driver
        adapter = self.adapter()
        try:
            key, secret = adapter.options.credentials()
        except ValueError as exc:
            raise AuthenticationError(str(exc), site=self.name) from None
        self._driver = self._call(adapter.build, key, secret, building=True)
        return self._driver

    # ------------------------------------------------------------------------ CloudProvider

    def lease(self, requests: Sequence[LeaseRequest]) -> list[Instance | SiteError]:
        """Create each VM with its marks, user data and the site's options; its instance or the error."""
        out: list[Instance | SiteError] = []
        for r in requests:
            marks = Marks(self.manager_id, self.name, r.key)
            tags = {**r.tags, **marks.tags()}
            try:
                drv, adapter = self.driver(), self.adapter()
                node = self._call(adapter.create, drv, r, marks, tags)
            except SiteError as exc:
                out.append(exc)
                continue
            out.append(self._instance(adapter.provider_id(node), node, adapter.tags(node) or tags))
        return out

    def release(self, provider_ids: Sequence[str]) -> dict[str, SiteError | None]:
        """Terminate each VM; None for success (also for one the provider no longer has)."""
        out: dict[str, SiteError | None] = {}
        for pid in provider_ids:
            try:
                self._call(self.adapter().destroy, self.driver(), pid)
                out[pid] = None
            except InvalidRequestError as exc:
                low = str(exc).lower()
                gone = any(
                    k in low.replace(" ", "") for k in ("notfound", "not_found", "doesnotexist", "couldnotbefound")
                )
                out[pid] = None if gone else exc
            except SiteError as exc:
                out[pid] = exc
        return out

    def instances(self) -> list[Instance]:
        """Every VM the provider holds marked with this manager's id (terminated ones included:
        a VM the manager thinks alive but the provider ended shows as terminated or absent)."""
        drv, adapter = self.driver(), self.adapter()
        out = []
        for node in self._call(adapter.nodes, drv, self.manager_id):
            tags = adapter.tags(node)
            if tags.get(MANAGER_TAG) == self.manager_id:
                out.append(self._instance(adapter.provider_id(node), node, tags))
        return out

    # ------------------------------------------------------------------------------ helpers

    def _call(self, fn: Any, *args: Any, building: bool = False, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except SiteError:
            raise
        except TimeoutError as exc:
            raise SiteTimeoutError(f"{self.settings.driver} does not answer: {exc}", site=self.name) from None
        except OSError as exc:  # connection refused, unreachable
            raise SiteTimeoutError(f"cannot reach {self.settings.driver}: {exc}", site=self.name) from None
        except Exception as exc:
            error = classify(exc, self.name)
            if building and type(error) in (TransientError, InvalidRequestError):
                raise InvalidRequestError(
                    f"cannot build the {self.settings.driver} driver: {exc}", site=self.name
                ) from None
            raise error from None

    @staticmethod
    def _instance(provider_id: str, node: Any, tags: dict[str, str]) -> Instance:
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
        return Instance(provider_id, state, tags=tags, address=ips[0] if ips else "")


def classify(exc: Exception, site: str) -> SiteError:
    """The SiteError a provider's exception means, with its own message."""
    from libcloud.common.types import InvalidCredsError

    message = str(exc).strip() or type(exc).__name__
    low = message.lower().replace(" ", "")
    code = str(getattr(exc, "code", "") or "").lower()
    # Libcloud's refused credentials, and Google's refused key or token (without importing
    # libcloud.common.google for the other drivers)
    if isinstance(exc, InvalidCredsError) or any(c.__name__ == "GoogleAuthError" for c in type(exc).__mro__):
        return AuthenticationError(message, site=site)
    # before the words of refused credentials: Nova refuses a quota with "403 Forbidden"
    if any(k.replace(" ", "") in low or k in code for k in _QUOTA):
        return QuotaError(message, site=site)
    if any(k.replace(" ", "") in low or k in code for k in _CAPACITY):
        return CapacityError(message, site=site)
    if any(k in low for k in _AUTH):
        return AuthenticationError(message, site=site)
    if getattr(exc, "code", None) in (400, 404) or any(k.replace(" ", "") in low for k in _INVALID):
        return InvalidRequestError(message, site=site)
    if "timeout" in low or "timedout" in low:
        return SiteTimeoutError(message, site=site)
    return TransientError(message, site=site)
