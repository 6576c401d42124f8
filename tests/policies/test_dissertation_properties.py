"""Property tests over the dissertation's policies (Villegas §6.3, §7.3.1), with hypothesis.

On random small workloads and clouds, every provisioning policy of Table 6.1 with every
allocation policy it can drive: no site is ever over capacity (and no VM is released while it
runs a job), every job completes exactly once, the charged cost stays within the budget,
nothing waits forever without a budget, policies never touch the state (check_purity), and
FCFS-2Q keeps each job class on its own pool.
"""

from __future__ import annotations

from collections import Counter, defaultdict

from hypothesis import given, settings
from hypothesis import strategies as st

from isthmus.metrics.run import compute_run_metrics
from isthmus.model import Environment, Job, Site, SiteKind
from isthmus.model.events import EventKind, KillCause
from isthmus.sim.runner import simulate

PROVISIONING = ["startup", "od-s", "od-g", "od-exectime", "od-execavg", "od-execkn", "od-wait"]
ALLOCATION = ["fcfs", "sjf", "fcbf-aggr", "fcbf-split", "fcbf-qwait"]


@st.composite
def workloads(draw, max_size: int = 4):
    n = draw(st.integers(1, 25))
    t = 0
    jobs = []
    for i in range(n):
        t += draw(st.integers(0, 60))
        runtime = draw(st.integers(1, 400))
        jobs.append(Job(i + 1, float(t), draw(st.integers(1, max_size)), float(runtime), user=str(i % 3)))
    return jobs


def cloud(name: str, max_vms: int, draw) -> Site:
    return Site(
        name,
        kind=SiteKind.CLOUD,
        max_vms=max_vms,
        boot_time=float(draw(st.integers(0, 120))),
        shutdown_time=float(draw(st.integers(0, 30))),
        price_per_hour=draw(st.sampled_from([0.0, 0.065])),
        billing_increment=draw(st.sampled_from([60.0, 3600.0])),
        idle_release_time=float(draw(st.integers(0, 300))),
    )


@st.composite
def clouds(draw):
    interval = draw(st.sampled_from([None, 10.0, 20.0]))
    return Environment("cloud", (cloud("cloud", draw(st.integers(4, 8)), draw),), round_interval=interval)


def check_capacity(env: Environment, jobs: list[Job], log) -> None:
    size = {j.id: j.size for j in jobs}
    busy: dict[int, int] = defaultdict(int)
    ready: dict[int, int] = defaultdict(int)
    up: set[tuple[int, int]] = set()
    for e in log:
        if e.site < 0:
            continue
        site = env.sites[e.site]
        if e.kind is EventKind.VM_READY:
            up.add((e.site, e.vm))
            ready[e.site] += site.cores_per_node
        elif e.kind is EventKind.VM_RELEASE:
            if (e.site, e.vm) not in up:
                continue  # released while booting (the budget ran out): it never held a job
            up.discard((e.site, e.vm))
            ready[e.site] -= site.cores_per_node
            assert ready[e.site] >= busy[e.site], f"a VM running a job was released at {e.time}"
        elif e.kind is EventKind.START:
            busy[e.site] += size[e.job]
            assert busy[e.site] <= ready[e.site], f"site {site.name} over capacity at {e.time}"
        elif e.kind in (EventKind.END, EventKind.KILL, EventKind.FAIL):
            busy[e.site] -= size[e.job]


def check_each_job_once(jobs: list[Job], result, *, all_done: bool) -> None:
    ends = Counter(e.job for e in result.log if e.kind is EventKind.END)
    starts = Counter(e.job for e in result.log if e.kind is EventKind.START)
    kills = Counter(e.job for e in result.log if e.kind is EventKind.KILL and e.value == KillCause.BUDGET)
    for j in jobs:
        if j.id in result.unfinished:
            assert result.unfinished[j.id], "an unfinished job needs a reason"
            assert ends[j.id] == 0
        else:
            assert ends[j.id] == 1, f"job {j.id} completed {ends[j.id]} times"
            # a run is restarted only when the budget ran out under it (KillCause.BUDGET)
            assert starts[j.id] == 1 + kills[j.id]
    if all_done:
        assert not result.unfinished, f"jobs left waiting: {result.unfinished}"


@settings(max_examples=40, deadline=None)
@given(
    workloads(),
    clouds(),
    st.sampled_from(PROVISIONING),
    st.sampled_from(ALLOCATION),
    st.one_of(st.none(), st.floats(0.0, 0.4)),
)
def test_dissertation_policies_keep_the_invariants(jobs, env, provisioning, allocation, budget):
    result = simulate(env, jobs, allocation, provisioning, check_purity=True, budget=budget)
    log = list(result.log)
    check_capacity(env, jobs, log)
    check_each_job_once(jobs, result, all_done=budget is None)
    if budget is not None:
        charged = compute_run_metrics(result.log, result.jobs, env, result.end_time).summary["cost_charged"] or 0.0
        assert charged <= budget + 1e-9
    again = simulate(env, jobs, allocation, provisioning, budget=budget)
    assert again.log.rows() == result.log.rows()


@st.composite
def pools(draw):
    sites = (cloud("p-short", draw(st.integers(1, 4)), draw), cloud("p-long", draw(st.integers(1, 4)), draw))
    return Environment("pools", sites, round_interval=draw(st.sampled_from([None, 20.0])))


@settings(max_examples=25, deadline=None)
@given(workloads(max_size=1), pools(), st.sampled_from(["od-2q", "od-s", "startup"]))
def test_fcfs_2q_keeps_each_class_on_its_pool(jobs, env, provisioning):
    result = simulate(env, jobs, "fcfs-2q", provisioning, check_purity=True)
    check_capacity(env, jobs, list(result.log))
    check_each_job_once(jobs, result, all_done=True)
    runtime = {j.id: j.runtime for j in jobs}
    for e in result.log:
        if e.kind is EventKind.START:
            assert e.site == (0 if runtime[e.job] <= 300 else 1)
