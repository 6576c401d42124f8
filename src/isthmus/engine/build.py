"""The one way to assemble an engine: an environment, the policies chosen for it, a clock and
the site backends.

The simulator, the federated simulator, the live manager, the live manager's forecasts and the
per-policy test harness all build their engines here, so the policy families are combined and
the default runtime predictor is chosen in one place. What really differs between them is a
parameter: the clock (simulated or wall), the backends (simulated or live), whether real
runtimes are known (not in a live manager), the round interval, the budget, walltime
enforcement, the engine's name (a manager of a federation) and the launchers' settings for bags.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import Enum
from typing import Literal

from isthmus.engine.bags import BagSettings
from isthmus.engine.clock import SimClock
from isthmus.engine.engine import BackendFactory, Engine
from isthmus.model.environment import Environment, PolicyChoice
from isthmus.policies.build import DEFAULT_PREDICTOR, PolicySet, build_policies

__all__ = ["FROM_ENVIRONMENT", "FromEnvironment", "PolicyChoices", "build_engine"]


class FromEnvironment(Enum):
    """Marks a setting taken from the environment (a distinct value: None means "none")."""

    VALUE = "from the environment"


FROM_ENVIRONMENT = FromEnvironment.VALUE
"""The round interval (or other setting) of the environment the engine is built for."""


def _choice(value: str | PolicyChoice) -> PolicyChoice:
    return value if isinstance(value, PolicyChoice) else PolicyChoice(value)


@dataclass(frozen=True)
class PolicyChoices:
    """Which policies an engine runs, by name and parameters: allocation, provisioning, the
    runtime predictor (created only when the allocation policy uses predictions; None: never)
    and the policies of the other deciding families (fair share, selection, ...) by family."""

    allocation: PolicyChoice
    provisioning: PolicyChoice
    predictor: PolicyChoice | None = DEFAULT_PREDICTOR
    others: Mapping[str, PolicyChoice] = field(default_factory=dict)

    @classmethod
    def of(
        cls,
        env: Environment,
        *,
        allocation: str | PolicyChoice | None = None,
        provisioning: str | PolicyChoice | None = None,
        predictor: str | PolicyChoice | None = DEFAULT_PREDICTOR,
        fairshare: str | PolicyChoice | None = None,
        selection: str | PolicyChoice | None = None,
    ) -> PolicyChoices:
        """The policies of `env`: its allocation, provisioning and fair-share policies unless
        given, its predictor (else the default) unless another (or None) is given, and a selection policy
        only when one is given (only a manager with peers forwards jobs)."""
        others: dict[str, PolicyChoice] = {}
        fair = _choice(fairshare) if fairshare is not None else env.fairshare
        if fair is not None:
            others["fairshare"] = fair
        if selection is not None:
            others["selection"] = _choice(selection)
        if predictor is DEFAULT_PREDICTOR and env.predictor is not None:
            predictor = env.predictor  # the environment's [policies] predictor
        return cls(
            _choice(allocation) if allocation is not None else env.allocation,
            _choice(provisioning) if provisioning is not None else env.provisioning,
            _choice(predictor) if predictor is not None else None,
            others,
        )

    def build(self, *, true_runtimes_known: bool = True) -> PolicySet:
        """Create the policies (PolicyError on an unknown name, bad parameters, or, where real
        runtimes are unknown, a policy that reads them)."""
        return build_policies(
            self.allocation,
            self.provisioning,
            self.predictor,
            self.others or None,
            true_runtimes_known=true_runtimes_known,
        )


def build_engine(
    env: Environment,
    policies: PolicyChoices,
    *,
    clock: SimClock,
    backends: BackendFactory,
    true_runtimes_known: bool = True,
    round_interval: float | Literal[FromEnvironment.VALUE] | None = FROM_ENVIRONMENT,
    budget: float | None = None,
    enforce_walltime: bool = False,
    check_purity: bool = False,
    rounds: str = "batch",
    name: str | None = None,
    bag_settings: BagSettings | None = None,
) -> Engine:
    """An engine for `env` running `policies` on `clock`, its sites served by what `backends`
    builds (simulated or live backends, given the function that schedules the engine's events).

    `true_runtimes_known=False` (a live manager, or a forecast of one) refuses the policies and
    predictors that read each job's real runtime. `round_interval` is the scheduling period in
    seconds, the environment's by default; None or 0: a round after the events of each instant.
    `budget` caps the charged cost of all cloud leases ($). `enforce_walltime` kills a run at its
    job's requested runtime. `check_purity` checks that no policy changes the state it is shown.
    `rounds` is the same-instant rule ("batch" or "per-event"). `name` names the engine among
    peer managers (default: the environment's name). `bag_settings` are the launchers' settings
    for bags of tasks (default: `BagSettings()`).
    """
    interval = env.round_interval if round_interval is FROM_ENVIRONMENT else round_interval
    engine = Engine(
        env,
        policies.build(true_runtimes_known=true_runtimes_known),
        clock,
        backends,
        round_interval=float(interval) if interval else None,
        check_purity=check_purity,
        budget=budget,
        enforce_walltime=enforce_walltime,
        rounds=rounds,
    )
    if name is not None:
        engine.name = name
    if bag_settings is not None:
        engine.bags.settings = bag_settings
    return engine
