"""A trained agent as an allocation policy: `isthmus simulate -p gym-agent:model=PATH`, or
`allocation = {name = "gym-agent", model = "PATH"}` for the live manager.

At each round it builds the observation the environment would show (`isthmus.gym.features`,
the same view and columns) and lets the agent act: a start is counted down on paper and the
agent asked again, until it waits or nothing visible fits. As in the environment, the agent may
not wait while nothing runs and no VM boots. It reads the agent's weights file
(`isthmus.gym.agent.LinearAgent.save`) once, when the policy is built; it needs no Gymnasium.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import ClassVar

from pydantic import BaseModel, ConfigDict, Field

from isthmus.decisions import Decision
from isthmus.decisions.start import start_job
from isthmus.gym.agent import LinearAgent
from isthmus.gym.features import observe, wait_allowed
from isthmus.model.environment import Environment
from isthmus.policies.allocation.common import all_sites
from isthmus.policies.api import AllocationDefaults, View


class AgentParams(BaseModel):
    """The agent's weights file."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    model: str = Field(description="JSON weights of a trained linear agent (isthmus.gym)")


class AgentPolicy(AllocationDefaults):
    """Starts the queued jobs a trained linear agent chooses, one at a time, until it waits.

    One queue with every site; each job goes to the first site where it fits. An agent trained on
    real runtimes (`runtime = "runtime"` in its file) reads them here too: simulation only.
    """

    name: ClassVar[str] = "gym-agent"
    seed: ClassVar[str] = "none: an agent trained in isthmus.gym (docs/research.md)"
    uses_prediction: ClassVar[bool] = True
    Params = AgentParams

    def __init__(self, params: AgentParams) -> None:
        try:
            self.agent = LinearAgent.load(params.model)
        except OSError as exc:
            raise ValueError(f"cannot read the agent's model {params.model!r}: {exc}") from exc
        if self.agent.runtime == "runtime":
            object.__setattr__(self, "needs_true_runtimes", True)  # this agent reads real runtimes

    def stage_sites(self, env: Environment) -> list[tuple[int, ...]]:
        """One queue that may use every site."""
        return all_sites(env)

    def decide(self, view: View) -> Iterable[Decision]:
        """The agent's starts at this round, in the order it chose them."""
        agent = self.agent
        free = view.free_processors()
        waiting = list(view.queue(0))
        out: list[Decision] = []
        while waiting:
            obs, shown = observe(view, waiting, free, slots=agent.slots, sites=agent.sites, source=agent.runtime)
            mask = shown.mask()
            if not mask[:-1].any():
                break
            if not wait_allowed(view, bool(out)):
                mask[-1] = 0  # as in the environment: no wait on an idle pool
            action = agent.act(obs, mask)
            if action >= len(shown.entries):
                break  # the agent waits
            entry, site = shown.entries[action], shown.sites[action]
            free[site] -= entry.job.size
            out.append(start_job(entry.job.id, site, None, self.name))
            waiting.remove(entry)
        return out
