"""Find policies by family and name; validate their parameters.

Each policy module defines one class with a `name`, a `seed` (the seed document and section
it implements), a docstring, and a `Params` pydantic model (extra keys forbidden). The table below maps names to modules
(imported lazily, as Libcloud's driver registry does); duplicate names are refused.

Policies of other packages join through the entry-point group `isthmus.policies` (`ENTRY_POINT_GROUP`):
an entry point named ``<family>.<name>`` whose value is ``module:Class`` (docs/environments.md,
"Adding a policy from your own package"). They are read once, the first time the table is used.
One naming a policy that exists is refused with a warning (the name keeps its first policy); one
naming an unknown family or a malformed name or target too, and asking for its name says why.
"""

from __future__ import annotations

import difflib
import importlib
import re
import types
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, Union, get_args, get_origin

import annotated_types
from pydantic import BaseModel, ValidationError
from pydantic.fields import FieldInfo

from isthmus.model.text import show_value

ENTRY_POINT_GROUP = "isthmus.policies"
"""The entry-point group through which other packages add policies (``<family>.<name> = module:Class``)."""

BUILTIN = "isthmus"
"""The source of the policies isthmus ships (`PolicyInfo.source`)."""

_NAME = re.compile(r"^[a-z0-9][a-z0-9_-]*$")

#: Families and the order in which their policies decide in a round (None: not consulted each
#: round). Provisioning looks first (VMs leased this round count as capacity for allocation),
#: then selection (where a job goes), fair share (malleable jobs), allocation last.
_FAMILIES: dict[str, int | None] = {
    "provisioning": 0,
    "selection": 10,
    "fairshare": 20,
    "allocation": 30,
    "prediction": None,
}

_TABLE: dict[str, dict[str, str]] = {
    "allocation": {
        "fcfs": "isthmus.policies.allocation.fcfs:StrictFcfs",
        "fcfs-reserve": "isthmus.policies.allocation.fcfs_reserve:FcfsReserve",
        "fcfs-nw": "isthmus.policies.allocation.fcfs_nw:FcfsNoWait",
        "easy": "isthmus.policies.allocation.easy:EasyBackfilling",
        "ff": "isthmus.policies.allocation.first_fit:FirstFit",
        "rr": "isthmus.policies.allocation.round_robin:RoundRobin",
        "sjf": "isthmus.policies.allocation.sjf:ShortestJobFirst",
        "sjf-ideal": "isthmus.policies.allocation.sjf:ShortestJobFirstIdeal",
        "hsdf": "isthmus.policies.allocation.hsdf:HighestSlowdownFirst",
        "tags-chain": "isthmus.policies.allocation.tags:TagsChain",
        "tags-sets": "isthmus.policies.allocation.tags:TagsSets",
        "fcfs-2q": "isthmus.policies.allocation.fcfs_2q:Fcfs2Q",
        "fcbf-aggr": "isthmus.policies.allocation.fcbf_aggressive:FcbfAggressive",
        "fcbf-split": "isthmus.policies.allocation.fcbf_split:FcbfSplit",
        "fcbf-qwait": "isthmus.policies.allocation.fcbf_qwait:FcbfQWait",
        "wrr": "isthmus.policies.allocation.koala_wrr:KoalaWrr",
    },
    "provisioning": {
        "on-demand": "isthmus.policies.provisioning.on_demand:OnDemand",
        "startup": "isthmus.policies.provisioning.startup:Startup",
        "none": "isthmus.policies.provisioning.static:NoProvisioning",
        "od-s": "isthmus.policies.provisioning.od_s:OnDemandSingle",
        "od-g": "isthmus.policies.provisioning.od_g:OnDemandGeometric",
        "od-exectime": "isthmus.policies.provisioning.od_exectime:OnDemandExecTime",
        "od-execavg": "isthmus.policies.provisioning.od_execavg:OnDemandExecAvg",
        "od-execkn": "isthmus.policies.provisioning.od_execkn:OnDemandExecKN",
        "od-wait": "isthmus.policies.provisioning.od_wait:OnDemandWait",
        "od-2q": "isthmus.policies.provisioning.od_2q:OnDemand2Q",
    },
    "prediction": {
        "user-last-two": "isthmus.policies.prediction.runtime:UserLastTwo",
        "requested": "isthmus.policies.prediction.runtime:RequestedRuntime",
        "exact": "isthmus.policies.prediction.runtime:ExactRuntime",
        "knn": "isthmus.policies.prediction.knn:NearestNeighbours",
    },
    "selection": {
        "local-first": "isthmus.policies.selection.local_first:LocalFirst",
        "round-robin": "isthmus.policies.selection.round_robin:RoundRobinForwarding",
        "lowest-qlen": "isthmus.policies.selection.lowest_qlen:LowestQlen",
        "lowest-qlen-cpus": "isthmus.policies.selection.lowest_qlen_cpus:LowestQlenCpus",
        "highest-idle": "isthmus.policies.selection.highest_idle:HighestIdle",
        "lowest-load": "isthmus.policies.selection.lowest_load:LowestLoad",
        "highest-cap": "isthmus.policies.selection.highest_cap:HighestCap",
        "bf-cap": "isthmus.policies.selection.bf_cap:BestFitCap",
        "bf-idle": "isthmus.policies.selection.bf_idle:BestFitIdle",
        "ibm-matching": "isthmus.policies.selection.ibm_matching:IbmMatching",
    },
    "fairshare": {
        "gep": "isthmus.policies.fairshare.gep:GridEquiPartition",
        "sep": "isthmus.policies.fairshare.sep:SiteEquiPartition",
        "vm-share": "isthmus.policies.fairshare.vm_share:VmShare",
    },
}

#: (family, name) -> the distribution an entry point added it from (policies isthmus ships are absent)
_SOURCES: dict[tuple[str, str], str] = {}
#: (family, name) -> why an entry point naming it was refused
_REFUSED: dict[tuple[str, str], str] = {}
_entry_points_read = False


def _read_entry_points() -> None:
    """Register the policies of the `ENTRY_POINT_GROUP` entry points (once per process)."""
    global _entry_points_read  # noqa: PLW0603  (the table is module state: read it once)
    if _entry_points_read:
        return
    _entry_points_read = True
    from importlib.metadata import entry_points

    for ep in entry_points(group=ENTRY_POINT_GROUP):
        dist = ep.dist.name if ep.dist is not None else "?"
        family, _, name = ep.name.partition(".")
        problem = None
        if family not in _TABLE:
            problem = f"unknown policy family {family!r}; expected one of: {', '.join(families())}"
        elif not _NAME.match(name):
            problem = f"policy name {name!r}: use lower-case letters, digits, '-' and '_'"
        elif ":" not in ep.value:
            problem = f"{ep.value!r} is not module:Class"
        elif name in _TABLE[family]:
            where = _SOURCES.get((family, name), BUILTIN)
            problem = f"{family} policy {name!r} is already registered (by {where}: {_TABLE[family][name]})"
        if problem is not None:
            warnings.warn(
                f"entry point {ep.name!r} of {dist} (group {ENTRY_POINT_GROUP}) refused: {problem}", stacklevel=3
            )
            _REFUSED[(family, name)] = f"the entry point of {dist} was refused: {problem}"
            continue
        _TABLE[family][name] = ep.value
        _SOURCES[(family, name)] = dist


def families() -> tuple[str, ...]:
    """The policy families, in the order they decide in a round (non-deciding families last)."""
    return tuple(sorted(_FAMILIES, key=lambda f: (_FAMILIES[f] is None, _FAMILIES[f] or 0, f)))


def round_order(family: str) -> int | None:
    """Where `family` decides in a round (lower first); None for a family not consulted each round."""
    _known(family)
    return _FAMILIES[family]


def register_family(family: str, order: int | None) -> None:
    """Add a policy family deciding at `order` in each round (None: not consulted each round)."""
    if family in _FAMILIES:
        raise PolicyError(f"policy family {family!r} already exists")
    _FAMILIES[family] = order
    _TABLE[family] = {}


class PolicyError(ValueError):
    """An unknown policy name or invalid parameters; the message lists what is valid.

    `problems` holds one (parameter path, message) pair per bad parameter, so an environment
    file can point each at its own line; it is empty for an unknown family or name.
    """

    def __init__(self, message: str, problems: Sequence[tuple[tuple[str | int, ...], str]] = ()) -> None:
        super().__init__(message)
        self.problems: tuple[tuple[tuple[str | int, ...], str], ...] = tuple(problems)


@dataclass(frozen=True, slots=True)
class ParamInfo:
    """One parameter of a policy: its name, type, default, constraint and meaning, in words."""

    name: str
    type: str
    default: Any
    required: bool
    constraint: str
    help: str

    def to_dict(self) -> dict[str, Any]:
        """A JSON-friendly view."""
        return {
            "name": self.name,
            "type": self.type,
            "default": self.default,
            "required": self.required,
            "constraint": self.constraint,
            "help": self.help,
        }


@dataclass(frozen=True, slots=True)
class PolicyInfo:
    """What the registry knows of one policy."""

    family: str
    name: str
    cls: type[Any]
    summary: str
    seed: str
    #: the distribution it comes from: `BUILTIN`, or the package whose entry point added it
    source: str = BUILTIN

    @property
    def parameters(self) -> list[ParamInfo]:
        """The policy's parameters, described from its `Params` model."""
        model: type[BaseModel] = self.cls.Params
        return [describe_param(n, f) for n, f in model.model_fields.items()]


def register(family: str, name: str, target: str) -> None:
    """Add a policy (module:Class) under `family`/`name`; a name already taken is refused."""
    table = _family(family)
    if name in table:
        raise PolicyError(f"{family} policy {name!r} is already registered ({table[name]})")
    table[name] = target


def unregister(family: str, name: str) -> None:
    """Remove a policy added with `register`; a name not registered is refused."""
    table = _family(family)
    if name not in table:
        raise PolicyError(f"{family} policy {name!r} is not registered")
    del table[name]
    _SOURCES.pop((family, name), None)


def _known(family: str) -> dict[str, str]:
    """The table of `family` as registered so far (entry points not read); PolicyError if unknown."""
    try:
        return _TABLE[family]
    except KeyError:
        valid = ", ".join(families())
        raise PolicyError(f"unknown policy family {family!r}; expected one of: {valid}") from None


def _family(family: str) -> dict[str, str]:
    """The whole table of `family`, the outside packages' entry points read first."""
    _read_entry_points()
    return _known(family)


def names(family: str) -> list[str]:
    """The policy names of `family`, sorted."""
    return sorted(_family(family))


def info(family: str, name: str) -> PolicyInfo:
    """Look a policy up; PolicyError listing the valid names when `name` is unknown.

    A name already registered is found without reading the entry points (scanning the installed
    packages costs tens of milliseconds at every start): no entry point can take a registered name."""
    table = _known(family)
    target = table.get(name)
    if target is None:  # perhaps an outside package's (they add to this table)
        _read_entry_points()
        target = table.get(name)
    if target is None:
        refused = _REFUSED.get((family, name))
        why = f" ({refused})" if refused else ""
        raise PolicyError(f"unknown {family} policy {name!r}{why}; valid names: {', '.join(sorted(table))}")
    module_name, _, cls_name = target.partition(":")
    try:
        cls = getattr(importlib.import_module(module_name), cls_name)
    except (ImportError, AttributeError) as exc:
        raise PolicyError(f"{family} policy {name!r}: cannot load {target}: {exc}") from exc
    source = _SOURCES.get((family, name), BUILTIN)
    if source != BUILTIN and getattr(cls, "name", None) != name:  # its decisions and runs would go by another name
        raise PolicyError(
            f"{family} policy {name!r} of {source}: its class {target} is named {getattr(cls, 'name', None)!r}"
        )
    doc = (cls.__doc__ or "").strip().splitlines()
    return PolicyInfo(family, name, cls, doc[0] if doc else "", str(getattr(cls, "seed", "")), source)


def with_capability(family: str, name: str, value: object = True) -> list[str]:
    """The names of the `family` policies whose capability `name` (`isthmus.policies.api.CAPABILITIES`)
    is `value`, sorted (each policy's module is imported)."""
    from isthmus.policies.api import capability

    return [n for n in names(family) if capability(info(family, n).cls, name) == value]


def all_policies() -> list[PolicyInfo]:
    """Every registered policy, family by family (in round order), names sorted."""
    return [info(family, name) for family in families() for name in names(family)]


_SCALARS = {float: "number", int: "integer", bool: "boolean", str: "string"}


def type_name(annotation: Any) -> str:
    """An annotation in words: ``tuple[float, ...] | None`` -> 'list of numbers, or none'."""
    origin = get_origin(annotation)
    if origin is Literal:
        return "one of " + ", ".join(repr(a) for a in get_args(annotation))
    if origin in (Union, types.UnionType):
        args = [a for a in get_args(annotation) if a is not type(None)]
        text = " or ".join(type_name(a) for a in args)
        return f"{text}, or none" if len(args) < len(get_args(annotation)) else text
    if origin in (tuple, list, set, frozenset):
        args = [a for a in get_args(annotation) if a is not Ellipsis]
        inner = type_name(args[0]) if args else "value"
        return f"list of {inner}s" if not inner.startswith("one of") else f"list of ({inner})"
    if annotation in _SCALARS:
        return _SCALARS[annotation]
    return getattr(annotation, "__name__", str(annotation))


_BOUNDS = (
    (annotated_types.Gt, "gt", ">"),
    (annotated_types.Ge, "ge", ">="),
    (annotated_types.Lt, "lt", "<"),
    (annotated_types.Le, "le", "<="),
)


def constraint_text(field: FieldInfo) -> str:
    """The field's bounds and length limits in words ('>= 0', 'at least 1 item'); '' when none."""
    parts: list[str] = []
    for meta in field.metadata:
        for kind, attr, op in _BOUNDS:
            if isinstance(meta, kind):
                parts.append(f"{op} {getattr(meta, attr)}")
        if isinstance(meta, annotated_types.MinLen) and meta.min_length:
            parts.append(f"at least {meta.min_length} item{'s' if meta.min_length != 1 else ''}")
        if isinstance(meta, annotated_types.MaxLen):
            parts.append(f"at most {meta.max_length} items")
    return ", ".join(parts)


def _plain(value: Any) -> Any:
    if isinstance(value, tuple | list):
        return [_plain(v) for v in value]
    return value


def describe_param(name: str, field: FieldInfo) -> ParamInfo:
    """A `ParamInfo` for one field of a policy's Params model."""
    required = field.is_required()
    return ParamInfo(
        name=name,
        type=type_name(field.annotation),
        default=None if required else _plain(field.get_default(call_default_factory=True)),
        required=required,
        constraint=constraint_text(field),
        help=field.description or "",
    )


_COMPARE = {"greater_than": ">", "greater_than_equal": ">=", "less_than": "<", "less_than_equal": "<="}
_COMPARE_CTX = {"greater_than": "gt", "greater_than_equal": "ge", "less_than": "lt", "less_than_equal": "le"}


def _article(text: str) -> str:
    return text if text.startswith("one of") else ("an " if text[0] in "aeiou" else "a ") + text


def _expected(err: Mapping[str, Any], field: FieldInfo | None) -> str:
    """What a parameter should have been, in words, for one pydantic error."""
    kind = str(err["type"])
    ctx = err.get("ctx") or {}
    nested = len(err["loc"]) > 1
    if kind in _COMPARE:
        is_int = field is not None and type_name(field.annotation).startswith("integer")
        limit = ctx.get(_COMPARE_CTX[kind])
        if isinstance(limit, float) and limit.is_integer():
            limit = int(limit)
        return f"{'an integer' if is_int else 'a number'} {_COMPARE[kind]} {limit}"
    if kind == "too_short":
        n = ctx.get("min_length", 1)
        return f"at least {n} item{'s' if n != 1 else ''}"
    if kind == "too_long":
        return f"at most {ctx.get('max_length')} items"
    if field is not None and not nested and (kind.endswith("_type") or kind.endswith("_parsing")):
        return _article(type_name(field.annotation))
    msg = str(err.get("msg", "a valid value"))
    msg = msg.removeprefix("Input should be ").removeprefix("Value error, ")
    return msg.split(", unable to", 1)[0].replace("a valid ", "a ")


def _param_problem(err: Mapping[str, Any], model: type[BaseModel]) -> tuple[tuple[str | int, ...], str]:
    loc: tuple[str | int, ...] = tuple(err["loc"])
    fields = model.model_fields
    kind = str(err["type"])
    if not loc:
        return loc, f"parameters: {err.get('msg', 'invalid')}"
    pname = str(loc[0])
    if kind == "extra_forbidden":
        valid = ", ".join(fields) or "none (this policy takes no parameters)"
        msg = f"unknown parameter {pname!r}; valid parameters: {valid}"
        close = difflib.get_close_matches(pname, list(fields), n=1)
        if pname == "predictor" and not close:
            users = ", ".join(with_capability("allocation", "uses_prediction"))
            msg += f"; this policy uses no runtime predictor (the policies that do: {users})"
        return loc, msg + (f"; did you mean {close[0]!r}?" if close else "")
    if kind == "missing":
        return loc, f"parameter {pname!r} is required"
    field = fields.get(pname)
    where = f"parameter {pname!r}"
    if len(loc) > 1 and isinstance(loc[1], int):
        where += f" item {loc[1] + 1}"
    expected = _expected(err, field)
    return loc, f"{where}: expected {expected}, got {show_value(err.get('input'))}"


def params(family: str, name: str, values: Mapping[str, Any] | None = None) -> BaseModel:
    """Validate `values` against the policy's Params model; PolicyError naming the bad field."""
    cls = info(family, name).cls
    model: type[BaseModel] = cls.Params
    try:
        return model.model_validate(dict(values or {}))
    except ValidationError as exc:
        errors = exc.errors(include_url=False)
        # pydantic adds a length error on a list whose items failed: report the items only
        locs = [tuple(e["loc"]) for e in errors]
        kept = [e for e in errors if not any(len(o) > len(e["loc"]) and o[: len(e["loc"])] == e["loc"] for o in locs)]
        problems = [_param_problem(err, model) for err in kept]
        text = "; ".join(m for _, m in problems)
        raise PolicyError(f"{family} policy {name!r}: {text}", problems) from None


def check_policy(family: str, name: str, values: Mapping[str, Any] | None = None) -> None:
    """Raise PolicyError if `name` is not a `family` policy or `values` are not its parameters."""
    params(family, name, values)


def create(family: str, name: str, values: Mapping[str, Any] | None = None) -> Any:
    """Build the policy `name` of `family` with validated parameters."""
    cls = info(family, name).cls
    return cls(params(family, name, values))
