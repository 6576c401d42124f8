"""Bags of tasks on cloud sites in simulation: hand-computed schedules. Bags scavenge the VMs
leased anyway: a launcher holds a free core of a ready VM, the VM stays idle to provisioning
(idle since its last rigid job ended), releasing it preempts the launchers at once (their tasks
back in the queue), and a rigid job needing the cores makes the bag shrink there."""

from __future__ import annotations

import os
from dataclasses import replace

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_vm_properties import checked_launches, typed_environment, vm_workload

from helpers import job
from isthmus.decisions.grow import GrowBag
from isthmus.decisions.reserve import ReserveVms
from isthmus.engine.backend import CloudBackend
from isthmus.engine.bags import BagSettings
from isthmus.metrics.run import compute_run_metrics
from isthmus.model.budget import BudgetCap
from isthmus.model.environment import Environment, PolicyChoice
from isthmus.model.events import EventKind
from isthmus.model.job import Job, JobKind, PriorityClass
from isthmus.model.site import Site, SiteKind
from isthmus.model.status import StatusCode
from isthmus.sim.harness import Harness
from isthmus.sim.runner import SimulationResult, simulate

K = EventKind
#: scenarios of the typed-cloud property (ISTHMUS_CLOUD_BAG_EXAMPLES; 60 in the suite)
TYPED_EXAMPLES = int(os.environ.get("ISTHMUS_CLOUD_BAG_EXAMPLES", "60"))


def bag(jid: int, tasks: int, runtime: float, submit: float = 0.0) -> Job:
    """A bag of `tasks` tasks of `runtime` seconds."""
    return Job(jid, submit, 1, runtime, user="u", kind=JobKind.MALLEABLE, tasks=tasks, priority=PriorityClass.SUPER_LOW)


def paid_cloud(cores: int) -> Environment:
    """One paid cloud ($1 an hour, hourly increments) of at most 2 VMs of `cores` cores, booting at once."""
    site = Site(
        "cloud",
        kind=SiteKind.CLOUD,
        max_vms=2,
        cores_per_node=cores,
        price_per_hour=1.0,
        billing_increment=3600.0,
        idle_release_time=300.0,
    )
    return Environment("paid-cloud", (site,))


def run(env: Environment, jobs: list[Job], bags: list[Job], provisioning: str = "on-demand") -> SimulationResult:
    return simulate(
        env,
        jobs,
        "fcfs",
        provisioning,
        bags=bags,
        fairshare="sep" if bags else None,
        bag_settings=BagSettings(preemption_time=10.0),
        check_purity=True,
        round_interval=None,
    )


def charged(result: SimulationResult, env: Environment) -> float:
    return compute_run_metrics(result.log, result.jobs, env, result.end_time).summary["cost_charged"] or 0.0


def rows(result: SimulationResult, *kinds: EventKind) -> list[tuple[float, str, int, int, float, int]]:
    return [(e.time, e.kind.name, e.job, e.vm, e.value, e.task) for e in result.log if e.kind in kinds]


def tasks_completed_once(result: SimulationResult, b: Job) -> None:
    ends = [e.task for e in result.log if e.kind is K.TASK_END and e.job == b.id]
    assert sorted(ends) == list(range(b.tasks))


def test_on_demand_releases_the_vm_a_bag_holds_at_its_billing_boundary():
    # One 1-core VM. Job 1 (0-100) makes On-Demand lease VM 0 at 0; the bag (70 tasks of 50 s)
    # grows onto it when job 1 ends at 100 and runs tasks 0, 1, ... every 50 s. The VM is idle to
    # On-Demand since 100: it is released at 3480, 120 s before its first billing boundary (the
    # paid release window), as without the bag. Task k starts at 100 + 50 k: task 67 at 3450 is
    # preempted at 3480 with 30 s of work lost, with no preemption time (the release does not
    # wait), and goes back to the queue (slot 0 given back at once). Job 2 at 4000 leases VM 1
    # (the bag causes no lease); the bag grows on it (slot 1) at 4100 when job 2 ends and runs
    # tasks 67-69 there, the last ending at 4250; VM 1 goes at 4000 + 3600 - 120 = 7480. The
    # charged cost is the same as without the bag: one increment per VM.
    env = paid_cloud(1)
    jobs = [job(1, 0, 1, 100), job(2, 4000, 1, 100)]
    b = bag(10, 70, 50.0)
    result = run(env, jobs, [b])
    alone = run(env, jobs, [])
    vm_events = (K.VM_LEASE, K.VM_RELEASE)
    assert (
        rows(result, *vm_events)
        == rows(alone, *vm_events)
        == [
            (0.0, "VM_LEASE", -1, 0, 0.0, -1),
            (3480.0, "VM_RELEASE", -1, 0, 0.0, -1),
            (4000.0, "VM_LEASE", -1, 1, 0.0, -1),
            (7480.0, "VM_RELEASE", -1, 1, 0.0, -1),
        ]
    )
    assert charged(result, env) == charged(alone, env) == 2.0
    around = rows(result, K.GROW, K.SHRINK, K.TASK_PREEMPT, K.BAG_RELEASE, K.VM_RELEASE, K.BAG_END)
    assert around == [
        (100.0, "GROW", 10, -1, 1.0, -1),
        (3480.0, "SHRINK", 10, -1, 1.0, -1),
        (3480.0, "TASK_PREEMPT", 10, 0, 30.0, 67),
        (3480.0, "BAG_RELEASE", 10, 0, 1.0, -1),
        (3480.0, "VM_RELEASE", -1, 0, 0.0, -1),
        (4100.0, "GROW", 10, -1, 1.0, -1),
        (4250.0, "BAG_END", 10, -1, 70.0, -1),
        (4250.0, "BAG_RELEASE", 10, 1, 1.0, -1),
        (7480.0, "VM_RELEASE", -1, 1, 0.0, -1),
    ]
    shrink = next(e for e in result.log if e.kind is K.SHRINK)
    assert shrink.policy == "vm-release"
    assert [r for r in rows(result, K.TASK_START) if r[5] == 67] == [
        (3450.0, "TASK_START", 10, 0, 0.0, 67),
        (4100.0, "TASK_START", 10, 1, 0.0, 67),
    ]
    tasks_completed_once(result, b)


def test_a_rigid_job_takes_the_cores_a_bag_holds_on_a_vm_after_the_preemption_time():
    # One 2-core VM leased for job 1 (0-100); the bag (30 tasks of 40 s) holds both cores from
    # 100 (slots 0 and 1). Job 2 (1 core) at 500: On-Demand counts the cores the bag holds as
    # free and leases nothing; SEP shrinks the bag by one core for job 2 (the seeded choice:
    # slot 1, whose task 21 had just started at 500: nothing lost); job 2 starts on the VM at
    # 510, after the 10 s preemption time, and the bag grows back on it when job 2 ends at 610.
    env = paid_cloud(2)
    b = bag(10, 30, 40.0)
    result = run(env, [job(1, 0, 2, 100), job(2, 500, 1, 100)], [b])
    assert rows(result, K.VM_LEASE) == [(0.0, "VM_LEASE", -1, 0, 0.0, -1)]
    assert rows(result, K.SHRINK, K.TASK_PREEMPT, K.BAG_RELEASE, K.START, K.GROW)[:7] == [
        (0.0, "START", 1, -1, 2.0, -1),
        (100.0, "GROW", 10, -1, 2.0, -1),
        (500.0, "SHRINK", 10, -1, 1.0, 2),
        (500.0, "TASK_PREEMPT", 10, 1, 0.0, 21),
        (510.0, "BAG_RELEASE", 10, 1, 1.0, -1),
        (510.0, "START", 2, -1, 1.0, -1),
        (610.0, "GROW", 10, -1, 1.0, -1),
    ]
    tasks_completed_once(result, b)


@pytest.mark.parametrize("provisioning", ["on-demand", "startup"])
def test_a_bag_causes_no_lease(provisioning: str):
    # One rigid job of 1 core (0-10): On-Demand leases one 2-core VM for it, Startup both VMs at
    # the first round (and keeps them), with the bag as without it; the bag scavenges the free
    # cores (1 under On-Demand, 3 under Startup) at 0, the job's core too from 10, and every VM
    # goes when it would without the bag (the charged cost is the same).
    env = paid_cloud(2)
    b = bag(10, 40, 10.0)
    result = run(env, [job(1, 0, 1, 10)], [b], provisioning)
    alone = run(env, [job(1, 0, 1, 10)], [], provisioning)
    vm_events = rows(alone, K.VM_LEASE, K.VM_RELEASE)
    assert rows(result, K.VM_LEASE, K.VM_RELEASE) == vm_events
    # On-Demand: VM 0 leased at 0 and released at 3480; Startup: VMs 0 and 1 leased, kept
    assert [r[1:4] for r in vm_events] == (
        [("VM_LEASE", -1, 0), ("VM_RELEASE", -1, 0)]
        if provisioning == "on-demand"
        else [("VM_LEASE", -1, 0), ("VM_LEASE", -1, 1)]
    )
    assert charged(result, env) == charged(alone, env) > 0
    first = 1.0 if provisioning == "on-demand" else 3.0
    assert rows(result, K.GROW) == [(0.0, "GROW", 10, -1, first, -1), (10.0, "GROW", 10, -1, 1.0, -1)]
    tasks_completed_once(result, b)


def test_a_budget_cap_releasing_the_vm_preempts_the_launcher_on_it_at_once():
    # A cluster of 1 processor and one 2-core VM at $1 an hour; the budget pays one increment.
    # Job 1 (2 cores, 0-100) makes On-Demand lease the VM; the bag (150 tasks of 50 s) holds the
    # cluster's processor from 0, and one core of the VM from 100, when job 2 (1 core, 4000 s)
    # starts on the other. At 3600 the budget cannot pay the VM's second hour: job 2 is killed
    # and requeued, and the VM released; the launcher on it (task 143, just started) is preempted
    # first, with no preemption time. Job 2 then claims the cluster: SEP shrinks the bag there (its
    # running task preempted too) and job 2 starts after the 10 s preemption time, ending at 7610;
    # the bag regrows then and completes its 8 tasks left at 8010 (1 processor, 8 x 50 s).
    cloud = paid_cloud(2).sites[0]
    env = Environment("cluster-cloud", (Site("c", nodes=1), replace(cloud, max_vms=1)))
    b = bag(10, 150, 50.0)
    result = simulate(
        env,
        [job(1, 0, 2, 100), job(2, 100, 1, 4000)],
        "fcfs",
        "on-demand",
        bags=[b],
        fairshare="sep",
        bag_settings=BagSettings(preemption_time=10.0),
        check_purity=True,
        round_interval=None,
        budget=1.0,
    )
    kinds = (K.KILL, K.REQUEUE, K.SHRINK, K.TASK_PREEMPT, K.BAG_RELEASE, K.VM_RELEASE, K.START, K.BAG_END)
    assert [(t, k, j, s) for t, k, j, s, _ in events_from(result, 3600.0, kinds)] == [
        (3600.0, "KILL", 2, 1),
        (3600.0, "REQUEUE", 2, -1),
        (3600.0, "SHRINK", 10, 1),
        (3600.0, "TASK_PREEMPT", 10, 1),
        (3600.0, "BAG_RELEASE", 10, 1),
        (3600.0, "VM_RELEASE", -1, 1),
        (3600.0, "SHRINK", 10, 0),
        (3600.0, "TASK_PREEMPT", 10, 0),
        (3610.0, "BAG_RELEASE", 10, 0),
        (3610.0, "START", 2, 0),
        (8010.0, "BAG_END", 10, -1),
        (8010.0, "BAG_RELEASE", 10, 0),
    ]
    policies = [p for _, k, _, _, p in events_from(result, 3600.0, kinds) if k in ("SHRINK", "VM_RELEASE")]
    assert policies == ["vm-release", "budget", "sep"]
    preempted = next(e for e in result.log if e.kind is K.TASK_PREEMPT)
    assert (preempted.task, preempted.value) == (143, 0.0)
    tasks_completed_once(result, b)


def events_from(result: SimulationResult, since: float, kinds: tuple[EventKind, ...]) -> list[tuple]:
    return [(e.time, e.kind.name, e.job, e.site, e.policy) for e in result.log if e.kind in kinds and e.time >= since]


def test_a_failed_or_reserved_vm_preempts_the_launchers_on_it_at_once():
    # Two ready 2-core VMs of a cloud; the bag holds 3 cores: both of VM 0 (lease order) and one
    # of VM 1, each running a task. VM 0 fails: its two launchers are preempted at once (tasks
    # back to the front of the queue, cores gone with the VM); reserving VM 1 for a queued job
    # preempts the third. The VMs stay idle to provisioning all along.
    h = Harness(paid_cloud(2), "fcfs", "none", others={"fairshare": PolicyChoice("sep")}, now=100.0)
    vm0, vm1 = h.vms(0, 2, leased_at=0.0)
    cloud = h.engine.backends[0]
    assert isinstance(cloud, CloudBackend)
    h.bag(bag(10, 20, 50.0), {0: 3})
    assert [(v.id, v.bagged, v.free, v.idle) for v in cloud.vms.values()] == [(vm0, 2, 0, True), (vm1, 1, 1, True)]
    assert [v.id for v in cloud.idle_vms()] == [vm0, vm1]
    assert h.engine.vm_failed(0, vm0, "error state")
    assert (cloud.free, cloud.online, h.engine.bags.held[0]) == (1, 2, 1)
    h.queue(job(1, 100, 4, 10))  # 4 cores: it waits, holding VM 1 (the bag may not take it)
    assert h.engine.apply(ReserveVms(1, 0, 1), "manual").accepted
    assert (cloud.vms[vm1].bagged, cloud.free, cloud.reserved_cores, h.engine.bags.held[0]) == (0, 2, 2, 0)
    preempts = [(e.time, e.kind.name, e.vm, e.task) for e in h.engine.log if e.kind in (K.TASK_PREEMPT, K.SHRINK)]
    assert preempts == [
        (100.0, "SHRINK", -1, -1),
        (100.0, "TASK_PREEMPT", 0, 0),
        (100.0, "TASK_PREEMPT", 1, 1),
        (100.0, "SHRINK", -1, -1),
        (100.0, "TASK_PREEMPT", 2, 2),
    ]
    assert list(h.engine.bags.get(10).queue)[:3] == [2, 1, 0]  # each to the front, as any shrink
    # SEP leaves the reserved VM's free cores out: no growth onto them, nothing refused
    h.engine.run_round()
    assert h.engine.bags.held[0] == 0 and h.engine.rejected_decisions == 0


def test_a_bag_scavenges_vms_serving_other_users_and_a_job_claims_back_its_own_users_vm():
    # Two ready 2-core VMs: VM 0 serves user b, VM 1 user c (vm-share's leases, as a manager
    # restarted on an environment that grows bags restores them). The bag of user u (2 tasks of
    # 50 s) arrives at 100: SEP grows it by 2, onto VM 0 (lease order): a launcher charges u
    # nothing, so whose VM it is does not matter (before: refused, NO_CAPACITY). Job 1 of b
    # (2 cores, 30 s) at 100: the site has 2 free cores, but on VM 1, which serves c; job 1 may
    # only run on VM 0, whose cores the bag holds, so SEP claims those two (both launchers on VM
    # 0, tasks 0 and 1 back to the queue) and job 1 starts there at 110, after the 10 s
    # preemption time. In that round the bag regrows by 2 on VM 1 (c's, free), not on VM 0,
    # which job 1 is about to take (`GrowBag.avoid`; lease order would put it there first),
    # and ends at 160.
    h = Harness(paid_cloud(2), "fcfs", "none", others={"fairshare": PolicyChoice("sep")}, now=100.0)
    h.engine.bags.settings = BagSettings(preemption_time=10.0)
    vm0 = h.vms(0, 1, leased_at=0.0, owner="b")[0]
    vm1 = h.vms(0, 1, leased_at=0.0, owner="c")[0]
    cloud = h.engine.backends[0]
    assert isinstance(cloud, CloudBackend)
    b = bag(10, 2, 50.0, submit=100.0)
    h.bag(b)
    h.engine.run_round()
    assert [(v.id, v.bagged, v.free) for v in cloud.vms.values()] == [(vm0, 2, 0), (vm1, 0, 2)]
    h.queue(job(1, 100, 2, 30, user="b"))
    h.engine.run_round()
    h.clock.run(until=110)
    assert [(v.id, v.load, v.bagged) for v in cloud.vms.values()] == [(vm0, 2, 0), (vm1, 0, 2)]
    h.clock.run()
    assert h.engine.rejected_decisions == 0
    kinds = (K.GROW, K.SHRINK, K.TASK_PREEMPT, K.BAG_RELEASE, K.START, K.END, K.BAG_END)
    assert [(e.time, e.kind.name, e.job, e.vm, e.value, e.task) for e in h.engine.log if e.kind in kinds] == [
        (100.0, "GROW", 10, -1, 2.0, -1),
        (100.0, "SHRINK", 10, -1, 2.0, 1),
        (100.0, "TASK_PREEMPT", 10, 0, 0.0, 0),
        (100.0, "TASK_PREEMPT", 10, 1, 0.0, 1),
        (110.0, "BAG_RELEASE", 10, 0, 1.0, -1),
        (110.0, "BAG_RELEASE", 10, 1, 1.0, -1),
        (110.0, "GROW", 10, -1, 2.0, -1),
        (110.0, "START", 1, -1, 2.0, -1),
        (140.0, "END", 1, -1, 0.0, -1),
        (160.0, "BAG_RELEASE", 10, 2, 1.0, -1),
        (160.0, "BAG_END", 10, -1, 2.0, -1),
        (160.0, "BAG_RELEASE", 10, 3, 1.0, -1),
    ]


def test_a_bag_of_a_user_whose_cap_is_spent_scavenges_an_idle_vm_and_is_charged_nothing():
    # One 2-core VM at $1 an hour; a cap of $0.50 on user u's increments: u's caps can pay none.
    # Job 1 of user r (2 cores, 0-100) makes On-Demand lease the VM, charged to r (whom no cap
    # covers). u's bag (40 tasks of 50 s) grows onto both cores when job 1 ends at 100 (a rigid
    # job of u could not take the VM over, since u could not pay its next increment; a launcher
    # charges u nothing, so the takeover guard does not apply) and ends at 100 + 20 x 50 = 1100.
    # The VM goes at 3480 (On-Demand's paid release window) as without the bag; $1 charged in all,
    # $0 to u's cap.
    cloud = replace(paid_cloud(2).sites[0], max_vms=1)
    env = Environment("capped", (cloud,), budgets=(BudgetCap("u-cap", 0.5, users=("u",)),))
    b = bag(10, 40, 50.0)
    jobs = [job(1, 0, 2, 100, user="r")]
    result = run(env, jobs, [b])
    alone = run(env, jobs, [])
    assert (
        rows(result, K.VM_LEASE, K.VM_RELEASE)
        == rows(alone, K.VM_LEASE, K.VM_RELEASE)
        == [
            (0.0, "VM_LEASE", -1, 0, 0.0, -1),
            (3480.0, "VM_RELEASE", -1, 0, 0.0, -1),
        ]
    )
    assert rows(result, K.GROW, K.BAG_END) == [(100.0, "GROW", 10, -1, 2.0, -1), (1100.0, "BAG_END", 10, -1, 40.0, -1)]
    assert not [e for e in result.log if e.kind is K.DECISION]  # nothing refused
    assert charged(result, env) == charged(alone, env) == 1.0
    (cap,) = result.budgets
    assert cap["name"] == "u-cap" and cap["spent"] == 0.0, cap
    tasks_completed_once(result, b)


def test_a_growth_avoiding_vms_takes_cores_of_the_others_only():
    # Two ready 2-core VMs and a 1-processor cluster. A growth of 2 avoiding VM 0 takes VM 1's
    # cores (lease order would take VM 0's); one of 3 avoiding VM 0 is refused (2 cores left);
    # naming VMs to avoid on a cluster is invalid.
    cloud = paid_cloud(2).sites[0]
    env = Environment("cluster-cloud", (Site("c", nodes=1), cloud))
    h = Harness(env, "fcfs", "none", others={"fairshare": PolicyChoice("sep")}, now=100.0)
    vm0, vm1 = h.vms(1, 2, leased_at=0.0)
    h.bag(bag(10, 20, 50.0, submit=100.0))
    assert h.engine.apply(GrowBag(10, 1, 3, avoid=(vm0,)), "t").code is StatusCode.NO_CAPACITY
    assert h.engine.apply(GrowBag(10, 0, 1, avoid=(vm0,)), "t").code is StatusCode.INVALID
    assert h.engine.apply(GrowBag(10, 1, 2, avoid=(vm0,)), "t").accepted
    backend = h.engine.backends[1]
    assert isinstance(backend, CloudBackend)
    assert [(v.id, v.bagged) for v in backend.vms.values()] == [(vm0, 0), (vm1, 2)]


@settings(max_examples=TYPED_EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    vm_workload(),
    typed_environment(),
    st.lists(st.tuples(st.integers(0, 600), st.integers(1, 30), st.sampled_from([5.0, 50.0])), min_size=1, max_size=2),
    st.sampled_from(["sep", "gep"]),
    st.sampled_from([0.0, 7.0]),
    st.sampled_from(["ff", "fcfs"]),
)
def test_bags_beside_jobs_with_vm_requirements_on_typed_clouds(jobs, env, bag_specs, policy, preemption, allocation):
    # Clouds of several instance types and images (test_vm_properties' environments) and jobs
    # of four users with VM requirements, with bags beside them: no growth of a bag on a cloud is
    # refused (the policies' room is the engine's: VMs of any user, none avoided), no VM runs a job it
    # may not take, and every task of a bag that ends completed exactly once. (That every rigid
    # job ending without the bags ends with them does not hold: the bags change which VMs
    # On-Demand leases, and a job may then find the cloud full of idle VMs of another image.)
    first = len(jobs) + 1
    bags = [bag(first + k, n, r, submit=float(t)) for k, (t, n, r) in enumerate(bag_specs)]
    problems: list[str] = []
    with checked_launches(problems):
        result = simulate(
            env,
            jobs,
            allocation,
            "on-demand",
            bags=bags,
            fairshare=policy,
            bag_settings=BagSettings(preemption_time=preemption),
            check_purity=True,
        )
    assert problems == []
    log = list(result.log)
    bag_ids = {b.id for b in bags}
    refused = [e for e in log if e.kind is K.DECISION and e.job in bag_ids and env.sites[e.site].is_cloud]
    assert refused == [], [(e, result.log.reasons.get(e.job)) for e in refused]
    for b in bags:
        if any(e.kind is K.BAG_END and e.job == b.id for e in log):
            tasks_completed_once(result, b)
