"""Property tests of VM requirements and vm-share (hypothesis).

1. No VM runs a job whose requirements it does not meet (Cloud Scheduler, Appendix I): every
   run's VMs are ready, not retiring, serve the job's user or anyone, and are of a type, image
   and network meeting the job's requirements; no job with requirements runs on a cluster.
2. Shares (Cloud Scheduler §3.3): once rebalancing has settled on a cloud (after a round, no
   VM booting or retiring there), the users with queued work their own VMs cannot take hold
   numbers of VMs that differ by at most one (jobs of one VM each).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from hypothesis import given, settings
from hypothesis import strategies as st

from isthmus.backends.simulated import SimCloud
from isthmus.engine.backend import CloudBackend
from isthmus.engine.clock import PRIO_SUBMIT, SimClock
from isthmus.engine.engine import Engine
from isthmus.engine.state import JobEntry
from isthmus.model import Environment, Job, Site, SiteKind, VmRequirements
from isthmus.model.environment import PolicyChoice
from isthmus.model.events import EventKind
from isthmus.model.states import VmState
from isthmus.model.vmtypes import InstanceType, VmImage, type_misfit
from isthmus.policies.build import build_policies
from isthmus.policies.vmfit import PaperVms
from isthmus.sim.runner import build_backends, simulate

TYPES = (
    InstanceType("small", 1, 0.05, 2048, 20, "x86_64"),
    InstanceType("big", 4, 0.20, 16384, 100, "x86_64"),
    InstanceType("arm", 2, 0.04, 4096, 40, "aarch64"),
)
IMAGES = (VmImage("base", "ami-1"), VmImage("armbase", "ami-2", "aarch64"))
REQUIREMENTS = (
    None,
    VmRequirements(memory_mb=4000),
    VmRequirements(vm_type="small"),
    VmRequirements(cpu_arch="x86_64"),
    VmRequirements(cpu_arch="aarch64", image="armbase"),
    VmRequirements(cores=4),
    VmRequirements(storage_gb=50),
    VmRequirements(network="private"),
    VmRequirements(network="public"),  # no cloud offers it: rejected at submission
)
USERS = ("ann", "bo", "cy", "di")


@st.composite
def typed_environment(draw: st.DrawFn) -> Environment:
    sites = []
    if draw(st.booleans()):
        sites.append(Site("c", nodes=draw(st.integers(1, 4))))
    for k in range(draw(st.integers(1, 2))):
        types = tuple(draw(st.permutations(TYPES))[: draw(st.integers(1, 3))])
        sites.append(
            Site(
                f"cloud{k}",
                kind=SiteKind.CLOUD,
                max_vms=draw(st.integers(1, 6)),
                boot_time=draw(st.sampled_from([0.0, 10.0, 60.0])),
                cores_per_node=types[0].cores,
                price_per_hour=types[0].price_per_hour,
                instance_types=types,
                images=IMAGES,
                networks=("private",),
            )
        )
    return Environment("props", tuple(sites), round_interval=draw(st.sampled_from([None, 30.0])))


@st.composite
def vm_workload(draw: st.DrawFn, one_vm: bool = False) -> list[Job]:
    n = draw(st.integers(1, 25))
    jobs = []
    t = 0.0
    for i in range(n):
        t += draw(st.sampled_from([0.0, 0.0, 5.0, 40.0, 200.0]))
        size = 1 if one_vm else draw(st.integers(1, 5))
        req = draw(st.sampled_from(REQUIREMENTS[:-2] if one_vm else REQUIREMENTS))
        runtime = draw(st.sampled_from([1.0, 30.0, 100.0, 500.0]))
        jobs.append(Job(i + 1, t, size, runtime, user=draw(st.sampled_from(USERS)), vm=req))
    return jobs


def _violation(backend: CloudBackend, entry: JobEntry) -> str:
    job = entry.job
    for vm_id, _ in entry.alloc:
        vm = backend.vms[vm_id]
        if vm.state is not VmState.READY:
            return f"job {job.id} on VM {vm_id} in state {vm.state.name}"
        if vm.retiring:
            return f"job {job.id} started on retiring VM {vm_id}"
        if vm.owner is not None and vm.owner != job.user:
            return f"job {job.id} of {job.user} on VM {vm_id} serving {vm.owner}"
        req = job.vm
        if req is None:
            continue
        site = backend.site
        why = type_misfit(req, site.types[vm.type])
        if why:
            return f"job {job.id} on VM {vm_id}: {why}"
        if req.image is not None and not site.vm_images[vm.image].named(req.image):
            return f"job {job.id} on VM {vm_id} booted {site.vm_images[vm.image].name}, not {req.image}"
        if req.network is not None and req.network not in site.networks:
            return f"job {job.id} on {site.name} without network {req.network}"
    return ""


@contextmanager
def checked_launches(problems: list[str]) -> Iterator[None]:
    """Check every run a simulated cloud launches (its VMs must accept the job)."""
    original = SimCloud._launch

    def launch(self: SimCloud, entry: JobEntry, now: float) -> None:
        why = _violation(self, entry)
        if why:
            problems.append(why)
        original(self, entry, now)

    SimCloud._launch = launch  # type: ignore[method-assign]
    try:
        yield
    finally:
        SimCloud._launch = original  # type: ignore[method-assign]


@settings(max_examples=120, deadline=None)
@given(
    vm_workload(),
    typed_environment(),
    st.sampled_from(
        [
            ("ff", "on-demand", None),
            ("fcfs", "on-demand", None),
            ("sjf", "on-demand", None),
            ("easy", "on-demand", None),
            ("ff", "none", "graceful"),
            ("ff", "none", "kill"),
        ]
    ),
)
def test_no_vm_runs_a_job_whose_requirements_it_does_not_meet(jobs, env, policies):
    allocation, provisioning, mode = policies
    fair = PolicyChoice("vm-share", {"mode": mode}) if mode else None
    problems: list[str] = []
    with checked_launches(problems):
        result = simulate(env, jobs, allocation, provisioning, fairshare=fair, check_purity=True)
    assert problems == []
    by_id = {j.id: j for j in jobs}
    for e in result.log:
        if e.kind is EventKind.START and not env.sites[e.site].is_cloud:
            assert by_id[e.job].vm is None, f"job {e.job} with VM requirements ran on cluster {env.sites[e.site].name}"
        if e.kind is EventKind.REJECT and by_id[e.job].vm == VmRequirements(network="public"):
            reason = result.log.reasons[e.job]
            assert "no network public" in reason or reason.startswith("needs "), reason  # or too large
    # no job asking for a network no cloud has ever runs
    started = {e.job for e in result.log if e.kind is EventKind.START}
    assert not any(by_id[j].vm == VmRequirements(network="public") for j in started)


def _unsettled_shares(engine: Engine) -> list[str]:
    """Users with queued work their own VMs cannot take, on each settled cloud, whose numbers of
    VMs differ by more than one."""
    out = []
    view = engine.view
    for b in engine.backends:
        if not isinstance(b, CloudBackend):
            continue
        if any(v.state is VmState.BOOTING or v.retiring for v in b.vms.values() if v.state is not VmState.GONE):
            continue  # still rebalancing
        cloud = view.cloud(b.index)
        assert cloud is not None
        held: dict[str, list] = {}
        for v in cloud.vms():
            if v.owner is not None and not v.retiring:
                held.setdefault(v.owner, []).append(v)
        waiting = set()
        queued: dict[str, list[Job]] = {}
        for q in engine.queues:
            for e in q.values():
                queued.setdefault(e.job.user, []).append(e.job)
        for user, jobs in queued.items():
            paper = PaperVms(cloud, held.get(user, []))
            if any(not paper.place(j) for j in jobs):
                waiting.add(user)
        counts = {u: len(held.get(u, [])) for u in waiting}
        if counts and max(counts.values()) - min(counts.values()) > 1:
            out.append(f"t={engine.now}: {b.name} shares of users with queued work: {counts}")
    return out


@settings(max_examples=120, deadline=None)
@given(
    vm_workload(one_vm=True),
    st.integers(1, 6),
    st.sampled_from([0.0, 10.0, 60.0]),
    st.sampled_from(["graceful", "kill"]),
    st.sampled_from([(TYPES[0],), TYPES]),
)
def test_shares_of_users_with_queued_work_differ_by_at_most_one_vm_once_settled(jobs, max_vms, boot, mode, types):
    env = Environment(
        "share",
        (
            Site(
                "cloud",
                kind=SiteKind.CLOUD,
                max_vms=max_vms,
                boot_time=boot,
                cores_per_node=types[0].cores,
                price_per_hour=types[0].price_per_hour,
                instance_types=types,
                images=IMAGES,
                networks=("private",),
            ),
        ),
        round_interval=None,
    )
    # every job must fit a type of this cloud (a one-type cloud: no arch/size requirement)
    if len(types) == 1:
        jobs = [Job(j.id, j.submit, 1, j.runtime, user=j.user) for j in jobs]
    policies = build_policies(
        PolicyChoice("ff"), PolicyChoice("none"), None, {"fairshare": PolicyChoice("vm-share", {"mode": mode})}
    )
    clock = SimClock()
    engine = Engine(env, policies, clock, lambda schedule: build_backends(env, schedule), check_purity=True)
    problems: list[str] = []
    engine.round_observer = lambda _seconds: problems.extend(_unsettled_shares(engine))
    clock.feed(jobs, lambda j: j.submit, engine.submit, PRIO_SUBMIT)
    clock.run(1e7, engine.idle)
    assert problems == []
    assert not engine.entries, f"jobs never finished: {[(j, engine.why(j)) for j in engine.entries]}"
