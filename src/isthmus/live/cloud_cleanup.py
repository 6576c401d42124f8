"""`isthmus cloud cleanup`: find and terminate the instances a manager leased that its database
does not know (docs/clouds.md, "Finding and removing everything isthmus leased").

Every instance a manager leases carries its id (`MANAGER_TAG`) and its VM's key (`VM_TAG`,
``<site index>/vm<id>``). The manager's id and its VMs are in its database; an instance tagged
with the id is *unknown* when no VM of the database that is not gone claims it, by instance id
or by key (a lease whose answer was lost is claimed by its key). After a lost database,
`everything` takes every instance tagged with the id (given by hand).

The manager should be stopped: a running manager terminates its own strays every minute, and
a lease it is making while this runs is not in the database yet.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from isthmus.backends.api import CloudProvider, Instance
from isthmus.backends.errors import SiteError
from isthmus.backends.libcloud_provider import VM_TAG
from isthmus.backends.local import vm_node_key
from isthmus.model.environment import Environment
from isthmus.model.site import Site
from isthmus.store.tables import Store


@dataclass(frozen=True, slots=True)
class Stray:
    """An instance of this manager that cleanup terminates: where it was found, its VM key tag,
    the provider's state, and what happened ("terminated", "dry run" or the provider's error)."""

    site: str
    provider_id: str
    key: str
    state: str
    outcome: str = ""


def known_vms(store: Store) -> tuple[set[str], set[str]]:
    """The instance ids and VM keys of the VMs the database holds that are not gone."""
    ids: set[str] = set()
    keys: set[str] = set()
    for row in store.vm_rows(live_only=True):
        keys.add(vm_node_key(int(row["site"]), int(row["vm"])))
        if row.get("provider_id"):
            ids.add(str(row["provider_id"]))
    return ids, keys


def cleanup(
    env: Environment,
    manager_id: str,
    known: tuple[set[str], set[str]] | None,
    provider_of: Callable[[Site], Callable[[str], CloudProvider]],
    *,
    dry_run: bool = False,
) -> list[Stray]:
    """Every instance tagged with `manager_id` on the providers of `env`'s cloud sites that is
    alive and not in `known` (instance ids, VM keys; None: every instance is taken), each
    terminated unless `dry_run`. Sites on the same provider list the same instances: each is
    taken once. SiteError when a provider cannot be listed."""
    ids, keys = known if known is not None else (set(), set())
    seen: set[str] = set()
    out: list[Stray] = []
    for site in env.sites:
        if not site.is_cloud or site.provider is None:
            continue
        provider = provider_of(site)(manager_id)
        strays: list[Instance] = []
        for inst in provider.instances():
            key = inst.tags.get(VM_TAG, "")
            if inst.provider_id in seen or inst.state == "terminated":
                continue
            seen.add(inst.provider_id)
            if inst.provider_id not in ids and key not in keys:
                strays.append(inst)
        outcomes: dict[str, SiteError | None] = {}
        if strays and not dry_run:
            outcomes = provider.release([i.provider_id for i in strays])
        for inst in strays:
            err = outcomes.get(inst.provider_id)
            outcome = "dry run" if dry_run else ("terminated" if err is None else f"error: {err}")
            out.append(Stray(site.name, inst.provider_id, inst.tags.get(VM_TAG, ""), inst.state, outcome))
    return out
