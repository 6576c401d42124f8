"""Property tests of bags of tasks over random clusters, rigid jobs and bags (hypothesis).

Invariants, all read from the event log, for FCFS, First-Fit and EASY allocation: every task of
every bag completes exactly once, and each task run ends once (completed or preempted); no site
holds more than its processors (rigid runs plus bag processors, those being preempted
included); a hold never exceeds its job's size and none is left at the end. Unobtrusiveness,
stated for what holds: under FCFS no bag delays a rigid job by more than the preemption time
past the moment the rigid jobs alone (with the jobs ahead of it where they actually ran) would
let it start. Every job a shrink names starts within the preemption time of the first shrink
for it (the engine holds the processors freed for it, and the free ones it counts on, for it
alone) with First-Fit on one or several clusters, and with FCFS and EASY when the fair-share
policy claims for no job past one that cannot start (`blocking`). Without `blocking`, FCFS and
EASY break it by design: a named job behind a head that cannot start waits for the head
(FCFS never passes it; EASY starts it only if it does not delay the head's reservation), its
hold ends after the round that did not start it (`tests/sim/test_bags.py` has the EASY case).
With SEP the bags with tasks waiting hold shares that differ by at most one processor per site
(with GEP: over the grid) whenever no rigid job waits and the load allows growth.
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from helpers import clusters
from isthmus.engine.bags import BagSettings
from isthmus.metrics.run import compute_run_metrics
from isthmus.model.environment import Environment, PolicyChoice
from isthmus.model.events import Event, EventKind
from isthmus.model.job import Job, JobKind, PriorityClass
from isthmus.model.site import Site, SiteKind
from isthmus.sim.runner import SimulationResult, simulate

K = EventKind


@st.composite
def scenarios(draw: st.DrawFn) -> tuple:
    sites = draw(st.lists(st.integers(2, 8), min_size=1, max_size=3))
    n_jobs = draw(st.integers(0, 8))
    submits = sorted(draw(st.lists(st.integers(0, 120), min_size=n_jobs, max_size=n_jobs)))
    jobs = [
        Job(i + 1, float(t), draw(st.integers(1, max(sites))), float(draw(st.integers(1, 60))))
        for i, t in enumerate(submits)
    ]
    n_bags = draw(st.integers(1, 3))
    bags = [
        Job(
            100 + k,
            float(draw(st.integers(0, 120))),
            1,
            float(draw(st.integers(1, 30))),
            user=f"u{k}",
            kind=JobKind.MALLEABLE,
            tasks=draw(st.integers(1, 25)),
            priority=PriorityClass.SUPER_LOW,
        )
        for k in range(n_bags)
    ]
    bags.sort(key=lambda b: b.submit)
    return sites, jobs, bags


def run(
    sites, jobs, bags, policy: str, params: dict, preemption: float, pull: float, allocation: str = "fcfs"
) -> SimulationResult:
    return simulate(
        clusters(*sites),
        jobs,
        allocation,
        "none",
        bags=bags,
        fairshare=PolicyChoice(policy, params),
        bag_settings=BagSettings(preemption_time=preemption, pull_latency=pull),
        check_purity=True,
    )


def tasks_complete_exactly_once(result: SimulationResult, log: list[Event]) -> None:
    ends = defaultdict(Counter)
    open_runs: dict[tuple[int, int], int] = {}
    for e in log:
        if e.kind is K.TASK_START:
            assert (e.job, e.vm) not in open_runs, "a processor runs two tasks at once"
            open_runs[(e.job, e.vm)] = e.task
        elif e.kind in (K.TASK_END, K.TASK_PREEMPT):
            assert open_runs.pop((e.job, e.vm)) == e.task
            if e.kind is K.TASK_END:
                ends[e.job][e.task] += 1
    assert not open_runs
    for b in result.bags.values():
        assert ends[b.id] == Counter(range(b.tasks)), f"bag {b.id}: {ends[b.id]}"
    assert sum(e.kind is K.BAG_END for e in log) == len(result.bags)


def no_site_over_capacity(sites: list[int], jobs: dict[int, Job], log: list[Event]) -> None:
    used = [0] * len(sites)
    for e in log:
        if e.kind is K.START:
            used[e.site] += jobs[e.job].size
        elif e.kind is K.END:
            used[e.site] -= jobs[e.job].size
        elif e.kind is K.GROW:
            used[e.site] += int(e.value)
        elif e.kind is K.BAG_RELEASE:
            used[e.site] -= 1
        assert all(0 <= u <= cap for u, cap in zip(used, sites, strict=True)), (e, used)
    assert used == [0] * len(sites)


def rigid_jobs_wait_at_most_the_preemption_time(
    sites: list[int], jobs: list[Job], log: list[Event], preemption: float
) -> None:
    """Strict FCFS: job J may start once its predecessors have started and some site has room
    for it among the rigid runs alone (T_J); it starts in [T_J, T_J + preemption]."""
    start = {e.job: e.time for e in log if e.kind is K.START}
    end = {e.job: e.time for e in log if e.kind is K.END}
    prev_start = 0.0
    for n, j in enumerate(jobs):
        before = jobs[:n]
        earliest = max(j.submit, prev_start)
        candidates = sorted({earliest, *(end[p.id] for p in before if end[p.id] > earliest)})

        def room(t: float, before: list[Job] = before, size: int = j.size) -> bool:
            used = [0] * len(sites)
            for p in before:
                if start[p.id] <= t < end[p.id]:
                    used[_site(log, p.id)] += p.size
            return any(cap - u >= size for cap, u in zip(sites, used, strict=True))

        t_j = next(t for t in candidates if room(t))
        assert t_j - 1e-9 <= start[j.id] <= t_j + preemption + 1e-9, (j, t_j, start[j.id])
        prev_start = start[j.id]


def shrinks_make_room_within_the_preemption_time(log: list[Event], preemption: float) -> None:
    """Each rigid job bags shrink for (SHRINK naming it) starts within the preemption time of the
    first such shrink (First-Fit; FCFS and EASY with the `blocking` walk, no job claiming past
    one that cannot start)."""
    start = {e.job: e.time for e in log if e.kind is K.START}
    first: dict[int, float] = {}
    for e in log:
        if e.kind is K.SHRINK and e.task >= 0:
            first.setdefault(e.task, e.time)
    for j, t in first.items():
        assert t - 1e-9 <= start[j] <= t + preemption + 1e-9, (j, t, start[j])


def holds_never_exceed_their_job(jobs: list[Job], log: list[Event]) -> None:
    """A hold never holds more processors than its job needs, and every hold has ended by the
    end (its job started, or the allocation did not start it)."""
    size = {j.id: j.size for j in jobs}
    held: dict[tuple[int, int], int] = {}
    for e in log:
        if e.kind is K.HOLD:
            assert 0 <= e.value <= size[e.job], e
            held[(e.site, e.job)] = int(e.value)
    assert not any(held.values()), held


def _site(log: list[Event], job_id: int) -> int:
    return next(e.site for e in log if e.kind is K.START and e.job == job_id)


def equal_shares(
    sites: list[int], jobs: dict[int, Job], bags: dict[int, Job], log: list[Event], per_site: bool
) -> None:
    """After all events of an instant (preemption time 0, so held = what the policy decided):
    where no rigid job waits and the load of rigid jobs is below 80%, the bags with queued tasks
    hold shares that differ by at most one (per site for SEP, over the grid for GEP)."""
    held: dict[int, list[int]] = {b: [0] * len(sites) for b in bags}
    queued = {b.id: 0 for b in bags.values()}
    rigid = [0] * len(sites)
    waiting: set[int] = set()
    arrived: set[int] = set()
    i = 0
    while i < len(log):
        t = log[i].time
        while i < len(log) and log[i].time == t:
            e = log[i]
            if e.kind is K.BAG_SUBMIT:
                queued[e.job] = int(e.value)
                arrived.add(e.job)
            elif e.kind is K.GROW:
                held[e.job][e.site] += int(e.value)
            elif e.kind is K.BAG_RELEASE:
                held[e.job][e.site] -= 1
            elif e.kind is K.TASK_START:
                queued[e.job] -= 1
            elif e.kind is K.TASK_PREEMPT:
                queued[e.job] += 1
            elif e.kind is K.SUBMIT:
                waiting.add(e.job)
            elif e.kind is K.START:
                waiting.discard(e.job)
                rigid[e.site] += jobs[e.job].size
            elif e.kind is K.END:
                rigid[e.site] -= jobs[e.job].size
            i += 1
        if waiting:
            continue
        busy = [b for b in arrived if queued[b] > 0]
        if len(busy) < 2:
            continue
        if per_site:
            for s, cap in enumerate(sites):
                if rigid[s] / cap < 0.8:
                    shares = [held[b][s] for b in busy]
                    assert max(shares) - min(shares) <= 1, (t, s, {b: held[b] for b in busy})
        elif sum(rigid) / sum(sites) < 0.8:
            shares = [sum(held[b]) for b in busy]
            assert max(shares) - min(shares) <= 1, (t, {b: held[b] for b in busy})


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    scenarios(),
    st.sampled_from(["sep", "gep"]),
    st.booleans(),
    st.sampled_from([0.0, 2.5, 7.0]),
    st.sampled_from([0.0, 1.0]),
    st.sampled_from(["default", "any", "blocking", "reservation"]),
    st.sampled_from(["fcfs", "ff", "easy"]),
)
def test_tasks_once_capacity_and_unobtrusiveness(scenario, policy, prefer, preemption, pull, walk, allocation):
    sites, jobs, bags = scenario
    params: dict = {"prefer_between_tasks": prefer}
    if walk != "default":  # the default walks as the allocation starts jobs (fcfs: blocking, easy: reservation)
        params |= {"blocking": walk == "blocking", "reservation": walk == "reservation"}
    result = run(sites, jobs, bags, policy, params, preemption, pull, allocation)
    log = list(result.log)
    tasks_complete_exactly_once(result, log)
    no_site_over_capacity(sites, {j.id: j for j in jobs}, log)
    strict = walk == "blocking" or (walk == "default" and allocation == "fcfs")
    easy = walk == "reservation" or (walk == "default" and allocation == "easy")
    if allocation == "fcfs" and strict:
        rigid_jobs_wait_at_most_the_preemption_time(sites, jobs, log, preemption)
    if allocation == "ff" or strict or (allocation == "easy" and easy):
        shrinks_make_room_within_the_preemption_time(log, preemption)
    holds_never_exceed_their_job(jobs, log)


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scenarios(), st.sampled_from(["sep", "gep"]))
def test_bags_with_work_hold_equal_shares(scenario, policy):
    sites, jobs, bags = scenario
    result = run(sites, jobs, bags, policy, {}, 0.0, 0.0)
    equal_shares(sites, {j.id: j for j in jobs}, result.bags, list(result.log), per_site=policy == "sep")


# ----------------------------------------------------------------------- a cluster and a cloud


@st.composite
def cloud_scenarios(draw: st.DrawFn) -> tuple:
    """A cluster and a cloud (paid or free, 1-3 VMs of 1-4 cores, booting in 0-60 s), or
    (`cloud_only`) the cloud alone kept at 1 VM at least, with rigid jobs and bags; every bag
    ends (on the cluster or the cloud's minimum VM at the latest)."""
    cluster = draw(st.integers(1, 6))
    cloud_only = draw(st.booleans())
    max_vms = draw(st.integers(1, 3))
    cloud = Site(
        "cloud",
        kind=SiteKind.CLOUD,
        max_vms=max_vms,
        min_vms=1 if cloud_only else 0,
        cores_per_node=draw(st.integers(1, 4)),
        boot_time=float(draw(st.sampled_from([0, 20, 60]))),
        price_per_hour=draw(st.sampled_from([0.0, 1.0])),
        billing_increment=float(draw(st.sampled_from([300, 3600]))),
        idle_release_time=float(draw(st.sampled_from([0, 30, 300]))),
    )
    sites = (cloud,) if cloud_only else (Site("c", nodes=cluster), cloud)
    env = Environment("cluster-cloud", sites)
    largest = cloud.max_vms * cloud.cores_per_node if cloud_only else cluster
    n_jobs = draw(st.integers(1 if cloud_only else 0, 8))
    submits = sorted(draw(st.lists(st.integers(0, 600), min_size=n_jobs, max_size=n_jobs)))
    if cloud_only:  # the first round, which leases the minimum VM, is at 0 with or without bags
        submits[0] = 0
    jobs = [
        Job(i + 1, float(t), draw(st.integers(1, largest)), float(draw(st.integers(1, 400))))
        for i, t in enumerate(submits)
    ]
    _, _, bags = draw(scenarios())
    return env, jobs, bags, cloud_only


def vm_lives(log: list[Event]) -> list[tuple]:
    return [(e.kind, e.site, e.vm, e.time) for e in log if e.kind in (K.VM_LEASE, K.VM_READY, K.VM_RELEASE)]


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cloud_scenarios(), st.sampled_from(["sep", "gep"]), st.sampled_from([0.0, 7.0]), st.booleans())
def test_bags_on_a_cloud_complete_every_task_once_and_change_no_lease(scenario, policy, preemption, prefer):
    """With a cluster and an On-Demand cloud: every task completes exactly once; no site holds
    more than its processors (a cloud's: its ready VMs' cores); every VM is leased while a rigid
    job waits (bags are no demand). With the cloud alone, of one VM, and no preemption time,
    the bags leave the rigid jobs' schedule and the VM's lease, boot and release as they are
    without bags (a bag never keeps a VM), hence the same charged cost over the same span (the
    VM kept at the minimum is paid until the end of the longer run). What does not hold:
    with a preemption time a rigid job may start later on a VM a bag held, and the VM's idle
    time (so its release) moves with it; with several VMs a rigid job may start on another VM
    than without bags (the free cores of a VM the bag does not hold, instead of the first VM's,
    which the bag holds), so another VM goes idle and is released (the charged cost may differ
    either way); with a cluster too, FCFS may start a job on an idle VM instead of waiting for
    the bag to give back cluster processors."""
    env, jobs, bags, cloud_only = scenario
    result = simulate(
        env,
        jobs,
        "fcfs",
        "on-demand",
        bags=bags,
        fairshare=PolicyChoice(policy, {"prefer_between_tasks": prefer}),
        bag_settings=BagSettings(preemption_time=preemption),
        check_purity=True,
    )
    log = list(result.log)
    tasks_complete_exactly_once(result, log)
    cloud = len(env.sites) - 1
    cores = env.sites[cloud].cores_per_node
    used = [0] * len(env.sites)
    ready = 0
    size = {j.id: j.size for j in jobs}
    for e in log:
        if e.kind is K.START:
            used[e.site] += size[e.job]
        elif e.kind is K.END:
            used[e.site] -= size[e.job]
        elif e.kind is K.GROW:
            used[e.site] += int(e.value)
        elif e.kind is K.BAG_RELEASE:
            used[e.site] -= 1
        elif e.kind is K.VM_READY:
            ready += cores
        elif e.kind is K.VM_RELEASE:
            ready -= cores
        assert 0 <= used[0] <= env.sites[0].nodes or cloud_only, (e, used)
        assert 0 <= used[cloud] <= ready, (e, used, ready)
    start = {e.job: e.time for e in log if e.kind is K.START}
    for e in log:  # every VM is leased for a rigid job waiting then (bags are no demand)
        if e.kind is K.VM_LEASE:
            assert any(j.submit <= e.time <= start.get(j.id, math.inf) for j in jobs), e
    if preemption == 0.0 and cloud_only and env.sites[0].max_vms == 1:
        alone = simulate(env, jobs, "fcfs", "on-demand", check_purity=True)
        rigid = (K.START, K.END)
        assert [(e.kind, e.job, e.site, e.time) for e in log if e.kind in rigid] == [
            (e.kind, e.job, e.site, e.time) for e in alone.log if e.kind in rigid
        ]
        assert vm_lives(log) == vm_lives(list(alone.log))
        # over the same span: the VM kept at the minimum is paid until the end of either run
        end = max(result.end_time, alone.end_time)
        cost = compute_run_metrics(result.log, result.jobs, env, end).summary["cost_charged"]
        assert cost == compute_run_metrics(alone.log, alone.jobs, env, end).summary["cost_charged"]
