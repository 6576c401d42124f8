"""A manager whose allocation policy puts a runtime limit on first runs (for the limit test).

Registers the test policy `test-limit-ff` and then runs the normal live CLI.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import ClassVar

from pydantic import BaseModel, ConfigDict

from isthmus.model.decisions import Decision, StartJob
from isthmus.policies import registry
from isthmus.policies.allocation.common import SingleSetPolicy, first_fit, free_processors
from isthmus.policies.base import View


class LimitParams(BaseModel):
    """Limit of first runs."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    limit: float = 1.0


class LimitFirstRun(SingleSetPolicy):
    """First fit; a job's first run gets a runtime limit, later runs none."""

    name: ClassVar[str] = "test-limit-ff"
    Params = LimitParams  # type: ignore[assignment]

    def decide(self, view: View) -> Iterable[Decision]:
        order = view.stage_sites(0)
        free = free_processors(view)
        out: list[Decision] = []
        for e in view.queue(0):
            i = first_fit(free, order, e.job.size)
            if i >= 0:
                free[i] -= e.job.size
                limit = self.params.limit if e.restarts == 0 else None  # type: ignore[union-attr]
                out.append(StartJob(e.job.id, i, limit=limit, by=self.name))
        return out


if "test-limit-ff" not in registry.names("allocation"):
    registry.register("allocation", "test-limit-ff", "limit_server:LimitFirstRun")

if __name__ == "__main__":
    from isthmus.live.__main__ import app

    app()
