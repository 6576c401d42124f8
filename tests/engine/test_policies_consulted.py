"""Which policies the engine consults each round: not one that declares it decides nothing."""

from __future__ import annotations

import pytest

from helpers import clusters, job
from isthmus.policies.provisioning.static import NoProvisioning
from isthmus.sim.harness import Harness
from isthmus.sim.runner import simulate


def test_no_provisioning_is_never_consulted_and_would_decide_nothing() -> None:
    calls: list[float] = []
    original = NoProvisioning.decide

    def decide(self: NoProvisioning, view: object) -> object:
        calls.append(0.0)
        return original(self, view)  # type: ignore[arg-type]

    jobs = [job(1, 0, 4, 10), job(2, 1, 2, 5), job(3, 2, 2, 5)]
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(NoProvisioning, "decide", decide)
        result = simulate(clusters(4), jobs, "fcfs", "none")
    assert result.rounds > 0 and calls == []
    assert [e.job for e in result.log if e.kind.name == "START"] == [1, 2, 3]
    # what it would answer in a state with queued jobs and free processors
    h = Harness(clusters(4), "fcfs")
    h.queue(job(4, 0, 2, 10))
    assert list(NoProvisioning().decide(h.view)) == []
