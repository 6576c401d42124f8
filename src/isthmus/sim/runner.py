"""Run one environment, workload and set of policies on the simulated clock."""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from operator import attrgetter
from typing import TYPE_CHECKING, cast

from isthmus.backends.simulated import SimCloud, SimCluster
from isthmus.engine.backend import SiteBackend
from isthmus.engine.bags import BagSettings
from isthmus.engine.budgets import cap_rows
from isthmus.engine.build import FROM_ENVIRONMENT, PolicyChoices, build_engine
from isthmus.engine.clock import PRIO_ARRIVAL_FIRST, PRIO_SUBMIT, Schedule, SimClock
from isthmus.engine.engine import BackendFactory
from isthmus.model.environment import Environment, PolicyChoice
from isthmus.model.events import EventLog
from isthmus.model.job import Job, JobKind
from isthmus.model.jobtable import JobTable
from isthmus.policies import registry
from isthmus.policies.build import DEFAULT_PREDICTOR, predictor_of

if TYPE_CHECKING:
    from isthmus.policies.api import FairSharePolicy

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
    #: the workload by id (built on lookup when the jobs were a JobTable)
    jobs: Mapping[int, Job]
    unfinished: dict[int, str] = field(default_factory=dict)
    rounds: int = 0
    rejected_decisions: int = 0
    #: refused (and held) decisions per status code label, e.g. {'no capacity': 3}
    refusals: dict[str, int] = field(default_factory=dict)
    wall_seconds: float = 0.0
    end_time: float = 0.0
    #: the bags of tasks simulated beside the jobs, by id (not in `jobs`: rigid metrics leave them out)
    bags: dict[int, Job] = field(default_factory=dict)
    #: the fair-share policy that grew and shrank them (None without bags)
    fairshare: PolicyChoice | None = None
    #: each budget cap at the end (isthmus.engine.budgets.cap_rows): spent, committed, left,
    #: charged by period, leases refused and VMs released
    budgets: list[dict[str, object]] = field(default_factory=list)


_submit_time: Callable[[Job], float] = attrgetter("submit")
"""A job's submit time (a C-level getter: the arrival feed reads it once per job)."""


def build_backends(env: Environment, schedule: Schedule) -> list[SiteBackend]:
    """Simulated backends for every site of `env`, by index, scheduling their events with `schedule`."""
    backends: list[SiteBackend] = []
    for i, site in enumerate(env.sites):
        cls = SimCloud if site.is_cloud else SimCluster
        backends.append(cls(i, site, schedule))
    return backends


def simulated_backends(env: Environment) -> BackendFactory:
    """The factory of `env`'s simulated backends an engine calls with its scheduling function."""
    return lambda schedule: build_backends(env, schedule)


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
    enforce_walltime: bool = False,
    progress: Callable[[int], None] | None = None,
    clock: SimClock | None = None,
    rounds: str = "batch",
    bags: Sequence[Job] = (),
    fairshare: str | PolicyChoice | None = None,
    bag_settings: BagSettings | None = None,
) -> SimulationResult:
    """Simulate `jobs` (sorted by submit time) on `env` with the given policies.

    Policies default to the environment's; `round_interval` defaults to the environment's
    (None: event-triggered rounds). The predictor is used only by policies that need one.
    `budget` caps the charged cost of cloud leases ($): leases it cannot pay are refused and a
    paid VM whose next billing increment it cannot pay is released at the boundary.
    With `enforce_walltime`, a run that reaches its job's requested runtime is killed and the
    job ends TIMEOUT, as the live manager does (off by default: a trace's runtimes are what its
    system allowed, some past the request).
    `progress` is called with the number of jobs submitted so far, now and then.
    The run is driven by `clock` (a new simulated clock by default) through its `run()`.
    `rounds` is the same-instant rule: "batch" (completions, arrivals, then one round) or
    "per-event" (arrivals first, a round after each event; needs event-triggered rounds).
    `fairshare` names a fair-share policy (default: the environment's, if any).
    `bags` are bags of tasks (malleable jobs) arriving at their submit times beside `jobs`, grown
    and shrunk by a fair-share policy that shares bags (required with bags), with the launchers'
    preemption time and task pull latency of `bag_settings` (isthmus.engine.bags).
    """
    for bag in bags:
        if bag.kind is not JobKind.MALLEABLE:
            raise ValueError(f"job {bag.id} among the bags is not a bag of tasks (kind {bag.kind})")
    choices = PolicyChoices.of(
        env, allocation=allocation, provisioning=provisioning, predictor=predictor, fairshare=fairshare
    )
    alloc, prov, pred = choices.allocation, choices.provisioning, choices.predictor
    fair = choices.others.get("fairshare")
    clock = clock if clock is not None else SimClock()
    engine = build_engine(
        env,
        choices,
        clock=clock,
        backends=simulated_backends(env),
        round_interval=FROM_ENVIRONMENT if round_interval is _UNSET else cast("float | None", round_interval),
        check_purity=check_purity,
        budget=budget,
        enforce_walltime=enforce_walltime,
        rounds=rounds,
        bag_settings=bag_settings,
    )
    policies = engine.policies
    sharing = cast("FairSharePolicy | None", policies.others.get("fairshare"))  # the family's protocol
    shares = sharing.shares if sharing is not None else None
    if bags and shares != "bags":
        growing = " or ".join(repr(n) for n in registry.with_capability("fairshare", "shares", "bags"))
        raise ValueError(f"bags of tasks need a fair-share policy that grows them ({growing})")
    if shares == "bags" and not bags:
        assert fair is not None
        raise ValueError(f"fair-share policy {fair.name!r} given without any bag of tasks to share processors among")
    arrivals = sorted([*jobs, *bags], key=_submit_time) if bags else jobs
    t0 = time.perf_counter()
    if rounds == "per-event":  # arrivals before completions at equal times
        clock.feed(arrivals, _submit_time, engine.submit_then_round, PRIO_ARRIVAL_FIRST)
    else:
        clock.feed(arrivals, _submit_time, engine.submit, PRIO_SUBMIT)
    clock.run(until, engine.idle, progress)
    n = len(arrivals)
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
        predictor=predictor_of(policies.allocation, pred) if policies.predictor is not None and pred else None,
        log=engine.log,
        jobs=jobs.by_id() if isinstance(jobs, JobTable) else {j.id: j for j in jobs},
        unfinished=unfinished,
        rounds=engine.rounds,
        rejected_decisions=engine.rejected_decisions,
        refusals={code.label: n for code, n in sorted(engine.refusals.items())},
        wall_seconds=wall,
        end_time=clock.now,
        bags={b.id: b for b in bags},
        fairshare=fair,
        budgets=cap_rows(engine.ledger, [s.name for s in env.sites], clock.now),
    )
    return result
