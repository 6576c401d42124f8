"""Indexes the engine keeps only once a policy reads them: a site's running jobs by estimated end
(`by_estimated_end`) is built on its first read and kept from then on, and must then be the very
list a site that kept it from the start holds."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from helpers import cloud_env, clusters, job
from isthmus.engine.engine import Engine
from isthmus.model import PolicyChoice
from isthmus.model.job import Job
from isthmus.sim.runner import simulate

jobs_strategy = st.lists(
    st.tuples(
        st.integers(0, 40),  # submit
        st.integers(1, 4),  # size
        st.sampled_from([1.0, 3.0, 5.0, 10.0, 12.0, 30.0]),  # runtime
        st.sampled_from([None, 2.0, 10.0, 40.0]),  # requested runtime (None: the prediction)
    ),
    min_size=1,
    max_size=40,
)


def _jobs(spec: list[tuple[int, int, float, float | None]]) -> list[Job]:
    ordered = sorted(spec, key=lambda x: x[0])
    return [job(i + 1, float(s), size, rt, req=req) for i, (s, size, rt, req) in enumerate(ordered)]


def _snapshots(env_name: str, jobs: list[Job], policy: str, first_read: int) -> tuple[list[object], list[object]]:
    """The log rows, and every site's `by_estimated_end` after each round from round
    `first_read` on (the index is first read just before that round)."""
    env = clusters(4, 3) if env_name == "clusters" else cloud_env(4, 3, boot=2.0)
    seen: list[object] = []
    original = Engine.run_round

    def run_round(self: Engine) -> None:
        if self.rounds + 1 >= first_read:  # read (built) before the round numbered first_read
            for s in self.view.sites:
                _ = s.by_estimated_end
        original(self)
        if self.rounds >= first_read:
            seen.append([list(s.by_estimated_end) for s in self.view.sites])

    Engine.run_round = run_round  # type: ignore[method-assign]
    try:
        result = simulate(env, jobs, PolicyChoice(policy, {}), None if env_name != "clusters" else "none")
    finally:
        Engine.run_round = original  # type: ignore[method-assign]
    return [result.log.rows()], seen


@settings(max_examples=60, deadline=None)
@given(
    jobs_strategy,
    st.sampled_from(["clusters", "cloud"]),
    st.sampled_from(["fcfs", "easy", "ff"]),
    st.integers(1, 30),
)
def test_the_running_index_built_on_first_read_is_the_one_kept_from_the_start(
    spec: list[tuple[int, int, float, float | None]], env_name: str, policy: str, first_read: int
) -> None:
    jobs = _jobs(spec)
    eager_log, eager = _snapshots(env_name, jobs, policy, 1)
    lazy_log, lazy = _snapshots(env_name, jobs, policy, first_read)
    assert lazy_log == eager_log
    assert lazy == eager[first_read - 1 :]


def test_a_site_builds_its_running_index_only_when_read() -> None:
    env = clusters(4)
    jobs = [job(1, 0, 2, 10, req=20), job(2, 0, 2, 5, req=8), job(3, 1, 4, 3)]
    result = simulate(env, jobs, "fcfs", "none")
    assert result.unfinished == {}
    from isthmus.engine.clock import SimClock
    from isthmus.policies.build import build_policies
    from isthmus.sim.runner import build_backends

    clock = SimClock()
    policies = build_policies(PolicyChoice("fcfs"), PolicyChoice("none"), None)
    engine = Engine(env, policies, clock, lambda schedule: build_backends(env, schedule))
    clock.feed(jobs, lambda j: j.submit, engine.submit)
    clock.run(until=0.0)
    backend = engine.backends[0]
    assert backend._ends is None  # started two runs, read by no one
    assert list(engine.view.sites[0].by_estimated_end) == [(8.0, 2), (20.0, 1)]
    assert backend._ends == [(8.0, 2), (20.0, 1)]
    clock.run()
    assert backend._ends == []


def test_the_queue_indexes_are_built_from_the_queue_on_first_read_and_kept_from_then_on() -> None:
    """EASY declares the size and estimate indexes but reads them only once its queue grows
    long: until then the engine keeps none; the first read builds them from the queue as it is
    (queue order, sequences in that order), and later arrivals and starts keep them."""
    from isthmus.sim.harness import Harness

    h = Harness(clusters(4), "easy", "none")
    engine = h.engine
    engine.submit(job(1, 0, 4, 100, req=100))
    engine.run_round()  # job 1 runs: the 4 processors are taken
    for jid, size, req in [(2, 2, 50.0), (3, 1, 500.0), (4, 2, 10.0), (5, 1, 5.0)]:
        engine.submit(job(jid, 0, size, req, req=req))
    book = engine.queue_book
    assert book.buckets == [{}] and book.sorted_buckets == [{}] and not book.size_index
    by_size = engine.view.queue_by_size(0)
    assert {size: list(bucket) for size, bucket in by_size.items()} == {2: [2, 4], 1: [3, 5]}
    seqs = [e.seq for e in engine.view.queue(0)]
    assert seqs == sorted(seqs) and len(set(seqs)) == 4
    by_estimate = engine.view.queue_by_runtime(0)
    assert [e.job.id for e in by_estimate[2]] == [4, 2] and [e.job.id for e in by_estimate[1]] == [5, 3]
    # up to a runtime, in queue order
    assert [jid for _, _, jid in by_estimate[1].upto(500.0)] == [3, 5]
    assert [jid for _, _, jid in by_estimate[2].upto(49.0)] == [4]
    engine.submit(job(6, 0, 2, 20, req=20))
    assert list(engine.view.queue_by_size(0)[2]) == [2, 4, 6]
    assert [e.job.id for e in engine.view.queue_by_runtime(0)[2]] == [4, 6, 2]
    engine.dequeue(engine.entries[4])
    assert list(engine.view.queue_by_size(0)[2]) == [2, 6]
    assert [e.job.id for e in engine.view.queue_by_runtime(0)[2]] == [6, 2]


def test_a_long_queue_gets_its_indexes_as_it_grows_not_at_the_first_round() -> None:
    """No round pays for indexing a long queue: past `INDEX_AT` jobs the declared indexes are
    built at that submission and kept up by each later one; a short queue waits for a read."""
    from isthmus.engine.queues import INDEX_AT
    from isthmus.model.environment import Environment
    from isthmus.model.site import Site
    from isthmus.sim.harness import Harness

    env = Environment(name="q", sites=(Site("c", nodes=4, cores_per_node=4),), round_interval=30.0)
    h = Harness(env, PolicyChoice("sjf"), now=0.0)
    book = h.engine.queue_book
    for i in range(1, INDEX_AT + 1):
        h.queue(job(i, 0, 8, 10.0), queued_at=0.0)  # no round runs: the jobs stay queued
    assert not book.size_index
    h.queue(job(INDEX_AT + 1, 0, 8, 10.0), queued_at=0.0)
    assert book.size_index and len(book.buckets[0][8]) == INDEX_AT + 1
    h.queue(job(INDEX_AT + 2, 0, 8, 5.0), queued_at=0.0)
    assert len(book.sorted_buckets[0][8]) == INDEX_AT + 2
