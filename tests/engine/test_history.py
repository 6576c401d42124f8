"""engine/history.py: the runtime predictors' history rebuilt from an event log, against hand-
computed runtimes and user-last-two predictions, and against the history a simulated engine
built as its runs completed (and the predictions it made at each arrival)."""

from __future__ import annotations

from helpers import clusters, job
from isthmus.engine.build import PolicyChoices, build_engine
from isthmus.engine.clock import PRIO_SUBMIT, SimClock
from isthmus.engine.engine import Engine
from isthmus.engine.history import CompletedRun, HistoryReplay, arrivals, completed_runs
from isthmus.model.environment import Environment, PolicyChoice
from isthmus.model.events import EventKind, EventLog, KillCause
from isthmus.model.job import Job
from isthmus.sim.runner import simulated_backends

S, T, E, K, F, R = EventKind.SUBMIT, EventKind.START, EventKind.END, EventKind.KILL, EventKind.FAIL, EventKind.REQUEUE


def hand_log() -> EventLog:
    """Jobs 1, 3 and 4 of user a, 2 and 5 of user b, 6 of user c. Job 1 runs 0-10 (index 4: its
    END), job 2 runs 1-14 (index 9); job 3's first run is lost at 12 and its second runs 13-43
    (index 10); jobs 4 and 5 arrive at 44 (indexes 11, 12); job 5 fails; job 6 arrives at 60
    (index 16); job 4 runs 50-100 (index 17)."""
    log = EventLog()
    rows = [
        (0.0, S, 1, -1),
        (0.0, T, 1, 0),
        (1.0, S, 2, -1),
        (1.0, T, 2, 0),
        (10.0, E, 1, 0),
        (11.0, S, 3, -1),
        (12.0, K, 3, 0),
        (12.0, R, 3, 0),
        (13.0, T, 3, 1),
        (14.0, E, 2, 0),
        (43.0, E, 3, 1),
        (44.0, S, 4, -1),
        (44.0, S, 5, -1),
        (50.0, T, 4, 0),
        (52.0, T, 5, 0),
        (55.0, F, 5, 0),
        (60.0, S, 6, -1),
        (100.0, E, 4, 0),
    ]
    for t, kind, jid, run in rows:
        value = float(KillCause.LOST) if kind is K else 0.0
        log.append(t, int(kind), jid, 0 if run >= 0 else -1, -1, value, run)
    return log


USERS = {1: "a", 2: "b", 3: "a", 4: "a", 5: "b", 6: "c"}


def sjf_engine(env: Environment | None = None) -> Engine:
    env = env or clusters(8)
    return build_engine(
        env,
        PolicyChoices(PolicyChoice("sjf"), PolicyChoice("none")),
        clock=SimClock(),
        backends=simulated_backends(env),
    )


def predict(engine: Engine, user: str, req: float | None = None) -> float:
    assert engine.predictor is not None
    return engine.predictor.predict(engine.view, Job(99, 0.0, 1, 1.0, requested_runtime=req, user=user))


def test_completed_runs_are_measured_from_their_runs_start_in_completion_order() -> None:
    log = hand_log()
    # job 3's runtime counts from its second run's START (13), not its first (11); job 5 failed
    assert completed_runs(log, USERS) == [
        CompletedRun(4, "a", 10.0),
        CompletedRun(9, "b", 13.0),
        CompletedRun(10, "a", 30.0),
        CompletedRun(17, "a", 50.0),
    ]
    assert arrivals(log) == {1: 0, 2: 2, 3: 5, 4: 11, 5: 12, 6: 16}
    # a run whose job has no known user cannot be attributed: left out
    assert [r.position for r in completed_runs(log, {k: v for k, v in USERS.items() if k != 2})] == [4, 10, 17]


def test_the_replay_gives_the_predictions_of_each_arrival_then_the_final_history() -> None:
    engine = sjf_engine()
    replay = HistoryReplay.from_log(engine, hand_log(), USERS)
    # nothing had completed when job 1 or 2 arrived: a's prediction is its requested runtime,
    # else the predictor's default (no mean yet)
    replay.before_arrival(2)
    assert (engine.history, engine.runtime_count) == ({}, 0)
    assert predict(engine, "a", req=70.0) == 70.0
    assert predict(engine, "a") == 600.0
    # job 3 arrived after job 1's END: a's last runtime is 10; b has none: the mean, 10
    replay.before_arrival(3)
    assert {u: tuple(h) for u, h in engine.history.items()} == {"a": (10.0,)}
    assert (predict(engine, "a"), predict(engine, "b")) == (10.0, 10.0)
    # job 4 arrived after jobs 2 and 3 ended: a (10, 30) -> 20, b (13) -> 13, c: mean 53/3
    replay.before_arrival(4)
    assert (predict(engine, "a"), predict(engine, "b"), predict(engine, "c")) == (20.0, 13.0, 53.0 / 3)
    replay.before_arrival(5)  # nothing ended between 4's and 5's arrivals
    assert engine.runtime_count == 3
    # the restored job is predicted from that history (what SJF orders it by)
    entry = engine.restore(job(4, 44.0, 1, 1.0, user="a"))
    assert entry is not None and entry.predicted == 20.0
    # the end: a keeps its last two (30, 50) -> 40; the sum and count hold every completed run
    replay.finish()
    assert {u: tuple(h) for u, h in engine.history.items()} == {"a": (30.0, 50.0), "b": (13.0,)}
    assert (engine.runtime_sum, engine.runtime_count) == (103.0, 4)
    assert (predict(engine, "a"), predict(engine, "b"), predict(engine, "c")) == (40.0, 13.0, 103.0 / 4)
    replay.finish()  # finishing twice adds nothing
    assert engine.runtime_count == 4


def test_a_job_not_in_the_log_gets_the_history_fed_so_far() -> None:
    engine = sjf_engine()
    replay = HistoryReplay.from_log(engine, hand_log(), USERS)
    replay.before_arrival(3)
    replay.before_arrival(77)
    assert engine.runtime_count == 1
    replay.before_arrival(1)  # an earlier arrival after a later one: the history does not go back
    assert engine.runtime_count == 1


def test_the_rebuilt_history_is_the_one_a_simulated_engine_built_and_predicts_as_it_did() -> None:
    # three users on 4 processors, SJF with user-last-two: the predictions made at each arrival
    # depend on what had completed by then
    env = clusters(4, interval=None)
    jobs = [
        job(i, float(3 * i), 1 + i % 3, float(5 + (7 * i) % 23), user="abc"[i % 3], req=None if i % 4 else 40.0)
        for i in range(1, 40)
    ]
    original = sjf_engine(env)
    assert original.predictor is not None
    made: dict[int, float] = {}
    predictor = original.predictor
    predict_at_arrival = predictor.predict

    def recording(view, j):  # type: ignore[no-untyped-def]
        made[j.id] = predict_at_arrival(view, j)
        return made[j.id]

    predictor.predict = recording  # type: ignore[method-assign]
    original.clock.feed(jobs, lambda j: j.submit, original.submit, PRIO_SUBMIT)
    original.clock.run(1e9, original.idle)
    assert not original.entries and len(made) == len(jobs)

    rebuilt = sjf_engine(env)
    replay = HistoryReplay.from_log(rebuilt, original.log, {j.id: j.user for j in jobs})
    for j in jobs:
        replay.before_arrival(j.id)
        assert predict(rebuilt, j.user, j.requested_runtime) == made[j.id], j.id
    replay.finish()
    assert {u: tuple(h) for u, h in rebuilt.history.items()} == {u: tuple(h) for u, h in original.history.items()}
    assert (rebuilt.runtime_sum, rebuilt.runtime_count) == (original.runtime_sum, original.runtime_count)
    assert original.runtime_count == len(jobs)
