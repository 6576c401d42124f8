"""The environment file schema (pydantic v2) and its validation into an `Environment`.

A document (the parsed TOML or YAML file) is checked in two passes whose problems are reported
together:

1. *structure*: the pydantic models below (types, ranges, unknown keys, with the closest valid
   key suggested);
2. *meaning*: rules across keys and items (a cluster needs nodes, a cloud needs ``max_vms`` and
   no ``nodes``, ``min_vms <= max_vms``, unique site and set names, sets naming known sites,
   policies known to `isthmus.policies.registry` with valid parameters).

The second pass reads the raw document defensively, so a type error in one site does not hide
a duplicate name in another. Problems come back sorted in document order.
"""

from __future__ import annotations

import dataclasses
import difflib
import types
import typing
import unicodedata
from collections.abc import Callable, Mapping, Sequence
from types import MappingProxyType
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StringConstraints, ValidationError, field_validator, model_validator
from pydantic_core import PydanticCustomError

from isthmus.config.errors import ConfigError, Problem, format_path, show_value
from isthmus.model.budget import BudgetCap
from isthmus.model.cloud import ProviderSettings
from isthmus.model.environment import Environment, PolicyChoice
from isthmus.model.peers import FederationSettings, PeerRole, PeerSettings
from isthmus.model.site import LrmSettings, Site, SiteKind, SiteSet
from isthmus.model.vmtypes import InstanceType, VmImage

__all__ = [
    "BILLING_UNITS",
    "CLOUD_ONLY_KEYS",
    "EnvironmentSpec",
    "Loc",
    "PoliciesSpec",
    "PolicySpec",
    "SiteSetSpec",
    "SiteSpec",
    "environment_to_dict",
    "spec_to_environment",
    "validate_document",
    "validate_environment",
]

Loc = tuple[str | int, ...]
"""A key path inside a document, e.g. ``("sites", 2, "max_vms")``."""

NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._-]*$"
NAME_RULE = "a name of letters, digits, '.', '_' or '-', starting with a letter or digit"

BILLING_UNITS: Mapping[str, float] = MappingProxyType({"hour": 3600.0, "minute": 60.0, "second": 1.0})
"""Words accepted for ``billing_increment``, with their length in seconds."""

CLOUD_ONLY_KEYS: tuple[str, ...] = (
    "min_vms",
    "max_vms",
    "boot_time",
    "shutdown_time",
    "price_per_hour",
    "billing_increment",
    "idle_release_time",
    "instance_types",
    "images",
    "networks",
)
"""Site keys that only make sense for a cloud site."""

_MODEL_CONFIG = ConfigDict(strict=True, extra="forbid", allow_inf_nan=False, frozen=True)

ItemName = Annotated[str, StringConstraints(pattern=NAME_PATTERN)]
Seconds = Annotated[float, Field(ge=0)]


class LrmSpec(BaseModel):
    """A cluster site's ``lrm`` table: the batch system behind it (docs/sites.md)."""

    model_config = _MODEL_CONFIG

    driver: Literal["slurm", "gridengine"] = Field(description='The local resource manager: "slurm" or "gridengine".')
    mode: Literal["pilot", "direct"] = Field(
        "pilot",
        description='"pilot" (default): isthmus holds nodes with pilot jobs and runs its jobs in them; '
        '"direct": each run of an isthmus job is one job of the LRM (its accounting sees it).',
    )
    partition: str | None = Field(None, min_length=1, max_length=128, description="Slurm: partition to submit to.")
    account: str | None = Field(None, min_length=1, max_length=128, description="Slurm: account to charge.")
    qos: str | None = Field(None, min_length=1, max_length=128, description="Slurm: quality of service.")
    queue: str | None = Field(None, min_length=1, max_length=128, description="Grid Engine: queue to submit to.")
    parallel_environment: str | None = Field(
        None, min_length=1, max_length=128, description='Grid Engine: parallel environment of multi-slot jobs ("smp").'
    )
    options: list[Annotated[str, StringConstraints(min_length=1, max_length=256)]] = Field(
        default_factory=list, description='Extra sbatch or qsub options, e.g. ["--exclusive"].'
    )
    config: str | None = Field(
        None, min_length=1, max_length=4096, description="The LRM's configuration file (SLURM_CONF) if not the default."
    )
    poll_interval: float = Field(2.0, gt=0, le=3600, description="Seconds between two status polls of the LRM.")
    command_timeout: float = Field(
        30.0, gt=0, le=3600, description="Seconds an LRM command may take before the LRM counts as not answering."
    )
    keep_free: int = Field(
        0,
        ge=0,
        description="Processors isthmus leaves free for local users' jobs (KOALA-CS §3.2.1); in pilot mode, "
        "rounded up to whole pilot positions.",
    )
    pilot_walltime: float | None = Field(
        None, gt=0, description="Pilot mode: walltime requested for each pilot job (default: the partition's limit)."
    )
    renew_before: Seconds = Field(
        300.0,
        description="Pilot mode: a pilot with less walltime left than this takes no new run and is replaced.",
    )
    pilots: Literal["fixed", "elastic"] = Field(
        "fixed",
        description='Pilot mode: "fixed" holds every position; "elastic" submits pilots for the queued demand '
        "and ends those idle for idle_release seconds beyond it.",
    )
    min_pilots: int = Field(0, ge=0, description="Pilot mode, elastic: pilots held even without demand.")
    idle_release: Seconds = Field(60.0, description="Pilot mode, elastic: seconds an unneeded pilot stays idle.")

    @model_validator(mode="after")
    def _keys_of_the_driver_and_mode(self) -> LrmSpec:
        own = {"slurm": ("partition", "account", "qos", "config"), "gridengine": ("queue", "parallel_environment")}
        foreign = sorted(k for d, keys in own.items() if d != self.driver for k in keys if k in self.model_fields_set)
        if foreign:
            raise PydanticCustomError(
                "driver_keys",
                f'{", ".join(foreign)} {"does" if len(foreign) == 1 else "do"} not apply to driver = "{self.driver}"',
            )
        given = sorted(
            {"pilot_walltime", "renew_before", "pilots", "min_pilots", "idle_release"} & self.model_fields_set
        )
        elastic_keys = sorted({"min_pilots", "idle_release"} & self.model_fields_set)
        if self.pilots == "fixed" and elastic_keys:
            raise PydanticCustomError("elastic_only", f'{", ".join(elastic_keys)} applies only to pilots = "elastic"')
        if self.mode == "direct" and given:
            raise PydanticCustomError("pilot_only", f'{", ".join(given)} applies only to mode = "pilot"')
        if self.pilot_walltime is not None and self.renew_before >= self.pilot_walltime:
            raise PydanticCustomError(
                "renew_before", "renew_before must be shorter than pilot_walltime (a pilot would be replaced at once)"
            )
        return self


class ProviderSpec(BaseModel):
    """A cloud site's ``provider`` table: a real IaaS cloud through Apache Libcloud (docs/clouds.md).

    Credentials are named, never given: ``key_env``/``secret_env`` are environment variables,
    ``credentials_file`` a file with ``key = ...`` and ``secret = ...`` lines.
    """

    model_config = _MODEL_CONFIG

    driver: Literal["ec2", "openstack", "opennebula", "gce"] = Field(description="Libcloud compute driver.")
    image: str = Field(
        "", max_length=256, description="Image VMs boot (an AMI id on EC2); optional when the site lists images."
    )
    instance_type: str = Field(
        "",
        max_length=128,
        description="Instance type VMs boot (cores_per_node and price_per_hour describe it); optional when the "
        "site lists instance_types.",
    )
    region: str = Field("", max_length=64, description="Provider region (default us-east-1 on EC2).")
    endpoint: str = Field("", max_length=512, description="Endpoint URL; empty for the provider's public one.")
    key_env: str = Field("", max_length=128, description="Environment variable holding the access key or user.")
    secret_env: str = Field("", max_length=128, description="Environment variable holding the secret.")
    credentials_file: str = Field("", max_length=4096, description="File with key = ... and secret = ... lines.")
    boot_timeout: float = Field(
        300.0, gt=0, description="Seconds a VM's pilot may take to register (else an error VM)."
    )
    agent_command: str = Field(
        "python3 -m isthmus.agent", min_length=1, max_length=1024, description="Starts the pilot on the image."
    )
    extra: dict[str, str] = Field(default_factory=dict, description="Further driver arguments (project, tenant, ...).")

    @model_validator(mode="after")
    def _credentials_named(self) -> ProviderSpec:
        if not self.credentials_file and not (self.key_env and self.secret_env):
            raise PydanticCustomError(
                "credentials",
                "credentials are needed: key_env and secret_env (names of environment variables) or credentials_file",
            )
        return self


class InstanceTypeSpec(BaseModel):
    """One ``[[sites.instance_types]]`` entry: a kind of VM the cloud leases (docs/clouds.md)."""

    model_config = _MODEL_CONFIG

    name: ItemName = Field(description="Name jobs ask for (VMType).")
    cores: int = Field(ge=1, le=4096, description="Processors of one VM.")
    memory_mb: int | None = Field(None, ge=1, description="RAM of one VM in MB (unknown: never matches a request).")
    disk_gb: float | None = Field(None, gt=0, description="Scratch storage of one VM in GB.")
    arch: str | None = Field(None, min_length=1, max_length=32, description='CPU architecture, e.g. "x86_64".')
    price_per_hour: Seconds = Field(0.0, description="Price of one VM-hour of this type (0 = free).")
    provider_size: str = Field("", max_length=128, description="The provider's size id (default: name).")


class ImageSpec(BaseModel):
    """One ``[[sites.images]]`` entry: an image the cloud's VMs may boot (docs/clouds.md)."""

    model_config = _MODEL_CONFIG

    name: str = Field(min_length=1, max_length=256, description="Name jobs ask for (VMAMI / VMLoc).")
    provider_id: str = Field("", max_length=256, description="The provider's image id (an AMI id; default: name).")
    arch: str | None = Field(None, min_length=1, max_length=32, description="CPU architecture it is built for.")


class SiteSpec(BaseModel):
    """One ``[[sites]]`` entry: a cluster (``nodes``) or a cloud (``max_vms`` and VM timings/prices).

    Keys left out take the defaults of `isthmus.model.site.Site`. Cloud-only keys on a cluster
    and ``nodes`` on a cloud are refused by `validate_document` (second pass).
    """

    model_config = _MODEL_CONFIG

    name: ItemName = Field(description="Unique site name.")
    kind: Literal["cluster", "cloud"] = Field("cluster", description="cluster or cloud.")
    nodes: int | None = Field(None, ge=0, description="Cluster only: nodes always present (>= 1).")
    cores_per_node: int = Field(1, ge=1, description="Processors per node or VM.")
    min_vms: int | None = Field(None, ge=0, description="Cloud only: VMs always kept leased (default 0).")
    max_vms: int | None = Field(None, ge=0, description="Cloud only: most VMs that may be leased (>= 1).")
    boot_time: Seconds | None = Field(None, description="Cloud only: seconds from lease to usable VM.")
    shutdown_time: Seconds | None = Field(None, description="Cloud only: seconds from release to gone.")
    price_per_hour: Seconds | None = Field(None, description="Cloud only: price of one VM-hour (0 = free).")
    billing_increment: float | None = Field(
        None, gt=0, description='Cloud only: seconds per billing increment, or "hour"/"minute"/"second".'
    )
    idle_release_time: Seconds | None = Field(
        None, description="Cloud only: seconds a VM of a free cloud may stay idle before release."
    )
    available_from: Seconds | None = Field(None, description="Seconds from the start when the site appears.")
    available_until: Seconds | None = Field(None, description="Seconds from the start when the site goes.")
    lrm: LrmSpec | None = Field(None, description="Cluster only: the batch system behind a live site.")
    provider: ProviderSpec | None = Field(None, description="Cloud only: a real IaaS provider for live runs.")
    instance_types: list[InstanceTypeSpec] | None = Field(
        None, description="Cloud only: the kinds of VM it leases; the first is the default."
    )
    images: list[ImageSpec] | None = Field(None, description="Cloud only: the images its VMs may boot.")
    networks: list[Annotated[str, StringConstraints(min_length=1, max_length=64)]] | None = Field(
        None, description='Cloud only: networks its VMs can join, e.g. ["public", "private"].'
    )

    @field_validator("billing_increment", mode="before")
    @classmethod
    def _billing_words(cls, value: Any) -> Any:
        if isinstance(value, str):
            try:
                return BILLING_UNITS[value.strip().lower()]
            except KeyError:
                raise PydanticCustomError(
                    "billing_unit", 'expected a number of seconds > 0 or one of "hour", "minute", "second"'
                ) from None
        if value is not None and (isinstance(value, bool) or not isinstance(value, int | float)):
            raise PydanticCustomError(
                "billing_unit", 'expected a number of seconds > 0 or one of "hour", "minute", "second"'
            )
        return value


class SiteSetSpec(BaseModel):
    """One ``[[sets]]`` entry: an ordered list of site names and an optional job runtime limit."""

    model_config = _MODEL_CONFIG

    name: ItemName = Field(description="Unique set name.")
    sites: list[str] = Field(description="Site names in order of preference (at least one).")
    runtime_limit: float | None = Field(
        None, gt=0, description="Seconds a job may run in this set before it is killed; null = unlimited."
    )


class PolicySpec(BaseModel):
    """A policy choice written as a table: ``{name = "on-demand", params = {...}}``."""

    model_config = _MODEL_CONFIG

    name: str = Field(min_length=1, description="Policy name in the registry.")
    params: dict[str, Any] = Field(default_factory=dict, description="Policy parameters.")


def _policy_before(value: Any) -> Any:
    if isinstance(value, str):
        return {"name": value}
    if isinstance(value, Mapping | PolicySpec):
        return value
    raise PydanticCustomError("policy_type", 'expected a policy name ("ff") or a table {name = "...", params = {...}}')


class PoliciesSpec(BaseModel):
    """The ``[policies]`` table: the default allocation and provisioning policies, and an
    optional fair-share policy (e.g. vm-share)."""

    model_config = _MODEL_CONFIG

    allocation: PolicySpec = Field(
        default_factory=lambda: PolicySpec(name="ff"), description="Allocation policy (default ff)."
    )
    provisioning: PolicySpec = Field(
        default_factory=lambda: PolicySpec(name="on-demand"),
        description="Provisioning policy (default on-demand).",
    )
    fairshare: PolicySpec | None = Field(None, description="Fair-share policy (default none), e.g. vm-share.")
    selection: PolicySpec | None = Field(
        None, description="Site-selection (forwarding) policy of a manager with [[peers]] (default: none)."
    )

    @field_validator("allocation", "provisioning", "fairshare", "selection", mode="before")
    @classmethod
    def _name_or_table(cls, value: Any) -> Any:
        return None if value is None else _policy_before(value)


class BudgetSpec(BaseModel):
    """One ``[[budgets]]`` entry: a hard cap on the charged cost of cloud leases (docs/clouds.md)."""

    model_config = _MODEL_CONFIG

    name: ItemName = Field(description="Unique budget name.")
    limit: float = Field(ge=0, description="Dollars the leases it covers may cost (per period, if one is given).")
    sites: list[ItemName] = Field(default_factory=list, description="Cloud sites it covers (default: every cloud).")
    period: Literal["day", "month"] | None = Field(None, description='"day" or "month" (UTC); default: in total.')
    users: list[Annotated[str, Field(min_length=1)]] = Field(
        default_factory=list, description="Users whose increments it covers (default: everyone)."
    )
    on_limit: Literal["requeue", "finish"] = Field(
        "requeue",
        description='"requeue": a job still running at a boundary the cap cannot pay is requeued; '
        '"finish": a job starting on a covered VM commits the increments its requested runtime needs.',
    )


class PeerSpec(BaseModel):
    """One ``[[peers]]`` entry: a peer manager (docs/federation.md).

    The shared secret is named, never given: ``token_env`` (an environment variable) or
    ``token_file`` (a file holding it), exactly one of them.
    """

    model_config = _MODEL_CONFIG

    name: ItemName = Field(description="The peer's environment name (how it introduces itself).")
    address: str = Field(
        min_length=1,
        max_length=512,
        pattern=r"^https?://[^\s/?#]+(/[^\s?#]*)?$",
        description="Base URL of the peer's API, e.g. http://10.0.0.2:8750.",
    )
    role: Literal["provider", "consumer", "both"] = Field(
        "both", description="What the peer is to this manager: provider (runs our jobs), consumer, both."
    )
    token_env: str = Field(
        "", max_length=128, pattern=r"^([A-Za-z_][A-Za-z0-9_]*)?$", description="Variable holding the shared secret."
    )
    token_file: str = Field("", max_length=4096, description="File holding the shared secret.")
    heartbeat: float | None = Field(None, gt=0, le=3600, description="Heartbeat interval proposed, seconds.")

    @model_validator(mode="after")
    def _one_secret(self) -> PeerSpec:
        if bool(self.token_env) == bool(self.token_file):
            raise PydanticCustomError(
                "credentials",
                "a peer needs exactly one of token_env (an environment variable) or token_file (a file) "
                "naming the secret shared with it",
            )
        return self


class FederationSpec(BaseModel):
    """The ``[federation]`` table: forwarding limits, resource-data pushes and heartbeats."""

    model_config = _MODEL_CONFIG

    max_hops: int = Field(1, ge=1, le=16, description="Managers a job may pass through (1: runs where received).")
    push_threshold: int = Field(1, ge=1, description="Push resource data when it changed by this much.")
    heartbeat: float = Field(2.0, gt=0, le=3600, description="Default heartbeat interval, seconds.")
    missed_heartbeats: int = Field(3, ge=1, le=100, description="A peer silent this many intervals is down.")
    timeout: float = Field(5.0, gt=0, le=600, description="Seconds one protocol request may take.")


class EnvironmentSpec(BaseModel):
    """A whole environment file: name, description, round interval, sites, sets and policies."""

    model_config = _MODEL_CONFIG

    name: str = Field(min_length=1, description="Environment name (default: the file name without suffix).")
    description: str = Field("", description="Free text shown by `isthmus env list`.")
    round_interval: float | None = Field(
        30.0,
        gt=0,
        description='Seconds between scheduling rounds; "event" or null for event-triggered rounds.',
    )
    sites: list[SiteSpec] = Field(description="The sites, in the order policies consider them.")
    sets: list[SiteSetSpec] = Field(default_factory=list, description="Optional sets of sites.")
    policies: PoliciesSpec = Field(default_factory=PoliciesSpec, description="Default policies.")
    budgets: list[BudgetSpec] = Field(default_factory=list, description="Hard caps on the cost of cloud leases.")
    peers: list[PeerSpec] = Field(default_factory=list, description="Peer managers (live federation).")
    federation: FederationSpec = Field(default_factory=FederationSpec, description="Forwarding settings.")

    @field_validator("round_interval", mode="before")
    @classmethod
    def _event(cls, value: Any) -> Any:
        if value is None or (isinstance(value, str) and value.strip().lower() == "event"):
            return None
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise PydanticCustomError("round_interval", 'expected a number of seconds > 0, "event" or null')
        return value

    @field_validator("name", mode="before")
    @classmethod
    def _printable_name(cls, value: Any) -> Any:
        if isinstance(value, str) and any(unicodedata.category(ch) in ("Cc", "Zl", "Zp") for ch in value):
            raise PydanticCustomError("name_control", "expected a name without control characters or line breaks")
        return value

    @field_validator("description", mode="before")
    @classmethod
    def _strip_description(cls, value: Any) -> Any:
        if value is None:
            return ""
        return value.strip() if isinstance(value, str) else value


# ----------------------------------------------------------------------------------------------
# Schema introspection: valid keys and field types at a location (for messages).

_TOP_ORDER = list(EnvironmentSpec.model_fields)
_FIELD_ORDER: dict[str, int] = {}
for _model in (
    EnvironmentSpec,
    SiteSpec,
    SiteSetSpec,
    PoliciesSpec,
    PolicySpec,
    InstanceTypeSpec,
    ImageSpec,
    PeerSpec,
    FederationSpec,
):
    for _key in _model.model_fields:
        _FIELD_ORDER.setdefault(_key, len(_FIELD_ORDER))


def _inner_model(annotation: Any) -> type[BaseModel] | None:
    """The model a field holds directly or as list items, if any."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    for arg in typing.get_args(annotation):
        found = _inner_model(arg)
        if found is not None:
            return found
    return None


def _model_at(loc: Loc) -> type[BaseModel] | None:
    """The model whose keys are valid at `loc` (the parent of a key), or None (free-form)."""
    model: type[BaseModel] = EnvironmentSpec
    for part in loc:
        if isinstance(part, int):
            continue
        field = model.model_fields.get(part)
        if field is None:
            return None
        inner = _inner_model(field.annotation)
        if inner is None:
            return None
        model = inner
    return model


def _is_int_field(loc: Loc) -> bool:
    if not loc or not isinstance(loc[-1], str):
        return False
    model = _model_at(loc[:-1])
    if model is None or loc[-1] not in model.model_fields:
        return False
    annotation = model.model_fields[loc[-1]].annotation
    args = typing.get_args(annotation) if isinstance(annotation, types.UnionType) else (annotation,)
    return int in args


def suggest_key(key: str, valid: Sequence[str]) -> str:
    """A hint for an unknown key: the closest valid key (difflib), or the list of valid keys."""
    close = difflib.get_close_matches(key, list(valid), n=1, cutoff=0.6)
    if close:
        return f"did you mean {close[0]!r}?"
    return "valid keys: " + ", ".join(valid)


# ----------------------------------------------------------------------------------------------
# Pass 1: pydantic errors → problems.

_COMPARE = {
    "greater_than": (">", "gt"),
    "greater_than_equal": (">=", "ge"),
    "less_than": ("<", "lt"),
    "less_than_equal": ("<=", "le"),
}


def _describe_pydantic_error(err: Mapping[str, Any]) -> str:
    kind = err["type"]
    loc: Loc = tuple(err["loc"])
    value = err.get("input")
    got = f", got {show_value(value)}"
    if kind == "missing":
        return "required key is missing"
    if kind == "extra_forbidden":
        parent = _model_at(loc[:-1])
        valid = list(parent.model_fields) if parent else []
        return f"unknown key {str(loc[-1])!r}; " + suggest_key(str(loc[-1]), valid)
    if kind in _COMPARE:
        op, ctx_key = _COMPARE[kind]
        limit = (err.get("ctx") or {}).get(ctx_key)
        if isinstance(limit, float) and limit.is_integer():
            limit = int(limit)
        what = "an integer" if _is_int_field(loc) else "a number"
        return f"expected {what} {op} {limit}{got}"
    if kind == "string_pattern_mismatch":
        key = loc[-1] if loc else None
        if key == "address":
            return f"expected an http:// or https:// URL (scheme, host[:port], optional path){got}"
        if key == "token_env":
            return f"expected the name of an environment variable (letters, digits, '_'){got}"
        return f"expected {NAME_RULE}{got}"
    if kind == "literal_error":
        expected = (err.get("ctx") or {}).get("expected", "")
        message = f"expected one of {expected}{got}"
        if isinstance(value, str) and loc and isinstance(loc[-1], str) and loc[-1] == "kind":
            close = difflib.get_close_matches(value, ["cluster", "cloud"], n=1)
            if close:
                message += f"; did you mean {close[0]!r}?"
        return message
    if kind == "string_too_short":
        return f"expected a non-empty string{got}"
    if kind == "int_type":
        return f"expected an integer{got}"
    if kind in ("float_type", "finite_number"):
        return f"expected a finite number{got}"
    if kind in ("dict_type", "model_type", "model_attributes_type"):
        return f"expected a table{got}"
    msg = str(err.get("msg", "invalid value"))
    if msg.startswith("Input should be "):
        msg = "expected " + msg[len("Input should be ") :]
    elif msg.startswith("Value error, "):
        msg = msg[len("Value error, ") :]
    return msg + got


def _pydantic_problems(exc: ValidationError) -> list[tuple[Loc, str]]:
    out: list[tuple[Loc, str]] = []
    for err in exc.errors(include_url=False):
        out.append((tuple(err["loc"]), _describe_pydantic_error(err)))
    return out


# ----------------------------------------------------------------------------------------------
# Pass 2: meaning, on the raw document.

PolicyChecker = Callable[[str, str, Mapping[str, Any]], None]


def _registry_check(family: str, name: str, params: Mapping[str, Any]) -> None:
    from isthmus.policies import registry

    registry.check_policy(family, name, params)


def _registry_names(family: str) -> list[str] | None:
    try:
        from isthmus.policies import registry

        return registry.names(family)
    except Exception:  # pragma: no cover - the registry itself is broken
        return None


def _int_value(raw: Mapping[str, Any], key: str) -> int | None:
    value = raw.get(key)
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _num_value(raw: Mapping[str, Any], key: str) -> float | None:
    value = raw.get(key)
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def _site_problems(i: int, raw: Mapping[str, Any]) -> list[tuple[Loc, str]]:
    """Rules across the keys of one site, on raw values (ill-typed values are left to pass 1)."""
    out: list[tuple[Loc, str]] = []
    at: Loc = ("sites", i)
    kind = raw.get("kind", "cluster")
    given = {key for key, value in raw.items() if value is not None}
    if kind == "cluster":
        nodes = _int_value(raw, "nodes")
        if "nodes" not in given:
            out.append(((*at, "nodes"), "a cluster site needs nodes (an integer >= 1)"))
        elif nodes == 0:
            out.append(((*at, "nodes"), "a cluster site needs at least 1 node, got 0"))
        for key in CLOUD_ONLY_KEYS:
            if key in given:
                out.append(
                    (
                        (*at, key),
                        f'{key} applies only to cloud sites; this site is a cluster (set kind = "cloud" '
                        f"or remove {key})",
                    )
                )
    if kind == "cluster" and "provider" in given:
        out.append(((*at, "provider"), "a cloud provider applies only to cloud sites"))
    elif kind == "cloud":
        if "lrm" in given:
            out.append(((*at, "lrm"), "a batch system (lrm) applies only to cluster sites"))
        if "nodes" in given:
            out.append(((*at, "nodes"), "a cloud site has no fixed nodes; give max_vms (and min_vms) instead"))
        max_vms, min_vms = _int_value(raw, "max_vms"), _int_value(raw, "min_vms")
        if "max_vms" not in given:
            out.append(((*at, "max_vms"), "a cloud site needs max_vms (an integer >= 1)"))
        elif max_vms == 0:
            out.append(((*at, "max_vms"), "a cloud site needs max_vms >= 1, got 0"))
        elif max_vms is not None and min_vms is not None and 0 <= max_vms < min_vms:
            out.append(((*at, "min_vms"), f"min_vms ({min_vms}) must not exceed max_vms ({max_vms})"))
        out.extend(_vm_offer_problems(at, raw, given))
    start, end = _num_value(raw, "available_from"), _num_value(raw, "available_until")
    if start is not None and end is not None and end <= start:
        out.append(
            (
                (*at, "available_until"),
                f"must be later than available_from ({show_value(raw['available_from'])}), "
                f"got {show_value(raw['available_until'])}",
            )
        )
    return out


def _vm_offer_problems(at: Loc, raw: Mapping[str, Any], given: set[str]) -> list[tuple[Loc, str]]:
    """Rules on a cloud's instance types, images and provider: unique names, no site-wide
    cores_per_node or price_per_hour beside types, a provider naming its instance type and
    image unless the site lists them."""
    out: list[tuple[Loc, str]] = []
    types = raw.get("instance_types")
    for key, label in (("instance_types", "instance type"), ("images", "image")):
        items = raw.get(key)
        if key in given and isinstance(items, list):
            if not items:
                out.append(((*at, key), f"an empty list; give at least one {label} or leave {key} out"))
            first: dict[str, int] = {}
            for j, item in enumerate(items):
                name = item.get("name") if isinstance(item, Mapping) else None
                if isinstance(name, str):
                    if name in first:
                        out.append(((*at, key, j, "name"), f"duplicate {label} {name!r} (also {key}[{first[name]}])"))
                    else:
                        first[name] = j
    if isinstance(types, list) and types:
        for key in ("cores_per_node", "price_per_hour"):
            if key in given:
                out.append(
                    (
                        (*at, key),
                        f"{key} describes a site's one VM shape; with instance_types give cores and price_per_hour "
                        "per type (the first type is the default)",
                    )
                )
    provider = raw.get("provider")
    if isinstance(provider, Mapping):
        if not provider.get("instance_type") and not (isinstance(types, list) and types):
            out.append(((*at, "provider", "instance_type"), "needed unless the site lists instance_types"))
        images = raw.get("images")
        if not provider.get("image") and not (isinstance(images, list) and images):
            out.append(((*at, "provider", "image"), "needed unless the site lists images"))
        if provider.get("instance_type") and isinstance(types, list) and types:
            out.append(
                (
                    (*at, "provider", "instance_type"),
                    "the site lists instance_types: give each its provider_size there instead",
                )
            )
    return out


def _semantic_problems(data: Mapping[str, Any], check_policy: PolicyChecker) -> list[tuple[Loc, str]]:
    out: list[tuple[Loc, str]] = []
    sites = data.get("sites")
    site_names: list[str] | None = None
    if isinstance(sites, list):
        if not sites:
            out.append((("sites",), "an environment needs at least one site"))
        site_names = []
        first_at: dict[str, int] = {}
        for i, raw in enumerate(sites):
            if not isinstance(raw, Mapping):
                continue
            out.extend(_site_problems(i, raw))
            name = raw.get("name")
            if isinstance(name, str):
                site_names.append(name)
                if name in first_at:
                    out.append((("sites", i, "name"), f"duplicate site name {name!r} (also sites[{first_at[name]}])"))
                else:
                    first_at[name] = i

    budgets = data.get("budgets")
    if isinstance(budgets, list):
        clouds = {
            raw.get("name") for raw in (sites if isinstance(sites, list) else []) if isinstance(raw, Mapping)
            if raw.get("kind") == "cloud"
        }  # fmt: skip
        budget_at: dict[str, int] = {}
        for j, raw in enumerate(budgets):
            if not isinstance(raw, Mapping):
                continue
            name = raw.get("name")
            if isinstance(name, str):
                if name in budget_at:
                    out.append(
                        (("budgets", j, "name"), f"duplicate budget name {name!r} (also budgets[{budget_at[name]}])")
                    )
                else:
                    budget_at[name] = j
            covered = raw.get("sites")
            if isinstance(covered, list) and site_names is not None:
                for k, s in enumerate(covered):
                    if isinstance(s, str) and s not in clouds:
                        what = "a cluster site" if s in site_names else "no site of this environment"
                        out.append((("budgets", j, "sites", k), f"{s!r} is {what}; a budget covers cloud sites"))

    sets = data.get("sets")
    if isinstance(sets, list):
        set_at: dict[str, int] = {}
        for j, raw in enumerate(sets):
            if not isinstance(raw, Mapping):
                continue
            name = raw.get("name")
            if isinstance(name, str):
                if name in set_at:
                    out.append((("sets", j, "name"), f"duplicate set name {name!r} (also sets[{set_at[name]}])"))
                else:
                    set_at[name] = j
            members = raw.get("sites")
            if not isinstance(members, list):
                continue
            if not members:
                out.append((("sets", j, "sites"), "a set needs at least one site"))
            seen: dict[str, int] = {}
            for k, member in enumerate(members):
                if not isinstance(member, str):
                    continue
                if member in seen:
                    out.append(
                        (
                            ("sets", j, "sites", k),
                            f"site {member!r} is listed twice in this set (also sites[{seen[member]}])",
                        )
                    )
                    continue
                seen[member] = k
                if site_names is not None and member not in site_names:
                    known = ", ".join(dict.fromkeys(site_names)) or "none"
                    message = f"unknown site {member!r}; sites: {known}"
                    close = difflib.get_close_matches(member, site_names, n=1)
                    if close:
                        message += f"; did you mean {close[0]!r}?"
                    out.append((("sets", j, "sites", k), message))

    peers = data.get("peers")
    if isinstance(peers, list):
        peer_at: dict[str, int] = {}
        for j, raw in enumerate(peers):
            if not isinstance(raw, Mapping):
                continue
            name = raw.get("name")
            if not isinstance(name, str):
                continue
            if name == data.get("name"):
                out.append(
                    (("peers", j, "name"), f"{name!r} is this manager's own name: a manager is not its own peer")
                )
            if name in peer_at:
                out.append((("peers", j, "name"), f"duplicate peer name {name!r} (also peers[{peer_at[name]}])"))
            else:
                peer_at[name] = j

    policies = data.get("policies", {})
    if isinstance(policies, Mapping):
        for family in ("allocation", "provisioning", "fairshare", "selection"):
            if family not in policies or policies[family] is None:
                continue
            out.extend(_policy_problems(family, policies[family], check_policy))
        out.extend(_fairshare_pairing(policies))
    return out


def _policy_name(raw: Any) -> str | None:
    if isinstance(raw, str):
        return raw
    if isinstance(raw, Mapping) and isinstance(raw.get("name"), str):
        return str(raw["name"])
    return None


def _fairshare_pairing(policies: Mapping[str, Any]) -> list[tuple[Loc, str]]:
    """A fair-share policy that leases and releases VMs itself (vm-share) runs with a provisioning
    policy that decides nothing or lends its release rule (`isthmus.policies.build.pairing_problem`)."""
    from isthmus.policies import registry
    from isthmus.policies.build import pairing_problem

    fair = _policy_name(policies.get("fairshare"))
    prov = _policy_name(policies.get("provisioning", "on-demand"))
    if fair is None or prov is None:
        return []
    try:
        problem = pairing_problem(registry.info("fairshare", fair).cls, registry.info("provisioning", prov).cls)
    except registry.PolicyError:
        return []  # an unknown name: reported by _policy_problems
    if problem is None:
        return []
    fits = " or ".join(f'"{n}"' for n in problem.fits)
    return [
        (
            ("policies", "provisioning"),
            f'fair-share policy "{fair}" leases and releases the clouds\' VMs itself; set provisioning = {fits} '
            f"(got {prov!r})",
        )
    ]


def _policy_problems(family: str, raw: Any, check_policy: PolicyChecker) -> list[tuple[Loc, str]]:
    at: Loc = ("policies", family)
    name: str
    params: Mapping[str, Any]
    if isinstance(raw, str):
        name, params, name_at, params_at = raw, {}, at, at
    elif isinstance(raw, Mapping):
        raw_name, raw_params = raw.get("name"), raw.get("params", {})
        if not isinstance(raw_name, str) or not raw_name or not isinstance(raw_params, Mapping):
            return []  # structure already reported by pass 1
        name, params = raw_name, raw_params
        name_at, params_at = (*at, "name"), (*at, "params")
    else:
        return []
    known = _registry_names(family)
    if known is not None and name not in known:
        message = f"unknown {family} policy {name!r}; valid names: {', '.join(known)}"
        close = difflib.get_close_matches(name, known, n=1)
        if close:
            message += f"; did you mean {close[0]!r}?"
        return [(name_at, message)]
    try:
        check_policy(family, name, params)
    except ValueError as exc:  # PolicyError
        where = params_at if known is not None else name_at
        per_param = getattr(exc, "problems", ())
        if per_param and known is not None:
            # one problem per parameter, each at its own key (and line)
            return [((*params_at, *loc), f"{family} policy {name!r}: {msg}") for loc, msg in per_param]
        return [(where, str(exc))]
    except ImportError as exc:
        return [(name_at, f"{family} policy {name!r} is registered but cannot be loaded: {exc}")]
    return []


# ----------------------------------------------------------------------------------------------
# Orchestration.


def _sort_key(loc: Loc) -> tuple[tuple[int, int], ...]:
    key: list[tuple[int, int]] = []
    for n, part in enumerate(loc):
        if isinstance(part, int):
            key.append((0, part))
        elif n == 0:
            key.append((1, _TOP_ORDER.index(part) if part in _TOP_ORDER else len(_TOP_ORDER)))
        else:
            key.append((1, _FIELD_ORDER.get(part, len(_FIELD_ORDER))))
    return tuple(key)


def _context(data: Mapping[str, Any], loc: Loc) -> str | None:
    if len(loc) >= 2 and loc[0] in ("sites", "sets") and isinstance(loc[1], int):
        items = data.get(str(loc[0]))
        if isinstance(items, list) and loc[1] < len(items) and isinstance(items[loc[1]], Mapping):
            name = items[loc[1]].get("name")
            if isinstance(name, str) and name:
                return f"{'site' if loc[0] == 'sites' else 'set'} {name!r}"
    return None


LineLocator = Callable[[Loc], int | None]


def validate_document(
    data: Any,
    *,
    file: str | None = None,
    default_name: str | None = None,
    line_of: LineLocator | None = None,
    check_policy: PolicyChecker | None = None,
) -> Environment:
    """Validate a parsed environment document and build the `Environment` it describes.

    `file` names the source in errors; `default_name` is used when the document has no
    ``name``; `line_of` maps a key path to a line (YAML); `check_policy` replaces the policy
    registry check (tests). Raises `ConfigError` listing every problem found.
    """
    if not isinstance(data, Mapping):
        raise ConfigError(
            file,
            f"expected a table of keys (name, sites, sets, policies, ...) at the top level, got {show_value(data)}",
        )
    if "name" not in data and default_name:
        data = {"name": default_name, **data}
    checker = check_policy or _registry_check
    raw_problems: list[tuple[Loc, str]] = []
    spec: EnvironmentSpec | None = None
    try:
        spec = EnvironmentSpec.model_validate(data)
    except ValidationError as exc:
        raw_problems.extend(_pydantic_problems(exc))
    raw_problems.extend(_semantic_problems(data, checker))
    if raw_problems or spec is None:
        raw_problems.sort(key=lambda item: _sort_key(item[0]))
        problems = [
            Problem(format_path(loc), message, line_of(loc) if line_of else None, _context(data, loc))
            for loc, message in raw_problems
        ]
        raise ConfigError(file, problems)
    env = spec_to_environment(spec)
    if checker is _registry_check:
        _check_structure(env, file, line_of)
    return env


def _check_structure(env: Environment, file: str | None, line_of: LineLocator | None) -> None:
    """Ask the allocation policy whether the sites and sets have the structure it needs.

    TAGS-sets needs nested sets with increasing limits, TAGS-chain whole chains of sites: a
    malformed structure is reported here, naming the file, rather than when a run starts.
    """
    from isthmus.policies import registry

    try:
        registry.create("allocation", env.allocation.name, env.allocation.params).stage_sites(env)
    except ValueError as exc:
        loc: Loc = ("sets",) if env.sets else ("policies", "allocation")
        raise ConfigError(
            file, [Problem(format_path(loc), str(exc), line_of(loc) if line_of else None, None)]
        ) from None


def spec_to_environment(spec: EnvironmentSpec) -> Environment:
    """Map a validated `EnvironmentSpec` to the frozen `Environment` model.

    Keys left out take the defaults of `Site`; for a cluster the cloud-only fields stay at their
    defaults and for a cloud ``nodes`` is 0.
    """
    sites = []
    for s in spec.sites:
        kwargs: dict[str, Any] = {
            "name": s.name,
            "kind": SiteKind(s.kind),
            "cores_per_node": s.cores_per_node,
        }
        if s.kind == "cluster":
            kwargs["nodes"] = s.nodes
            if s.lrm is not None:
                kwargs["lrm"] = LrmSettings(
                    driver=s.lrm.driver,
                    mode=s.lrm.mode,
                    partition=s.lrm.partition,
                    account=s.lrm.account,
                    qos=s.lrm.qos,
                    queue=s.lrm.queue,
                    parallel_environment=s.lrm.parallel_environment,
                    options=tuple(s.lrm.options),
                    config=s.lrm.config,
                    poll_interval=float(s.lrm.poll_interval),
                    command_timeout=float(s.lrm.command_timeout),
                    pilot_walltime=None if s.lrm.pilot_walltime is None else float(s.lrm.pilot_walltime),
                    renew_before=float(s.lrm.renew_before),
                    keep_free=s.lrm.keep_free,
                    pilots=s.lrm.pilots,
                    min_pilots=s.lrm.min_pilots,
                    idle_release=float(s.lrm.idle_release),
                )
        else:
            for key in CLOUD_ONLY_KEYS:
                value = getattr(s, key)
                if value is not None:
                    kwargs[key] = value
            if s.provider is not None:
                p = s.provider
                kwargs["provider"] = ProviderSettings(
                    driver=p.driver,
                    image=p.image,
                    instance_type=p.instance_type,
                    region=p.region,
                    endpoint=p.endpoint,
                    key_env=p.key_env,
                    secret_env=p.secret_env,
                    credentials_file=p.credentials_file,
                    boot_timeout=float(p.boot_timeout),
                    agent_command=p.agent_command,
                    extra=tuple(sorted(p.extra.items())),
                )
            if s.instance_types:
                kwargs["instance_types"] = tuple(
                    InstanceType(
                        t.name,
                        t.cores,
                        float(t.price_per_hour),
                        t.memory_mb,
                        None if t.disk_gb is None else float(t.disk_gb),
                        t.arch,
                        t.provider_size,
                    )
                    for t in s.instance_types
                )
                kwargs["cores_per_node"] = s.instance_types[0].cores
                kwargs["price_per_hour"] = float(s.instance_types[0].price_per_hour)
            if s.images:
                kwargs["images"] = tuple(VmImage(im.name, im.provider_id, im.arch) for im in s.images)
            if s.networks:
                kwargs["networks"] = tuple(s.networks)
        for key in ("available_from", "available_until"):
            value = getattr(s, key)
            if value is not None:
                kwargs[key] = float(value)
        for key in ("boot_time", "shutdown_time", "price_per_hour", "billing_increment", "idle_release_time"):
            if key in kwargs:
                kwargs[key] = float(kwargs[key])
        sites.append(Site(**kwargs))
    sets = tuple(
        SiteSet(st.name, tuple(st.sites), None if st.runtime_limit is None else float(st.runtime_limit))
        for st in spec.sets
    )
    return Environment(
        name=spec.name,
        sites=tuple(sites),
        sets=sets,
        allocation=_choice(spec.policies.allocation),
        provisioning=_choice(spec.policies.provisioning),
        fairshare=None if spec.policies.fairshare is None else _choice(spec.policies.fairshare),
        round_interval=None if spec.round_interval is None else float(spec.round_interval),
        description=spec.description,
        budgets=tuple(
            BudgetCap(b.name, float(b.limit), tuple(b.sites), b.period, tuple(b.users), b.on_limit)
            for b in spec.budgets
        ),
        peers=tuple(
            PeerSettings(
                name=p.name,
                address=p.address.rstrip("/"),
                role=PeerRole(p.role),
                token_env=p.token_env,
                token_file=p.token_file,
                heartbeat=None if p.heartbeat is None else float(p.heartbeat),
            )
            for p in spec.peers
        ),
        federation=FederationSettings(
            max_hops=spec.federation.max_hops,
            push_threshold=spec.federation.push_threshold,
            heartbeat=float(spec.federation.heartbeat),
            missed_heartbeats=spec.federation.missed_heartbeats,
            timeout=float(spec.federation.timeout),
        ),
        selection=None if spec.policies.selection is None else _choice(spec.policies.selection),
    )


def _choice(policy: PolicySpec) -> PolicyChoice:
    return PolicyChoice(policy.name, MappingProxyType(dict(policy.params)))


# ----------------------------------------------------------------------------------------------
# Environment → document.


def _number(value: float) -> int | float:
    """Integral floats as ints, for tidy files (loading turns them back into floats)."""
    return int(value) if float(value).is_integer() and abs(value) < 2**53 else float(value)


def _plain(value: Any) -> Any:
    """Mapping proxies and tuples as plain dicts and lists, recursively."""
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    return value


def _policy_doc(choice: PolicyChoice) -> str | dict[str, Any]:
    if not choice.params:
        return choice.name
    return {"name": choice.name, "params": _plain(choice.params)}


def environment_to_dict(env: Environment) -> dict[str, Any]:
    """The normalized file form of `env`: plain dicts, lists, strings and numbers.

    Every key is written explicitly (defaults included) except those without a value: an
    unbounded availability window and an unlimited set runtime limit are left out, and an
    event-triggered round interval is written ``"event"``. Feeding the result back to
    `validate_document` gives an equal `Environment`. Cloud-only fields of cluster sites are not
    written (they mean nothing for a cluster).
    """
    sites: list[dict[str, Any]] = []
    for s in env.sites:
        item: dict[str, Any] = {"name": s.name, "kind": s.kind.value}
        if s.is_cloud:
            if not s.instance_types:
                item["cores_per_node"] = s.cores_per_node
            item["min_vms"] = s.min_vms
            item["max_vms"] = s.max_vms
            item["boot_time"] = _number(s.boot_time)
            item["shutdown_time"] = _number(s.shutdown_time)
            if not s.instance_types:
                item["price_per_hour"] = _number(s.price_per_hour)
            else:
                item["instance_types"] = [
                    {
                        k: (_number(v) if isinstance(v, float) else v)
                        for k, v in dataclasses.asdict(t).items()
                        if v is not None and not (k == "provider_size" and not v)
                    }
                    for t in s.instance_types
                ]
            if s.images:
                item["images"] = [
                    {
                        k: v
                        for k, v in dataclasses.asdict(im).items()
                        if v is not None and not (k == "provider_id" and not v)
                    }
                    for im in s.images
                ]
            if s.networks:
                item["networks"] = list(s.networks)
            item["billing_increment"] = _number(s.billing_increment)
            item["idle_release_time"] = _number(s.idle_release_time)
            if s.provider is not None:
                prov = dataclasses.asdict(s.provider)
                prov["extra"] = dict(s.provider.extra)
                prov["boot_timeout"] = _number(s.provider.boot_timeout)
                item["provider"] = prov
        else:
            item["nodes"] = s.nodes
            item["cores_per_node"] = s.cores_per_node
            if s.lrm is not None:
                lrm = {k: v for k, v in dataclasses.asdict(s.lrm).items() if v is not None}
                lrm["options"] = list(s.lrm.options)
                if s.lrm.mode != "pilot":
                    for key in ("pilot_walltime", "renew_before", "pilots", "min_pilots", "idle_release"):
                        lrm.pop(key, None)
                elif s.lrm.pilots == "fixed":
                    lrm.pop("min_pilots", None)
                    lrm.pop("idle_release", None)
                item["lrm"] = lrm
        if s.available_from is not None:
            item["available_from"] = _number(s.available_from)
        if s.available_until is not None:
            item["available_until"] = _number(s.available_until)
        sites.append(item)
    sets: list[dict[str, Any]] = []
    for st in env.sets:
        entry: dict[str, Any] = {"name": st.name, "sites": list(st.sites)}
        if st.runtime_limit is not None:
            entry["runtime_limit"] = _number(st.runtime_limit)
        sets.append(entry)
    doc: dict[str, Any] = {
        "name": env.name,
        "description": env.description,
        "round_interval": "event" if env.round_interval is None else _number(env.round_interval),
        "policies": {
            "allocation": _policy_doc(env.allocation),
            "provisioning": _policy_doc(env.provisioning),
        }
        | ({"fairshare": _policy_doc(env.fairshare)} if env.fairshare is not None else {}),
        "sites": sites,
    }
    if sets:
        doc["sets"] = sets
    if env.selection is not None:
        doc["policies"]["selection"] = _policy_doc(env.selection)
    if env.peers:
        doc["peers"] = [
            {"name": p.name, "address": p.address, "role": p.role.value}
            | ({"token_env": p.token_env} if p.token_env else {"token_file": p.token_file})
            | ({"heartbeat": _number(p.heartbeat)} if p.heartbeat is not None else {})
            for p in env.peers
        ]
    if env.federation != FederationSettings():
        doc["federation"] = {k: _number(v) for k, v in dataclasses.asdict(env.federation).items()}
    if env.budgets:
        doc["budgets"] = [
            {"name": b.name, "limit": _number(b.limit), "sites": list(b.sites)}
            | ({"period": b.period} if b.period else {})
            | ({"users": list(b.users)} if b.users else {})
            | ({"on_limit": b.on_limit} if b.on_limit != "requeue" else {})
            for b in env.budgets
        ]
    return doc


def validate_environment(env: Environment, *, check_policy: PolicyChecker | None = None) -> Environment:
    """Check an `Environment` built in code against every file rule; return the normalized copy.

    Raises `ConfigError` (file ``<environment NAME>``) when the environment could not be written
    as a valid file.
    """
    return validate_document(environment_to_dict(env), file=f"<environment {env.name}>", check_policy=check_policy)
