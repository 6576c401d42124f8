"""KOALA's placement queues scanned by weighted round robin (KOALA-CS thesis §2.2.3), on
hand-built states through the harness: priority order, Worst Fit, placement tries, upgrades
after P tries (never from super-low) and the abort limit."""

from __future__ import annotations

import pytest

from helpers import clusters, job
from isthmus.decisions.abort import AbortJob
from isthmus.decisions.start import StartJob
from isthmus.decisions.wake import WakeUp
from isthmus.model.environment import PolicyChoice
from isthmus.model.events import EventKind
from isthmus.model.job import Job, PriorityClass
from isthmus.model.status import StatusCode
from isthmus.policies import registry
from isthmus.sim.harness import Harness

SH, H, L, SL = PriorityClass.SUPER_HIGH, PriorityClass.HIGH, PriorityClass.LOW, PriorityClass.SUPER_LOW


def pjob(jid: int, size: int, priority: PriorityClass) -> Job:
    return Job(jid, 0.0, size, 100.0, priority=priority)


def test_queues_are_scanned_by_priority_and_jobs_placed_worst_fit():
    # free: 4 on s0, 3 on s1. Arrival order: low (3), super-high (4), high (2), super-low (1).
    # super-high first: the site with the most free (s0); high: s1 (3 free); low: fits nowhere
    # (1 free left), passed over; super-low: s1.
    h = Harness(clusters(4, 6), "wrr")
    h.running(job(9, 0, 3, 1000), 1, started=0.0)
    for j in (pjob(1, 3, L), pjob(2, 4, SH), pjob(3, 2, H), pjob(4, 1, SL)):
        h.queue(j)
    assert [(o.decision, o.status.code) for o in h.decide()] == [
        (StartJob(2, 0, by="wrr"), StatusCode.ACCEPTED),
        (StartJob(3, 1, by="wrr"), StatusCode.ACCEPTED),
        (StartJob(4, 1, by="wrr"), StatusCode.ACCEPTED),
    ]
    assert h.engine.why(1) == "in the low placement queue after 1 placement tries; no site has 3 free processors"


def test_weighted_scans_count_tries_upgrade_after_p_and_abort_past_the_limit():
    # a full 2-processor cluster; N_h = 2, N_l = 1, weights (2, 1, 1, 1): per round a high job is
    # tried 2 times, a low or super-low job once (the plan SH SH H SH SH H L SL). P = 3, abort
    # past 5 tries. Round 1: job 2 (high) 2 tries, job 1 (low) 1, job 3 (super-low) 1. Round 2:
    # job 2's 3rd try moves it to super-high, where it is tried twice more (5). Round 3: job 2's
    # 6th try aborts it; job 1's 3rd try moves it to high. Round 4: job 1 4, 5. Round 5: job 1
    # aborted; job 3 (never upgraded) at 5. Round 6: job 3 aborted.
    params = {"high_scans": 2, "low_scans": 1, "weights": [2, 1, 1, 1], "upgrade_after": 3, "max_tries": 5}
    h = Harness(clusters(2), PolicyChoice("wrr", params))
    h.running(job(9, 0, 2, 1000), 0, started=0.0)
    for j in (pjob(1, 1, L), pjob(2, 1, H), pjob(3, 1, SL)):
        h.queue(j)

    def round_() -> list[tuple[object, StatusCode]]:
        return [(o.decision, o.status.code) for o in h.decide()]

    wake = (WakeUp(30.0, by="wrr"), StatusCode.ACCEPTED)
    abort = "placement tries, more than 5"
    assert round_() == [wake]
    assert h.engine.why(2) == "in the high placement queue after 2 placement tries; no site has 1 free processors"
    assert h.engine.why(1).startswith("in the low placement queue after 1 placement tries")
    assert round_() == [wake]
    assert h.engine.why(2).startswith("in the super-high placement queue after 5 placement tries")
    assert round_() == [(AbortJob(2, f"6 {abort}", by="wrr"), StatusCode.ACCEPTED), wake]
    assert h.engine.why(1).startswith("in the high placement queue after 3 placement tries")
    assert h.engine.why(3).startswith("in the super-low placement queue after 3 placement tries")
    assert round_() == [wake]
    assert round_() == [(AbortJob(1, f"6 {abort}", by="wrr"), StatusCode.ACCEPTED), wake]
    assert h.engine.why(3).startswith("in the super-low placement queue after 5 placement tries")
    assert round_() == [(AbortJob(3, f"6 {abort}", by="wrr"), StatusCode.ACCEPTED)]
    cancels = [e.job for e in h.engine.log if e.kind is EventKind.CANCEL]
    assert cancels == [2, 1, 3]
    assert h.engine.log.reasons[2] == f"aborted by wrr: 6 {abort}"
    # an abort of a job no longer queued is refused
    assert h.engine.apply(AbortJob(2, "again"), "t").code is StatusCode.WRONG_STATE


def test_an_upgraded_job_is_tried_before_the_low_queue():
    # 1 free processor; P = 1. Round 1: low job 1 (2 processors) fits nowhere and moves to high.
    # Round 2: job 1 is tried first (high), fits nowhere and moves to super-high; then the low
    # queue: job 3 (1 processor) starts.
    h = Harness(clusters(3), PolicyChoice("wrr", {"upgrade_after": 1}))
    h.running(job(9, 0, 2, 1000), 0, started=0.0)
    h.queue(pjob(1, 2, L))
    wake = (WakeUp(30.0, by="wrr"), StatusCode.ACCEPTED)
    assert [(o.decision, o.status.code) for o in h.decide()] == [wake]
    assert h.engine.why(1).startswith("in the high placement queue after 1 placement tries")
    h.queue(pjob(3, 1, L))
    assert [(o.decision, o.status.code) for o in h.decide()] == [
        (StartJob(3, 0, by="wrr"), StatusCode.ACCEPTED),
        wake,
    ]
    assert h.engine.why(1).startswith("in the super-high placement queue after 2 placement tries")


def test_parameters_keep_the_seeds_order_of_weights():
    with pytest.raises(registry.PolicyError, match=r"high_scans \(1\) must be >= low_scans \(2\)"):
        registry.params("allocation", "wrr", {"low_scans": 2})
    with pytest.raises(registry.PolicyError, match=r"n1 >= n2 >= 1 and n3 >= n4 >= 1, got \[1, 2, 1, 1\]"):
        registry.params("allocation", "wrr", {"weights": [1, 2, 1, 1]})
