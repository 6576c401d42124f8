"""Rules across keys and items of an environment, checked on validated models.

A cluster needs nodes and no cloud-only keys, a cloud ``max_vms`` and no ``nodes``,
``min_vms <= max_vms``; site, set, budget and peer names are unique; sets and budgets name known
sites; policies are known to `isthmus.policies.registry` with valid parameters.

When the document as a whole does not validate, each item (a site, a set, the policies, ...) is
validated on its own (`Parts.of_document`) and the rules run on the items that did: one site's
type error does not hide another site's missing nodes. Rules that need every site (set members,
the sites a budget covers) wait until every site is valid.
"""

from __future__ import annotations

import difflib
import typing
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from pydantic import ValidationError

from isthmus.config.errors import ConfigError, Problem, format_path, show_value
from isthmus.config.models import (
    CLOUD_ONLY_KEYS,
    BudgetSpec,
    EnvironmentSpec,
    ImageSpec,
    InstanceTypeSpec,
    Loc,
    PeerSpec,
    PoliciesSpec,
    PolicySpec,
    SiteSetSpec,
    SiteSpec,
    Spec,
)
from isthmus.model.environment import Environment

__all__ = ["Parts", "PolicyChecker", "check", "check_structure", "registry_check"]

PolicyChecker = Callable[[str, str, Mapping[str, Any]], None]
"""Checks a policy's name and parameters for a family; raises ValueError (PolicyError) if invalid."""

S = TypeVar("S", bound=Spec)


def registry_check(family: str, name: str, params: Mapping[str, Any]) -> None:
    """The policy registry's check of a policy's parameters."""
    from isthmus.policies import registry

    registry.check_policy(family, name, params)


@dataclass(frozen=True)
class Parts:
    """The validated items of a document: an item is None where it did not validate on its own;
    a list is None where the document has no such list (or something else in its place)."""

    name: str | None
    sites: list[SiteSpec | None] | None
    sets: list[SiteSetSpec | None]
    budgets: list[BudgetSpec | None]
    peers: list[PeerSpec | None]
    policies: PoliciesSpec | None

    @classmethod
    def of_spec(cls, spec: EnvironmentSpec) -> Parts:
        """The items of a document that validated as a whole."""
        return cls(spec.name, list(spec.sites), list(spec.sets), list(spec.budgets), list(spec.peers), spec.policies)

    @classmethod
    def of_document(cls, data: Mapping[str, Any]) -> Parts:
        """Each item of `data` validated on its own (the document as a whole did not validate)."""
        name = data.get("name")
        policies = lenient(PoliciesSpec, data.get("policies", {}))
        return cls(
            name if isinstance(name, str) else None,
            _valid_items(SiteSpec, data.get("sites")),
            _valid_items(SiteSetSpec, data.get("sets")) or [],
            _valid_items(BudgetSpec, data.get("budgets")) or [],
            _valid_items(PeerSpec, data.get("peers")) or [],
            policies,
        )


def lenient(model: type[S], data: Any) -> S | None:
    """`data` validated by `model`; when it does not validate, an instance holding the keys that
    do (each validated alone by the model's own validators; the items of a list of tables
    likewise), the others named in its `invalid_keys` and left at their defaults (None for a
    required key). None when `data` is not a table or lacks a required key. Its problems are
    pydantic's to report: this only lets the rules across keys run on what is valid."""
    try:
        return model.model_validate(data)
    except ValidationError:
        pass
    if not isinstance(data, Mapping):
        return None
    obj = typing.cast("S", model.model_construct())
    validator = model.__pydantic_validator__
    given: set[str] = set()
    invalid: set[str] = set()
    for key, value in data.items():
        if not isinstance(key, str) or key not in model.model_fields:
            continue
        try:
            validator.validate_assignment(obj, key, value)
            given.add(key)
            continue
        except ValidationError as exc:
            if all(not e["loc"] for e in exc.errors()):
                # the value is valid; a rule of the whole table (run on each assignment) is not yet
                obj.__dict__[key] = value
                given.add(key)
                continue
        inner = _items_model(model.model_fields[key].annotation)
        items = [lenient(inner, item) for item in value] if inner is not None and isinstance(value, list) else None
        if items is not None and all(item is not None for item in items):
            obj.__dict__[key] = items
        else:
            invalid.add(key)
    for key, field in model.model_fields.items():
        if field.is_required() and key not in given:
            if key not in invalid:
                return None
            obj.__dict__[key] = None
    obj.__pydantic_fields_set__ = given | invalid
    obj._invalid = frozenset(invalid)
    return obj


def _items_model(annotation: Any) -> type[Spec] | None:
    """The table model of a field holding a list of tables (``instance_types``), if it is one."""
    for arg in typing.get_args(annotation):
        if typing.get_origin(arg) is list:
            (item,) = typing.get_args(arg)
            if isinstance(item, type) and issubclass(item, Spec):
                return item
    return None


def _valid_items(model: type[S], value: Any) -> list[S | None] | None:
    return [lenient(model, item) for item in value] if isinstance(value, list) else None


def check(parts: Parts, check_policy: PolicyChecker) -> list[tuple[Loc, str]]:
    """Every rule across keys and items broken by `parts`, as (key path, message)."""
    out: list[tuple[Loc, str]] = []
    sites = parts.sites
    if sites is not None and not sites:
        out.append((("sites",), "an environment needs at least one site"))
    valid_sites = [(i, s) for i, s in enumerate(sites or []) if s is not None]
    for i, site in valid_sites:
        out.extend(_site_problems(("sites", i), site))
    out.extend(_repeated_names("sites", "site name", [(i, s.name) for i, s in valid_sites]))
    # references to sites are checked once every site is valid (a broken one still has a name)
    complete = sites is not None and all(s is not None and "name" not in s.invalid_keys for s in sites)
    names = [s.name for _, s in valid_sites] if complete else None
    clouds = {s.name for _, s in valid_sites if s.kind == "cloud"}

    budgets = [(j, b) for j, b in enumerate(parts.budgets) if b is not None]
    out.extend(_repeated_names("budgets", "budget name", [(j, b.name) for j, b in budgets]))
    if names is not None:
        for j, budget in budgets:
            for k, s in enumerate(budget.sites):
                if s not in clouds:
                    what = "a cluster site" if s in names else "no site of this environment"
                    out.append((("budgets", j, "sites", k), f"{s!r} is {what}; a budget covers cloud sites"))

    sets = [(j, st) for j, st in enumerate(parts.sets) if st is not None]
    out.extend(_repeated_names("sets", "set name", [(j, st.name) for j, st in sets]))
    for j, site_set in sets:
        out.extend(_set_problems(j, site_set, names))

    peers = [(j, p) for j, p in enumerate(parts.peers) if p is not None]
    for j, peer in peers:
        if peer.name == parts.name:
            out.append(
                (("peers", j, "name"), f"{peer.name!r} is this manager's own name: a manager is not its own peer")
            )
    out.extend(_repeated_names("peers", "peer name", [(j, p.name) for j, p in peers]))

    if parts.policies is not None:
        for family in ("allocation", "provisioning", "fairshare", "selection"):
            choice = getattr(parts.policies, family)
            if choice is not None:
                out.extend(_policy_problems(family, choice, check_policy))
        if parts.policies.predictor is not None:
            out.extend(_policy_problems("prediction", parts.policies.predictor, check_policy, key="predictor"))
        out.extend(_fairshare_pairing(parts.policies))
    return out


def _repeated_names(key: str, label: str, named: Sequence[tuple[int, str | None]]) -> list[tuple[Loc, str]]:
    out: list[tuple[Loc, str]] = []
    first: dict[str, int] = {}
    for i, name in named:
        if name is None:  # invalid: reported by pydantic
            continue
        if name in first:
            out.append(((key, i, "name"), f"duplicate {label} {name!r} (also {key}[{first[name]}])"))
        else:
            first[name] = i
    return out


def _set_problems(j: int, site_set: SiteSetSpec, names: list[str] | None) -> list[tuple[Loc, str]]:
    out: list[tuple[Loc, str]] = []
    if "sites" in site_set.invalid_keys:
        return out
    if not site_set.sites:
        out.append((("sets", j, "sites"), "a set needs at least one site"))
    seen: dict[str, int] = {}
    for k, member in enumerate(site_set.sites):
        if member in seen:
            out.append(
                (("sets", j, "sites", k), f"site {member!r} is listed twice in this set (also sites[{seen[member]}])")
            )
            continue
        seen[member] = k
        if names is not None and member not in names:
            known = ", ".join(dict.fromkeys(names)) or "none"
            message = f"unknown site {member!r}; sites: {known}"
            close = difflib.get_close_matches(member, names, n=1)
            if close:
                message += f"; did you mean {close[0]!r}?"
            out.append((("sets", j, "sites", k), message))
    return out


def _given(site: SiteSpec) -> set[str]:
    """Keys the file gives a value (not null) for, valid or not."""
    return {key for key in site.model_fields_set if getattr(site, key) is not None} | site.invalid_keys


def _site_problems(at: Loc, site: SiteSpec) -> list[tuple[Loc, str]]:
    """Rules across the keys of one site."""
    out: list[tuple[Loc, str]] = []
    given = _given(site)
    kind = None if "kind" in site.invalid_keys else site.kind  # an unknown kind: no kind's rules
    if kind == "cluster":
        if "nodes" not in given:
            out.append(((*at, "nodes"), "a cluster site needs nodes (an integer >= 1)"))
        elif site.nodes == 0:
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
        if "provider" in given:
            out.append(((*at, "provider"), "a cloud provider applies only to cloud sites"))
    elif kind == "cloud":
        if "lrm" in given:
            out.append(((*at, "lrm"), "a batch system (lrm) applies only to cluster sites"))
        if "nodes" in given:
            out.append(((*at, "nodes"), "a cloud site has no fixed nodes; give max_vms (and min_vms) instead"))
        if "max_vms" not in given:
            out.append(((*at, "max_vms"), "a cloud site needs max_vms (an integer >= 1)"))
        elif site.max_vms == 0:
            out.append(((*at, "max_vms"), "a cloud site needs max_vms >= 1, got 0"))
        elif site.max_vms is not None and site.min_vms is not None and site.max_vms < site.min_vms:
            out.append(((*at, "min_vms"), f"min_vms ({site.min_vms}) must not exceed max_vms ({site.max_vms})"))
        out.extend(_vm_offer_problems(at, site, given))
    start, end = site.available_from, site.available_until
    if start is not None and end is not None and end <= start:
        out.append(
            (
                (*at, "available_until"),
                f"must be later than available_from ({show_value(_tidy(start))}), got {show_value(_tidy(end))}",
            )
        )
    return out


def _tidy(value: float) -> int | float:
    return int(value) if float(value).is_integer() else value


def _vm_offer_problems(at: Loc, site: SiteSpec, given: set[str]) -> list[tuple[Loc, str]]:
    """Rules on a cloud's instance types, images and provider: unique names, no site-wide
    cores_per_node or price_per_hour beside types, a provider naming its instance type and
    image unless the site lists them."""
    out: list[tuple[Loc, str]] = []
    offers: tuple[tuple[str, str, Sequence[InstanceTypeSpec | ImageSpec] | None], ...] = (
        ("instance_types", "instance type", site.instance_types),
        ("images", "image", site.images),
    )
    for key, label, items in offers:
        if items is None:
            continue
        if not items:
            out.append(((*at, key), f"an empty list; give at least one {label} or leave {key} out"))
        named = [(j, item.name) for j, item in enumerate(items)]
        out.extend(((*at, *loc), message) for loc, message in _repeated_names(key, label, named))
    types = site.instance_types
    if types:
        for key in ("cores_per_node", "price_per_hour"):
            if key in given:
                out.append(
                    (
                        (*at, key),
                        f"{key} describes a site's one VM shape; with instance_types give cores and price_per_hour "
                        "per type (the first type is the default)",
                    )
                )
    provider = site.provider
    if provider is not None and not {"instance_types", "images"} & site.invalid_keys:
        if not provider.instance_type and not types:
            out.append(((*at, "provider", "instance_type"), "needed unless the site lists instance_types"))
        if not provider.image and not site.images:
            out.append(((*at, "provider", "image"), "needed unless the site lists images"))
        if provider.instance_type and types:
            out.append(
                (
                    (*at, "provider", "instance_type"),
                    "the site lists instance_types: give each its provider_size there instead",
                )
            )
    return out


def _registry_names(family: str) -> list[str] | None:
    try:
        from isthmus.policies import registry

        return registry.names(family)
    except Exception:  # pragma: no cover - the registry itself is broken
        return None


def _fairshare_pairing(policies: PoliciesSpec) -> list[tuple[Loc, str]]:
    """A fair-share policy that leases and releases VMs itself (vm-share) runs with a provisioning
    policy that decides nothing or lends its release rule (`isthmus.policies.build.pairing_problem`)."""
    from isthmus.policies import registry
    from isthmus.policies.build import pairing_problem

    if policies.fairshare is None:
        return []
    fair, prov = policies.fairshare.name, policies.provisioning.name
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


def _policy_problems(
    family: str, choice: PolicySpec, check_policy: PolicyChecker, key: str | None = None
) -> list[tuple[Loc, str]]:
    at: Loc = ("policies", key or family)
    name_at, params_at = (at, at) if choice.written_as_name else ((*at, "name"), (*at, "params"))
    name, params = choice.name, choice.params
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


def check_structure(env: Environment, file: str | None, line_of: Callable[[Loc], int | None] | None) -> None:
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
