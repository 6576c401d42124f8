"""An environment: the sites, the sets of sites and the chosen policies."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from isthmus.model.budget import BudgetCap
from isthmus.model.peers import FederationSettings, PeerSettings
from isthmus.model.site import Site, SiteSet

_EMPTY: Mapping[str, Any] = MappingProxyType({})


@dataclass(frozen=True, slots=True)
class PolicyChoice:
    """A policy named in a registry, with its parameters."""

    name: str
    params: Mapping[str, Any] = field(default_factory=lambda: _EMPTY)


@dataclass(frozen=True, slots=True)
class UserAccounts:
    """The Unix accounts jobs run as (the environment file's ``[users]``): `accounts` maps an
    isthmus user to its account, `run_as` is the account of every other user (None: they have
    none and cannot run jobs)."""

    run_as: str | None = None
    accounts: Mapping[str, str] = field(default_factory=lambda: _EMPTY)

    def account_of(self, user: str) -> str | None:
        """The Unix account the jobs of isthmus user `user` run as, or None when it has none."""
        return self.accounts.get(user, self.run_as)


@dataclass(frozen=True, slots=True)
class Environment:
    """Sites, sets of sites and policies: everything a run needs besides the workload.

    `sets` are the sets of sites that set-aware policies (TAGS-sets) read; other policies use
    all sites in the order given and ignore them. `allocation` and
    `provisioning` name the default policies; a command line may override them. `fairshare`
    names an optional fair-share policy (vm-share: per-user VM shares, Cloud Scheduler §3.3).
    `round_interval` is the scheduling period in seconds (KOALA-C: 30 s); None makes rounds
    event-triggered (a round after every batch of simultaneous events). `budgets` are hard caps
    on the charged cost of cloud leases (isthmus.model.budget), in simulation and live alike.
    `peers`, `federation` and `selection` configure a live manager's peer managers. `users`
    maps isthmus users to the Unix accounts their jobs run as (privilege separation).
    """

    name: str
    sites: tuple[Site, ...]
    sets: tuple[SiteSet, ...] = ()
    allocation: PolicyChoice = field(default_factory=lambda: PolicyChoice("ff"))
    provisioning: PolicyChoice = field(default_factory=lambda: PolicyChoice("on-demand"))
    round_interval: float | None = 30.0
    description: str = ""
    budgets: tuple[BudgetCap, ...] = ()
    fairshare: PolicyChoice | None = None
    #: peer managers (live federation, docs/federation.md) and the site-selection policy that
    #: forwards jobs to them (None: jobs stay here)
    peers: tuple[PeerSettings, ...] = ()
    federation: FederationSettings = field(default_factory=FederationSettings)
    selection: PolicyChoice | None = None
    #: the runtime predictor of the policies that use one (SJF, HSDF) unless a policy names its
    #: own (`sjf:predictor=...`); None: the default, user-last-two
    predictor: PolicyChoice | None = None
    #: the Unix accounts jobs run as (None: as the pilot's own user)
    users: UserAccounts | None = None

    def site(self, name: str) -> Site:
        """Return the site called `name`; KeyError naming the known sites otherwise."""
        for s in self.sites:
            if s.name == name:
                return s
        known = ", ".join(s.name for s in self.sites)
        raise KeyError(f"no site {name!r} in environment {self.name!r} (sites: {known})")

    @property
    def max_processors(self) -> int:
        """The largest number of processors any single site can ever offer."""
        return max((s.max_processors for s in self.sites), default=0)


def policy_label(choice: PolicyChoice) -> str:
    """A short unique label for a policy with parameters, usable in file names."""
    if not choice.params:
        return choice.name
    parts = []
    for k, v in choice.params.items():
        text = ";".join(map(str, v)) if isinstance(v, list | tuple) else str(v)
        parts.append(f"{k}={text}")
    return f"{choice.name}[{','.join(parts)}]"
