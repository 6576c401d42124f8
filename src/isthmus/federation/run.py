"""Simulate several peer managers: each with its sites, policies and workload, one clock.

`simulate_federation` builds one engine per `Manager`, connects them (every pair, each a
provider and a consumer to the other, unless `links` says otherwise), feeds each its own
arrivals and runs the shared clock until every job has ended. It returns one
`SimulationResult` per manager and one for the federation as its users see it (a merged log,
`isthmus.federation.merge`), on which every metric and report of a single run works.
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from dataclasses import dataclass

from isthmus.engine.build import PolicyChoices, build_engine
from isthmus.engine.clock import PRIO_SUBMIT, SimClock
from isthmus.engine.engine import Engine
from isthmus.federation.merge import merge_logs, merged_environment
from isthmus.federation.simulated import LatencyModel, SimFederation
from isthmus.model.environment import Environment, PolicyChoice
from isthmus.model.events import EventKind
from isthmus.model.job import Job
from isthmus.model.peers import PeerRole
from isthmus.sim.runner import SimulationResult, simulated_backends


@dataclass(frozen=True)
class Manager:
    """One peer manager of a simulated federation: its name, environment (sites, allocation
    and provisioning policies, round interval), site-selection policy (None: it keeps every
    job it receives) and the jobs submitted to it (sorted by submit time)."""

    name: str
    env: Environment
    selection: PolicyChoice | None = None
    jobs: Sequence[Job] = ()


@dataclass
class FederationResult:
    """What a federated simulation produced: each manager's result and the federation's."""

    managers: dict[str, SimulationResult]
    merged: SimulationResult
    messages: int = 0
    wall_seconds: float = 0.0
    forwarded: int = 0
    returned: int = 0


def _arrival_time(arrival: tuple[float, int, int, Job]) -> float:
    return arrival[0]


def _arrival_key(arrival: tuple[float, int, int, Job]) -> tuple[float, int, int]:
    return arrival[0], arrival[1], arrival[2]


def simulate_federation(
    managers: Sequence[Manager],
    *,
    links: Sequence[tuple[str, str, PeerRole]] | None = None,
    latency: LatencyModel | None = None,
    push_threshold: int | None = 1,
    refresh: float | None = None,
    max_hops: int = 1,
    until: float = math.inf,
    label: str = "",
) -> FederationResult:
    """Run `managers` as peers on one simulated clock (see the module docstring).

    `links` lists (a, b, what b is to a); default: every pair, both roles. Job ids must be
    unique over all managers (a forwarded job keeps its id).
    """
    if not managers:
        raise ValueError("a federation needs at least one manager")
    seen: set[int] = set()
    for m in managers:
        if any(b.submit < a.submit for a, b in zip(m.jobs, m.jobs[1:], strict=False)):
            raise ValueError(f"the jobs of manager {m.name!r} are not sorted by submit time")
        for j in m.jobs:
            if j.id in seen:
                raise ValueError(f"job id {j.id} is submitted twice (ids must be unique over the federation)")
            seen.add(j.id)
    clock = SimClock()
    fed = SimFederation(clock, latency=latency, push_threshold=push_threshold, refresh=refresh, max_hops=max_hops)
    engines: list[Engine] = []
    for m in managers:
        engine = build_engine(
            m.env,
            PolicyChoices.of(m.env, selection=m.selection),
            clock=clock,
            backends=simulated_backends(m.env),
            name=m.name,
        )
        fed.add(engine)
        engines.append(engine)
    pairs = (
        links
        if links is not None
        else [(a.name, b.name, PeerRole.BOTH) for i, a in enumerate(managers) for b in managers[i + 1 :]]
    )
    for a, b, role in pairs:
        fed.connect(a, b, role)
    fed.start()
    # one arrival feed for every manager (the clock's fast path), in the order separate feeds
    # would give: by time, then manager order, then each manager's own order
    arrivals = sorted(
        ((j.submit, k, i, j) for k, m in enumerate(managers) for i, j in enumerate(m.jobs)), key=_arrival_key
    )
    if arrivals:
        submit = [e.submit for e in engines]
        clock.feed(arrivals, _arrival_time, lambda a: submit[a[1]](a[3]), PRIO_SUBMIT)
    t0 = time.perf_counter()
    clock.run(until, fed.idle)
    wall = time.perf_counter() - t0

    results: dict[str, SimulationResult] = {}
    all_jobs = {j.id: j for m in managers for j in m.jobs}
    for m, engine in zip(managers, engines, strict=True):
        unfinished = {job_id: engine.why(job_id) for job_id in engine.entries}
        engine.log.reasons.update(unfinished)
        results[m.name] = SimulationResult(
            env=m.env,
            label=f"{m.name}",
            allocation=m.env.allocation,
            provisioning=m.env.provisioning,
            predictor=None,
            log=engine.log,
            jobs=all_jobs,
            unfinished=unfinished,
            rounds=engine.rounds,
            rejected_decisions=engine.rejected_decisions,
            refusals={code.label: n for code, n in sorted(engine.refusals.items())},
            wall_seconds=wall,
            end_time=clock.now,
        )
    parts = [(m.name, m.env) for m in managers]
    log = merge_logs([(m.name, m.env, e.log) for m, e in zip(managers, engines, strict=True)])
    merged = SimulationResult(
        env=merged_environment(parts),
        label=label or (managers[0].selection.name if managers[0].selection else "local"),
        allocation=managers[0].env.allocation,
        provisioning=managers[0].env.provisioning,
        predictor=None,
        log=log,
        jobs=all_jobs,
        unfinished={k: v for r in results.values() for k, v in r.unfinished.items()},
        rounds=sum(e.rounds for e in engines),
        rejected_decisions=sum(e.rejected_decisions for e in engines),
        wall_seconds=wall,
        end_time=clock.now,
    )
    kinds = log.columns()["kind"]
    return FederationResult(
        managers=results,
        merged=merged,
        messages=fed.messages,
        wall_seconds=wall,
        forwarded=sum(1 for k in kinds if k == EventKind.FORWARD),
        returned=sum(1 for k in kinds if k == EventKind.RETURN),
    )
