"""A job's requested runtime as a walltime: with enforcement on, a run that reaches it is killed
and the job ends TIMEOUT (kept apart from FAILED); a run that ends at or before it completes.
Off (trace simulation's default), runs last their recorded runtime."""

from __future__ import annotations

from helpers import clusters, job
from isthmus.model.events import EventKind, KillCause
from isthmus.sim.runner import simulate


def _ends(result):
    return [
        (e.time, e.kind, e.job, e.value)
        for e in result.log
        if e.kind in (EventKind.END, EventKind.KILL, EventKind.FAIL)
    ]


def test_a_run_is_killed_at_its_requested_runtime_and_ends_timeout():
    jobs = [job(1, 0, 2, 8.0, req=5.0), job(2, 0, 2, 5.0, req=5.0), job(3, 1, 4, 3.0, req=None)]
    result = simulate(clusters(4), jobs, "fcfs", "none", enforce_walltime=True)
    assert _ends(result) == [
        (5.0, EventKind.END, 2, 0),  # ends exactly at its request: completed (ends come first)
        (5.0, EventKind.KILL, 1, KillCause.TIMEOUT),  # 8 s of work, 5 s asked: killed at 5
        (5.0, EventKind.FAIL, 1, -9),
        (8.0, EventKind.END, 3, 0),  # no request, no walltime; starts at 5 when 4 are free
    ]
    assert result.unfinished == {}


def test_without_enforcement_runs_last_their_recorded_runtime():
    jobs = [job(1, 0, 2, 8.0, req=5.0)]
    result = simulate(clusters(4), jobs, "fcfs", "none")
    assert _ends(result) == [(8.0, EventKind.END, 1, 0)]


def test_a_requeued_run_gets_a_fresh_walltime():
    from isthmus.model import PolicyChoice

    # TAGS chain: limit 2 s on s0, then s1 unlimited; walltime 5 s per run (as a batch system's)
    jobs = [job(1, 0, 1, 4.0, req=5.0)]
    result = simulate(
        clusters(1, 1), jobs, PolicyChoice("tags-chain", {"limits": [2.0]}), "none", enforce_walltime=True
    )
    assert _ends(result) == [(2.0, EventKind.KILL, 1, KillCause.LIMIT), (6.0, EventKind.END, 1, 0)]
