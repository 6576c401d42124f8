"""The drivers a site may name: batch systems (``[sites.lrm] driver``) and cloud providers
(``[sites.provider] driver``), each registered under a name with a lazy factory and an options model.

A driver is registered as strings, after Apache Libcloud's driver registry: the module and
attribute of its factory and of its options model (``"isthmus.backends.slurm:SlurmBatch.open"``),
so a driver's module, and the SDK it needs, is imported only when a site names that driver.
The options model (pydantic, ``extra="forbid"``) holds the keys of the site's table that belong
to that driver alone; the keys every driver shares (``mode``, ``poll_interval``, ... for batch
systems; ``image``, ``instance_type``, ... for clouds) are the configuration's own
(`isthmus.config.models`). The configuration validates a site's driver keys with the model of the
driver it names and refuses a key of another driver, naming both.

The factory builds the backend for one site and one manager id::

    batch:  factory(site_name: str, manager_id: str, options, lrm: LrmSettings) -> BatchSystem
    cloud:  factory(site_name: str, manager_id: str, options, provider: ProviderSettings) -> CloudProvider

Outside packages register drivers through the entry-point group ``isthmus.backends``: each
entry point names a `Driver` (or a sequence of them), loaded the first time the registry is
read. A name is registered once per family: a second registration is refused.
"""

from __future__ import annotations

import importlib
import logging
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from importlib.metadata import entry_points
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:
    from pydantic import BaseModel

    from isthmus.backends.api import BatchSystem, CloudProvider
    from isthmus.model.site import Site

__all__ = [
    "ENTRY_POINT_GROUP",
    "Driver",
    "Family",
    "batch_system",
    "cloud_provider",
    "get",
    "names",
    "register",
    "unregister",
]

log = logging.getLogger("isthmus.backends")

ENTRY_POINT_GROUP = "isthmus.backends"
"""The entry-point group outside packages register drivers in."""

Family = Literal["batch", "cloud"]
"""``batch``: a cluster's batch system (``lrm``); ``cloud``: an IaaS provider (``provider``)."""

FAMILY_LABEL = {"batch": "batch system", "cloud": "cloud provider"}


def _load(target: str) -> Any:
    """The object a ``"module:attr.attr"`` string names (the module imported now)."""
    module_name, sep, attr = target.partition(":")
    if not sep or not attr:
        raise ValueError(f"expected 'module:attribute', got {target!r}")
    obj: Any = importlib.import_module(module_name)
    for part in attr.split("."):
        obj = getattr(obj, part)
    return obj


@dataclass(frozen=True, slots=True)
class Driver:
    """One registered driver: its family and name, where its factory and options model live
    (``"module:attribute"`` strings, imported on first use, or the objects themselves), and the
    client commands it runs (checked on PATH at a manager's start) with the package that
    provides them."""

    family: Family
    name: str
    factory: str | Callable[..., Any]
    options: str | type[BaseModel]
    commands: tuple[str, ...] = ()
    package: str = ""

    def options_model(self) -> type[BaseModel]:
        """The pydantic model of this driver's own keys (its module imported now)."""
        model: type[BaseModel] = _load(self.options) if isinstance(self.options, str) else self.options
        return model

    def load_factory(self) -> Callable[..., Any]:
        """The callable that builds this driver's backend (its module imported now)."""
        return _load(self.factory) if isinstance(self.factory, str) else self.factory


_LIBCLOUD = "isthmus.backends.libcloud_provider"

_BUILTIN: tuple[Driver, ...] = (
    Driver(
        "batch",
        "slurm",
        "isthmus.backends.slurm:SlurmBatch.open",
        "isthmus.backends.slurm:SlurmOptions",
        ("sbatch", "scontrol", "scancel", "sinfo", "squeue"),
        "slurm-client",
    ),
    Driver(
        "batch",
        "gridengine",
        "isthmus.backends.gridengine:GridEngineBatch.open",
        "isthmus.backends.gridengine:GridEngineOptions",
        ("qsub", "qstat", "qdel", "qacct"),
        "gridengine-client",
    ),
    *(
        Driver("cloud", name, f"{_LIBCLOUD}:LibcloudProvider.open", f"{_LIBCLOUD}:{model}")
        for name, model in (("ec2", "Ec2Options"), ("openstack", "OpenStackOptions"), ("gce", "GceOptions"))
    ),
)

_drivers: dict[tuple[str, str], Driver] = {}
_state = {"loaded": False}  # built-ins and entry points registered


def register(driver: Driver) -> Driver:
    """Add `driver`; ValueError if its family already has a driver of that name."""
    if driver.family not in FAMILY_LABEL:
        raise ValueError(f"unknown driver family {driver.family!r}; expected 'batch' or 'cloud'")
    key = (driver.family, driver.name)
    if key in _drivers:
        raise ValueError(f"{FAMILY_LABEL[driver.family]} driver {driver.name!r} is already registered")
    _drivers[key] = driver
    return driver


def unregister(family: Family, name: str) -> None:
    """Remove a driver (tests that register a throwaway one); KeyError if none is registered."""
    del _drivers[(family, name)]


def _ensure_loaded() -> None:
    if _state["loaded"]:
        return
    _state["loaded"] = True
    for driver in _BUILTIN:
        register(driver)
    for ep in entry_points(group=ENTRY_POINT_GROUP):
        try:
            found = ep.load()
            for driver in [found] if isinstance(found, Driver) else list(_as_drivers(found, ep.name)):
                register(driver)
        except Exception as exc:  # one broken plug-in must not hide the others
            log.warning("backend entry point %r (%s) not loaded: %s", ep.name, ep.value, exc)


def _as_drivers(found: Any, name: str) -> Iterable[Driver]:
    if isinstance(found, Sequence) and all(isinstance(d, Driver) for d in found):
        return found
    raise TypeError(f"entry point {name!r} must name a Driver or a sequence of them, got {type(found).__name__}")


def names(family: Family) -> list[str]:
    """The registered driver names of `family`, sorted."""
    _ensure_loaded()
    return sorted(name for fam, name in _drivers if fam == family)


def get(family: Family, name: str) -> Driver:
    """The driver `name` of `family`; KeyError naming the registered ones if there is none."""
    _ensure_loaded()
    try:
        return _drivers[(family, name)]
    except KeyError:
        known = ", ".join(repr(n) for n in names(family))
        raise KeyError(f"unknown {FAMILY_LABEL[family]} driver {name!r}; registered: {known}") from None


def _options(driver: Driver, given: Any) -> Any:
    """`given` if it is already an instance of the driver's options model, else the model's
    defaults (a site built in code without driver options)."""
    model = driver.options_model()
    return given if isinstance(given, model) else model.model_validate(given or {})


def batch_system(site: Site) -> Callable[[str], BatchSystem]:
    """How to connect to the batch system of cluster site `site` as a given manager id."""
    lrm = site.lrm
    if lrm is None:
        raise ValueError(f"site {site.name} has no batch system (lrm)")
    driver = get("batch", lrm.driver)
    factory, options = driver.load_factory(), _options(driver, lrm.driver_options)
    return lambda manager_id: factory(site.name, manager_id, options, lrm)


def cloud_provider(site: Site) -> Callable[[str], CloudProvider]:
    """How to connect to the provider of cloud site `site` as a given manager id."""
    provider = site.provider
    if provider is None:
        raise ValueError(f"site {site.name} has no cloud provider")
    driver = get("cloud", provider.driver)
    factory, options = driver.load_factory(), _options(driver, provider.driver_options)
    return lambda manager_id: factory(site.name, manager_id, options, provider)
