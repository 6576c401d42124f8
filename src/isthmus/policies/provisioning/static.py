"""No provisioning (clusters only, or clouds managed by hand)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import ClassVar

from isthmus.decisions import Decision
from isthmus.policies.api import NoParams, View


class NoProvisioning:
    """Never lease or release a VM. For environments made only of cluster sites."""

    name: ClassVar[str] = "none"
    seed: ClassVar[str] = "KOALA-C §II-B (cluster sites are always present; nothing to lease)"
    #: the engine does not consult it each round (DecidingPolicy)
    decides_nothing: ClassVar[bool] = True
    Params = NoParams

    def __init__(self, params: NoParams | None = None) -> None:
        self.params = params

    def decide(self, view: View) -> Iterable[Decision]:
        """Nothing to decide."""
        return ()
