"""Sites (clusters and clouds) and sets of sites."""

from __future__ import annotations

import math
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from isthmus.model.cloud import ProviderSettings
from isthmus.model.vmtypes import InstanceType, VmImage


class SiteKind(StrEnum):
    """A cluster site is always present; a cloud site's VMs must be leased first."""

    CLUSTER = "cluster"
    CLOUD = "cloud"


@dataclass(frozen=True, slots=True)
class LrmSettings:
    """How a live cluster site reaches its local resource manager (docs/sites.md).

    `driver` names the system (a batch-system driver of `isthmus.backends.registry`: "slurm",
    "gridengine", ...) and `driver_options` holds that driver's own options (an instance of its
    options model, e.g. the Slurm partition; None: the model's defaults). `mode` is "pilot" (pilot
    jobs hold nodes and run isthmus jobs; each asks for `pilot_walltime` and is replaced
    `renew_before` seconds before it ends) or "direct" (each run one LRM job).
    In pilot mode `pilots` is "fixed" (every position held) or "elastic" (pilots follow the
    demand: at least `min_pilots`, idle ones beyond the demand end after `idle_release` s).
    A simulation treats such a site as the cluster its `nodes` describe.
    """

    driver: str = "slurm"
    mode: str = "pilot"
    driver_options: Any = None
    poll_interval: float = 2.0
    pilot_walltime: float | None = None
    renew_before: float = 300.0
    keep_free: int = 0
    pilots: str = "fixed"
    min_pilots: int = 0
    idle_release: float = 60.0


@dataclass(frozen=True, slots=True)
class Site:
    """A group of nodes that can run a job (KOALA-C §III-A, "virtual cluster structure").

    For a cluster, `nodes` is the number of nodes always present. For a cloud, `nodes` is unused
    (0) and `max_vms` bounds how many VMs may be leased; each VM is one node with
    `cores_per_node` processors. `price_per_hour` is charged per started `billing_increment`
    seconds of a lease (3600 for hourly billing, 1 for per-second billing); a price of 0 makes
    the cloud free. `idle_release_time` is how long a VM of a free cloud may stay idle before
    On-Demand releases it. `available_from`/`available_until` bound when the site can be used
    (the IBM seed's cloud available during a time window); None means always. `lrm` puts a live
    cluster site behind a batch system (None: the manager's own pilot processes).

    A cloud may offer several `instance_types` and `images` and name the `networks` its VMs
    can join (Cloud Scheduler, Appendix I; `isthmus.model.vmtypes`); without declared types it
    offers one implicit type (`types`), `cores_per_node` at `price_per_hour`. With declared
    types, `cores_per_node` and `price_per_hour` are those of the first (the default type).
    """

    name: str
    kind: SiteKind = SiteKind.CLUSTER
    nodes: int = 0
    cores_per_node: int = 1
    min_vms: int = 0
    max_vms: int = 0
    boot_time: float = 0.0
    shutdown_time: float = 0.0
    price_per_hour: float = 0.0
    billing_increment: float = 3600.0
    idle_release_time: float = 300.0
    available_from: float | None = None
    available_until: float | None = None
    lrm: LrmSettings | None = None
    provider: ProviderSettings | None = None
    instance_types: tuple[InstanceType, ...] = ()
    images: tuple[VmImage, ...] = ()
    networks: tuple[str, ...] = ()

    @property
    def types(self) -> tuple[InstanceType, ...]:
        """The instance types VMs are leased as: the declared ones, or the implicit one."""
        if self.instance_types:
            return self.instance_types
        size = self.provider.instance_type if self.provider is not None and self.provider.instance_type else ""
        return (InstanceType(size or "default", self.cores_per_node, self.price_per_hour, provider_size=size),)

    @property
    def vm_images(self) -> tuple[VmImage, ...]:
        """The images VMs may boot: the declared ones, or the provider's one image."""
        if self.images:
            return self.images
        if self.provider is not None and self.provider.image:
            return (VmImage(self.provider.image, self.provider.image),)
        return ()

    @property
    def is_cloud(self) -> bool:
        """True for a cloud site (VMs are leased), False for a cluster site."""
        return self.kind is SiteKind.CLOUD

    @property
    def is_paid(self) -> bool:
        """True when leasing a VM here costs money."""
        if self.instance_types:
            return self.is_cloud and any(t.price_per_hour > 0 for t in self.instance_types)
        return self.is_cloud and self.price_per_hour > 0

    @property
    def max_processors(self) -> int:
        """The most processors the site can ever offer at once."""
        if self.is_cloud:
            cores = max((t.cores for t in self.instance_types), default=self.cores_per_node)
            return self.max_vms * cores
        return self.nodes * self.cores_per_node

    @property
    def price_per_increment(self) -> float:
        """What one started billing increment of one VM costs."""
        return self.price_per_hour * self.billing_increment / 3600.0

    def type_price_per_increment(self, vm_type: int) -> float:
        """What one started billing increment of one VM of type index `vm_type` costs."""
        if not self.instance_types:
            return self.price_per_increment
        return self.instance_types[vm_type].price_per_hour * self.billing_increment / 3600.0

    def charged_cost(self, lease_seconds: float, vm_type: int = 0) -> float:
        """Charged cost of one VM lease of `lease_seconds` (of type index `vm_type`): each started
        increment is paid in full."""
        if not self.is_paid or lease_seconds <= 0:
            return 0.0
        return math.ceil(lease_seconds / self.billing_increment - 1e-9) * self.type_price_per_increment(vm_type)

    def actual_cost(self, lease_seconds: float, vm_type: int = 0) -> float:
        """Cost of `lease_seconds` of one VM (of type index `vm_type`) at the hourly price,
        without rounding to increments."""
        price = self.instance_types[vm_type].price_per_hour if self.instance_types else self.price_per_hour
        return max(0.0, lease_seconds) * price / 3600.0


@dataclass(frozen=True, slots=True)
class SiteSet:
    """An ordered group of sites (a KOALA-C subsystem), optionally with a job runtime limit.

    Sets may overlap. A job running in a set with a `runtime_limit` is killed when it has run
    that long (TAGS, KOALA-C §IV-B/C); None means unlimited.
    """

    name: str
    sites: tuple[str, ...]
    runtime_limit: float | None = None
