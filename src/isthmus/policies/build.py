"""Building the policies an engine runs, the same way for the simulator and the live manager."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import NamedTuple, cast

from isthmus.model.environment import PolicyChoice
from isthmus.policies import registry
from isthmus.policies.api import AllocationPolicy, DecidingPolicy, ProvisioningPolicy, RuntimePredictor, capability
from isthmus.policies.provisioning.static import NoProvisioning

#: The runtime predictor of KOALA-C §III-B, used when a policy needs predictions.
DEFAULT_PREDICTOR = PolicyChoice("user-last-two")


@dataclass(frozen=True)
class PolicySet:
    """The policies of one engine: allocation, provisioning, the runtime predictor if one is
    used, and policies of other deciding families (selection, fair share, ...) by family."""

    allocation: AllocationPolicy
    provisioning: ProvisioningPolicy
    predictor: RuntimePredictor | None = None
    others: Mapping[str, DecidingPolicy] = field(default_factory=dict)

    @property
    def deciders(self) -> tuple[DecidingPolicy, ...]:
        """The policies consulted each round, in their families' round order; last a predictor
        that watches the rounds (one with a `decide`, e.g. `knn`: it records the completions it
        predicts from and decides nothing), after the round's starts so that it sees them."""
        by_family: dict[str, DecidingPolicy] = {
            "allocation": self.allocation,
            "provisioning": self.provisioning,
            **self.others,
        }
        ordered = [f for f in registry.families() if f in by_family and registry.round_order(f) is not None]
        watching = (cast(DecidingPolicy, self.predictor),) if hasattr(self.predictor, "decide") else ()
        return tuple(by_family[f] for f in ordered) + watching


def build_policies(
    allocation: PolicyChoice,
    provisioning: PolicyChoice,
    predictor: PolicyChoice | None = DEFAULT_PREDICTOR,
    others: Mapping[str, PolicyChoice] | None = None,
    *,
    true_runtimes_known: bool = True,
) -> PolicySet:
    """Create the named policies with validated parameters (PolicyError otherwise).

    A predictor is created only for an allocation policy that uses predictions (SJF, HSDF),
    so runs of other policies do not pay for predicting. The policy's own `predictor`
    parameter (`sjf:predictor=requested`) wins over `predictor` (the environment's
    ``[policies] predictor``, else `DEFAULT_PREDICTOR`); `predictor=None` means no predictor
    whatever the policy asks (runs whose predictions are never read). Where real runtimes are unknown (a
    live manager: `true_runtimes_known=False`), a policy or predictor that reads them
    (SJF-ideal, the exact predictor) is refused rather than silently fed estimates.
    """
    alloc: AllocationPolicy = registry.create("allocation", allocation.name, allocation.params)
    prov: ProvisioningPolicy = registry.create("provisioning", provisioning.name, provisioning.params)
    pred: RuntimePredictor | None = None
    if predictor is not None and alloc.uses_prediction:
        chosen = predictor_of(alloc, predictor)
        pred = registry.create("prediction", chosen.name, chosen.params)
    if not true_runtimes_known:
        for family, policy in (("allocation", alloc), ("prediction", pred)):
            if policy is not None and policy.needs_true_runtimes:
                raise registry.PolicyError(
                    f"{family} policy {policy.name!r} needs every job's actual runtime, which is known only in "
                    "simulation; a live manager cannot use it (choose e.g. 'sjf' with the 'user-last-two' predictor)"
                )
    built: dict[str, DecidingPolicy] = {}
    for family, choice in (others or {}).items():
        if registry.round_order(family) is None or family in ("allocation", "provisioning"):
            raise registry.PolicyError(
                f"{family!r} is not a family of policies consulted each round besides allocation and provisioning"
            )
        built[family] = policy = registry.create(family, choice.name, choice.params)
        problem = pairing_problem(policy, prov)
        if problem is not None:
            raise registry.PolicyError(
                f"{family} policy {problem.fairshare!r} leases and releases the clouds' VMs itself; it runs with "
                f"provisioning {' or '.join(repr(n) for n in problem.fits)}, not {problem.provisioning!r}"
            )
        if capability(policy, "leases_vms") and capability(prov, "lends_release_rule"):
            # the pair decides together (vm-share reads On-Demand's release rule): one policy, one round
            policy.pair(prov)
            prov = NoProvisioning()
    return PolicySet(alloc, prov, pred, built)


def predictor_of(policy: object, fallback: PolicyChoice = DEFAULT_PREDICTOR) -> PolicyChoice:
    """The runtime predictor `policy` runs with: the one its `predictor` parameter names (with
    the fallback's parameters when the fallback is that same predictor), else `fallback`."""
    named = getattr(getattr(policy, "params", None), "predictor", None)
    if named is None or named == fallback.name:
        return fallback
    return PolicyChoice(str(named))


class PairingProblem(NamedTuple):
    """A fair-share policy that leases VMs itself given with a provisioning policy it cannot run
    with, and the provisioning policies it can run with."""

    fairshare: str
    provisioning: str
    fits: tuple[str, ...]


def pairing_problem(fairshare: object, provisioning: object) -> PairingProblem | None:
    """Why a fair-share policy cannot run with a provisioning policy (each a policy or its class);
    None when it can. One that leases and releases VMs itself (`leases_vms`) runs only with a
    provisioning policy that decides nothing or lends its release rule: two policies leasing on
    the same clouds independently would undo each other."""
    if not capability(fairshare, "leases_vms"):
        return None
    if capability(provisioning, "decides_nothing") or capability(provisioning, "lends_release_rule"):
        return None
    fits = {
        *registry.with_capability("provisioning", "decides_nothing"),
        *registry.with_capability("provisioning", "lends_release_rule"),
    }
    return PairingProblem(
        str(getattr(fairshare, "name", "?")), str(getattr(provisioning, "name", "?")), tuple(sorted(fits))
    )
