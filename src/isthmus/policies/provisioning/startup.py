"""Startup provisioning."""

from __future__ import annotations

from collections.abc import Iterable
from typing import ClassVar

from isthmus.decisions import Decision
from isthmus.decisions.lease import LeaseVms
from isthmus.policies.api import NoParams, View


class Startup:
    """Startup: lease every VM a cloud allows when the system starts; never release.

    Dissertation §6.2 (Table 6.1, policy 1): no delay waiting for VMs, but they are paid for
    whether jobs arrive or not. The baseline that replicates physical sites.
    """

    name: ClassVar[str] = "startup"
    seed: ClassVar[str] = "Villegas dissertation §6.2 (Table 6.1, policy 1)"
    Params = NoParams

    def __init__(self, params: NoParams | None = None) -> None:
        self.params = params

    def decide(self, view: View) -> Iterable[Decision]:
        """Lease up to the maximum on every cloud site that is short of it."""
        out: list[Decision] = []
        for s in view.sites:
            cloud = view.cloud(s.index)
            if cloud is None:
                continue
            missing = cloud.site.max_vms - cloud.leased
            if missing > 0:
                out.append(LeaseVms(s.index, missing, by=self.name))
        return out
