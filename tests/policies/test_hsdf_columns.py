"""HSDF ranks the queue through the engine's NumPy columns: it decides exactly what ranking every
queued job in Python by its definition decides, and the columns follow the queue."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from helpers import clusters, job
from isthmus.decisions.start import StartJob
from isthmus.engine.columns import QueueColumns
from isthmus.model.environment import PolicyChoice
from isthmus.policies.allocation.common import first_fit
from isthmus.policies.allocation.hsdf import estimated_slowdown
from isthmus.policies.prediction.wait import AvailabilityProfile
from isthmus.sim.harness import Harness


def _reference(h: Harness) -> list[tuple[int, int]]:
    """Blocking HSDF by its definition: the whole queue sorted by estimated slowdown (ties in
    queue order), started first fit in that order until a job fits nowhere."""
    view = h.view
    order = view.stage_sites(0)
    profile = AvailabilityProfile(view, order)
    ranked = sorted(
        view.queue(0),
        key=lambda e: -estimated_slowdown(profile.earliest_start(e.job.size) - e.queued_at, e.predicted),
    )
    can_change = any(view.sites[i].running for i in order)
    free = view.free_processors()
    out = []
    for e in ranked:
        i = first_fit(free, order, e.job.size)
        if i < 0:
            if not can_change:
                continue
            break
        free[i] -= e.job.size
        out.append((e.job.id, i))
    return out


STATES = st.tuples(
    st.lists(st.integers(1, 6), min_size=1, max_size=3),  # processors per cluster
    st.lists(  # queued: size, runtime, queued at (None: its submit time)
        st.tuples(st.integers(1, 6), st.sampled_from([5.0, 10.0, 10.0, 30.0]), st.sampled_from([None, 0.0, 50.0])),
        max_size=25,
    ),
    st.lists(st.tuples(st.integers(1, 4), st.sampled_from([20.0, 150.0, 150.0, 400.0])), max_size=5),  # running
    st.lists(st.integers(0, 24), max_size=6),  # queued jobs removed before the round
)


def _decide_and_compare(state, in_order: bool) -> None:
    procs, queued, running, removed = state
    h = Harness(clusters(*procs), "hsdf", predictor=PolicyChoice("requested"), now=100.0)
    jid = 0
    for size, requested in running:
        jid += 1
        site = next((i for i, p in enumerate(h.view.free_processors()) if p >= size), None)
        if site is not None:
            h.running(job(jid, 0, size, 1000.0, req=requested), site, started=0.0)
    first_queued = jid + 1
    for size, runtime, queued_at in queued:
        jid += 1
        if size <= max(procs):
            h.queue(job(jid, 10.0 + jid, size, runtime, req=runtime * 2 if jid % 3 else runtime), queued_at=queued_at)
    for k in removed:
        entry = h.engine.entries.get(first_queued + k)
        if entry is not None and entry.job.id in h.engine.queues[0]:
            h.engine.dequeue(entry)  # the columns forget it as the queue does
    if in_order:
        # every job queued in submit order: the ranking goes through the group heads
        assert h.view.queue_heads(0) is not None
    expected = _reference(h)
    decided = [(d.job_id, d.site) for d in h.engine.allocation.decide(h.view) if isinstance(d, StartJob)]
    assert decided == expected


@settings(max_examples=300, deadline=None)
@given(STATES)
def test_hsdf_through_the_columns_equals_ranking_the_queue_in_python(state):
    _decide_and_compare(state, in_order=False)


#: queued in submit order (queued_at None), few distinct (size, runtime) pairs so that groups hold
#: several jobs, runtimes that make equal estimated slowdowns across groups
IN_ORDER_STATES = st.tuples(
    st.lists(st.integers(1, 6), min_size=1, max_size=3),
    st.lists(st.tuples(st.integers(1, 4), st.sampled_from([5.0, 10.0, 20.0]), st.none()), max_size=40),
    st.lists(st.tuples(st.integers(1, 4), st.sampled_from([20.0, 150.0, 150.0, 400.0])), max_size=5),
    st.lists(st.integers(0, 39), max_size=10),
)


@settings(max_examples=300, deadline=None)
@given(IN_ORDER_STATES)
def test_hsdf_through_the_group_heads_equals_ranking_the_queue_in_python(state):
    _decide_and_compare(state, in_order=True)


class _Entry:
    def __init__(self, job_id: int, seq: int) -> None:
        self.job = job(job_id, 0.0, 1 + job_id % 5, 10.0)
        self.seq = seq
        self.queued_at = float(seq // 3)
        self.predicted = float(1 + job_id % 3)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.booleans(), st.integers(0, 40)), max_size=120))
def test_the_columns_hold_exactly_the_jobs_added_and_not_removed(ops):
    cols = QueueColumns(capacity=2)  # grows
    held: dict[int, _Entry] = {}
    seq = 0
    changed = False  # a queued_at was changed
    for add, job_id in ops:
        if add and job_id not in held:
            seq += 1
            held[job_id] = _Entry(job_id, seq)
            cols.add(held[job_id])  # type: ignore[arg-type]
        elif not add and job_id in held:
            cols.remove(job_id)
            del held[job_id]
        elif job_id in held:
            # earlier than every job (out of order unless alone), or later than every job (in
            # order if it is the job added last)
            queued_at = -1.0 if job_id % 2 else 1e6
            held[job_id].queued_at = queued_at
            cols.set_queued_at(job_id, queued_at)
            changed = True
    v = cols.view()
    rows = {
        int(i): (int(s), int(z), float(q), float(p))
        for i, s, z, q, p in zip(v.ids, v.seq, v.size, v.queued_at, v.predicted, strict=True)
    }
    assert rows == {i: (e.seq, e.job.size, e.queued_at, e.predicted) for i, e in held.items()}
    if len(v):
        with pytest.raises(ValueError, match="read-only"):
            v.queued_at[0] = 0.0
    # the group heads: one row per (size, predicted), its jobs in queue order, the first at the head
    heads = cols.heads.view()
    in_queue = sorted(held.values(), key=lambda e: e.seq)
    if not changed:
        assert heads is not None  # added in queued_at order
    if heads is None:
        return
    assert [e.queued_at for e in in_queue] == sorted(e.queued_at for e in in_queue)  # given only then
    groups: dict[tuple[int, float], list[_Entry]] = {}
    for e in in_queue:
        groups.setdefault((e.job.size, e.predicted), []).append(e)
    assert len(heads) == len(groups)
    assert heads.sizes == tuple(sorted({size for size, _ in groups}))
    for row in range(len(heads)):
        members = groups[(int(heads.size[row]), float(heads.predicted[row]))]
        assert (int(heads.ids[row]), int(heads.seq[row]), float(heads.queued_at[row])) == (
            members[0].job.id,
            members[0].seq,
            members[0].queued_at,
        )
        assert list(heads.group(row).items()) == [(e.job.id, (e.seq, e.queued_at)) for e in members]


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from([-3.0, -2.0, -2.0, -1.0, 0.0, float("-inf")]), max_size=60), st.integers(1, 6))
def test_ranking_in_two_steps_and_lazily_is_the_full_order(keys, head):
    import numpy as np

    from isthmus.policies.allocation.hsdf import _ranked, _ranked_lazily

    key = np.array(keys, dtype=np.float64)
    seq = np.random.default_rng(len(keys)).permutation(len(keys)).astype(np.int64)
    full = np.lexsort((seq, key)).tolist()
    assert list(_ranked(key, seq, head=head)) == full
    assert list(_ranked_lazily(key, seq, first=head - 1)) == full  # first = 0: `_ranked` alone
