"""VM requirements (Cloud Scheduler, Appendix I) on hand-computed cases: the cheapest type that
fits is leased, a job runs only on a VM that matches, a job no site can match is refused at
submission with its reason; a site with one VM shape behaves as before."""

from __future__ import annotations

import pytest

from helpers import cloud_env, job, start_of
from isthmus.decisions.lease import LeaseVms
from isthmus.decisions.start import StartJob
from isthmus.engine.backend import CloudBackend
from isthmus.model import Environment, Job, Site, SiteKind, VmRequirements
from isthmus.model.events import EventKind
from isthmus.model.status import StatusCode
from isthmus.model.vmtypes import InstanceType, VmImage, cheapest_type, site_misfit
from isthmus.sim.harness import Harness
from isthmus.sim.runner import SimulationResult, simulate

SMALL = InstanceType("small", 1, 0.05, 2048, 20, "x86_64", "t3.small")
BIG = InstanceType("big", 4, 0.20, 16384, 100, "x86_64", "m5.xlarge")
ARM = InstanceType("arm", 2, 0.04, 4096, 20, "aarch64", "t4g.medium")


def typed_env(*types: InstanceType, max_vms: int = 4, boot: float = 60.0, cluster: int = 0) -> Environment:
    """One cloud offering `types`, images base (any arch) and armbase (aarch64), a private network."""
    sites = []
    if cluster:
        sites.append(Site("c", nodes=cluster))
    sites.append(
        Site(
            "cloud",
            kind=SiteKind.CLOUD,
            max_vms=max_vms,
            boot_time=boot,
            cores_per_node=types[0].cores,
            price_per_hour=types[0].price_per_hour,
            instance_types=types,
            images=(VmImage("base", "ami-1"), VmImage("armbase", "ami-2", "aarch64")),
            networks=("private",),
        )
    )
    return Environment("typed", tuple(sites), round_interval=None)


def vmjob(jid: int, submit: float, size: int, runtime: float, user: str = "u", **req: object) -> Job:
    return Job(jid, submit, size, runtime, user=user, vm=VmRequirements(**req) if req else None)  # type: ignore[arg-type]


def test_cheapest_type_counts_the_vms_a_job_spans():
    types = (SMALL, BIG, ARM)
    # one processor, no requirements: the cheapest VM (arm at $0.04)
    assert cheapest_type(None, types, (), 1) == (2, 0)
    # x86_64 for 1 processor: small ($0.05) beats big ($0.20)
    assert cheapest_type(VmRequirements(cpu_arch="x86_64"), types, (), 1)[0] == 0
    # x86_64 for 8 processors: 8 small ($0.40) vs 2 big ($0.40): a tie goes to fewer VMs (big)
    assert cheapest_type(VmRequirements(cpu_arch="x86_64"), types, (), 8)[0] == 1
    # 3 cores per VM: only big has them
    assert cheapest_type(VmRequirements(cores=3), types, (), 1)[0] == 1
    # the image arm64-only image suits only arm
    images = (VmImage("base", "ami-1"), VmImage("armbase", "ami-2", "aarch64"))
    assert cheapest_type(VmRequirements(image="ami-2"), types, images, 1) == (2, 1)
    assert cheapest_type(VmRequirements(memory_mb=10**6), types, images, 1) == (-1, -1)


def test_site_misfit_names_what_is_missing():
    req = VmRequirements(memory_mb=32768)
    why = site_misfit(req, (SMALL, BIG), (), ())
    assert why == "type small has 2048 MB of memory, not 32768 MB; type big has 16384 MB of memory, not 32768 MB"
    assert site_misfit(VmRequirements(network="public"), (SMALL,), (), ("private",)) == (
        "no network public (networks: private)"
    )
    assert site_misfit(VmRequirements(image="nope"), (SMALL,), (VmImage("base"),), ()).startswith("no image nope")


def test_on_demand_leases_the_cheapest_fitting_type_and_the_job_starts_on_it():
    # KOALA-C On-Demand with Cloud Scheduler's requirements: job 1 (no requirement, 1 proc) and
    # job 2 (4 GB) both fit an arm VM ($0.04, 2 cores): one arm VM holds both. Job 3 asks for
    # x86_64 with 8 GB: only big fits. Job 4 needs 3 cores per VM: big again, but job 3's big
    # VM keeps 3 free cores for it (planned together). VMs boot in 60 s.
    env = typed_env(SMALL, BIG, ARM)
    jobs = [
        vmjob(1, 0, 1, 100),
        vmjob(2, 0, 1, 100, memory_mb=4000),
        vmjob(3, 0, 1, 100, cpu_arch="x86_64", memory_mb=8000),
        vmjob(4, 0, 3, 100, cores=3),
    ]
    result = simulate(env, jobs, "ff", "on-demand")
    leases = [(e.vm, int(e.value), e.slots) for e in result.log if e.kind is EventKind.VM_LEASE]
    assert leases == [(0, 2, 2), (1, 1, 4)]  # one arm (type 2, 2 cores), one big (type 1, 4 cores)
    assert start_of(result) == {1: (60, 0), 2: (60, 0), 3: (60, 0), 4: (60, 0)}
    summary_cost = sum(env.sites[0].type_price_per_increment(t) for _, t, _ in leases)
    from isthmus.metrics.run import compute_run_metrics

    metrics = compute_run_metrics(result.log, result.jobs, env, result.end_time)
    summary = metrics.summary
    assert summary["cost_charged"] == pytest.approx(summary_cost) == pytest.approx(0.24)
    # capacity is counted per lease, 2 + 4 cores, over the window 0-160: 960 processor-seconds
    # for 600 busy (sizes 1, 1, 1, 3 for 100 s)
    assert summary["available_processor_seconds"] == pytest.approx(960)
    assert summary["utilization"] == pytest.approx(600 / 960)
    assert metrics.timeseries.capacity.values.max() == 6


def test_a_job_runs_only_on_a_vm_that_matches():
    env = typed_env(SMALL, BIG)
    h = Harness(env, "ff", "none")
    (small,) = h.vms(0, 1, vm_type="small")
    e = h.queue(vmjob(1, 0, 1, 100, vm_type="big"))
    # FF sees a free processor but no VM that accepts the job: it starts nothing
    assert h.decide() == []
    # the engine refuses the start anyway, naming the requirements
    status = h.engine.apply(StartJob(1, 0))
    assert status.code is StatusCode.NO_CAPACITY
    assert "matching its requirements (type=big)" in status.reason
    (big,) = h.vms(0, 1, vm_type="big")
    out = h.decide()
    assert [(o.decision, o.status.accepted) for o in out] == [(StartJob(1, 0, by="ff"), True)]
    assert e.alloc == ((big, 1),)
    backend = h.engine.backends[0]
    assert isinstance(backend, CloudBackend) and backend.vms[small].free == 1


def test_a_job_with_vm_requirements_never_runs_on_a_cluster():
    env = typed_env(SMALL, cluster=4)
    h = Harness(env, "ff", "none")
    h.queue(vmjob(1, 0, 1, 100, memory_mb=1024))
    assert h.decide() == []  # the cluster has 4 free processors, the cloud no VM
    status = h.engine.apply(StartJob(1, 0))
    assert status.code is StatusCode.NOT_ALLOWED and "is a cluster" in status.reason


def test_a_vm_serving_one_user_takes_no_job_of_another():
    env = typed_env(SMALL)
    h = Harness(env, "ff", "none")
    h.vms(0, 1, owner="alice")
    h.queue(vmjob(1, 0, 1, 100, user="bob"))
    h.queue(vmjob(2, 0, 1, 100, user="alice"))
    out = h.decide()
    assert [o.decision.job_id for o in out if isinstance(o.decision, StartJob)] == [2]


def test_lease_of_a_type_or_image_the_site_does_not_offer_is_refused():
    h = Harness(typed_env(SMALL, BIG), "ff", "none")
    status = h.engine.apply(LeaseVms(0, 1, vm_type="huge"))
    assert status.code is StatusCode.UNKNOWN_TARGET
    assert status.reason == "site cloud offers no instance type 'huge' (types: small, big)"
    status = h.engine.apply(LeaseVms(0, 1, image="ami-9"))
    assert status.code is StatusCode.UNKNOWN_TARGET and "images: base, armbase" in status.reason
    assert h.engine.apply(LeaseVms(0, 1, vm_type="big", image="ami-1")).accepted
    backend = h.engine.backends[0]
    assert isinstance(backend, CloudBackend)
    (vm,) = backend.vms.values()
    assert (vm.cores, vm.type, vm.image) == (4, 1, 0)


def test_a_job_no_site_can_match_is_refused_at_submission_with_its_reason():
    env = typed_env(SMALL, BIG)
    jobs = [vmjob(1, 0, 1, 10, memory_mb=65536), vmjob(2, 0, 1, 10, network="public"), vmjob(3, 0, 1, 10)]
    result = simulate(env, jobs, "ff", "on-demand")
    rejected = {e.job for e in result.log if e.kind is EventKind.REJECT}
    assert rejected == {1, 2}
    assert result.log.reasons[1] == (
        "no site can match its VM requirements (memory=65536 MB): cloud: type small has 2048 MB of memory, "
        "not 65536 MB; type big has 16384 MB of memory, not 65536 MB"
    )
    assert result.log.reasons[2] == (
        "no site can match its VM requirements (network=public): cloud: no network public (networks: private)"
    )
    assert start_of(result) == {3: (60, 0)}


def test_a_job_larger_than_the_matching_vms_can_hold_is_refused():
    env = typed_env(SMALL, BIG, max_vms=3)
    # the site gives up to 12 processors (3 big VMs), but 3 small VMs hold 3, not 4
    result = simulate(env, [vmjob(1, 0, 4, 10, vm_type="small")], "ff", "on-demand")
    assert result.log.reasons[1] == (
        "no site can match its VM requirements (type=small): cloud: needs 4 processors, matching VMs give at most 3"
    )


def test_one_shape_environments_lease_as_before():
    # a site without declared types: its one implicit type, VM_LEASE value 0, schedule unchanged
    env = cloud_env(cluster=1, max_vms=4, boot=60)
    result = simulate(env, [job(1, 0, 1, 100), job(2, 0, 2, 10)], "ff", "on-demand")
    assert start_of(result) == {1: (0, 0), 2: (60, 1)}
    assert {e.value for e in result.log if e.kind is EventKind.VM_LEASE} == {0.0}
    assert not any(e.kind is EventKind.VM_USER for e in result.log)


def test_why_a_job_waits_counts_only_the_vms_that_match_it():
    env = typed_env(SMALL, BIG)
    h = Harness(env, "ff", "none")
    h.vms(0, 2, vm_type="small")
    h.queue(vmjob(1, 0, 1, 100, vm_type="big"))
    status = h.engine.why_status(1)
    assert status.code is StatusCode.NO_CAPACITY
    assert status.reason == (
        "waiting in queue 0 behind 0 jobs; needs 1 processors, the most free on its sites is 0 on VMs matching "
        "its requirements (type=big)"
    )


@pytest.mark.parametrize("policy", ["od-s", "od-g", "on-demand"])
def test_the_dissertations_provisioning_policies_lease_the_cheapest_type_that_fits(policy: str) -> None:
    # job 1 needs 8 GB: only "big" (4 cores) has it; OD-S (and OD-G's first step, and
    # On-Demand) lease one big VM for it at 0, and job 2 (no requirements) fits on paper on its
    # three other cores: one VM, not a small one each (the default type, on which job 1 could
    # never run). Both start when it is ready, at 60.
    env = typed_env(SMALL, BIG)
    jobs = [vmjob(1, 0, 1, 100, memory_mb=8000), vmjob(2, 0, 1, 100)]
    result = simulate(env, jobs, "ff", policy)
    assert [(e.time, int(e.value)) for e in result.log if e.kind is EventKind.VM_LEASE] == [(0.0, 1)]
    assert start_of(result) == {1: (60.0, 0), 2: (60.0, 0)}
    assert not result.unfinished


def two_images_at_the_maximum(provisioning: str, interval: float | None) -> SimulationResult:
    """One cloud of at most one 1-core VM, images a and b, 20 s boot, idle VMs released after
    300 s; job 1 (image a) at 0 for 100 s, job 2 (image b) at 200 for 100 s; FCFS."""
    site = Site(
        "cloud",
        kind=SiteKind.CLOUD,
        max_vms=1,
        cores_per_node=1,
        boot_time=20.0,
        idle_release_time=300.0,
        images=(VmImage("a"), VmImage("b")),
    )
    env = Environment("typed", (site,), round_interval=interval)
    jobs = [vmjob(1, 0.0, 1, 100.0, image="a"), vmjob(2, 200.0, 1, 100.0, user="v", image="b")]
    return simulate(env, jobs, "fcfs", provisioning, check_purity=True)


@pytest.mark.parametrize(("interval", "start"), [(None, 440.0), (30.0, 510.0)])
def test_a_release_at_the_maximum_is_followed_by_a_round_that_leases_for_the_waiting_job(
    interval: float | None, start: float
) -> None:
    # One VM at most, images a and b, 20 s boot, idle VMs released after 300 s. Job 1 (image a)
    # runs 20-120 on VM 0; job 2 (image b) arrives at 200 and cannot use it, nor lease (at the
    # maximum). On-Demand releases VM 0 at 420 (event rounds; 450 with 30 s rounds) and must
    # then lease an image-b VM: job 2 starts one boot later, 440 (480 + 30 = 510). Before, no
    # round followed the release and the run ended at 420 with job 2 waiting.
    result = two_images_at_the_maximum("on-demand", interval)
    assert start_of(result)[2][0] == start
    leases = [(e.time, e.vm) for e in result.log if e.kind is EventKind.VM_LEASE]
    assert leases == [(0.0, 0), (start - 20.0, 1) if interval is None else (start - 30.0, 1)]


@pytest.mark.parametrize(
    ("policy", "interval", "start"),
    [
        ("od-s", None, 440.0),
        ("od-g", None, 460.0),
        ("od-exectime", None, 440.0),
        ("od-wait", None, 440.0),
        ("od-execavg", None, 440.0),
        ("od-execkn", None, 440.0),
        ("od-s", 30.0, 510.0),
        ("od-g", 30.0, 510.0),
        ("od-exectime", 30.0, 510.0),
    ],
)
def test_the_dissertation_policies_release_a_vm_no_queued_job_can_use_at_the_maximum(
    policy: str, interval: float | None, start: float
) -> None:
    # The case above, under the dissertation's policies. Job 2 (image b) cannot use the idle
    # image-a VM; before, their demand counted free processors per cloud, so job 2 was placed
    # on paper on that VM, which then counted as claimed and was never released: job 2 waited
    # to the end of the run. Now the VM is released after its 300 s idle time (420; 450 with 30 s
    # rounds) and an image-b VM leased at once, up 20 s later: 440 (510). OD-G decides once per
    # 20 s period: its release at 420 is one decision, the lease the next one at 440, up at 460.
    result = two_images_at_the_maximum(policy, interval)
    assert not result.unfinished
    assert start_of(result)[2][0] == start
    releases = [e.time for e in result.log if e.kind is EventKind.VM_RELEASE]
    assert releases[0] == (420.0 if interval is None else 450.0)
