"""FCBF-Split finds the jobs behind a blocked head through the queue's size index (only those
that fit are visited): its decisions are those of its plain scan of the whole queue, kept here
as the oracle (the policy's code before the index), event log against event log on random
workloads over one to three clusters, with the purity check on and off (the engine builds the
index at its first read)."""

from __future__ import annotations

import math
from collections.abc import Iterable

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from helpers import clusters, job
from isthmus.decisions import Decision
from isthmus.decisions.start import start_job
from isthmus.model import PolicyChoice
from isthmus.model.job import Job
from isthmus.policies.allocation.common import first_fit, free_processors
from isthmus.policies.allocation.fcbf_split import FcbfSplit
from isthmus.policies.api import View
from isthmus.sim.runner import SimulationResult, simulate


def scanned_decide(self: FcbfSplit, view: View) -> Iterable[Decision]:
    """FCBF-Split as it was: the jobs behind the head scanned one by one."""
    order = view.stage_sites(0)
    free = free_processors(view)
    out: list[Decision] = []
    queue = iter(view.queue(0))
    for e in queue:
        i = first_fit(free, order, e.job.size)
        if i < 0:
            others = list(free)
            for j in order:
                others[j] = free[j] - math.ceil(free[j] * self.params.head_share)
            for rest in queue:
                k = first_fit(others, order, rest.job.size)
                if k >= 0:
                    others[k] -= rest.job.size
                    out.append(start_job(rest.job.id, k, None, self.name))
                if not any(others[j] > 0 for j in order):
                    break
            break
        free[i] -= e.job.size
        out.append(start_job(e.job.id, i, None, self.name))
    return out


def run(procs: list[int], jobs: list[Job], share: float, purity: bool) -> SimulationResult:
    choice = PolicyChoice("fcbf-split", {"head_share": share})
    return simulate(clusters(*procs), jobs, choice, "none", check_purity=purity)


@st.composite
def workloads(draw: st.DrawFn) -> tuple[list[int], list[Job]]:
    procs = draw(st.lists(st.integers(2, 16), min_size=1, max_size=3))
    t, jobs = 0.0, []
    for jid in range(1, draw(st.integers(5, 60)) + 1):
        t += draw(st.sampled_from([0, 0, 1, 5, 20]))
        jobs.append(job(jid, t, draw(st.integers(1, max(procs))), float(draw(st.sampled_from([1, 5, 10, 50, 300])))))
    return procs, jobs


@settings(max_examples=100, deadline=None)
@given(workloads(), st.sampled_from([0.0, 0.5, 0.75, 1.0]), st.booleans())
def test_fcbf_split_through_the_index_decides_as_its_scan(
    case: tuple[list[int], list[Job]], share: float, purity: bool
) -> None:
    procs, jobs = case
    indexed = run(procs, jobs, share, purity)
    original = FcbfSplit.decide
    FcbfSplit.decide = scanned_decide  # type: ignore[method-assign]
    try:
        scanned = run(procs, jobs, share, purity)
    finally:
        FcbfSplit.decide = original  # type: ignore[method-assign]
    a, b = scanned.log.columns(), indexed.log.columns()
    for name in a:
        assert np.array_equal(a[name], b[name]), name
