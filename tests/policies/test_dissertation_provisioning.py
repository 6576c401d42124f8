"""The dissertation's provisioning policies on hand-computed schedules (Villegas §6.3.1).

Each case is a tiny workload on one cloud of single-core VMs with event-triggered rounds; the
expected lease, ready, release times and job starts are worked out in the comments.
"""

from __future__ import annotations

import pytest

from helpers import cloud_env, events, job, start_of
from isthmus.model import Environment, PolicyChoice, Site, SiteKind
from isthmus.model.events import EventKind
from isthmus.policies.provisioning.od_execkn import ExecKnParams, OnDemandExecKN
from isthmus.sim.runner import simulate

VM = (EventKind.VM_LEASE, EventKind.VM_READY, EventKind.VM_RELEASE)
CLOUD = 1  # cloud_env puts the cloud after an (empty) cluster


def vm_times(result, kind: str) -> list[float]:
    return [t for t, k, _, _ in events(result, *VM) if k == kind]


def test_od_s_leases_one_vm_per_unassigned_job_and_releases_after_the_idle_time():
    env = cloud_env(cluster=0, max_vms=4, boot=60, idle=100)
    jobs = [job(1, 0, 1, 10), job(2, 0, 1, 10), job(3, 200, 1, 10)]
    result = simulate(env, jobs, "fcfs", "od-s")
    # t=0: two jobs, nothing free or booting: two VMs; ready at 60, jobs run 60-70, idle from 70,
    # released at 70+100. Job 3 at 200 finds no VM: one more, ready 260, released 270+100.
    assert vm_times(result, "VM_LEASE") == [0, 0, 200]
    assert vm_times(result, "VM_READY") == [60, 60, 260]
    assert vm_times(result, "VM_RELEASE") == [170, 170, 370]
    assert start_of(result) == {1: (60, CLOUD), 2: (60, CLOUD), 3: (260, CLOUD)}


def test_od_s_idle_time_zero_releases_right_after_the_job():
    env = cloud_env(cluster=0, max_vms=4, boot=60, idle=100)
    result = simulate(env, [job(1, 0, 1, 10)], "fcfs", PolicyChoice("od-s", {"idle_time": 0}))
    assert vm_times(result, "VM_RELEASE") == [70]


def test_od_s_does_not_lease_again_for_a_job_waiting_on_a_booting_vm():
    env = cloud_env(cluster=0, max_vms=4, boot=60, idle=100)
    # job 2 arrives while job 1's VM boots: it gets its own VM, job 1 does not get a second one
    result = simulate(env, [job(1, 0, 1, 10), job(2, 30, 1, 10)], "fcfs", "od-s")
    assert vm_times(result, "VM_LEASE") == [0, 30]


def test_od_s_keeps_idle_vms_a_parallel_head_job_waits_for():
    env = cloud_env(cluster=0, max_vms=3, boot=0, idle=0)
    # job 1 (1 VM, 100 s) runs; job 2 needs 3 VMs and the maximum is 3: two are leased for it at
    # once and stay idle, claimed, until job 1 ends at 100 - none is released meanwhile.
    result = simulate(env, [job(1, 0, 1, 100), job(2, 1, 3, 10)], "fcfs", "od-s")
    assert start_of(result)[2] == (100, CLOUD)
    assert [t for t in vm_times(result, "VM_RELEASE") if t < 100] == []


def test_od_g_leases_geometrically_every_period_then_releases_geometrically():
    env = cloud_env(cluster=0, max_vms=10, boot=30, idle=0)
    # seven 1-VM jobs at 0, all ending together at 1070
    runtimes = [1040, 1020, 1020, 1000, 1000, 1000, 1000]
    jobs = [job(i + 1, 0, 1, rt) for i, rt in enumerate(runtimes)]
    result = simulate(env, jobs, "fcfs", PolicyChoice("od-g", {"increase": 2, "period": 20, "idle_time": 0}))
    # decisions every 20 s: t=0 need 7 -> 2^0 = 1; t=20 need 6 (one booting) -> 2; t=40 need 4 -> 4
    assert vm_times(result, "VM_LEASE") == [0, 20, 20, 40, 40, 40, 40]
    assert vm_times(result, "VM_READY") == [30, 50, 50, 70, 70, 70, 70]
    assert start_of(result) == {1: (30, CLOUD), 2: (50, CLOUD), 3: (50, CLOUD)} | dict.fromkeys(
        range(4, 8), (70, CLOUD)
    )
    # all seven idle at 1070: releases of 1, 2, then 4 at successive decisions
    assert vm_times(result, "VM_RELEASE") == [1070, 1090, 1090, 1110, 1110, 1110, 1110]


def test_od_g_with_increase_one_leases_one_vm_per_period():
    env = cloud_env(cluster=0, max_vms=10, boot=30, idle=0)
    jobs = [job(i + 1, 0, 1, 500) for i in range(3)]
    result = simulate(env, jobs, "fcfs", PolicyChoice("od-g", {"increase": 1, "period": 20}))
    assert vm_times(result, "VM_LEASE") == [0, 20, 40]


def test_od_exectime_leases_one_vm_per_decision_above_five_boot_times():
    env = cloud_env(cluster=0, max_vms=4, boot=60, idle=300)
    jobs = [job(1, 0, 1, 100), job(2, 0, 1, 100), job(3, 0, 1, 150)]
    result = simulate(env, jobs, "fcfs", "od-exectime")
    # t=0: queued work 350 > 5 x 60 -> one VM. t=60 it is ready (observed boot 60): provisioning
    # decides before job 1 starts, work still 350 -> a second VM. t=120: 250 < 300, none more.
    assert vm_times(result, "VM_LEASE") == [0, 60]
    # VM0: job 1 60-160, job 3 160-310; VM1: job 2 120-220. Idle 300 s, then released.
    assert start_of(result) == {1: (60, CLOUD), 2: (120, CLOUD), 3: (160, CLOUD)}
    assert vm_times(result, "VM_RELEASE") == [520, 610]


def test_threshold_policies_lease_for_a_lone_job_below_the_threshold():
    env = cloud_env(cluster=0, max_vms=4, boot=60)
    for name in ("od-exectime", "od-execavg", "od-execkn", "od-wait"):
        result = simulate(env, [job(1, 0, 1, 10)], "fcfs", name)
        assert vm_times(result, "VM_LEASE") == [0], name  # liveness: no VM at all
        assert start_of(result) == {1: (60, CLOUD)}, name


def test_od_execavg_uses_the_initial_estimate_then_the_completed_mean():
    env = cloud_env(cluster=0, max_vms=4, boot=60, idle=300)
    jobs = [job(i + 1, 0, 1, 10) for i in range(7)]
    avg = simulate(env, jobs, "fcfs", "od-execavg")
    # 7 x 47 (initial estimate) = 329 > 300: a VM at 0 and again at 60 (before job 1 starts);
    # at 70 job 1 completed, the mean is 10 s: 6 x 10 < 300, no more leases.
    assert vm_times(avg, "VM_LEASE") == [0, 60]
    exact = simulate(env, jobs, "fcfs", "od-exectime")
    # known runtimes: 7 x 10 = 70 < 300: only the liveness VM
    assert vm_times(exact, "VM_LEASE") == [0]
    # one VM serves the jobs back to back from 60 (the second VM comes up at 120 with job 7)
    assert [start_of(exact)[j][0] for j in range(1, 8)] == [60, 70, 80, 90, 100, 110, 120]


def test_od_execkn_estimates_from_the_nearest_completed_jobs():
    policy = OnDemandExecKN(ExecKnParams(k=2, initial_runtime=47.0))
    assert policy.estimate(1.0) == 47.0  # nothing completed yet
    policy._done.done.extend([(1.0, 10.0), (4.0, 100.0), (1.0, 30.0), (8.0, 400.0)])
    assert policy.estimate(1.0) == pytest.approx(20.0)  # the two size-1 jobs
    assert policy.estimate(5.0) == pytest.approx(250.0)  # sizes 4 and 8 (distance 1 and 3)
    assert policy.estimate(2.0) == pytest.approx(20.0)  # sizes 1, 1 (distance 1), not 4 (2)


def test_od_execkn_observes_completions_in_a_run():
    env = cloud_env(cluster=0, max_vms=4, boot=60, idle=300)
    jobs = [job(i + 1, 0, 1, 10) for i in range(7)]
    # as OD-ExecAvg: the initial estimate leases twice, the observed runtimes (10 s) stop it
    result = simulate(env, jobs, "fcfs", PolicyChoice("od-execkn", {"k": 3}))
    assert vm_times(result, "VM_LEASE") == [0, 60]


def test_od_wait_leases_when_the_summed_waiting_time_passes_the_threshold():
    env = cloud_env(cluster=0, max_vms=4, boot=60, idle=300)
    jobs = [job(1, 0, 1, 1000), job(2, 10, 1, 10), job(3, 10, 1, 10), job(4, 10, 1, 10)]
    result = simulate(env, jobs, "fcfs", "od-wait")
    # t=0: liveness VM. At 60 job 1 starts; jobs 2-4 have waited 50 s each. Their waits sum to
    # 3 (t - 10) and pass 5 x 60 = 300 at t = 110: the policy asked to be woken then.
    leases = vm_times(result, "VM_LEASE")
    assert leases[0] == 0
    assert leases[1] == pytest.approx(110, abs=1e-3)
    assert start_of(result)[2][0] == pytest.approx(170, abs=1e-3)


def pools(max_short: int = 2, max_long: int = 2, boot: float = 10) -> Environment:
    def cloud(name: str, n: int) -> Site:
        return Site(name, kind=SiteKind.CLOUD, max_vms=n, boot_time=boot, idle_release_time=0)

    return Environment("pools", (cloud("p-short", max_short), cloud("p-long", max_long)), round_interval=None)


def test_od_2q_keeps_two_pools_with_their_own_idle_times():
    env = pools()
    jobs = [job(1, 0, 1, 5), job(2, 0, 1, 1000), job(3, 500, 1, 5)]
    result = simulate(env, jobs, "fcfs-2q", "od-2q")
    # one VM per pool at 0, ready at 10; the short job's VM stays idle 600 s and serves job 3
    # at 500 (no lease); the long pool's VM goes as soon as job 2 ends at 1010.
    assert [(t, s) for t, k, _, s in events(result, EventKind.VM_LEASE)] == [(0, 0), (0, 1)]
    assert start_of(result) == {1: (10, 0), 2: (10, 1), 3: (500, 0)}
    releases = [(t, s) for t, k, _, s in events(result, EventKind.VM_RELEASE)]
    assert sorted(releases) == [(1010, 1), (1105, 0)]


def test_od_2q_needs_a_two_queue_allocation_policy():
    with pytest.raises(ValueError, match="fcfs-2q"):
        simulate(pools(), [job(1, 0, 1, 5)], "fcfs", "od-2q")


def test_bundled_testbeds_use_the_dissertation_policies():
    from isthmus.config import load_environment

    env = load_environment("villegas-das4")
    assert (env.allocation.name, env.provisioning.name) == ("fcfs", "od-s")
    two = load_environment("villegas-fiu:pools=true")
    assert (two.allocation.name, two.provisioning.name) == ("fcfs-2q", "od-2q")
    assert [(s.name, s.max_vms) for s in two.sites] == [("fiu-short", 4), ("fiu-long", 3)]
