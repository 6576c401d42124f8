"""Run one environment, workload and set of policies on the simulated clock."""

from __future__ import annotations

import heapq
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from isthmus.engine.backend import SiteBackend
from isthmus.engine.clock import PRIO_WAKE, SimClock
from isthmus.engine.engine import Engine
from isthmus.engine.policies import DEFAULT_PREDICTOR, build_policies
from isthmus.model.environment import Environment, PolicyChoice
from isthmus.model.events import EventLog
from isthmus.model.job import Job
from isthmus.sim.backends import SimCloud, SimCluster

# Arrivals sort after completions, VM changes and wake-ups of the same instant, before the round.
PRIO_SUBMIT = PRIO_WAKE + 1

_UNSET = object()


@dataclass
class SimulationResult:
    """What a simulation produced: the event log plus what is needed to read it."""

    env: Environment
    label: str
    allocation: PolicyChoice
    provisioning: PolicyChoice
    predictor: PolicyChoice | None
    log: EventLog
    jobs: dict[int, Job]
    unfinished: dict[int, str] = field(default_factory=dict)
    rounds: int = 0
    rejected_decisions: int = 0
    wall_seconds: float = 0.0
    end_time: float = 0.0


def _choice(value: str | PolicyChoice) -> PolicyChoice:
    return value if isinstance(value, PolicyChoice) else PolicyChoice(value)


def build_backends(env: Environment, clock: SimClock) -> list[SiteBackend]:
    """Simulated backends for every site of `env`, by index."""
    backends: list[SiteBackend] = []
    for i, site in enumerate(env.sites):
        cls = SimCloud if site.is_cloud else SimCluster
        backends.append(cls(i, site, clock.at))
    return backends


def simulate(
    env: Environment,
    jobs: Sequence[Job],
    allocation: str | PolicyChoice | None = None,
    provisioning: str | PolicyChoice | None = None,
    predictor: str | PolicyChoice | None = DEFAULT_PREDICTOR,
    *,
    round_interval: float | object | None = _UNSET,
    label: str | None = None,
    check_purity: bool = False,
    until: float = math.inf,
    budget: float | None = None,
    progress: Callable[[int], None] | None = None,
) -> SimulationResult:
    """Simulate `jobs` (sorted by submit time) on `env` with the given policies.

    Policies default to the environment's; `round_interval` defaults to the environment's
    (None: event-triggered rounds). The predictor is used only by policies that need one.
    `budget` caps the charged cost of cloud leases ($): leases it cannot pay are refused and a
    paid VM whose next billing increment it cannot pay is released at the boundary.
    `progress` is called with the number of jobs submitted so far, now and then.
    """
    alloc = _choice(allocation) if allocation is not None else env.allocation
    prov = _choice(provisioning) if provisioning is not None else env.provisioning
    pred = _choice(predictor) if predictor is not None else None
    policies = build_policies(alloc, prov, pred)
    interval = env.round_interval if round_interval is _UNSET else round_interval
    assert interval is None or isinstance(interval, (int, float))

    clock = SimClock()
    engine = Engine(
        env,
        policies.allocation,
        policies.provisioning,
        policies.predictor,
        build_backends(env, clock),
        clock.at,
        round_interval=float(interval) if interval else None,
        check_purity=check_purity,
        budget=budget,
    )
    t0 = time.perf_counter()
    heap = clock.heap
    handle = engine.handle
    submit = engine.submit
    pop = heapq.heappop
    n = len(jobs)
    i = 0
    inf = math.inf
    next_submit = jobs[0].submit if n else inf
    last_submit = -inf
    step = max(1, n // 200)
    while True:
        if heap:
            top = heap[0]
            ht = top[0]
        else:
            top = None
            ht = inf
        if next_submit < ht or (next_submit == ht and top is not None and top[1] > PRIO_SUBMIT):
            if next_submit > until:
                break
            job = jobs[i]
            if next_submit < last_submit:
                raise ValueError(f"jobs are not sorted by submit time (job {job.id} at {job.submit})")
            last_submit = next_submit
            clock.now = engine.now = next_submit
            submit(job)
            i += 1
            next_submit = jobs[i].submit if i < n else inf
            if progress is not None and i % step == 0:
                progress(i)
        elif top is not None:
            if ht > until:
                break
            if engine.billing_pending == len(heap) and i >= n and not engine.entries:
                break  # only billing boundaries of idle leases remain: the workload is done
            pop(heap)
            clock.now = engine.now = ht
            handle(top[3], top[4], top[5])
        else:
            break
    wall = time.perf_counter() - t0
    if progress is not None:
        progress(n)
    unfinished = {job_id: engine.why(job_id) for job_id in engine.entries}
    engine.log.reasons.update(unfinished)
    result = SimulationResult(
        env=env,
        label=label or alloc.name,
        allocation=alloc,
        provisioning=prov,
        predictor=pred if policies.predictor is not None else None,
        log=engine.log,
        jobs={j.id: j for j in jobs},
        unfinished=unfinished,
        rounds=engine.rounds,
        rejected_decisions=engine.rejected_decisions,
        wall_seconds=wall,
        end_time=engine.now,
    )
    return result
