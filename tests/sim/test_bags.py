"""Bags of tasks in simulation: hand-computed schedules (grow, task pulls, a shrink for a rigid
job with its preemption time, pull latency) and the bag metrics computed from the log."""

from __future__ import annotations

import math

import pytest

from helpers import clusters, job
from isthmus.engine.bags import BagSettings
from isthmus.metrics.bags import bag_records, rigid_delay, shrink_waits
from isthmus.model.environment import PolicyChoice
from isthmus.model.events import EventKind
from isthmus.model.job import Job, JobKind, PriorityClass
from isthmus.policies.fairshare.common import FairShareParams
from isthmus.sim.runner import simulate

BAG_KINDS = {
    EventKind.BAG_SUBMIT,
    EventKind.GROW,
    EventKind.SHRINK,
    EventKind.BAG_RELEASE,
    EventKind.TASK_START,
    EventKind.TASK_END,
    EventKind.TASK_PREEMPT,
    EventKind.BAG_END,
    EventKind.SUBMIT,
    EventKind.START,
    EventKind.END,
}


def bag(jid: int, tasks: int, runtime: float, submit: float = 0.0, user: str = "u") -> Job:
    """A bag of `tasks` tasks of `runtime` seconds."""
    return Job(
        jid, submit, 1, runtime, user=user, kind=JobKind.MALLEABLE, tasks=tasks, priority=PriorityClass.SUPER_LOW
    )


def rows(result) -> list[tuple]:
    return [
        (e.time, e.kind.name, e.job, e.vm, e.value, e.task)
        if e.kind.name.startswith(("TASK", "BAG"))
        else (e.time, e.kind.name, e.job, e.value)
        for e in result.log
        if e.kind in BAG_KINDS
    ]


def test_a_rigid_job_arriving_mid_bag_waits_only_the_preemption_time():
    # 4 processors; a bag of 8 tasks of 10 s at 0; a rigid job of 2 processors (20 s) at 15;
    # preemption time 5 s. The bag takes the 4 processors and runs tasks 0-3, then 4-7 at 10.
    # At 15 SEP shrinks it by 2 for the rigid job: two running tasks (the seeded random choice:
    # those on processors 3 and 1, tasks 7 and 5) go back to the queue with 5 s of work lost;
    # the processors are free at 20, when the rigid job starts (5 s later than alone) and the
    # bag's two other processors, done with tasks 4 and 6, pull tasks 5 and 7. Those end at 30,
    # the bag's last processors find no task and are given back.
    result = simulate(
        clusters(4),
        [job(1, 15, 2, 20)],
        "fcfs",
        "none",
        bags=[bag(10, 8, 10.0)],
        fairshare="sep",
        bag_settings=BagSettings(preemption_time=5.0),
        check_purity=True,
    )
    assert rows(result) == [
        (0.0, "BAG_SUBMIT", 10, -1, 8.0, -1),
        (0.0, "GROW", 10, 4.0),
        *[(0.0, "TASK_START", 10, k, 0.0, k) for k in range(4)],
        *[r for k in range(4) for r in ((10.0, "TASK_END", 10, k, 10.0, k), (10.0, "TASK_START", 10, k, 0.0, k + 4))],
        (15.0, "SUBMIT", 1, 2.0),
        (15.0, "SHRINK", 10, 2.0),
        (15.0, "TASK_PREEMPT", 10, 3, 5.0, 7),
        (15.0, "TASK_PREEMPT", 10, 1, 5.0, 5),
        (20.0, "TASK_END", 10, 0, 10.0, 4),
        (20.0, "TASK_START", 10, 0, 0.0, 5),
        (20.0, "TASK_END", 10, 2, 10.0, 6),
        (20.0, "TASK_START", 10, 2, 0.0, 7),
        (20.0, "BAG_RELEASE", 10, 3, 1.0, -1),
        (20.0, "BAG_RELEASE", 10, 1, 1.0, -1),
        (20.0, "START", 1, 2.0),
        (30.0, "TASK_END", 10, 0, 10.0, 5),
        (30.0, "BAG_RELEASE", 10, 0, 1.0, -1),
        (30.0, "TASK_END", 10, 2, 10.0, 7),
        (30.0, "BAG_END", 10, -1, 8.0, -1),
        (30.0, "BAG_RELEASE", 10, 2, 1.0, -1),
        (40.0, "END", 1, 0.0),
    ]
    (rec,) = bag_records(result.log, result.bags, result.end_time)
    assert (rec.tasks, rec.done, rec.repeated, rec.makespan, rec.preemptions) == (8, 8, 0, 30.0, 2)
    assert rec.throughput == pytest.approx(8 / 30)
    assert rec.wasted_seconds == 10.0
    assert rec.processor_seconds == 2 * 20 + 2 * 30
    assert rec.peak_processors == 4
    alone = simulate(clusters(4), [job(1, 15, 2, 20)], "fcfs", "none")
    delay = rigid_delay(alone.log, result.log, result.jobs)
    assert (delay["jobs"], delay["delay_max"], delay["jobs_delayed"]) == (1, 5.0, 1)
    assert (delay["wait_mean_without_bags"], delay["wait_mean_with_bags"]) == (0.0, 5.0)
    assert shrink_waits(result.log) == {"jobs": 1, "wait_mean": 5.0, "wait_max": 5.0, "not_started": []}
    # the rigid job's own records do not see the bag
    assert set(result.jobs) == {1}


def test_the_pull_latency_delays_each_task_and_an_idle_processor_is_given_back():
    # 2 processors, 3 tasks of 10 s, pull latency 1 s: tasks 0 and 1 start at 1 and end at 11;
    # at 12 one processor pulls task 2 and the other finds the queue empty and is given back;
    # task 2 ends at 22, the bag's last: the runner aborts its launchers, the processor is free
    # at once (§3.5.4), not after another pull
    result = simulate(
        clusters(2),
        [],
        "fcfs",
        "none",
        bags=[bag(10, 3, 10.0)],
        fairshare="gep",
        bag_settings=BagSettings(preemption_time=5.0, pull_latency=1.0),
    )
    starts = [(e.time, e.task) for e in result.log if e.kind is EventKind.TASK_START]
    assert starts == [(1.0, 0), (1.0, 1), (12.0, 2)]
    releases = [e.time for e in result.log if e.kind is EventKind.BAG_RELEASE]
    assert releases == [12.0, 22.0]
    (rec,) = bag_records(result.log, result.bags)
    assert (rec.end, rec.makespan, rec.processor_seconds) == (22.0, 22.0, 12.0 + 22.0)


def test_a_finished_bag_frees_the_processors_pulling_a_task_at_once():
    # 4 processors, 4 tasks of 4 s, pull latency 1 s: all end at 5, the bag's last tasks; a rigid
    # job arriving at 5 starts at 5 (P = 0), not at 6 when the pulls would have found no task
    # (found by the property test: a finished bag is no longer the fair-share policy's to shrink)
    result = simulate(
        clusters(4),
        [job(1, 5, 1, 1)],
        "fcfs",
        "none",
        bags=[bag(10, 4, 4.0)],
        fairshare="sep",
        bag_settings=BagSettings(preemption_time=0.0, pull_latency=1.0),
    )
    assert [e.time for e in result.log if e.kind is EventKind.BAG_RELEASE] == [5.0] * 4
    assert [(e.job, e.time) for e in result.log if e.kind is EventKind.START] == [(1, 5.0)]


def test_two_bags_share_a_cluster_and_the_second_gets_its_half_after_a_rebalance():
    # 4 processors; bag 10 (12 tasks of 10 s) takes all 4 at 0; bag 11 (4 tasks of 10 s) arrives
    # at 5: SEP rebalances: bag 10 gives back 2 (running tasks, 5 s lost each) freed at 7
    # (preemption time 2 s), where bag 11 grows by 2.
    result = simulate(
        clusters(4),
        [],
        "fcfs",
        "none",
        bags=[bag(10, 12, 10.0), bag(11, 4, 10.0, submit=5.0)],
        fairshare="sep",
        bag_settings=BagSettings(preemption_time=2.0),
    )
    grows = [(e.time, e.job, e.value) for e in result.log if e.kind is EventKind.GROW]
    assert grows[:2] == [(0.0, 10, 4.0), (7.0, 11, 2.0)]
    shrinks = [(e.time, e.job, e.value) for e in result.log if e.kind is EventKind.SHRINK]
    assert shrinks[0] == (5.0, 10, 2.0)
    recs = {r.bag: r for r in bag_records(result.log, result.bags)}
    assert recs[10].done == 12 and recs[11].done == 4
    assert recs[10].wasted_seconds == 10.0
    # bag 11: tasks at 7 and 17 on its two processors: done at 27, 22 s after it arrived
    assert recs[11].end == 27.0 and recs[11].makespan == 22.0


def test_bags_run_with_per_event_rounds_and_periodic_rounds():
    for kwargs in ({"rounds": "per-event", "round_interval": None}, {"round_interval": 30.0}):
        result = simulate(
            clusters(4),
            [job(1, 15, 2, 20)],
            "fcfs",
            "none",
            bags=[bag(10, 8, 10.0)],
            fairshare="sep",
            bag_settings=BagSettings(preemption_time=5.0),
            **kwargs,
        )
        (rec,) = bag_records(result.log, result.bags)
        assert rec.done == 8 and rec.repeated == 0 and not math.isnan(rec.makespan)
        assert [e.kind for e in result.log].count(EventKind.END) == 1


def test_bags_need_a_fair_share_policy_and_a_policy_needs_bags():
    with pytest.raises(ValueError, match="need a fair-share policy"):
        simulate(clusters(4), [], "fcfs", "none", bags=[bag(10, 2, 1.0)])
    with pytest.raises(ValueError, match="without any bag"):
        simulate(clusters(4), [job(1, 0, 1, 1)], "fcfs", "none", fairshare="sep")
    with pytest.raises(ValueError, match="not a bag of tasks"):
        simulate(clusters(4), [], "fcfs", "none", bags=[job(3, 0, 1, 1)], fairshare="sep")


def _first_fit_steal(allocation: str) -> tuple[dict[int, float], list[tuple]]:
    """8 processors, P = 10 s. Job 1 (2 processors, 8 s) runs from 0 beside a bag holding the
    other 6. At 8 job 1 ends and job 2 (4 processors) arrives: 2 free, so the bag gives back 2
    for it (free at 18). At 9 job 3 (2 processors) arrives."""
    env = clusters(8)
    jobs = [job(1, 0, 2, 8), job(2, 8, 4, 50), job(3, 9, 2, 50)]
    result = simulate(
        env,
        jobs,
        allocation,
        "none",
        bags=[bag(10, 100, 100.0)],
        fairshare="sep",
        bag_settings=BagSettings(preemption_time=10.0),
        check_purity=True,
    )
    shrinks = [(e.time, int(e.value), e.task) for e in result.log if e.kind is EventKind.SHRINK]
    assert shrinks[0] == (8.0, 2, 2)
    holds = [(e.time, e.job, int(e.value)) for e in result.log if e.kind is EventKind.HOLD]
    return {e.job: e.time for e in result.log if e.kind is EventKind.START}, holds


#: the holds of `_first_fit_steal`: at 8 the 2 free processors are held for job 2 at once, the 2
#: preempted for it join its hold at 18, where it starts (its hold ends); the 2 the bag gave back
#: for job 3 at 9 are held for job 3 as they come free at 19, where it starts
STEAL_HOLDS = [(8.0, 2, 2), (18.0, 2, 3), (18.0, 2, 4), (18.0, 2, 0), (19.0, 3, 1), (19.0, 3, 2), (19.0, 3, 0)]


def test_with_fcfs_a_later_job_leaves_the_free_processors_to_the_job_bags_shrank_for():
    # FCFS does not start job 3 before job 2: job 2 starts at 18 on the 2 free and the 2 freed;
    # job 3 made the bag give back 2 more at 9 (job 2 counts on the free ones): it starts at 19.
    assert _first_fit_steal("fcfs") == ({1: 0.0, 2: 18.0, 3: 19.0}, STEAL_HOLDS)


@pytest.mark.parametrize("allocation", ["ff", "easy"])
def test_with_first_fit_the_job_bags_shrank_for_starts_within_the_preemption_time(allocation):
    # Without holds First-Fit (and EASY, whose head job 2 has no shadow time: the bag's processors
    # are not running jobs) started job 3 at 9 on the 2 free processors job 2 counted on, and the
    # bag gave back 2 more for job 2, which started at 19. The engine holds the 2 free processors
    # for job 2 from the shrink at 8: job 3 cannot take them (the bag gives back 2 for it at 9),
    # job 2 starts at 18 = 8 + P, job 3 at 19 = 9 + P.
    assert _first_fit_steal(allocation) == ({1: 0.0, 2: 18.0, 3: 19.0}, STEAL_HOLDS)


def test_with_easy_a_hold_never_delays_the_head_and_ends_when_its_job_is_not_started():
    # Without the EASY walk (`reservation=false`).
    # 8 processors, P = 10 s. Job 1 (6 processors, 30 s) runs from 0 beside a bag holding 2. Job 2
    # (8 processors) arrives at 1: it needs job 1's processors, the bag alone cannot make room
    # (no shrink). Job 3 (2 processors, 100 s) arrives at 2: the bag gives back its 2 for it,
    # held for job 3 as they come free at 12. EASY's head is job 2, its shadow time 30 (the held
    # processors count as free for it) with none left over: job 3 (ending at 112) would delay
    # it, so EASY does not start it, and its hold ends after that round (HOLD 0 at 12). Job 2
    # starts at 30 as it would without the hold, job 3 after it at 80: a job bags shrank for
    # that EASY's reservation holds back waits past the preemption time.
    result = simulate(
        clusters(8),
        [job(1, 0, 6, 30), job(2, 1, 8, 50), job(3, 2, 2, 100)],
        "easy",
        "none",
        bags=[bag(10, 100, 100.0)],
        fairshare=PolicyChoice("sep", {"reservation": False}),  # not the EASY walk (the default with easy)
        bag_settings=BagSettings(preemption_time=10.0),
        check_purity=True,
    )
    assert [(e.time, e.job, int(e.value), e.task) for e in result.log if e.kind is EventKind.SHRINK] == [
        (2.0, 10, 2, 3)
    ]
    assert [(e.time, e.job, int(e.value)) for e in result.log if e.kind is EventKind.HOLD] == [
        (12.0, 3, 1),
        (12.0, 3, 2),
        (12.0, 3, 0),
    ]
    assert {e.job: e.time for e in result.log if e.kind is EventKind.START} == {1: 0.0, 2: 30.0, 3: 80.0}
    assert not [e for e in result.log if e.kind is EventKind.DECISION]


@pytest.mark.parametrize("allocation", ["fcfs", "ff", "easy"])
def test_a_hold_let_go_by_a_job_starting_elsewhere_goes_to_the_job_that_counted_on_it(allocation):
    # Sites of 4 and 8 processors, P = 10 s, one bag. Job 1 (4 processors, 5 s) runs on site 0
    # from 0; the bag grows on site 1's 8. Job 2 (4) arrives at 1: the bag gives back 4 of
    # site 1 for it (free at 11). Job 3 (8) arrives at 2: only 4 more could come back on site 1,
    # no claim. At 5 job 1 ends: job 2 fits on site 0's 4 free processors (it starts there), so
    # the fair-share walk counts job 2's 4 being preempted on site 1 for job 3 and the bag gives
    # back its last 4 there for it (free at 15). When job 2 starts on site 0 its hold on site 1
    # ends: its 4 processors go to job 3's hold (they come free at 11, held for job 3), so job 4
    # (4 processors, arriving at 8) cannot start on them: job 3 starts at 15 = 5 + P, job 4 when
    # job 3 ends (35). Before, they went to no one: First-Fit and EASY started job 4 on them at
    # 11, job 3 waited for it and a second shrink and started at 31.
    result = simulate(
        clusters(4, 8),
        [job(1, 0, 4, 5), job(2, 1, 4, 100), job(3, 2, 8, 20), job(4, 8, 4, 10)],
        allocation,
        "none",
        bags=[bag(10, 100, 100.0)],
        fairshare="sep",
        bag_settings=BagSettings(preemption_time=10.0),
        check_purity=True,
    )
    assert {e.job: e.time for e in result.log if e.kind is EventKind.START} == {1: 0.0, 2: 5.0, 3: 15.0, 4: 35.0}
    assert [(e.time, e.site, int(e.value), e.task) for e in result.log if e.kind is EventKind.SHRINK] == [
        (1.0, 1, 4, 2),
        (5.0, 1, 4, 3),
    ]
    holds = [(e.time, e.job, int(e.value)) for e in result.log if e.kind is EventKind.HOLD]
    job3 = [(11.0, 3, n) for n in range(1, 5)] + [(15.0, 3, n) for n in range(5, 9)]
    assert holds == [(5.0, 2, 0), *job3, (15.0, 3, 0)]


@pytest.mark.parametrize(
    ("runtime", "starts", "shrinks"),
    [
        (100.0, {1: 0.0, 2: 40.0, 3: 90.0}, [(30.0, 10, 2, 2)]),
        (10.0, {1: 0.0, 3: 12.0, 2: 40.0}, [(2.0, 10, 2, 3), (30.0, 10, 2, 2)]),
    ],
)
def test_with_the_easy_walk_bags_shrink_only_for_a_job_easy_will_start(runtime, starts, shrinks):
    # The case above with the fair-share parameter `reservation` (the allocation is EASY). At 2
    # job 2 (8 processors) is EASY's head: it cannot start before job 1 ends at 30, and the bag's
    # 2 processors, given back for job 3, would count as free for it then (shadow time 30, none
    # left over). Job 3 (2 processors) would start once they are back, at 12: with 100 s it
    # would end at 112 and delay job 2, so the bag gives back nothing for it (before: it did,
    # EASY left job 3 waiting on its hold and the hold ended); with 10 s it ends at 22 and EASY
    # starts it at 12 = 2 + P. At 30 the bag (grown back on job 3's processors, or never shrunk)
    # gives back 2 for job 2, which starts at 40 = 30 + P; a 100 s job 3 starts when job 2 ends.
    result = simulate(
        clusters(8),
        [job(1, 0, 6, 30), job(2, 1, 8, 50), job(3, 2, 2, runtime)],
        "easy",
        "none",
        bags=[bag(10, 100, 100.0)],
        fairshare=PolicyChoice("sep", {"reservation": True}),
        bag_settings=BagSettings(preemption_time=10.0),
        check_purity=True,
    )
    assert [(e.time, e.job, int(e.value), e.task) for e in result.log if e.kind is EventKind.SHRINK] == shrinks
    assert {e.job: e.time for e in result.log if e.kind is EventKind.START} == starts


def test_the_walks_of_fcfs_and_easy_exclude_each_other():
    with pytest.raises(ValueError, match="exclude each other"):
        simulate(
            clusters(4),
            [job(1, 0, 1, 1)],
            "easy",
            "none",
            bags=[bag(10, 2, 1.0)],
            fairshare=PolicyChoice("sep", {"blocking": True, "reservation": True}),
        )


@pytest.mark.parametrize("allocation", ["ff", "easy"])
def test_a_job_counting_on_processors_given_back_for_no_job_gets_them_held(allocation):
    # Sites of 4 and 4 processors, P = 10 s, one bag (on site 1). Jobs 1 (2 processors, 5 s) and
    # 2 (2, 7 s) run on site 0 from 0. Job 3 (2) at 1 and job 4 (2) at 3 make the bag give back
    # 2 of site 1 each (free at 11 and 13); each starts on site 0 instead as jobs 1 and 2 end (5,
    # 7), so site 1's 4 are being preempted for no job. Job 5 (4 processors, 20 s) arrives at 8:
    # the fair-share walk counts them for it and asks the engine to hold them for it
    # (HoldBagRelease; the bag has nothing more to give back). Job 6 (2, 10 s) arrives at 9.
    # The first 2 come free at 11 and are held for job 5, so job 6 cannot take them: job 5
    # starts at 13, job 6 when it ends (33). Before, job 6 started at 11 on them and job 5 waited.
    jobs = [job(1, 0, 2, 5), job(2, 0, 2, 7), job(3, 1, 2, 100), job(4, 3, 2, 100), job(5, 8, 4, 20), job(6, 9, 2, 10)]
    result = simulate(
        clusters(4, 4),
        jobs,
        allocation,
        "none",
        bags=[bag(10, 100, 100.0)],
        fairshare="sep",
        bag_settings=BagSettings(preemption_time=10.0),
        check_purity=True,
    )
    starts = {e.job: e.time for e in result.log if e.kind is EventKind.START}
    assert starts == {1: 0.0, 2: 0.0, 3: 5.0, 4: 7.0, 5: 13.0, 6: 33.0}
    assert [(e.time, e.site, int(e.value), e.task) for e in result.log if e.kind is EventKind.SHRINK] == [
        (1.0, 1, 2, 3),
        (3.0, 1, 2, 4),
    ]
    holds = [(e.time, e.job, e.site, int(e.value)) for e in result.log if e.kind is EventKind.HOLD]
    job5 = [(11.0, 5, 1, 1), (11.0, 5, 1, 2), (13.0, 5, 1, 3), (13.0, 5, 1, 4), (13.0, 5, 1, 0)]
    assert holds == [(5.0, 3, 1, 0), (7.0, 4, 1, 0), *job5]
    assert not [e for e in result.log if e.kind is EventKind.DECISION]


def test_the_walk_follows_the_allocation_by_default():
    # 3 processors, strict FCFS, GEP, P = 7 s, pull latency 1 s. Jobs 1-3 (1 processor) start at
    # 0, job 4 (2 processors, 60 s) at 14 when job 3 ends; job 5 (3 processors, 10 s) waits for
    # the whole cluster. The bag (arriving at 27) grows on job 1's processor at 32. Jobs 6 and 7
    # (1 processor) arrive at 69 behind job 5: strict FCFS will not start them first, so the
    # walk (blocking by default with fcfs) shrinks the bag for no one of them. At 74 job 4 ends:
    # the bag gives its processor back for job 5, which starts at 74 + 7 = 81. Walking as if any
    # job could start (`blocking=false`), the bag shrank for job 6 at 69, its processor came back
    # at 76 for job 6, which FCFS could not start, the bag took it again and shrank for job 5 at
    # 76: job 5 started at 83, past its preemption time.
    jobs = [job(1, 0, 1, 32), job(2, 0, 1, 2), job(3, 0, 1, 14), job(4, 0, 2, 60), job(5, 0, 3, 10)]
    jobs += [job(6, 69, 1, 20), job(7, 69, 1, 33)]
    starts = {}
    for params in ({}, {"blocking": False}):
        result = simulate(
            clusters(3),
            jobs,
            "fcfs",
            "none",
            bags=[bag(100, 25, 30.0, submit=27.0)],
            fairshare=PolicyChoice("gep", params),
            bag_settings=BagSettings(preemption_time=7.0, pull_latency=1.0),
            check_purity=True,
        )
        starts[str(params)] = {e.job: e.time for e in result.log if e.kind is EventKind.START}[5]
    assert starts == {"{}": 81.0, "{'blocking': False}": 83.0}


def test_the_walk_of_each_allocation():
    assert FairShareParams().walk("strict") == (True, False)
    assert FairShareParams().walk("easy") == (False, True)
    assert FairShareParams().walk("any") == (False, False)
    assert FairShareParams(blocking=False).walk("strict") == (False, False)
    assert FairShareParams(blocking=True).walk("easy") == (True, False)
    assert FairShareParams(reservation=True).walk("strict") == (False, True)


def _fcfs_bag_run(sites: tuple[int, ...], jobs: list[Job], bags: list[Job], preemption: float):
    result = simulate(
        clusters(*sites),
        jobs,
        "fcfs",
        "none",
        bags=bags,
        fairshare="sep",
        bag_settings=BagSettings(preemption_time=preemption),
        check_purity=True,
    )
    starts = {e.job: e.time for e in result.log if e.kind is EventKind.START}
    shrinks = [(e.time, e.site, int(e.value), e.task) for e in result.log if e.kind is EventKind.SHRINK and e.task >= 0]
    return starts, shrinks


def test_with_fcfs_a_complete_hold_behind_a_job_still_waiting_for_its_own_is_kept():
    # Sites of 9 and 1 processors, strict FCFS, P = 20 s, one bag of 6 tasks (on 6 of site 0).
    # Job 1 (4 processors) at 1: the bag gives back 1 (free at 21), job 1 runs 21-65; the
    # preempted task's processor is taken on site 1 at 21. Job 2 (4) at 47: the bag gives back 4
    # (free at 67). Jobs 3 (1 processor, 22 s) and 4 (4, 45 s) at 48: the bag gives back its
    # last one on site 0 for job 3 (free at 68); job 4 fits nowhere even then. At 65 job 1 ends,
    # job 2 starts on its 4 processors; the 4 being preempted for it go to no job. Job 5 (1) at
    # 66: the walk counts those 4 for job 4 (held for it, HoldBagRelease) and the bag gives back
    # site 1's processor for job 5 (free at 86). At 67 job 4's hold is complete while job 3, ahead
    # of it, waits for its own processor (68): the engine keeps job 4's hold (strict FCFS starts
    # job 4 right after job 3), job 3 and job 4 start at 68, job 5 at 86 = 66 + P. Before, the
    # hold ended after the round at 67: job 3 started on one of those 4, the bag grew on the
    # others, job 4 needed a second shrink (68) and started at 88, and job 5 behind it too (22 s).
    jobs = [job(1, 1, 4, 44), job(2, 47, 4, 187), job(3, 48, 1, 22), job(4, 48, 4, 45), job(5, 66, 1, 133)]
    starts, shrinks = _fcfs_bag_run((9, 1), jobs, [bag(10, 6, 1000.0)], 20.0)
    assert starts == {1: 21.0, 2: 65.0, 3: 68.0, 4: 68.0, 5: 86.0}
    assert shrinks == [(1.0, 0, 1, 1), (47.0, 0, 4, 2), (48.0, 0, 1, 3), (66.0, 1, 1, 5)]


def test_the_walk_counts_the_hold_of_a_job_starting_elsewhere_as_free_only_after_the_round():
    # Sites of 5, 3 and 4 processors, strict FCFS, P = 20 s, one bag (from 1, on sites 1 and 2:
    # site 0's load of 80% stops its growth there). All jobs at 0: job 1 (4 processors, 41 s)
    # starts on site 0; jobs 2 (5, 20 s), 3 (3, 34 s), 4 (3, 44 s) and 5 (4, 25 s) wait. At 41
    # job 1 ends, job 2 starts on site 0 and the bag gives back 3 on site 1 for job 3 and 3 on
    # site 2 for job 4 (free at 61). At 61 job 2 ends: FCFS starts job 3 on site 0 (the first
    # where it fits) and job 4 on its hold on site 2 (site 1's 3, held for job 3, are free for
    # others only once job 3 has started). The walk counts them so too: job 5 cannot start even
    # with the bag's processors, and the bag gives back 1 of site 0 for it when job 3 ends (95):
    # it starts at 115 = 95 + P. Before, the walk counted job 3's hold on site 1 as free at 61,
    # expected job 4 there and counted job 4's hold on site 2 for job 5 (a shrink of 1 there);
    # job 4 took it, and job 5, named at 61, started at 115 (54 s).
    jobs = [job(1, 0, 4, 41), job(2, 0, 5, 20), job(3, 0, 3, 34), job(4, 0, 3, 44), job(5, 0, 4, 25)]
    starts, shrinks = _fcfs_bag_run((5, 3, 4), jobs, [bag(10, 7, 54.0, submit=1.0)], 20.0)
    assert starts == {1: 0.0, 2: 41.0, 3: 61.0, 4: 61.0, 5: 115.0}
    assert shrinks == [(41.0, 1, 3, 3), (41.0, 2, 3, 4), (95.0, 0, 1, 5)]


def test_a_job_that_waits_keeps_its_holds_for_itself_in_the_walk():
    # Sites of 3, 3 and 1 processors, strict FCFS, P = 20 s. Bag 10 (7 tasks of 70 s) holds all
    # 7 from 0; bag 11 (1 task of 47 s) arrives at 25 and the bags rebalance. Job 1 (1
    # processor) at 25: bag 10 gives back 1 of site 0 for it (free at 45). Job 2 (1) at 26
    # counts on a processor being given back on site 1 by the rebalancing (held for it,
    # HoldBagRelease, free at 45). Job 3 (3 processors) at 27: job 2 also fits on site 0 once a
    # processor given back there by the rebalancing comes free, but it may as well start on its
    # hold on site 1 (it does, at 45), so the walk keeps that hold for job 2 and job 3 cannot
    # start even with the bags' processors: no shrink names it until job 1 ends (77), and it
    # starts at 97 = 77 + P. Before, the walk put job 2 on site 0 and counted job 2's hold on
    # site 1 for job 3 (a shrink of 1 there at 27); job 2 started on it and job 3, named at 27,
    # waited for a second shrink: it started at 97 (70 s).
    jobs = [job(1, 25, 1, 32), job(2, 26, 1, 44), job(3, 27, 3, 49)]
    bags = [bag(10, 7, 70.0), bag(11, 1, 47.0, submit=25.0, user="v")]
    starts, shrinks = _fcfs_bag_run((3, 3, 1), jobs, bags, 20.0)
    assert starts == {1: 45.0, 2: 45.0, 3: 97.0}
    assert shrinks == [(25.0, 0, 1, 1), (77.0, 0, 1, 3), (77.0, 0, 1, 3)]


def test_with_fcfs_bags_shrink_for_no_job_behind_a_waiting_job_counting_on_unheld_processors():
    # Sites of 2, 8 and 6 processors, strict FCFS, P = 20 s, one bag (tasks of 32 s). Jobs 1-8
    # arrive at 1 and run in order as the bag gives back processors for each (shrinks below).
    # At 110 job 2 ends on site 1: job 5 (6 processors) starts there on the free ones instead of
    # its hold on site 2, which it lets go of once started. Job 6 (2) waits for the 2 the bag
    # gives back for it on site 0 (free at 125). Job 7 (5) counts on job 5's hold on site 2,
    # which nothing holds for it, so the walk makes the bag shrink for no job behind it: job 8
    # is not named at 110. At 111 job 6 starts on 2 of those processors of site 2 (the first
    # site where it fits then); job 7 needs 1 more from the bag there (112) and starts at 132,
    # job 8 (never named) with it, job 9 (arriving at 111) too, on its processor of site 1.
    # Before, the bag gave back 1 of site 1 for job 8 at 110; job 8 waited for job 7 and
    # started at 132, 22 s after that shrink.
    jobs = [
        job(1, 1, 3, 27),
        job(2, 1, 7, 42),
        job(3, 1, 4, 9),
        job(4, 1, 5, 8),
        job(5, 1, 6, 44),
        job(6, 1, 2, 1),
        job(7, 1, 5, 59),
        job(8, 1, 2, 23),
        job(9, 111, 1, 43),
    ]
    starts, shrinks = _fcfs_bag_run((2, 8, 6), jobs, [bag(10, 26, 32.0)], 20.0)
    assert starts == {1: 21.0, 2: 68.0, 3: 68.0, 4: 97.0, 5: 110.0, 6: 111.0, 7: 132.0, 8: 132.0, 9: 132.0}
    assert shrinks == [
        (1.0, 1, 3, 1),
        (48.0, 1, 4, 2),
        (48.0, 2, 4, 3),
        (77.0, 2, 1, 4),
        (105.0, 0, 2, 6),
        (105.0, 2, 1, 5),
        (112.0, 1, 1, 9),
        (112.0, 2, 1, 7),
    ]


def _easy_sep_run(sites: tuple[int, ...], jobs: list[Job], bags: list[Job], preemption: float):
    """EASY with SEP and its default walk (`reservation`); (starts, shrinks naming a job: (time,
    bag, processors, job)); the check that every job a shrink names starts within P of the first."""
    result = simulate(
        clusters(*sites),
        jobs,
        "easy",
        "none",
        bags=bags,
        fairshare=PolicyChoice("sep", {}),
        bag_settings=BagSettings(preemption_time=preemption),
        check_purity=True,
    )
    starts = {e.job: e.time for e in result.log if e.kind is EventKind.START}
    shrinks = [(e.time, e.job, int(e.value), e.task) for e in result.log if e.kind is EventKind.SHRINK and e.task >= 0]
    first: dict[int, float] = {}
    for t, _, _, j in shrinks:
        first.setdefault(j, t)
    assert all(starts[j] - t <= preemption for j, t in first.items()), (first, starts)
    return starts, shrinks


def test_with_the_easy_walk_a_head_starting_by_the_preemption_time_passes_the_claim_to_the_next_head():
    # Sites of 4 and 4, P = 20 s. At 70 job 1 (4, ends 90) fills site 0; site 1 runs job 3 (2,
    # ends 99) beside the bags. Queue: job 4 (4, 10 s), job 6 (4, 44 s), job 7 (2, 32 s). Job 4
    # is EASY's head with its reservation at 90 on site 0 (job 1 ends): a shrink of 1 on site 1
    # for job 7 passes it. But at 90 = 70 + P job 4 has started: EASY's head is then job 6,
    # reserved on site 1 at 99 with nothing left over (job 3's 2 and job 7's 2), and job 7 (to
    # 122) does not fit: before, its hold ended and it started at 100 on site 0 (30 s after the
    # shrink). Now the walk checks the claim against job 6's reservation too: no shrink names
    # job 7, which starts at 99 on site 1 as job 3 ends.
    starts, shrinks = _easy_sep_run(
        (4, 4),
        [
            job(1, 16, 4, 54),
            job(2, 18, 3, 20),
            job(3, 31, 2, 41),
            job(4, 39, 4, 10),
            job(5, 46, 1, 12),
            job(6, 67, 4, 44),
            job(7, 70, 2, 32),
            job(8, 79, 1, 16),
            job(9, 113, 3, 5),
        ],
        [bag(100, 21, 82.0, submit=9.0, user="u0"), bag(101, 48, 86.0, submit=11.0, user="u1")],
        20.0,
    )
    assert 7 not in [j for *_, j in shrinks]
    assert (starts[4], starts[7], starts[6]) == (90.0, 99.0, 100.0)


def test_with_the_easy_walk_a_job_starting_this_round_ends_its_runtime_from_now():
    # One 8-processor cluster, P = 20 s. At 74 job 3 (3, 44 s) starts on its hold; job 4 (6) is
    # EASY's head and job 5 (2, 33 s) would start once 2 processors of the bag are back, at 94.
    # With job 3 ending at 118 (74 + 44) job 4's reservation is at 118 with none left over, and
    # job 5 (to 127) would delay it; the walk counted job 3 as starting at 94 (ending 138), let
    # the bag give back 2 for job 5 at 74, and EASY did not start it: it waited 51 s. Now no
    # shrink names job 5 at 74; it is named at 105 (job 2 ends) and starts at 125 = 105 + P.
    starts, shrinks = _easy_sep_run(
        (8,),
        [
            job(1, 17, 8, 30),
            job(2, 31, 1, 58),
            job(3, 54, 3, 44),
            job(4, 71, 6, 60),
            job(5, 74, 2, 33),
            job(6, 74, 6, 18),
            job(7, 104, 4, 30),
            job(8, 115, 5, 57),
        ],
        [bag(100, 57, 98.0, submit=53.0, user="u0")],
        20.0,
    )
    assert [s for s in shrinks if s[3] == 5] == [(105.0, 100, 1, 5)]
    assert (starts[3], starts[5], starts[4]) == (74.0, 125.0, 138.0)


def test_with_the_easy_walk_bags_do_not_grow_on_the_processors_a_backfilled_claim_counts_on():
    # One 8-processor cluster, P = 10 s, two bags. At 80 job 5 (2, 35 s) gets a shrink of 1 from
    # each bag (back at 90) behind EASY's head job 3 (3) and job 4 (4, 28 s). At 86 job 1 (4) ends
    # and job 3 starts on 3 of its processors; job 4 is EASY's head, reserved at 101 (job 3
    # ends) on the free processor, job 5's 2 and job 3's 3, with exactly job 5's 2 left over.
    # Before, the bag grew on the free processor at 86: at 90 job 4's reservation had 1 left
    # over, EASY did not start job 5 and it waited 31 s. Now the bags do not grow on it (the
    # processors left over at the shadow time that job 5 counts on) and job 5 starts at 90.
    starts, shrinks = _easy_sep_run(
        (8,),
        [
            job(1, 48, 4, 38),
            job(2, 50, 2, 58),
            job(3, 52, 3, 15),
            job(4, 73, 4, 28),
            job(5, 80, 2, 35),
            job(6, 88, 2, 29),
            job(7, 115, 1, 31),
            job(8, 119, 5, 5),
        ],
        [bag(100, 12, 33.0, submit=51.0, user="u0"), bag(101, 43, 17.0, submit=52.0, user="u1")],
        10.0,
    )
    assert [s for s in shrinks if s[3] == 5] == [(80.0, 100, 1, 5), (80.0, 101, 1, 5)]
    assert (starts[3], starts[5], starts[4]) == (86.0, 90.0, 101.0)


def test_with_the_easy_walk_a_head_starting_before_the_preemption_time_ends_its_runtime_from_then():
    # One 8-processor cluster, P = 20 s, the bag holds 3. Job 1 (5) runs until 101. At 93 job 4
    # (5, 45 s) is EASY's head, job 5 (6, 43 s) waits behind it and job 7 (3, 45 s) arrives: a
    # shrink of 3 (back at 113) would let it start then. Job 4 starts at 101 as job 1 ends, not
    # at 113 when the walk's EASY picture is taken: it ends at 146, so job 5, the head at 113, is
    # reserved at 146 with 2 left over and job 7 (to 158) would delay it. The walk started job 4
    # at its shadow time as seen at 113 (ending at 158: job 7 passed), the bag gave back 3 for
    # job 7 and EASY did not start it (its hold ended at 113 unused). Now the walk starts a head
    # when it fits on the processors free now as jobs end: no shrink names job 7.
    starts, shrinks = _easy_sep_run(
        (8,),
        [job(1, 0, 5, 101), job(4, 80, 5, 45), job(5, 85, 6, 43), job(7, 93, 3, 45)],
        [bag(100, 30, 100.0, submit=1.0)],
        20.0,
    )
    assert 7 not in [j for *_, j in shrinks]
    assert shrinks[0] == (146.0, 100, 1, 5)
    assert (starts[4], starts[5]) == (101.0, 166.0)


def test_with_the_easy_walk_a_job_waiting_for_processors_being_preempted_ends_its_runtime_from_their_return():
    # One 16-processor cluster, P = 60 s, the bag holds all 16. The bag gives back 8 for job 1 (8,
    # 57 s) at 14 (free at 74) and 1 for job 2 (1, 12 s) at 15 (at 75). At 33 job 3 (15) cannot
    # start even with the bag's 7 (EASY's head) and job 4 (7, 45 s) arrives: the bag's 7 back at
    # 93 would start it. Job 1 ends at 131 (74 + 57), so job 3 is reserved at 131 with 1 left over
    # and job 4 (to 138) would delay it. The walk counted jobs 1 and 2 as starting at 93 (the
    # preemption time from now, job 1 ending at 150): job 4 passed, the bag gave back 7 for it and
    # EASY left it waiting (177 s). Now a job waiting for processors being preempted starts when
    # they are back (`BagsInfo.coming_by`): no shrink names job 4 (it starts once the bag ends).
    starts, shrinks = _easy_sep_run(
        (16,),
        [job(1, 14, 8, 57), job(2, 15, 1, 12), job(3, 23, 15, 19), job(4, 33, 7, 45)],
        [bag(100, 26, 16.0, submit=11.0)],
        60.0,
    )
    assert [j for *_, j in shrinks] == [1, 2]
    assert (starts[1], starts[3]) == (74.0, 131.0)


def test_with_the_easy_walk_a_job_starting_on_processors_being_preempted_is_checked_when_they_come():
    # One 8-processor cluster, P = 60 s, two bags. Job 5 (3, 14 s) is named at 69 (2 processors
    # back at 129, 1 more held for it since 87). At 102 job 2 ends, job 3 (4, 8 s) starts and one
    # processor is left free; job 4 (5, 19 s), ahead of job 5, cannot start. EASY decides on job
    # 5 at 129, when its processors come, not at 162 (the preemption time from this round): job
    # 4, the head then, is reserved at 129 with exactly job 5's 3 left over, counting the free
    # processor. Checked at 162, job 5 counted on nothing left over and the bag grew on it: at 129
    # job 4's reservation had 2 left over, job 5's hold ended, job 4 started on its processors and
    # job 5 waited 79 s. Now job 4 starts at 110 (job 3 ends) on 5 free processors without a
    # shrink, and job 5 at 129 = 69 + P.
    starts, shrinks = _easy_sep_run(
        (8,),
        [job(1, 6, 5, 17), job(2, 9, 5, 19), job(3, 38, 4, 8), job(4, 66, 5, 19), job(5, 69, 3, 14), job(6, 79, 4, 35)],
        [bag(100, 46, 84.0, submit=1.0, user="u0"), bag(101, 25, 94.0, submit=27.0, user="u1")],
        60.0,
    )
    assert [s for s in shrinks if s[3] in (4, 5)] == [(69.0, 100, 2, 5)]
    assert (starts[3], starts[4], starts[5]) == (102.0, 110.0, 129.0)
