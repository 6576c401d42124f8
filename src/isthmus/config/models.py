"""The environment file's pydantic models: types, ranges and unknown keys of every table.

A site's ``lrm`` and ``provider`` tables hold the keys every driver shares (declared here) and the
keys of the driver they name, validated by that driver's options model from
`isthmus.backends.registry`: a key of another driver is refused naming the key and the driver.
Rules across keys and items (a cluster needs nodes, set members name known sites, ...) are
`isthmus.config.checks`; turning the models into an `Environment` is `isthmus.config.convert`.
"""

from __future__ import annotations

import re
import typing
import unicodedata
from collections.abc import Mapping
from types import MappingProxyType
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    PrivateAttr,
    StringConstraints,
    ValidationError,
    field_validator,
    model_validator,
)
from pydantic_core import InitErrorDetails, PydanticCustomError, core_schema

__all__ = [
    "BILLING_UNITS",
    "CLOUD_ONLY_KEYS",
    "NAME_RULE",
    "BudgetSpec",
    "EnvironmentSpec",
    "Family",
    "FederationSpec",
    "ImageSpec",
    "InstanceTypeSpec",
    "Loc",
    "LrmSpec",
    "PeerSpec",
    "PoliciesSpec",
    "PolicySpec",
    "ProviderSpec",
    "SiteSetSpec",
    "SiteSpec",
    "Spec",
    "UsersSpec",
    "suggest_key",
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

Family = Literal["batch", "cloud"]

_MODEL_CONFIG = ConfigDict(strict=True, extra="forbid", allow_inf_nan=False, frozen=True)

ItemName = Annotated[str, StringConstraints(pattern=NAME_PATTERN)]
Seconds = Annotated[float, Field(ge=0)]


_BUILTIN_ERRORS = frozenset(typing.get_args(core_schema.ErrorType))


def _detail(err: Mapping[str, Any], prefix: Loc = ()) -> InitErrorDetails:
    """One error of a nested validation, to raise again from a validator (its location kept)."""
    kind = err["type"]
    detail: InitErrorDetails = {
        "type": kind if kind in _BUILTIN_ERRORS else PydanticCustomError(kind, str(err["msg"])),
        "loc": (*prefix, *err["loc"]),
        "input": err.get("input"),
    }
    if kind in _BUILTIN_ERRORS and "ctx" in err:
        detail["ctx"] = err["ctx"]
    return detail


def _custom(kind: str, message: str, loc: Loc, value: Any) -> InitErrorDetails:
    return {"type": PydanticCustomError(kind, message), "loc": loc, "input": value}


def suggest_key(key: str, valid: typing.Sequence[str]) -> str:
    """A hint for an unknown key: the closest valid key (difflib), or the list of valid keys."""
    import difflib

    close = difflib.get_close_matches(key, list(valid), n=1, cutoff=0.6)
    if close:
        return f"did you mean {close[0]!r}?"
    return "valid keys: " + ", ".join(valid)


def _other_drivers_keys(family: Family, name: str) -> dict[str, list[str]]:
    """key -> the other registered drivers of `family` whose options include it."""
    from isthmus.backends import registry

    found: dict[str, list[str]] = {}
    for other in registry.names(family):
        if other == name:
            continue
        try:
            fields = registry.get(family, other).options_model().model_fields
        except Exception:
            continue
        for key in fields:
            found.setdefault(key, []).append(other)
    return found


def _with_driver_options(model: type[BaseModel], family: Family, data: Any, handler: Any) -> Any:
    """Validate a driver table: the shared keys by `model`, the others by the options model of the
    driver it names (put in its ``driver_options``), every problem reported at its own key."""
    if not isinstance(data, Mapping):
        return handler(data)
    from isthmus.backends import registry

    shared = set(model.model_fields) - {"driver_options"}
    common = {k: v for k, v in data.items() if k in shared}
    own = {k: v for k, v in data.items() if k not in shared}
    errors: list[InitErrorDetails] = []
    options: Any = None
    name = data.get("driver")
    driver = None
    if isinstance(name, str):
        try:
            driver = registry.get(family, name)
        except KeyError as exc:
            errors.append(_custom("driver_name", str(exc.args[0]), ("driver",), name))
    options_model: type[BaseModel] | None = None
    if driver is not None:
        try:
            options_model = driver.options_model()
        except Exception as exc:  # an outside driver whose module does not import
            message = f"driver {name!r} is registered but its options model cannot be loaded: {exc}"
            errors.append(_custom("driver_name", message, ("driver",), name))
    if options_model is not None:
        assert isinstance(name, str)
        mine = set(options_model.model_fields)
        others = _other_drivers_keys(family, name) if set(own) - mine else {}
        foreign = sorted(k for k in own if k not in mine and k in others)
        if foreign:
            verb = "does" if len(foreign) == 1 else "do"
            message = f'{", ".join(foreign)} {verb} not apply to driver = "{name}"'
            errors.append(_custom("driver_keys", message, (), data))
        valid = [*(k for k in model.model_fields if k in shared), *options_model.model_fields]
        for key, value in own.items():
            if key not in mine and key not in others:
                hint = suggest_key(key, valid)
                errors.append(_custom("unknown_key", f"unknown key {key!r}; {hint}", (key,), value))
        try:
            options = options_model.model_validate({k: v for k, v in own.items() if k in mine})
        except ValidationError as exc:
            errors.extend(_detail(e) for e in exc.errors(include_url=False))
    spec = None
    try:
        spec = handler({**common, "driver_options": options})
    except ValidationError as exc:
        errors.extend(_detail(e) for e in exc.errors(include_url=False))
    if errors:
        raise ValidationError.from_exception_data(model.__name__, errors)
    return spec


class Spec(BaseModel):
    """A table of the file. `invalid_keys` names keys given with a value that did not validate
    (only on an instance built by `isthmus.config.checks.lenient`: a valid one has none)."""

    model_config = _MODEL_CONFIG

    _invalid: frozenset[str] = PrivateAttr(frozenset())

    @property
    def invalid_keys(self) -> frozenset[str]:
        """Keys given with a value that did not validate (left at their defaults here)."""
        return self._invalid


class LrmSpec(Spec):
    """A cluster site's ``lrm`` table: the batch system behind it (docs/sites.md).

    Beside the keys below, the table holds the options of its driver (`isthmus.backends.registry`:
    Slurm's partition, Grid Engine's queue, ...), validated by that driver's options model.
    """

    model_config = _MODEL_CONFIG

    driver: str = Field(description='The batch system: a registered driver, e.g. "slurm" or "gridengine".')
    mode: Literal["pilot", "direct"] = Field(
        "pilot",
        description='"pilot" (default): isthmus holds nodes with pilot jobs and runs its jobs in them; '
        '"direct": each run of an isthmus job is one job of the LRM (its accounting sees it).',
    )
    poll_interval: float = Field(2.0, gt=0, le=3600, description="Seconds between two status polls of the LRM.")
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
    driver_options: Any = Field(None, description="The driver's own options (its options model), set by validation.")

    @model_validator(mode="wrap")
    @classmethod
    def _driver_keys(cls, data: Any, handler: Any) -> Any:
        return _with_driver_options(cls, "batch", data, handler)

    @model_validator(mode="after")
    def _keys_of_the_mode(self) -> LrmSpec:
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


class ProviderSpec(Spec):
    """A cloud site's ``provider`` table: a real IaaS cloud (docs/clouds.md).

    Beside the keys below, the table holds the options of its driver (`isthmus.backends.registry`:
    a Libcloud driver's region, endpoint and named credentials), validated by that driver's
    options model.
    """

    model_config = _MODEL_CONFIG

    driver: str = Field(description='The cloud provider: a registered driver, e.g. "ec2" or "openstack".')
    image: str = Field(
        "", max_length=256, description="Image VMs boot (an AMI id on EC2); optional when the site lists images."
    )
    instance_type: str = Field(
        "",
        max_length=128,
        description="Instance type VMs boot (cores_per_node and price_per_hour describe it); optional when the "
        "site lists instance_types.",
    )
    boot_timeout: float = Field(
        300.0, gt=0, description="Seconds a VM's pilot may take to register (else an error VM)."
    )
    agent_command: str = Field(
        "python3 -m isthmus.agent", min_length=1, max_length=1024, description="Starts the pilot on the image."
    )
    driver_options: Any = Field(None, description="The driver's own options (its options model), set by validation.")

    release_on_stop: bool = Field(
        False,
        description="Every stop of the manager terminates this site's VMs once their running jobs have ended "
        "or been requeued (as `isthmus stop --release`).",
    )
    lease_patience: float | None = Field(
        None,
        gt=0,
        description="Dead-man switch: a VM whose pilot has not reached the manager for this many seconds "
        "powers itself off and is terminated (default: off; the pilot then exits after the server's "
        "--pilot-timeout and the VM stays leased).",
    )

    @model_validator(mode="wrap")
    @classmethod
    def _driver_keys(cls, data: Any, handler: Any) -> Any:
        return _with_driver_options(cls, "cloud", data, handler)


class InstanceTypeSpec(Spec):
    """One ``[[sites.instance_types]]`` entry: a kind of VM the cloud leases (docs/clouds.md)."""

    model_config = _MODEL_CONFIG

    name: ItemName = Field(description="Name jobs ask for (VMType).")
    cores: int = Field(ge=1, le=4096, description="Processors of one VM.")
    memory_mb: int | None = Field(None, ge=1, description="RAM of one VM in MB (unknown: never matches a request).")
    disk_gb: float | None = Field(None, gt=0, description="Scratch storage of one VM in GB.")
    arch: str | None = Field(None, min_length=1, max_length=32, description='CPU architecture, e.g. "x86_64".')
    price_per_hour: Seconds = Field(0.0, description="Price of one VM-hour of this type (0 = free).")
    provider_size: str = Field("", max_length=128, description="The provider's size id (default: name).")


class ImageSpec(Spec):
    """One ``[[sites.images]]`` entry: an image the cloud's VMs may boot (docs/clouds.md)."""

    model_config = _MODEL_CONFIG

    name: str = Field(min_length=1, max_length=256, description="Name jobs ask for (VMAMI / VMLoc).")
    provider_id: str = Field("", max_length=256, description="The provider's image id (an AMI id; default: name).")
    arch: str | None = Field(None, min_length=1, max_length=32, description="CPU architecture it is built for.")


class SiteSpec(Spec):
    """One ``[[sites]]`` entry: a cluster (``nodes``) or a cloud (``max_vms`` and VM timings/prices).

    Keys left out take the defaults of `isthmus.model.site.Site`. Cloud-only keys on a cluster
    and ``nodes`` on a cloud are refused by `isthmus.config.checks`.
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


class SiteSetSpec(Spec):
    """One ``[[sets]]`` entry: an ordered list of site names and an optional job runtime limit."""

    model_config = _MODEL_CONFIG

    name: ItemName = Field(description="Unique set name.")
    sites: list[str] = Field(description="Site names in order of preference (at least one).")
    runtime_limit: float | None = Field(
        None, gt=0, description="Seconds a job may run in this set before it is killed; null = unlimited."
    )


class PolicySpec(Spec):
    """A policy choice: a name (``"ff"``) or a table ``{name = "on-demand", params = {...}}``."""

    model_config = _MODEL_CONFIG

    name: str = Field(min_length=1, description="Policy name in the registry.")
    params: dict[str, Any] = Field(default_factory=dict, description="Policy parameters.")
    _as_name: bool = PrivateAttr(False)

    @property
    def written_as_name(self) -> bool:
        """True when the file gave the policy as a bare name (its problems are at the policy's key)."""
        return self._as_name

    @model_validator(mode="wrap")
    @classmethod
    def _from_name(cls, data: Any, handler: Any) -> Any:
        if isinstance(data, str):
            spec = handler({"name": data})
            spec._as_name = True
            return spec
        return handler(data)


def _policy_before(value: Any) -> Any:
    if isinstance(value, str | Mapping | PolicySpec):
        return value
    raise PydanticCustomError("policy_type", 'expected a policy name ("ff") or a table {name = "...", params = {...}}')


class PoliciesSpec(Spec):
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
    predictor: PolicySpec | None = Field(
        None,
        description="Runtime predictor of the policies that use one, SJF and HSDF (default user-last-two), "
        "e.g. requested or knn; a policy's own predictor parameter wins.",
    )

    @field_validator("allocation", "provisioning", "fairshare", "selection", "predictor", mode="before")
    @classmethod
    def _name_or_table(cls, value: Any) -> Any:
        return None if value is None else _policy_before(value)


class BudgetSpec(Spec):
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


class PeerSpec(Spec):
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
    ca_file: str = Field("", max_length=4096, description="CA file (PEM) an https peer is verified against.")
    insecure_http: bool = Field(False, description="Allow an http:// address outside loopback (secret in clear).")

    @model_validator(mode="after")
    def _one_secret(self) -> PeerSpec:
        if bool(self.token_env) == bool(self.token_file):
            raise PydanticCustomError(
                "credentials",
                "a peer needs exactly one of token_env (an environment variable) or token_file (a file) "
                "naming the secret shared with it",
            )
        return self


class FederationSpec(Spec):
    """The ``[federation]`` table: forwarding limits, resource-data pushes and heartbeats."""

    model_config = _MODEL_CONFIG

    max_hops: int = Field(1, ge=1, le=16, description="Managers a job may pass through (1: runs where received).")
    push_threshold: int = Field(1, ge=1, description="Push resource data when it changed by this much.")
    heartbeat: float = Field(2.0, gt=0, le=3600, description="Default heartbeat interval, seconds.")
    missed_heartbeats: int = Field(3, ge=1, le=100, description="A peer silent this many intervals is down.")
    timeout: float = Field(5.0, gt=0, le=600, description="Seconds one protocol request may take.")


_UNIX_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_.-]{0,31}")


def _unix_name(value: str) -> str:
    if not _UNIX_NAME.fullmatch(value):
        raise PydanticCustomError(
            "unix_name",
            "expected a Unix account name (up to 32 letters, digits, '_', '.' or '-', not starting with a digit, "
            "'.' or '-')",
        )
    return value


UnixName = Annotated[str, AfterValidator(_unix_name)]


class UsersSpec(Spec):
    """The ``[users]`` table: the Unix account each isthmus user's jobs run as (docs/security.md).

    ``run_as`` is one account for every user; ``map`` names an account per isthmus user and wins
    over ``run_as``. Whether the accounts exist, and are neither root nor the manager's own user,
    is checked where the manager starts (`isthmus.agent.accounts.check_users`).
    """

    model_config = _MODEL_CONFIG

    run_as: UnixName | None = Field(
        None, description="The Unix account jobs of users not in map run as (one unprivileged account for all)."
    )
    map: dict[Annotated[str, Field(min_length=1, max_length=128)], UnixName] = Field(
        default_factory=dict, description="Isthmus user name -> the Unix account its jobs run as."
    )

    @model_validator(mode="after")
    def _something(self) -> UsersSpec:
        if self.run_as is None and not self.map:
            raise PydanticCustomError("users_empty", "set run_as (one account for all) or map (an account per user)")
        return self


class EnvironmentSpec(Spec):
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
    users: UsersSpec | None = Field(None, description="The Unix accounts jobs run as (default: the pilot's own).")

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
