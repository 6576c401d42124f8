"""Building the policies an engine runs, the same way for the simulator and the live manager."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from isthmus.model.environment import PolicyChoice
from isthmus.policies import registry

#: The runtime predictor of KOALA-C §III-B, used when a policy needs predictions.
DEFAULT_PREDICTOR = PolicyChoice("user-last-two")


@dataclass(frozen=True)
class PolicySet:
    """The allocation and provisioning policies, and the runtime predictor if one is used."""

    allocation: Any
    provisioning: Any
    predictor: Any | None


def build_policies(
    allocation: PolicyChoice, provisioning: PolicyChoice, predictor: PolicyChoice | None = DEFAULT_PREDICTOR
) -> PolicySet:
    """Create the named policies with validated parameters (PolicyError otherwise).

    A predictor is created only for an allocation policy that uses predictions (SJF, HSDF),
    so runs of other policies do not pay for predicting.
    """
    alloc = registry.create("allocation", allocation.name, allocation.params)
    prov = registry.create("provisioning", provisioning.name, provisioning.params)
    pred = None
    if predictor is not None and getattr(alloc, "uses_prediction", False):
        pred = registry.create("prediction", predictor.name, predictor.params)
    return PolicySet(alloc, prov, pred)
