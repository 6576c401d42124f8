"""What a cloud site offers (instance types, images, networks) and what a job's VM requirements match.

Cloud Scheduler (cloud-scheduler-uvic.txt, Appendix I and Table 1): a job names the VM it
needs (VMType, VMAMI/VMLoc, VMCPUArch, VMCPUCores, VMMem, VMStorage, VMNetwork); a cloud
describes the memory, CPU architectures, networks, cores per VM and storage it can give.
Here a cloud site offers a list of instance types (cores, memory, disk, architecture, price
per hour) and images; a job's requirements (`isthmus.model.job.VmRequirements`) match a type,
an image and a network of the site, or the site can never run the job.

A site without declared instance types offers one implicit type: its `cores_per_node` at its
`price_per_hour`, named after the provider's instance type ("default" without a provider),
with memory, disk and architecture unknown (a requirement on them never matches it).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from isthmus.model.job import VmRequirements


@dataclass(frozen=True, slots=True)
class InstanceType:
    """One kind of VM a cloud site leases: `cores` processors, `memory_mb` of RAM, `disk_gb` of
    scratch storage, CPU architecture `arch`, at `price_per_hour`. `provider_size` is the
    provider's name for it (a Libcloud size id, e.g. "m5.large"; default: `name`). None for a
    figure means unknown: a requirement on it does not match."""

    name: str
    cores: int
    price_per_hour: float = 0.0
    memory_mb: int | None = None
    disk_gb: float | None = None
    arch: str | None = None
    provider_size: str = ""

    @property
    def size_id(self) -> str:
        """The provider's name for the type (what a lease asks for)."""
        return self.provider_size or self.name


@dataclass(frozen=True, slots=True)
class VmImage:
    """An image a cloud site boots: `name` as jobs and the environment file call it,
    `provider_id` as the provider does (an AMI id on EC2; default: `name`), and the CPU
    architecture it is built for (None: any)."""

    name: str
    provider_id: str = ""
    arch: str | None = None

    @property
    def image_id(self) -> str:
        """The provider's id of the image (what a lease boots)."""
        return self.provider_id or self.name

    def named(self, text: str) -> bool:
        """True when `text` names this image (its name or its provider id)."""
        return text in (self.name, self.image_id)


def type_misfit(req: VmRequirements, t: InstanceType) -> str:
    """Why instance type `t` cannot serve `req` ("" when it can)."""
    if req.vm_type is not None and req.vm_type != t.name:
        return f"type {t.name} is not {req.vm_type}"
    if req.cpu_arch is not None and req.cpu_arch != t.arch:
        return f"type {t.name} is {t.arch or 'of unknown architecture'}, not {req.cpu_arch}"
    if req.cores is not None and req.cores > t.cores:
        return f"type {t.name} has {t.cores} cores, not {req.cores}"
    if req.memory_mb is not None and (t.memory_mb is None or t.memory_mb < req.memory_mb):
        return f"type {t.name} has {_amount(t.memory_mb, 'MB')} of memory, not {req.memory_mb} MB"
    if req.storage_gb is not None and (t.disk_gb is None or t.disk_gb < req.storage_gb - 1e-9):
        return f"type {t.name} has {_amount(t.disk_gb, 'GB')} of disk, not {req.storage_gb:g} GB"
    return ""


def _amount(value: float | None, unit: str) -> str:
    return "an unknown amount" if value is None else f"{value:g} {unit}"


def image_index(req: VmRequirements, images: tuple[VmImage, ...], t: InstanceType) -> int:
    """Index of the image a VM of type `t` boots for `req`: the one it names, else the first
    whose architecture suits `t` (0 when no image is declared: the provider's default); -1
    when the image it names is not offered or does not suit `t`."""
    if req.image is not None:
        for i, im in enumerate(images):
            if im.named(req.image) and (im.arch is None or t.arch is None or im.arch == t.arch):
                return i
        return -1
    for i, im in enumerate(images):
        if im.arch is None or t.arch is None or im.arch == t.arch:
            return i
    return 0


def vms_needed(size: int, t: InstanceType) -> int:
    """VMs of type `t` a job of `size` processors spans."""
    return max(1, math.ceil(size / t.cores))


def cheapest_type(
    req: VmRequirements | None, types: tuple[InstanceType, ...], images: tuple[VmImage, ...], size: int
) -> tuple[int, int]:
    """(type index, image index) of the cheapest type serving `req` for a job of `size`
    processors: the least price per hour for the VMs the job spans (ties: fewer VMs, then the
    order of the site's list). (-1, -1) when no type serves it. Without requirements every type
    serves; the cheapest one is chosen the same way."""
    best = (-1, -1)
    best_key: tuple[float, int, int] | None = None
    plain = req if req is not None else VmRequirements()
    for i, t in enumerate(types):
        if type_misfit(plain, t):
            continue
        im = image_index(plain, images, t)
        if im < 0:
            continue
        n = vms_needed(size, t)
        key = (n * t.price_per_hour, n, i)
        if best_key is None or key < best_key:
            best, best_key = (i, im), key
    return best


def site_misfit(
    req: VmRequirements, types: tuple[InstanceType, ...], images: tuple[VmImage, ...], networks: tuple[str, ...]
) -> str:
    """Why a cloud offering `types`, `images` and `networks` can never serve `req` ("" when it can)."""
    if req.network is not None and req.network not in networks:
        offered = ", ".join(networks) or "none declared"
        return f"no network {req.network} (networks: {offered})"
    if req.image is not None and not any(im.named(req.image) for im in images):
        offered = ", ".join(im.name for im in images) or "none declared"
        return f"no image {req.image} (images: {offered})"
    reasons = [type_misfit(req, t) for t in types]
    if all(reasons):
        return "; ".join(reasons)
    if req.image is not None and all(image_index(req, images, t) < 0 for t in types if not type_misfit(req, t)):
        return f"image {req.image} suits no type that fits"
    return ""


def describe(req: VmRequirements) -> str:
    """The requirements in words, e.g. "type=big, arch=x86_64, memory=2048 MB"."""
    parts = []
    if req.vm_type is not None:
        parts.append(f"type={req.vm_type}")
    if req.image is not None:
        parts.append(f"image={req.image}")
    if req.cpu_arch is not None:
        parts.append(f"arch={req.cpu_arch}")
    if req.cores is not None:
        parts.append(f"cores={req.cores}")
    if req.memory_mb is not None:
        parts.append(f"memory={req.memory_mb} MB")
    if req.storage_gb is not None:
        parts.append(f"storage={req.storage_gb:g} GB")
    if req.network is not None:
        parts.append(f"network={req.network}")
    return ", ".join(parts) or "none"


def is_empty(req: VmRequirements | None) -> bool:
    """True when `req` asks for nothing (None or every field None)."""
    return req is None or req == VmRequirements()
