"""The allocation policy an environment puts in its engine: it hands each round to the agent.

The engine runs its rounds as usual and asks this policy, as it asks any allocation policy,
with its read-only view. The policy returns the decision the agent made at the previous
decision point (if any) and marks that it was asked; the environment (`isthmus.gym.env`) then
reads the same view to build the next observation. One round is therefore one decision point,
and every start the agent makes is validated and applied by the engine like any policy's.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import ClassVar

from isthmus.decisions import Decision
from isthmus.model.environment import Environment
from isthmus.policies import registry
from isthmus.policies.allocation.common import all_sites
from isthmus.policies.api import AllocationDefaults, NoParams, View

NAME = "gym-seat"
"""The seat's name in the registry, while an environment builds its engine (`seated`)."""


class Seat(AllocationDefaults):
    """Returns the agent's pending decisions when the engine asks, and records that it was asked.

    One queue with every site; runtime predictions on (the observation's runtime column reads
    each queued job's estimate).
    """

    name: ClassVar[str] = NAME
    seed: ClassVar[str] = "none: the decisions of an agent trained in isthmus.gym"
    uses_prediction: ClassVar[bool] = True
    Params = NoParams

    def __init__(self, params: NoParams | None = None) -> None:
        #: the decisions the next round returns (set by the environment)
        self.pending: list[Decision] = []
        #: True once a round asked this policy (reset by the environment)
        self.asked = False

    def stage_sites(self, env: Environment) -> list[tuple[int, ...]]:
        """One queue that may use every site."""
        return all_sites(env)

    def decide(self, view: View) -> Iterable[Decision]:
        """The agent's pending decisions (none when it waits)."""
        self.asked = True
        out, self.pending = self.pending, []
        return out


@contextmanager
def seated() -> Iterator[None]:
    """The seat registered as an allocation policy while the block runs (an engine is built by
    policy names), and gone after it: `isthmus policies` and the registry's other readers never
    list it."""
    registry.register("allocation", NAME, f"{__name__}:Seat")
    try:
        yield
    finally:
        registry.unregister("allocation", NAME)
