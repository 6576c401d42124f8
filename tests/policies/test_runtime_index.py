"""SJF through the engine's runtime index decides exactly what sorting the whole queue decides.

The index (size groups ordered by predicted or actual runtime, kept by the engine for policies
that declare `runtime_index`) lets a round visit only the jobs that can start; these tests hold
it to the plain definition: sort every queued job that fits by runtime (ties in queue order),
then start each on the first site where it still fits.
"""

from __future__ import annotations

from unittest.mock import patch

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import isthmus.engine.queues as queues_module
from helpers import clusters, job
from isthmus.decisions.start import StartJob
from isthmus.model.environment import PolicyChoice
from isthmus.sim.harness import Harness


def _reference(h: Harness, key: str) -> list[tuple[int, int]]:
    """(job, site) started by the definition of SJF on the harness's state."""
    view = h.view
    free = view.free_processors()
    order = list(view.stage_sites(0))
    queued = list(view.queue(0))
    ranked = sorted(queued, key=lambda e: (e.predicted if key == "predicted" else e.job.runtime, queued.index(e)))
    out = []
    for e in ranked:
        for i in order:
            if free[i] >= e.job.size:
                free[i] -= e.job.size
                out.append((e.job.id, i))
                break
    return out


STATES = st.tuples(
    st.lists(st.integers(1, 6), min_size=1, max_size=3),  # processors per cluster
    # queued: up to 60 jobs, so that both the short-queue sort (at most 4 jobs per size group)
    # and the merge of the size groups are taken
    st.integers(0, 60).flatmap(  # a length drawn evenly: long queues are as likely as short ones
        lambda n: st.lists(
            st.tuples(st.integers(1, 6), st.sampled_from([5.0, 10.0, 10.0, 30.0])), min_size=n, max_size=n
        )
    ),
    st.lists(st.integers(1, 4), max_size=4),  # running jobs' sizes (placed where they fit)
    st.lists(st.integers(0, 59), max_size=6),  # queued jobs removed before the round (started/cancelled)
)


@settings(max_examples=300, deadline=None)
@given(STATES, st.sampled_from(["sjf", "sjf-ideal"]), st.sampled_from([2, 256]))
def test_sjf_via_the_index_equals_sorting_the_queue(state, policy, plain_max):
    # plain_max: how long a size group may grow as a plain sorted list before it becomes a
    # SortedList (2 takes the SortedList path with these short queues)
    with patch.object(queues_module, "_PLAIN_GROUP_MAX", plain_max):
        _check_sjf_index(state, policy)


def _check_sjf_index(state, policy):  # type: ignore[no-untyped-def]
    procs, queued, running, removed = state
    h = Harness(clusters(*procs), policy, predictor=PolicyChoice("requested"), now=100.0)
    jid = 0
    for size in running:
        jid += 1
        site = next((i for i, p in enumerate(h.view.free_processors()) if p >= size), None)
        if site is not None:
            h.running(job(jid, 0, size, 1000.0), site, started=0.0)
    first_queued = jid + 1
    for size, runtime in queued:
        jid += 1
        if size <= max(procs):
            h.queue(job(jid, 10.0 + jid, size, runtime, req=runtime * 2 if jid % 3 else runtime))
    for k in removed:
        entry = h.engine.entries.get(first_queued + k)
        if entry is not None and entry.job.id in h.engine.queues[0]:
            h.engine.dequeue(entry)  # the index forgets it as the queue does
    key = "predicted" if policy == "sjf" else "runtime"
    expected = _reference(h, key)
    decided = [(d.job_id, d.site) for d in h.engine.allocation.decide(h.view) if isinstance(d, StartJob)]
    assert decided == expected


@pytest.mark.parametrize(
    ("policy", "message"),
    [("sjf", "runtime_index without uses_size_index"), ("hsdf", "uses_queue_columns without uses_size_index")],
)
def test_an_index_kept_within_the_size_buckets_needs_the_size_index(policy, message):
    """The runtime index (SJF) and the queue columns (HSDF) are kept beside the size buckets."""
    from isthmus.backends.simulated import SimCluster
    from isthmus.engine.clock import SimClock
    from isthmus.engine.engine import Engine
    from isthmus.policies import registry
    from isthmus.policies.build import PolicySet

    broken = type("Broken", (type(registry.create("allocation", policy)),), {"uses_size_index": False})
    env = clusters(4)
    policies = PolicySet(broken(), Harness(env).policies.provisioning)
    with pytest.raises(ValueError, match=message):
        Engine(env, policies, SimClock(0.0), lambda sch: [SimCluster(0, env.sites[0], sch)])
