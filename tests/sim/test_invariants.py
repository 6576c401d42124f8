"""Property tests over random workloads, environments and policies (hypothesis).

Invariants: no site over capacity at any time; every job starts at or after its submit time
and completes exactly once, or is reported unfinished/rejected with a reason; no TAGS run
outlives its stage's limit; policies never touch the state (check_purity); the same inputs
give an identical event log.
"""

from __future__ import annotations

from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from invariants import ALLOCATION, capacity_never_exceeded, charged_by_billing_rules, environments, workloads
from isthmus.metrics.run import compute_run_metrics
from isthmus.model import PolicyChoice
from isthmus.model.events import EventKind, KillCause
from isthmus.sim.runner import simulate


@settings(max_examples=150, deadline=None)
@given(
    workloads(),
    environments(),
    st.sampled_from(ALLOCATION),
    st.sampled_from(["on-demand", "startup"]),
    st.one_of(st.none(), st.floats(0, 0.5)),
)
def test_invariants(jobs, env, allocation, provisioning, budget):
    policy = PolicyChoice("tags-chain", {"limits": [15.0]}) if allocation == "tags-chain" else allocation
    result = simulate(env, jobs, policy, provisioning, check_purity=True, budget=budget)
    log = list(result.log)
    capacity_never_exceeded(env, log)

    summary = compute_run_metrics(result.log, result.jobs, env, result.end_time).summary
    charged = summary["cost_charged"] or 0.0
    assert charged == pytest.approx(charged_by_billing_rules(env, log, result.end_time))
    if budget is not None:
        assert charged <= budget + 1e-9

    submit = {j.id: j.submit for j in jobs}
    ends = Counter(e.job for e in log if e.kind is EventKind.END)
    rejected = {e.job for e in log if e.kind is EventKind.REJECT}
    for e in log:
        if e.kind is EventKind.START:
            assert e.time >= submit[e.job]
    for j in jobs:
        if j.id in rejected:
            assert result.log.reasons[j.id]
            assert ends[j.id] == 0
        elif j.id in result.unfinished:
            assert result.unfinished[j.id]
        else:
            assert ends[j.id] == 1, f"job {j.id} completed {ends[j.id]} times"
    # Nothing can stay queued forever here (every job fits some site of its queue), unless the
    # budget ran out before a cloud-only job could run.
    if budget is None:
        assert not result.unfinished

    # No run outlives its stage's runtime limit, except in the last stage.
    started = {}
    for e in log:
        if e.kind is EventKind.START:
            started[e.job] = e.time
        elif e.kind in (EventKind.END, EventKind.KILL) and allocation in ("tags-sets", "tags-chain"):
            limit = env.sets[0].runtime_limit if allocation == "tags-sets" else 15.0
            if e.kind is EventKind.KILL and e.value == KillCause.LIMIT:
                assert e.time - started[e.job] == limit

    again = simulate(env, jobs, policy, provisioning, budget=budget)
    assert again.log.rows() == result.log.rows()
