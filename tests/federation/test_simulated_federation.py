"""Several managers on one simulated clock (Villegas dissertation ch. 4; IBM seed §4): hand-
computed schedules of forwarding, notification, rejection of jobs no one can run and the hand-back
of jobs at a window's close, and properties over random federations (each job ends exactly once,
at one manager; no site over capacity)."""

from __future__ import annotations

from collections import Counter

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from helpers import clusters, job
from invariants import capacity_never_exceeded
from isthmus.federation.run import Manager, simulate_federation
from isthmus.federation.simulated import LatencyModel
from isthmus.model import Environment, PolicyChoice, Site
from isthmus.model.events import EventKind
from isthmus.sim.runner import SimulationResult

SELECTION = [
    "local-first",
    "round-robin",
    "lowest-qlen",
    "lowest-qlen-cpus",
    "highest-idle",
    "lowest-load",
    "highest-cap",
    "bf-cap",
    "bf-idle",
    "ibm-matching",
]


def trail(result: SimulationResult) -> list[tuple[float, str, int]]:
    c = result.log.columns()
    return [(c["time"][i], EventKind(c["kind"][i]).name, c["job"][i]) for i in range(len(c["time"]))]


def test_forwarded_job_runs_at_the_peer_and_one_no_one_can_run_is_rejected() -> None:
    a = Manager(
        "A",
        clusters(4),
        PolicyChoice("lowest-qlen"),
        [job(1, 0, 4, 100), job(2, 10, 2, 50), job(3, 20, 8, 30), job(4, 30, 100, 5)],
    )
    b = Manager("B", clusters(8))
    r = simulate_federation([a, b], latency=LatencyModel(1.0))
    # job 2: A and B both have no queued job (tie): A keeps it and runs it when job 1 ends;
    # job 3 (8 processors) fits no site of A: forwarded at 20, at B one second later;
    # job 4 fits nowhere: rejected at the end of its round, saying so
    assert trail(r.managers["A"]) == [
        (0, "SUBMIT", 1),
        (0, "START", 1),
        (10, "SUBMIT", 2),
        (20, "SUBMIT", 3),
        (20, "FORWARD", 3),
        (30, "SUBMIT", 4),
        (30, "REJECT", 4),
        (100, "END", 1),
        (100, "START", 2),
        (150, "END", 2),
    ]
    assert trail(r.managers["B"]) == [(21, "SUBMIT", 3), (21, "START", 3), (51, "END", 3)]
    assert r.managers["A"].log.reasons[4].endswith("offers at most 4, and no peer took it")
    assert r.forwarded == 1 and r.returned == 0
    merged = Counter(k for _, k, _ in trail(r.merged))
    assert merged["END"] == 3 and merged["REJECT"] == 1


def test_without_peers_a_job_too_large_is_rejected_at_once() -> None:
    a = Manager("A", clusters(4), PolicyChoice("lowest-qlen"), [job(1, 0, 8, 10)])
    r = simulate_federation([a])
    assert trail(r.managers["A"]) == [(0, "SUBMIT", 1), (0, "REJECT", 1)]


def test_jobs_waiting_at_a_closing_window_go_back_to_their_origin_and_not_there_again() -> None:
    # B's only site is open until t=50. At 5 B is idle: A forwards its job 2 there; B's own job
    # arrives at 5.5 and takes the site until 105, so job 2 waits at B and fails back at 50 (IBM
    # seed §4.2.2), is queued again at A at 51, is not forwarded to B again (failed resource,
    # and B's site is closed) and runs at A when A's job ends at 200
    b_env = Environment("B", (Site("b", nodes=4, available_until=50.0),), round_interval=None)
    a = Manager("A", clusters(4), PolicyChoice("lowest-load"), [job(1, 0, 4, 200), job(2, 5, 4, 10)])
    b = Manager("B", b_env, None, [job(100, 5.5, 4, 100)])
    r = simulate_federation([a, b], latency=LatencyModel(1.0))
    moves = {"SUBMIT", "START", "END", "FORWARD", "RETURN", "REQUEUE"}
    assert [e for e in trail(r.managers["A"]) if e[1] in moves] == [
        (0, "SUBMIT", 1),
        (0, "START", 1),
        (5, "SUBMIT", 2),
        (5, "FORWARD", 2),
        (51, "REQUEUE", 2),
        (200, "END", 1),
        (200, "START", 2),
        (210, "END", 2),
    ]
    assert [e for e in trail(r.managers["B"]) if e[1] in moves] == [
        (5.5, "SUBMIT", 100),
        (5.5, "START", 100),
        (6, "SUBMIT", 2),
        (50, "RETURN", 2),
        (105.5, "END", 100),
    ]
    assert r.returned == 1


@st.composite
def federations(draw):  # type: ignore[no-untyped-def]
    n = draw(st.integers(2, 3))
    names = ["A", "B", "C"][:n]
    policy = draw(st.sampled_from(SELECTION))
    next_id = 1
    managers = []
    for name in names:
        sizes = draw(st.lists(st.integers(1, 8), min_size=1, max_size=2))
        env = Environment(name, tuple(Site(f"{name}{i}", nodes=s) for i, s in enumerate(sizes)), round_interval=None)
        jobs = []
        t = 0.0
        for _ in range(draw(st.integers(0, 8))):
            t += draw(st.integers(0, 30))
            jobs.append(job(next_id, t, draw(st.integers(1, 10)), float(draw(st.integers(1, 100)))))
            next_id += 1
        managers.append(Manager(name, env, PolicyChoice(policy) if draw(st.booleans()) else None, jobs))
    return managers, draw(st.sampled_from([0.0, 0.5, 5.0]))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(federations())
def test_every_job_ends_exactly_once_at_one_manager(case) -> None:  # type: ignore[no-untyped-def]
    managers, latency = case
    r = simulate_federation(managers, latency=LatencyModel(latency))
    submitted = {j.id for m in managers for j in m.jobs}
    ends: Counter[int] = Counter()
    where: dict[int, set[str]] = {}
    for name, res in r.managers.items():
        capacity_never_exceeded(res.env, res.log)
        for _, kind, jid in trail(res):
            if kind in ("END", "REJECT"):
                ends[jid] += 1
            if kind == "START":
                where.setdefault(jid, set()).add(name)
        assert not res.unfinished, res.unfinished
    assert set(ends) == submitted and all(n == 1 for n in ends.values())
    assert all(len(m) == 1 for m in where.values())  # never started at two managers


def test_a_job_arriving_after_the_window_closed_fails_back_at_once() -> None:
    # B's only site is open until t=50. At 49.5 A's site is busy (job 1 until 200) and B's
    # last resource data (from t=0) shows its site idle: lowest-load forwards job 2 there. It
    # reaches B at 50.5, after the close: B hands it back at once (RETURN, IBM seed §4.2.2) instead
    # of queueing it where no site can ever start it; A requeues it at 51.5, does not send it to B
    # again, and runs it when job 1 ends
    b_env = Environment("B", (Site("b", nodes=4, available_until=50.0),), round_interval=None)
    a = Manager("A", clusters(4), PolicyChoice("lowest-load"), [job(1, 0, 4, 200), job(2, 49.5, 4, 10)])
    b = Manager("B", b_env)
    r = simulate_federation([a, b], latency=LatencyModel(1.0))
    moves = {"SUBMIT", "START", "END", "FORWARD", "RETURN", "REQUEUE"}
    assert [e for e in trail(r.managers["A"]) if e[1] in moves] == [
        (0, "SUBMIT", 1),
        (0, "START", 1),
        (49.5, "SUBMIT", 2),
        (49.5, "FORWARD", 2),
        (51.5, "REQUEUE", 2),
        (200, "END", 1),
        (200, "START", 2),
        (210, "END", 2),
    ]
    assert [e for e in trail(r.managers["B"]) if e[1] in moves] == [(50.5, "SUBMIT", 2), (50.5, "RETURN", 2)]
    assert r.managers["B"].log.reasons[2] == "handed back to A: its sites here closed"
    assert r.returned == 1 and not r.managers["A"].unfinished and not r.managers["B"].unfinished


@st.composite
def federations_with_windows(draw):  # type: ignore[no-untyped-def]
    """Like `federations`, but some managers are cloud domains as in the IBM seed: no user
    submits to them and each of their sites closes at a drawn time; jobs waiting there when it
    closes, or reaching it after, fail back to their origin. The first manager stays an origin."""
    managers, latency = draw(federations())
    out = [managers[0]]
    for m in managers[1:]:
        if draw(st.booleans()):
            sites = tuple(
                Site(s.name, nodes=s.nodes, available_until=float(draw(st.integers(1, 120)))) for s in m.env.sites
            )
            m = Manager(m.name, Environment(m.name, sites, round_interval=None), m.selection, [])
        out.append(m)
    return out, latency


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(federations_with_windows())
def test_with_closing_windows_every_job_still_ends_exactly_once(case) -> None:  # type: ignore[no-untyped-def]
    managers, latency = case
    r = simulate_federation(managers, latency=LatencyModel(latency))
    submitted = {j.id for m in managers for j in m.jobs}
    ends: Counter[int] = Counter()
    for res in r.managers.values():
        capacity_never_exceeded(res.env, res.log)
        for _, kind, jid in trail(res):
            if kind in ("END", "REJECT"):
                ends[jid] += 1
        assert not res.unfinished, res.unfinished
    assert set(ends) == submitted and all(n == 1 for n in ends.values())
