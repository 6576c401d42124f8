"""FCFS-NoWait (Villegas §6.3.2) and the simulator's processor sharing, on hand-computed
schedules; property: no job stays queued while a VM is up."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from helpers import job
from isthmus.decisions.start import StartJob
from isthmus.decisions.wake import WakeUp
from isthmus.metrics.run import compute_run_metrics
from isthmus.model import Environment, Job, Site, SiteKind
from isthmus.model.events import EventKind
from isthmus.model.status import StatusCode
from isthmus.sim.harness import Harness
from isthmus.sim.runner import simulate


def two_vms(cores: int = 1, **kw) -> Environment:
    cloud = Site("cloud", kind=SiteKind.CLOUD, max_vms=2, min_vms=2, boot_time=0, cores_per_node=cores, **kw)
    return Environment("t", (cloud,), round_interval=None)


def ends(result) -> dict[int, float]:
    return {e.job: e.time for e in result.log if e.kind is EventKind.END}


def test_jobs_share_busy_vms_round_robin_and_slow_down():
    # VM0 runs job 1 and VM1 job 2 (100 s each). Job 3 (50 s) at 10 shares VM0: both at half
    # speed. Job 4 (10 s) at 20 shares VM1 (round robin): it ends at 40 (10 s of work at half
    # speed), job 2 has 80 - 10 = 70 s left at 40 and ends at 110. On VM0 job 3 ends at
    # 10 + 2 × 50 = 110; job 1 has 90 - 50 = 40 s left at 110 and ends at 150.
    jobs = [job(1, 0, 1, 100), job(2, 0, 1, 100), job(3, 10, 1, 50), job(4, 20, 1, 10)]
    r = simulate(two_vms(), jobs, "fcfs-nw", "startup")
    starts = {e.job: e.time for e in r.log if e.kind is EventKind.START}
    assert starts == {1: 0, 2: 0, 3: 10, 4: 20}  # nobody waits
    assert ends(r) == {1: 150, 2: 110, 3: 110, 4: 40}
    # slowdowns count each run against its runtime alone (the dissertation's JSD), from SHARED events
    shared = {e.job: e.value for e in r.log if e.kind is EventKind.SHARED}
    assert shared == {1: 100, 2: 100, 3: 50, 4: 10}
    m = compute_run_metrics(r.log, {j.id: j for j in jobs}, two_vms(), r.end_time)
    slowdown = dict(zip(m.records.job_id.tolist(), m.records.slowdown.tolist(), strict=True))
    assert slowdown == {1: 1.5, 2: 1.1, 3: 2.0, 4: 2.0}
    # strict FCFS on the same VMs: jobs 3 and 4 wait for a free VM instead
    r = simulate(two_vms(), jobs, "fcfs", "startup")
    assert ends(r) == {1: 100, 2: 100, 3: 150, 4: 110}


def test_a_parallel_run_goes_at_the_pace_of_its_busiest_vm():
    # 2-core VMs. Job 1 (3 procs, 100 s) takes VM0's two cores and one of VM1's; job 2 (2 procs,
    # 60 s) at 0 takes VM1's free core and shares VM0 (load 3 on 2 cores: rate 2/3 for both).
    # Both run at 2/3: job 2 ends at 90, job 1 has 100 - 60 = 40 s left, ends at 130.
    jobs = [job(1, 0, 3, 100), job(2, 0, 2, 60)]
    r = simulate(two_vms(cores=2), jobs, "fcfs-nw", "startup")
    assert ends(r) == {1: 130, 2: 90}


def test_killing_a_sharing_run_gives_its_company_full_speed_again():
    h = Harness(two_vms(), "fcfs-nw", "none")
    h.vms(0, 2)
    eng = h.engine
    for j in (job(1, 0, 1, 100), job(2, 0, 1, 100), job(3, 0, 1, 100)):
        h.queue(j)
    eng.run_round()  # job 3 shares VM0 with job 1
    assert all(e.state.name == "RUNNING" for e in eng.entries.values())
    eng.apply(WakeUp(40.0), "manual")
    h.clock.run(until=40)  # 20 s of work done by jobs 1 and 3
    assert h.clock.now == 40
    assert eng.cancel(3)
    h.clock.run()
    r = {e.job: e.time for e in eng.log if e.kind is EventKind.END}
    assert r == {1: 120, 2: 100}


def test_share_is_refused_without_ready_vms_and_on_a_cluster():
    h = Harness(two_vms(), "fcfs-nw", "none")
    h.queue(job(1, 0, 1, 10))
    status = h.engine.apply(StartJob(1, 0, share=True), "manual")
    assert status.code is StatusCode.NO_CAPACITY
    assert status.reason == "needs 1 processors; site cloud has 0 on ready VMs to share"
    h2 = Harness(Environment("c", (Site("c", nodes=1),), round_interval=None), "fcfs", "none")
    h2.queue(job(1, 0, 1, 10))
    h2.queue(job(2, 0, 1, 10))
    h2.engine.run_round()
    assert h2.engine.apply(StartJob(2, 0, share=True), "manual").code is StatusCode.NO_CAPACITY


@st.composite
def single_task_workloads(draw):
    n = draw(st.integers(1, 30))
    t = 0
    jobs = []
    for i in range(n):
        t += draw(st.integers(0, 40))
        jobs.append(Job(i + 1, float(t), 1, float(draw(st.integers(1, 300)))))
    return jobs


def ready_intervals(log) -> list[tuple[float, int]]:
    """(time, VMs ready from then on), from the log."""
    ready, out = 0, []
    for e in log:
        if e.kind is EventKind.VM_READY:
            ready += 1
        elif e.kind is EventKind.VM_RELEASE:
            ready -= 1
        else:
            continue
        out.append((e.time, ready))
    return out


@settings(max_examples=150, deadline=None)
@given(
    jobs=single_task_workloads(),
    provisioning=st.sampled_from(["startup", "od-s", "od-g", "on-demand", "od-exectime"]),
    boot=st.integers(0, 200),
    max_vms=st.integers(1, 4),
)
def test_fcfs_nw_never_leaves_a_job_queued_while_a_vm_is_up(jobs, provisioning, boot, max_vms):
    cloud = Site("cloud", kind=SiteKind.CLOUD, max_vms=max_vms, boot_time=boot, idle_release_time=30)
    r = simulate(Environment("t", (cloud,), round_interval=None), jobs, "fcfs-nw", provisioning, check_purity=True)
    steps = ready_intervals(r.log)
    start = {e.job: e.time for e in r.log if e.kind is EventKind.START}
    for j in jobs:
        t = start[j.id]
        # no VM was up at any moment the job waited: at its submit and at every change before its start
        up_before = [n for at, n in steps if at <= j.submit]
        assert not (t > j.submit and up_before and up_before[-1] > 0), f"job {j.id} waited with a VM up"
        assert all(n == 0 for at, n in steps if j.submit < at < t), f"job {j.id} waited with a VM up"
    assert sorted(e.job for e in r.log if e.kind is EventKind.END) == sorted(j.id for j in jobs)
    # work is conserved: a run never ends before its runtime of full-speed work
    for e in r.log:
        if e.kind is EventKind.END:
            assert e.time - start[e.job] >= next(j.runtime for j in jobs if j.id == e.job) - 1e-6
