"""Bundled environments from the seed papers, selectable by name (no file needed).

A name may carry parameters: ``koala-c-multicluster:k=4,tags=true``. Each bundled environment
is built as a *document* (the same dict an environment file parses to) and then validated by
the same code as files, so every bundled environment can be written out with
``isthmus env show NAME --format toml`` and loaded back unchanged.

Seeds are in the project's shared ``seeds/`` folder; each builder's docstring cites the section it
follows and states what was chosen where the seed is silent.
"""

from __future__ import annotations

import difflib
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from isthmus.config.errors import ConfigError, Problem
from isthmus.model.environment import Environment, PolicyChoice
from isthmus.model.site import Site, SiteKind

__all__ = [
    "DEFAULT_ENVIRONMENT",
    "EC2_PRICE_PER_HOUR",
    "BundledEnvironment",
    "Parameter",
    "bundled",
    "bundled_document",
    "bundled_environment",
    "bundled_names",
    "parse_spec",
    "single_cluster",
    "sites_summary",
]

DEFAULT_ENVIRONMENT = "koala-c-multicloud"
"""The environment `isthmus simulate` uses when none is given."""

EC2_PRICE_PER_HOUR = 0.065
"""Amazon EC2 price per VM-hour used by KOALA-C (§V-A 2) and adopted for the other seeds."""

ParamValue = int | float | bool


@dataclass(frozen=True, slots=True)
class Parameter:
    """A parameter of a bundled environment name: ``NAME:key=value``.

    `kind` is int, float or bool; `default` None makes the parameter required; `minimum` bounds
    numbers from below.
    """

    name: str
    kind: type[ParamValue]
    default: ParamValue | None
    help: str
    minimum: float | None = None

    @property
    def type_name(self) -> str:
        """``int``, ``float`` or ``bool``."""
        return self.kind.__name__

    def parse(self, text: str) -> ParamValue:
        """Turn the text after ``=`` into a value; ValueError with what was expected."""
        text = text.strip()
        value: ParamValue
        if self.kind is bool:
            low = text.lower()
            if low in ("true", "yes", "on", "1"):
                return True
            if low in ("false", "no", "off", "0"):
                return False
            raise ValueError(f"expected true or false, got {text!r}")
        if self.kind is int:
            try:
                value = int(text)
            except ValueError:
                raise ValueError(f"expected an integer, got {text!r}") from None
        else:
            try:
                value = float(text)
            except ValueError:
                raise ValueError(f"expected a number, got {text!r}") from None
            if not math.isfinite(value):
                raise ValueError(f"expected a finite number, got {text!r}")
        if self.minimum is not None and value < self.minimum:
            raise ValueError(f"expected a number >= {format_value(self.minimum)}, got {text}")
        return value

    def describe(self) -> str:
        """``k=1 (int)`` or ``processors=<int, required>`` for listings."""
        if self.default is None:
            return f"{self.name}=<{self.type_name}, required>"
        return f"{self.name}={format_value(self.default)}"


def format_value(value: ParamValue) -> str:
    """A parameter value as it is written in a name: ``4``, ``0.065``, ``true``."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


Builder = Callable[[Mapping[str, Any]], dict[str, Any]]


@dataclass(frozen=True, slots=True)
class BundledEnvironment:
    """A named, parameterized environment from a seed.

    `build` turns resolved parameters into a document (without ``name``); `source` cites the
    seed and section; `example` is a complete name (with required parameters) for listings and
    tests.
    """

    name: str
    summary: str
    source: str
    build: Builder
    parameters: tuple[Parameter, ...] = ()
    example: str = ""
    notes: tuple[str, ...] = field(default_factory=tuple)

    @property
    def example_spec(self) -> str:
        """A name that builds this environment: `example`, or the bare name."""
        return self.example or self.name

    def parameter(self, key: str) -> Parameter:
        """The parameter called `key`; KeyError otherwise."""
        for p in self.parameters:
            if p.name == key:
                return p
        raise KeyError(key)


# ----------------------------------------------------------------------------------------------
# Site helpers (documents, as in a file).


def _cluster(name: str, nodes: int) -> dict[str, Any]:
    return {"name": name, "kind": "cluster", "nodes": nodes, "cores_per_node": 1}


def _cloud(
    name: str,
    *,
    max_vms: int,
    min_vms: int = 0,
    boot_time: float,
    shutdown_time: float,
    price_per_hour: float = 0.0,
    billing_increment: float = 3600.0,
    idle_release_time: float = 300.0,
) -> dict[str, Any]:
    return {
        "name": name,
        "kind": "cloud",
        "cores_per_node": 1,
        "min_vms": min_vms,
        "max_vms": max_vms,
        "boot_time": boot_time,
        "shutdown_time": shutdown_time,
        "price_per_hour": price_per_hour,
        "billing_increment": billing_increment,
        "idle_release_time": idle_release_time,
    }


def _policies(allocation: str, provisioning: str) -> dict[str, Any]:
    return {"allocation": allocation, "provisioning": provisioning}


# ----------------------------------------------------------------------------------------------
# Builders.

_TAGS = Parameter("tags", bool, False, "make the paper's TAGS policy the default allocation (default: FF)")


def _koala_c_multicluster(p: Mapping[str, Any]) -> dict[str, Any]:
    """KOALA-C §V-A 1 (Multicluster Environment): k identical chains of two 32-node cluster sites.

    The paper varies k from 1 to 10. Sites are listed chain by chain: ``c1a, c1b, c2a, c2b, ...``,
    which is the structure TAGS-chain (§IV-B) reads (consecutive sites form a chain). FF by
    default; ``tags=true`` makes TAGS-chain the default allocation with the short-job runtime
    limit ``limit`` on the first site of each chain (default 25 min, the KTH-SP2 optimum of
    §V-B / Table III; other traces: Table III). Rounds every 30 s (§IV-A); no clouds, so no
    provisioning.
    """
    k = int(p["k"])
    sites = [_cluster(f"c{i}{suffix}", 32) for i in range(1, k + 1) for suffix in ("a", "b")]
    allocation: str | dict[str, Any] = (
        {"name": "tags-chain", "params": {"limits": [float(p["limit"])]}} if p["tags"] else "ff"
    )
    return {
        "description": f"KOALA-C multicluster: {k} chain{'s' if k != 1 else ''} of two 32-node clusters",
        "round_interval": 30,
        "policies": {"allocation": allocation, "provisioning": "none"},
        "sites": sites,
    }


def _koala_c_multicloud(p: Mapping[str, Any]) -> dict[str, Any]:
    """KOALA-C §V-A 2 (Multicluster and Multicloud Environment): five sites.

    Three 32-node clusters ``c1``-``c3``; a free private cloud ``private`` with at least 8 and at
    most 64 VMs; a public cloud ``public`` with at most 128 VMs and none kept, at $0.065 per
    VM-hour billed per started hour (Amazon EC2). The paper gives no VM boot/shutdown times;
    the defaults here (private 60 s / 10 s, public 120 s / 30 s) are typical of an OpenNebula
    cloud on a local cluster and of EC2 on-demand instances, and are parameters. The idle
    release time of the free cloud is not given either (Site's default, 300 s). The TAGS-sets
    structure of §V-B is included: set ``short`` = all five sites with runtime limit ``limit``
    (default 40 min, §V-B) and set ``long`` = one cluster and both clouds (c3, private, public),
    unlimited. Only TAGS-sets reads the sets; FF is the default allocation and ``tags=true``
    makes it TAGS-sets. Rounds every 30 s (§IV-A); On-Demand provisioning (§III).
    """
    return {
        "description": "KOALA-C multicluster and multicloud: three 32-node clusters, a free private "
        "cloud (8-64 VMs) and a paid public cloud (up to 128 VMs, $0.065/VM-hour)",
        "round_interval": 30,
        "policies": _policies("tags-sets" if p["tags"] else "ff", "on-demand"),
        "sites": [
            _cluster("c1", 32),
            _cluster("c2", 32),
            _cluster("c3", 32),
            _cloud("private", min_vms=8, max_vms=64, boot_time=p["private_boot_time"], shutdown_time=10),
            _cloud(
                "public",
                max_vms=128,
                boot_time=p["public_boot_time"],
                shutdown_time=30,
                price_per_hour=EC2_PRICE_PER_HOUR,
                billing_increment=3600,
            ),
        ],
        "sets": [
            {"name": "short", "sites": ["c1", "c2", "c3", "private", "public"], "runtime_limit": p["limit"]},
            {"name": "long", "sites": ["c3", "private", "public"]},
        ],
    }


def _koala_c_realworld(p: Mapping[str, Any]) -> dict[str, Any]:
    """KOALA-C §V-A, last paragraph (real-world experiment, §V-D): four sites.

    DAS-4 cluster sites ``fs1`` and ``fs2`` of 32 nodes; the OpenNebula private cloud ``one``
    of DAS-4 with up to 32 VMs (free; no minimum given, so 0); Amazon EC2 ``ec2`` with up to
    64 VMs at $0.065 per VM-hour billed hourly. Boot/shutdown times as in koala-c-multicloud
    (not given by the paper). The TAGS-sets structure of the experiment is included: set
    ``short`` = all four sites with runtime limit ``limit`` (default 10 min, as in the paper) and
    set ``long`` = fs2, one, ec2 ("omitting fs1"), unlimited. FF is the default allocation;
    ``tags=true`` makes it TAGS-sets. Rounds every 30 s; On-Demand provisioning.
    """
    return {
        "description": "KOALA-C real-world: DAS-4 clusters fs1 and fs2 (32 nodes each), OpenNebula "
        "private cloud (up to 32 VMs) and Amazon EC2 (up to 64 VMs, $0.065/VM-hour)",
        "round_interval": 30,
        "policies": _policies("tags-sets" if p["tags"] else "ff", "on-demand"),
        "sites": [
            _cluster("fs1", 32),
            _cluster("fs2", 32),
            _cloud("one", max_vms=32, boot_time=p["private_boot_time"], shutdown_time=10),
            _cloud(
                "ec2",
                max_vms=64,
                boot_time=p["public_boot_time"],
                shutdown_time=30,
                price_per_hour=EC2_PRICE_PER_HOUR,
                billing_increment=3600,
            ),
        ],
        "sets": [
            {"name": "short", "sites": ["fs1", "fs2", "one", "ec2"], "runtime_limit": p["limit"]},
            {"name": "long", "sites": ["fs2", "one", "ec2"]},
        ],
    }


def _ibm_enterprise_cloud(p: Mapping[str, Any]) -> dict[str, Any]:
    """IBM meta-schedulers report §4.2 (Figure 2, Tables 1-2): enterprise cluster + cloud cluster.

    The enterprise domain is a 300-node cluster ``enterprise`` (one processor per node, §4.1;
    450 nodes for the single-cluster baseline: ``cluster=450,cloud=0``). The cloud domain is a
    cluster of ``cloud`` virtual nodes (75 or 150 in Table 1, 200 in Table 2; 0 leaves it out)
    present only from ``start`` = 3000 s to ``end`` = 10000 s of the (reduced) CTC trace
    (§4.2.2: "we pre-fix the period of time when a cloud cluster is present"). Provisioning is
    outside the paper's scope, so the cloud boots instantly and keeps all its nodes
    (min_vms = max_vms, On-Demand tops it up when the window opens); at the end of the window it
    is drained. The paper charges nothing for the cloud (it only remarks that a cloud "charged
    by time" would favour 75 nodes), so ``price`` defaults to 0. LoadLeveler schedules with
    backfilling (§3.1): EASY allocation; the proxy reports every 15 s, used as the round interval.
    """
    cluster, size = int(p["cluster"]), int(p["cloud"])
    sites: list[dict[str, Any]] = [_cluster("enterprise", cluster)]
    if size > 0:
        cloud = _cloud(
            "cloud",
            min_vms=size,
            max_vms=size,
            boot_time=0,
            shutdown_time=0,
            price_per_hour=p["price"],
            billing_increment=3600,
            idle_release_time=0,
        )
        cloud["available_from"] = p["start"]
        cloud["available_until"] = p["end"]
        sites.append(cloud)
    window = f", cloud of {size} nodes from {format_value(p['start'])} s to {format_value(p['end'])} s"
    return {
        "description": f"IBM enterprise + cloud: {cluster}-node enterprise cluster"
        + (window if size > 0 else ", no cloud"),
        "round_interval": 15,
        "policies": _policies("easy", "on-demand"),
        "sites": sites,
    }


def _villegas(site: str, max_vms: int, what: str) -> Builder:
    def build(p: Mapping[str, Any]) -> dict[str, Any]:
        def cloud(name: str, vms: int) -> dict[str, Any]:
            return _cloud(
                name,
                max_vms=vms,
                boot_time=p["boot_time"],
                shutdown_time=p["shutdown_time"],
                price_per_hour=p["price"],
                billing_increment=3600,
                idle_release_time=p["idle_time"],
            )

        if p["pools"]:
            short = (max_vms + 1) // 2
            return {
                "description": f"Villegas Table 6.3: {what}, up to {max_vms} single-core VMs in two pools "
                f"(short jobs: {short}, long jobs: {max_vms - short}) for OD-2Q + FCFS-2Q",
                "round_interval": 20,
                "policies": _policies("fcfs-2q", "od-2q"),
                "sites": [cloud(f"{site}-short", short), cloud(f"{site}-long", max_vms - short)],
            }
        return {
            "description": f"Villegas Table 6.3: {what}, up to {max_vms} single-core VMs",
            "round_interval": 20,
            "policies": _policies("fcfs", "od-s"),
            "sites": [cloud(site, max_vms)],
        }

    build.__doc__ = f"Villegas dissertation §6.4.2, Table 6.3 row {what!r}: one IaaS cloud of {max_vms} VMs."
    return build


_VILLEGAS_PARAMS = (
    Parameter("boot_time", float, 600.0, "VM boot time in seconds (§6.5.5 VM_BOOT_TIME)", 0),
    Parameter("shutdown_time", float, 60.0, "VM shutdown time in seconds (§7.4.1)", 0),
    Parameter("price", float, EC2_PRICE_PER_HOUR, "price per VM-hour, billed per started hour (§6.4.4)", 0),
    Parameter("idle_time", float, 300.0, "seconds an idle VM is kept by OD-S and the threshold policies", 0),
    Parameter("pools", bool, False, "split the VMs into a short-job and a long-job pool for OD-2Q + FCFS-2Q"),
)

_VILLEGAS_NOTE = (
    "Single-core VMs, one task per VM (§6.3.2, §7.4.1); no minimum. Boot 600 s is the simulator's "
    "empirically observed VM_BOOT_TIME (§6.5.5), shutdown 60 s as in §7.4.1. Charged cost uses the "
    "EC2 model of hourly increments on every testbed (§6.4.4); the price is $0.065/VM-hour as in "
    "KOALA-C (the dissertation gives no price). Rounds every 20 s (OD-G period, §6.3.1); FCFS + OD-S "
    "(§6.3); pools=true splits the VMs into two sites (short pool: half rounded up) with FCFS-2Q + OD-2Q."
)


def _villegas_parallel(p: Mapping[str, Any]) -> dict[str, Any]:
    """Villegas dissertation §7.4.1-7.4.2: one site of single-processor VMs for parallel jobs.

    VMs boot in 600 s and shut down in 60 s (§7.4.1), the cloud controller decides every 10 s;
    `vms` is the site's maximum (§7.4.2 uses a third, half and all of the trace's machines).
    The dissertation's FCFS (which reserves VMs, `fcfs-reserve`) with its on-demand policy
    (`od-s`). The price is KOALA-C's EC2 price (chapter 7 reports no costs).
    """
    cloud = _cloud(
        "site",
        max_vms=p["vms"],
        boot_time=600,
        shutdown_time=60,
        price_per_hour=p["price"],
        billing_increment=3600,
        idle_release_time=p["idle_time"],
    )
    return {
        "description": f"Villegas §7.4: one site of up to {p['vms']} single-processor VMs (boot 600 s, shutdown 60 s)",
        "round_interval": 10,
        "policies": _policies("fcfs-reserve", "od-s"),
        "sites": [cloud],
    }


def _local(p: Mapping[str, Any]) -> dict[str, Any]:
    """One machine, for trying the live manager on a laptop (no seed; small enough for 2 cores).

    Two cluster sites of 4 and 2 slots, a free private cloud of up to 4 VMs (boot 2 s, idle
    release after 10 s) and a paid public cloud of up to 4 VMs (boot 3 s, $0.065/VM-hour billed
    per started minute so costs show in short runs). Rounds every second.
    """
    return {
        "description": "One machine: two small cluster sites, a free private cloud and a paid public "
        "cloud (per-minute billing), for the live manager",
        "round_interval": 1,
        "policies": _policies("ff", "on-demand"),
        "sites": [
            _cluster("local-a", 4),
            _cluster("local-b", 2),
            _cloud("local-private", max_vms=4, boot_time=2, shutdown_time=1, idle_release_time=10),
            _cloud(
                "local-public",
                max_vms=4,
                boot_time=3,
                shutdown_time=1,
                price_per_hour=EC2_PRICE_PER_HOUR,
                billing_increment=p["billing_increment"],
                idle_release_time=10,
            ),
        ],
    }


def _single_cluster(p: Mapping[str, Any]) -> dict[str, Any]:
    """One cluster site ``cluster`` of P single-processor nodes, event-triggered rounds, FCFS.

    The classic single-machine setting of the Parallel Workloads Archive traces (``isthmus
    simulate --cluster P``).
    """
    n = int(p["processors"])
    return {
        "description": f"One cluster of {n} processors, event-triggered rounds, FCFS",
        "round_interval": "event",
        "policies": _policies("fcfs", "none"),
        "sites": [_cluster("cluster", n)],
    }


_REGISTRY: dict[str, BundledEnvironment] = {}


def _add(entry: BundledEnvironment) -> None:
    if entry.name in _REGISTRY:
        raise ValueError(f"bundled environment {entry.name!r} defined twice")
    _REGISTRY[entry.name] = entry


_add(
    BundledEnvironment(
        "koala-c-multicluster",
        "k chains of two 32-node clusters",
        "koala-c-multicluster-multicloud.txt §V-A 1 (TAGS-chain limit: §V-B, Table III)",
        _koala_c_multicluster,
        (
            Parameter("k", int, 1, "number of chains (the paper uses 1 to 10)", 1),
            _TAGS,
            Parameter("limit", float, 1500.0, "TAGS short-job runtime limit in seconds (KTH-SP2: 25 min)", 1),
        ),
    )
)
_add(
    BundledEnvironment(
        "koala-c-multicloud",
        "three 32-node clusters, free private cloud (8-64 VMs), EC2-priced public cloud (<=128 VMs)",
        "koala-c-multicluster-multicloud.txt §V-A 2 (TAGS-sets limit: §V-B)",
        _koala_c_multicloud,
        (
            _TAGS,
            Parameter("limit", float, 2400.0, "TAGS-sets short-job runtime limit in seconds (40 min)", 1),
            Parameter("private_boot_time", float, 60.0, "private cloud VM boot time, seconds (assumed)", 0),
            Parameter("public_boot_time", float, 120.0, "public cloud VM boot time, seconds (assumed)", 0),
        ),
    )
)
_add(
    BundledEnvironment(
        "koala-c-realworld",
        "DAS-4 fs1 and fs2 (32 nodes), OpenNebula (<=32 VMs), Amazon EC2 (<=64 VMs)",
        "koala-c-multicluster-multicloud.txt §V-A last paragraph, §V-D",
        _koala_c_realworld,
        (
            _TAGS,
            Parameter("limit", float, 600.0, "TAGS-sets short-job runtime limit in seconds (10 min)", 1),
            Parameter("private_boot_time", float, 60.0, "OpenNebula VM boot time, seconds (assumed)", 0),
            Parameter("public_boot_time", float, 120.0, "EC2 VM boot time, seconds (assumed)", 0),
        ),
    )
)
_add(
    BundledEnvironment(
        "ibm-enterprise-cloud",
        "300-node enterprise cluster + cloud cluster of 75 or 150 nodes during a time window",
        "ibm-meta-schedulers-cloud.txt §3 (Figure 2), §4.2.1-4.2.2, Tables 1-2",
        _ibm_enterprise_cloud,
        (
            Parameter("cloud", int, 75, "cloud nodes (75 or 150 in Table 1; 200 in Table 2; 0 = none)", 0),
            Parameter("cluster", int, 300, "enterprise cluster nodes (450 for the single-cluster baseline)", 1),
            Parameter("start", float, 3000.0, "second at which the cloud appears", 0),
            Parameter("end", float, 10000.0, "second at which the cloud is drained", 0),
            Parameter("price", float, 0.0, "price per cloud VM-hour (the paper charges nothing)", 0),
        ),
    )
)
for _row, _site, _max, _what in (
    ("das4", "das4", 64, "DAS-4 Delft, OpenNebula 3.0/KVM"),
    ("fiu", "fiu", 7, "FIU, OpenNebula 2.2/Xen"),
    ("ec2", "ec2", 20, "Amazon EC2 eu-west-1"),
):
    _add(
        BundledEnvironment(
            f"villegas-{_row}",
            f"{_what}: one cloud of up to {_max} VMs",
            "villegas-resource-brokering-dissertation.txt §6.4.2, Table 6.3",
            _villegas(_site, _max, _what),
            _VILLEGAS_PARAMS,
            notes=(_VILLEGAS_NOTE,),
        )
    )
_add(
    BundledEnvironment(
        "villegas-parallel",
        "one site of single-processor VMs for parallel jobs (boot 600 s, shutdown 60 s, 10 s rounds)",
        "villegas-resource-brokering-dissertation.txt §7.4.1-7.4.2",
        _villegas_parallel,
        (
            Parameter("vms", int, 450, "maximum VMs (§7.4.2: a third, half or all of ~450 CTC machines)", 1),
            Parameter("idle_time", float, 300.0, "seconds an idle VM is kept by OD-S", 0),
            Parameter("price", float, EC2_PRICE_PER_HOUR, "price per VM-hour, billed per started hour", 0),
        ),
    )
)
_add(
    BundledEnvironment(
        "local",
        "one machine: clusters of 4 and 2 slots, free and paid clouds of 4 VMs",
        "none (for the live manager on one machine)",
        _local,
        (Parameter("billing_increment", float, 60.0, "public cloud billing increment in seconds", 1),),
    )
)
_add(
    BundledEnvironment(
        "single-cluster",
        "one cluster of P processors, event-triggered rounds, FCFS",
        "Parallel Workloads Archive setting (simulate --cluster P)",
        _single_cluster,
        (Parameter("processors", int, None, "processors (nodes) of the cluster", 1),),
        example="single-cluster:processors=128",
    )
)


# ----------------------------------------------------------------------------------------------
# Names and parameters.


def bundled_names() -> list[str]:
    """The bundled environment names, in listing order."""
    return list(_REGISTRY)


def bundled(name: str) -> BundledEnvironment:
    """The bundled environment called `name` (no parameters); ConfigError listing the names otherwise."""
    try:
        return _REGISTRY[name]
    except KeyError:
        pass
    message = f"unknown environment {name!r}; bundled environments: {', '.join(_REGISTRY)}"
    close = difflib.get_close_matches(name, list(_REGISTRY), n=1)
    if close:
        message += f"; did you mean {close[0]!r}?"
    message += "; or give a path to a .toml, .yaml or .yml file"
    raise ConfigError(name, message)


def parse_spec(spec: str) -> tuple[BundledEnvironment, dict[str, ParamValue], str]:
    """Split ``name:key=value,...`` into the bundled entry, all parameter values and a canonical name.

    The canonical name lists, in declaration order, the parameters that differ from their
    defaults (``koala-c-multicluster:k=4``). ConfigError (file = `spec`, path = the parameter)
    for unknown names, unknown or repeated parameters, bad values and missing required ones.
    """
    name, _, rest = spec.strip().partition(":")
    entry = bundled(name.strip())
    given: dict[str, str] = {}
    problems: list[Problem] = []
    valid = ", ".join(p.name for p in entry.parameters) or "none"
    for item in (part.strip() for part in rest.split(",")) if rest.strip() else ():
        key, eq, text = item.partition("=")
        key = key.strip()
        if not eq or not key:
            problems.append(Problem("", f"expected key=value, got {item!r} (parameters: {valid})"))
            continue
        if key in given:
            problems.append(Problem(key, "parameter given twice"))
            continue
        given[key] = text
    values: dict[str, ParamValue] = {}
    for key, text in given.items():
        try:
            param = entry.parameter(key)
        except KeyError:
            hint = difflib.get_close_matches(key, [p.name for p in entry.parameters], n=1)
            extra = f"; did you mean {hint[0]!r}?" if hint else ""
            problems.append(Problem(key, f"unknown parameter of {entry.name} (parameters: {valid}){extra}"))
            continue
        try:
            values[key] = param.parse(text)
        except ValueError as exc:
            problems.append(Problem(key, str(exc)))
    for param in entry.parameters:
        if param.name not in given:
            if param.default is None:
                problems.append(Problem(param.name, f"required parameter is missing (e.g. {entry.example_spec})"))
            else:
                values[param.name] = param.default
    if problems:
        raise ConfigError(spec, problems)
    shown = [
        f"{p.name}={format_value(values[p.name])}"
        for p in entry.parameters
        if p.default is None or values[p.name] != p.default
    ]
    canonical = entry.name + (":" + ",".join(shown) if shown else "")
    return entry, values, canonical


def bundled_document(spec: str) -> dict[str, Any]:
    """The file document of a bundled name with parameters (not yet validated)."""
    entry, values, canonical = parse_spec(spec)
    return {"name": canonical, **entry.build(values)}


def bundled_environment(spec: str) -> Environment:
    """Build and validate the bundled environment `spec` (``name`` or ``name:key=value,...``)."""
    from isthmus.config.schema import validate_document  # pydantic models: loaded when needed

    return validate_document(bundled_document(spec), file=spec.strip())


def single_cluster(processors: int) -> Environment:
    """One cluster site of `processors` processors, event-triggered rounds, FCFS, no provisioning.

    Used by ``isthmus simulate --cluster P``; equal to the bundled name
    ``single-cluster:processors=P`` (its document, from the same builder), but made from the
    document directly rather than through the file schema: loading the schema's pydantic models
    takes longer than reading a 10,000-job trace. ConfigError when `processors` < 1.
    """
    if isinstance(processors, bool) or not isinstance(processors, int):
        raise ConfigError("single-cluster", f"processors must be an integer, got {processors!r}", "processors")
    entry, values, canonical = parse_spec(f"single-cluster:processors={processors}")
    doc = entry.build(values)
    (site,) = doc["sites"]
    policies = doc["policies"]
    return Environment(
        name=canonical,
        sites=(
            Site(
                name=site["name"],
                kind=SiteKind(site["kind"]),
                nodes=site["nodes"],
                cores_per_node=site["cores_per_node"],
            ),
        ),
        allocation=PolicyChoice(policies["allocation"]),
        provisioning=PolicyChoice(policies["provisioning"]),
        round_interval=None if doc["round_interval"] == "event" else float(doc["round_interval"]),
        description=doc["description"],
    )


def sites_summary(doc_or_env: Mapping[str, Any] | Environment) -> str:
    """A one-line description of the sites: ``3 clusters (96 nodes), 2 clouds (8-192 VMs)``."""
    if isinstance(doc_or_env, Environment):
        rows = [(s.kind.value, s.nodes, s.min_vms, s.max_vms) for s in doc_or_env.sites]
    else:
        rows = [
            (s.get("kind", "cluster"), s.get("nodes") or 0, s.get("min_vms") or 0, s.get("max_vms") or 0)
            for s in doc_or_env.get("sites", [])
        ]
    clusters = [r for r in rows if r[0] == "cluster"]
    clouds = [r for r in rows if r[0] == "cloud"]
    parts = []
    if clusters:
        nodes = sum(r[1] for r in clusters)
        parts.append(f"{len(clusters)} cluster{'s' if len(clusters) != 1 else ''} ({nodes} nodes)")
    if clouds:
        lo, hi = sum(r[2] for r in clouds), sum(r[3] for r in clouds)
        vms = f"{hi} VMs" if lo == hi else f"{lo}-{hi} VMs" if lo else f"<={hi} VMs"
        parts.append(f"{len(clouds)} cloud{'s' if len(clouds) != 1 else ''} ({vms})")
    return ", ".join(parts) or "no sites"
