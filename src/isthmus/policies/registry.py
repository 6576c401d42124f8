"""Find policies by family and name; validate their parameters.

Each policy module defines one class with a `name`, a docstring citing its seed and section,
and a `Params` pydantic model (extra keys forbidden). The table below maps names to modules
(imported lazily, as Libcloud's driver registry does); duplicate names are refused.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ValidationError

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
        "easy": "isthmus.policies.allocation.easy:EasyBackfilling",
        "ff": "isthmus.policies.allocation.first_fit:FirstFit",
        "rr": "isthmus.policies.allocation.round_robin:RoundRobin",
        "sjf": "isthmus.policies.allocation.sjf:ShortestJobFirst",
        "sjf-ideal": "isthmus.policies.allocation.sjf:ShortestJobFirstIdeal",
        "hsdf": "isthmus.policies.allocation.hsdf:HighestSlowdownFirst",
        "tags-chain": "isthmus.policies.allocation.tags:TagsChain",
        "tags-sets": "isthmus.policies.allocation.tags:TagsSets",
    },
    "provisioning": {
        "on-demand": "isthmus.policies.provisioning.on_demand:OnDemand",
        "startup": "isthmus.policies.provisioning.startup:Startup",
        "none": "isthmus.policies.provisioning.static:NoProvisioning",
    },
    "prediction": {
        "user-last-two": "isthmus.policies.prediction.runtime:UserLastTwo",
        "requested": "isthmus.policies.prediction.runtime:RequestedRuntime",
        "exact": "isthmus.policies.prediction.runtime:ExactRuntime",
    },
    "selection": {},
    "fairshare": {},
}


def families() -> tuple[str, ...]:
    """The policy families, in the order they decide in a round (non-deciding families last)."""
    return tuple(sorted(_FAMILIES, key=lambda f: (_FAMILIES[f] is None, _FAMILIES[f] or 0, f)))


def round_order(family: str) -> int | None:
    """Where `family` decides in a round (lower first); None for a family not consulted each round."""
    _family(family)
    return _FAMILIES[family]


def register_family(family: str, order: int | None) -> None:
    """Add a policy family deciding at `order` in each round (None: not consulted each round)."""
    if family in _FAMILIES:
        raise PolicyError(f"policy family {family!r} already exists")
    _FAMILIES[family] = order
    _TABLE[family] = {}


class PolicyError(ValueError):
    """An unknown policy name or invalid parameters; the message lists what is valid."""


@dataclass(frozen=True, slots=True)
class PolicyInfo:
    """What the registry knows of one policy."""

    family: str
    name: str
    cls: type[Any]
    summary: str


def register(family: str, name: str, target: str) -> None:
    """Add a policy (module:Class) under `family`/`name`; a name already taken is refused."""
    table = _family(family)
    if name in table:
        raise PolicyError(f"{family} policy {name!r} is already registered ({table[name]})")
    table[name] = target


def _family(family: str) -> dict[str, str]:
    try:
        return _TABLE[family]
    except KeyError:
        valid = ", ".join(families())
        raise PolicyError(f"unknown policy family {family!r}; expected one of: {valid}") from None


def names(family: str) -> list[str]:
    """The policy names of `family`, sorted."""
    return sorted(_family(family))


def info(family: str, name: str) -> PolicyInfo:
    """Look a policy up; PolicyError listing the valid names when `name` is unknown."""
    table = _family(family)
    target = table.get(name)
    if target is None:
        raise PolicyError(f"unknown {family} policy {name!r}; valid names: {', '.join(sorted(table))}")
    module_name, _, cls_name = target.partition(":")
    cls = getattr(importlib.import_module(module_name), cls_name)
    doc = (cls.__doc__ or "").strip().splitlines()
    return PolicyInfo(family, name, cls, doc[0] if doc else "")


def params(family: str, name: str, values: Mapping[str, Any] | None = None) -> BaseModel:
    """Validate `values` against the policy's Params model; PolicyError naming the bad field."""
    cls = info(family, name).cls
    model: type[BaseModel] = cls.Params
    try:
        return model.model_validate(dict(values or {}))
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in err['loc']) or '(params)'}: {err['msg']}" for err in exc.errors()
        )
        fields = ", ".join(model.model_fields) or "none"
        raise PolicyError(f"{family} policy {name!r}: {problems} (parameters: {fields})") from None


def check_policy(family: str, name: str, values: Mapping[str, Any] | None = None) -> None:
    """Raise PolicyError if `name` is not a `family` policy or `values` are not its parameters."""
    params(family, name, values)


def create(family: str, name: str, values: Mapping[str, Any] | None = None) -> Any:
    """Build the policy `name` of `family` with validated parameters."""
    cls = info(family, name).cls
    return cls(params(family, name, values))
