"""Converters between the validated models and the frozen `Environment`, both ways.

`spec_to_environment` builds the `Environment` a validated `EnvironmentSpec` describes;
`environment_to_dict` writes an `Environment` back as the normalized file form (plain dicts,
lists, strings and numbers) that validates to an equal `Environment`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

from isthmus.config.models import CLOUD_ONLY_KEYS, EnvironmentSpec, PolicySpec
from isthmus.model.budget import BudgetCap
from isthmus.model.cloud import ProviderSettings
from isthmus.model.environment import Environment, PolicyChoice, UserAccounts
from isthmus.model.peers import FederationSettings, PeerRole, PeerSettings
from isthmus.model.site import LrmSettings, Site, SiteKind, SiteSet
from isthmus.model.vmtypes import InstanceType, VmImage

__all__ = ["environment_to_dict", "spec_to_environment"]


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
                    driver_options=s.lrm.driver_options,
                    poll_interval=float(s.lrm.poll_interval),
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
                    boot_timeout=float(p.boot_timeout),
                    agent_command=p.agent_command,
                    driver_options=p.driver_options,
                    release_on_stop=p.release_on_stop,
                    lease_patience=None if p.lease_patience is None else float(p.lease_patience),
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
        predictor=None if spec.policies.predictor is None else _choice(spec.policies.predictor),
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
                ca_file=p.ca_file,
                insecure_http=p.insecure_http,
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
        users=None if spec.users is None else UserAccounts(spec.users.run_as, MappingProxyType(dict(spec.users.map))),
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


def _options_doc(options: Any) -> dict[str, Any]:
    """A driver's options (its options model) as file keys; those without a value left out."""
    if options is None:
        return {}
    return {k: _plain(v) for k, v in options.model_dump(exclude_none=True).items()}


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
                p = s.provider
                item["provider"] = {"driver": p.driver, "image": p.image, "instance_type": p.instance_type}
                item["provider"] |= _options_doc(p.driver_options) | {
                    "boot_timeout": _number(p.boot_timeout),
                    "agent_command": p.agent_command,
                }
                if p.release_on_stop:
                    item["provider"]["release_on_stop"] = True
                if p.lease_patience is not None:
                    item["provider"]["lease_patience"] = _number(p.lease_patience)
        else:
            item["nodes"] = s.nodes
            item["cores_per_node"] = s.cores_per_node
            if s.lrm is not None:
                shared = dataclasses.asdict(s.lrm)
                del shared["driver_options"]
                lrm = {"driver": s.lrm.driver, "mode": s.lrm.mode} | _options_doc(s.lrm.driver_options)
                lrm |= {k: v for k, v in shared.items() if v is not None and k not in lrm}
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
    if env.predictor is not None:
        doc["policies"]["predictor"] = _policy_doc(env.predictor)
    if env.peers:
        doc["peers"] = [
            {"name": p.name, "address": p.address, "role": p.role.value}
            | ({"token_env": p.token_env} if p.token_env else {"token_file": p.token_file})
            | ({"heartbeat": _number(p.heartbeat)} if p.heartbeat is not None else {})
            | ({"ca_file": p.ca_file} if p.ca_file else {})
            | ({"insecure_http": True} if p.insecure_http else {})
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
    if env.users is not None:
        doc["users"] = ({"run_as": env.users.run_as} if env.users.run_as else {}) | (
            {"map": dict(env.users.accounts)} if env.users.accounts else {}
        )
    return doc
