"""The engine's answers and hooks used by the live side: why(), lost(), restore(), cancel()."""

from __future__ import annotations

from helpers import clusters, job
from isthmus.decisions.start import StartJob
from isthmus.engine.state import JobState
from isthmus.model.events import EventKind, KillCause
from isthmus.model.status import StatusCode
from isthmus.sim.harness import Harness


def engine_for(env, allocation="fcfs"):
    h = Harness(env, allocation, "none")
    return h.engine, h.clock


def test_why_a_job_waits():
    eng, _ = engine_for(clusters(4))
    eng.submit(job(1, 0, 3, 100))
    eng.submit(job(2, 0, 4, 100))
    eng.submit(job(3, 0, 1, 100))
    eng.run_round()
    assert eng.why(1).startswith("running on s0")
    assert eng.why(2) == "waiting in queue 0 behind 0 jobs; needs 4 processors, the most free on its sites is 1"
    assert "behind 1 jobs" in eng.why(3)  # strict FCFS: blocked behind job 2
    refused = eng.apply(StartJob(2, 0), "manual")
    assert refused.code is StatusCode.NO_CAPACITY and refused.policy == "manual"
    assert refused.reason == "needs 4 processors; site s0 has 1 free"
    assert eng.why(2) == refused.reason  # the last refusal is the answer
    assert eng.status(2) == refused
    decisions = [e for e in eng.log if e.kind is EventKind.DECISION]
    assert [(d.job, d.value, d.policy) for d in decisions] == [(2, StatusCode.NO_CAPACITY, "manual")]
    assert eng.log.notes[len(eng.log) - 1] == refused.reason
    assert eng.why(99) == "job 99 is not in the system"


def test_why_status_carries_code_and_policy():
    eng, _ = engine_for(clusters(4))
    eng.submit(job(1, 0, 3, 100))
    eng.submit(job(2, 0, 4, 100))
    eng.submit(job(3, 0, 1, 100))
    eng.run_round()
    assert eng.why_status(1).code is StatusCode.ACCEPTED
    assert (eng.why_status(2).code, eng.why_status(2).policy) == (StatusCode.NO_CAPACITY, "fcfs")
    # job 3 fits (1 free) but strict FCFS holds it behind job 2: held, not out of capacity
    assert (eng.why_status(3).code, eng.why_status(3).policy) == (StatusCode.HELD, "fcfs")
    refused = eng.apply(StartJob(3, 99), "manual")  # no site 99
    assert refused.code is StatusCode.UNKNOWN_TARGET and eng.why_status(3) == refused
    assert eng.why_status(99).code is StatusCode.WRONG_STATE


def test_why_a_job_was_rejected():
    eng, _ = engine_for(clusters(4))
    assert eng.submit(job(1, 0, 9, 1)) is None
    assert "needs 9 processors" in eng.why(1)


def test_lost_run_is_requeued_once():
    eng, _ = engine_for(clusters(2))
    eng.submit(job(1, 0, 1, 100))
    eng.run_round()
    entry = eng.entries[1]
    assert eng.lost(1, entry.run + 1) is False  # not the current run
    assert eng.lost(1, entry.run) is True
    assert entry.state is JobState.QUEUED and entry.restarts == 1
    assert eng.lost(1, entry.run) is False
    kills = [e for e in eng.log if e.kind is EventKind.KILL]
    assert [k.value for k in kills] == [KillCause.LOST]
    eng.job_ended(1, 1)  # a late report of the lost run is ignored
    assert entry.state is JobState.QUEUED


def test_restore_puts_a_job_back_in_its_stage_with_its_counts():
    from isthmus.model import SiteSet

    env = clusters(1, 1, sets=(SiteSet("all", ("s0", "s1"), 10.0), SiteSet("long", ("s1",), None)))
    eng, _ = engine_for(env, "tags-sets")
    entry = eng.restore(job(7, 0, 1, 50), stage=1, run=1, restarts=1)
    assert entry is not None and entry.stage == 1 and entry.run == 1 and entry.restarts == 1
    assert list(eng.queues[1]) == [7] and not eng.queues[0]
    refused = eng.apply(StartJob(7, 0))
    assert (refused.code, refused.reason) == (StatusCode.NOT_ALLOWED, "site s0 is not among the sites of queue 1")
    assert eng.apply(StartJob(7, 1)).accepted
    assert entry.run == 2


def test_cancel_queued_and_running():
    eng, _ = engine_for(clusters(1))
    eng.submit(job(1, 0, 1, 100))
    eng.submit(job(2, 0, 1, 100))
    eng.run_round()
    assert eng.cancel(2) and eng.cancel(1)
    assert not eng.cancel(1)
    kinds = [e.kind for e in eng.log if e.job in (1, 2)]
    assert kinds.count(EventKind.CANCEL) == 2
    assert eng.backends[0].free == 1


def test_size_index_is_kept_only_for_policies_that_declare_it():
    import pytest

    eng, _ = engine_for(clusters(4), "ff")
    eng.submit(job(1, 0, 2, 10))
    assert list(eng.view.queue_by_size(0)) == [2]
    fcfs, _ = engine_for(clusters(4), "fcfs")
    fcfs.submit(job(1, 0, 2, 10))
    assert fcfs.queue_book.buckets == [{}]  # not maintained: FCFS never reads it
    with pytest.raises(RuntimeError, match="uses_size_index"):
        fcfs.view.queue_by_size(0)
