"""Cluster holds: processors bags give back for a waiting rigid job are held for it (engine
side, isthmus.engine.bags), hand-computed: what the engine refuses on them, when a hold ends
(its job cancelled, started on another site), and what the log records (HOLD)."""

from __future__ import annotations

import math

from helpers import clusters, job
from isthmus.decisions.grow import GrowBag
from isthmus.decisions.start import StartJob
from isthmus.engine.bags import BagSettings
from isthmus.engine.clock import PRIO_SUBMIT, SimClock
from isthmus.engine.engine import Engine
from isthmus.model.environment import PolicyChoice
from isthmus.model.events import EventKind
from isthmus.model.job import Job, JobKind, PriorityClass
from isthmus.model.status import StatusCode
from isthmus.policies.build import DEFAULT_PREDICTOR, build_policies
from isthmus.sim.runner import build_backends, simulate


def a_bag(jid: int, tasks: int, runtime: float) -> Job:
    return Job(jid, 0.0, 1, runtime, kind=JobKind.MALLEABLE, tasks=tasks, priority=PriorityClass.SUPER_LOW)


def holds(log) -> list[tuple[float, int, int, int]]:
    return [(e.time, e.job, e.site, int(e.value)) for e in log if e.kind is EventKind.HOLD]


def test_the_engine_refuses_other_jobs_and_growth_on_held_processors_until_the_job_leaves() -> None:
    # 8 processors, FF and SEP, P = 10 s. Job 1 (2 processors, 8 s) beside a bag holding 6; at 8
    # job 1 ends and job 2 (4 processors) arrives: the bag gives back 2 for it and the 2 free are
    # held for it at once. Job 3 (2 processors) cannot start on them, nor can the bag grow there;
    # once job 2 is cancelled its hold ends (HOLD 0) and job 3 may start.
    clock = SimClock()
    env = clusters(8)
    policies = build_policies(
        PolicyChoice("ff"), PolicyChoice("none"), DEFAULT_PREDICTOR, {"fairshare": PolicyChoice("sep")}
    )
    engine = Engine(env, policies, clock, lambda schedule: build_backends(env, schedule))
    engine.bags.settings = BagSettings(preemption_time=10.0)
    clock.feed(
        [job(1, 0, 2, 8), a_bag(10, 100, 100.0), job(2, 8, 4, 50)], lambda j: j.submit, engine.submit, PRIO_SUBMIT
    )
    clock.run(until=8.0)
    backend = engine.backends[0]
    assert (backend.free, backend.reserved_cores, backend.holds) == (2, 2, {2: 2})
    assert engine.view.free_processors() == [0]
    assert engine.view.holds() == {2: {0: 2}}
    assert engine.view.bags.leaving_for(0, 2) == 2
    # the 2 being preempted for job 2 are back at 18 (8 + P); none is coming for no job or job 5
    bags = engine.view.bags
    assert (bags.coming_by(0, 2), bags.coming_by(0, -1), bags.coming_by(0, 5)) == (18.0, -math.inf, -math.inf)
    engine.submit(job(3, 8, 2, 50))
    refused = engine.apply(StartJob(3, 0), "test")
    assert refused.code is StatusCode.RESERVED and "2 of them reserved for other jobs" in refused.reason
    grow = engine.apply(GrowBag(10, 0, 1), "test")
    assert grow.code is StatusCode.NO_CAPACITY and "held for waiting jobs" in grow.reason
    assert engine.cancel(2)
    assert (backend.reserved_cores, backend.holds, engine.bags.hold_keys) == (0, {}, set())
    assert engine.view.bags.leaving_for(0, 2) == 0
    assert (bags.coming_by(0, 2), bags.coming_by(0, -1)) == (-math.inf, 18.0)  # now for no job
    assert holds(engine.log) == [(8.0, 2, 0, 2), (8.0, 2, 0, 0)]
    assert engine.apply(StartJob(3, 0), "test").code is StatusCode.ACCEPTED


def test_a_hold_ends_at_once_when_its_job_starts_on_another_site() -> None:
    # sites of 4 and 4, FF and SEP, P = 10 s. Job 1 (4 processors, 10 s) runs on site 0, the bag
    # holds site 1. Job 2 (4 processors) arrives at 5: the bag gives back its 4 on site 1 for it
    # (free at 15, held for job 2 then). At 10 job 1 ends: FF starts job 2 on site 0, and its
    # hold on site 1 ends at once (HOLD 0 at 10): at 15 the 4 processors come free for all and
    # the bag grows there again.
    result = simulate(
        clusters(4, 4),
        [job(1, 0, 4, 10), job(2, 5, 4, 50)],
        "ff",
        "none",
        bags=[a_bag(10, 100, 100.0)],
        fairshare="sep",
        bag_settings=BagSettings(preemption_time=10.0),
        check_purity=True,
    )
    log = list(result.log)
    assert [(e.time, e.site, int(e.value), e.task) for e in log if e.kind is EventKind.SHRINK] == [(5.0, 1, 4, 2)]
    assert [(e.job, e.time, e.site) for e in log if e.kind is EventKind.START] == [(1, 0.0, 0), (2, 10.0, 0)]
    assert holds(log) == [(10.0, 2, 1, 0)]
    assert [(e.time, e.site, int(e.value)) for e in log if e.kind is EventKind.GROW][:2] == [(0.0, 1, 4), (15.0, 1, 4)]
    assert not [e for e in log if e.kind is EventKind.DECISION]
