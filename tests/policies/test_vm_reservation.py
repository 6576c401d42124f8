"""VM reservation (Villegas §7.3.1): the ReserveVms decision, its statuses, and FCFS with
reservation on hand-computed schedules; property: a reserved VM is never released and never
runs another job."""

from __future__ import annotations

from collections import defaultdict

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_dissertation_properties import workloads

from helpers import job
from isthmus.decisions.release import ReleaseVms
from isthmus.decisions.reserve import ReserveVms
from isthmus.decisions.start import StartJob
from isthmus.engine.backend import CloudBackend
from isthmus.model import Environment, Site, SiteKind
from isthmus.model.events import EventKind
from isthmus.model.status import StatusCode
from isthmus.sim.harness import Harness
from isthmus.sim.runner import simulate


def one_cloud(max_vms: int = 3, boot: float = 10, idle: float = 50, interval: float | None = None) -> Environment:
    cloud = Site("cloud", kind=SiteKind.CLOUD, max_vms=max_vms, boot_time=boot, idle_release_time=idle)
    return Environment("t", (cloud,), round_interval=interval)


def trace(result, *kinds):
    return [(e.time, e.kind.name, e.job, e.vm, e.value) for e in result.log if e.kind in kinds]


# Up to 3 single-core VMs booting in 10 s, KOALA-C On-Demand releasing VMs idle for 50 s. Job 1
# (1 proc, 1000 s) and job 2 (1 proc, 30 s) at 0; job 3 (3 procs, 100 s) at 1. On-Demand cannot
# place job 3 (2 leased + 3 > 3) until job 1 ends.
JOBS = [job(1, 0, 1, 1000), job(2, 0, 1, 30), job(3, 1, 3, 100)]
KINDS = (EventKind.VM_LEASE, EventKind.VM_RELEASE, EventKind.RESERVE, EventKind.START)


def test_fcfs_lets_the_idle_vm_go_and_leases_two_later():
    r = simulate(one_cloud(), JOBS, "fcfs", "on-demand")
    assert trace(r, *KINDS) == [
        (0, "VM_LEASE", -1, 0, 0),
        (0, "VM_LEASE", -1, 1, 0),
        (10, "START", 1, -1, 1),
        (10, "START", 2, -1, 1),
        (90, "VM_RELEASE", -1, 1, 0),  # job 2's VM, idle since 40
        (1010, "VM_LEASE", -1, 2, 0),
        (1010, "VM_LEASE", -1, 3, 0),
        (1020, "START", 3, -1, 3),
        (1170, "VM_RELEASE", -1, 0, 0),
        (1170, "VM_RELEASE", -1, 2, 0),
        (1170, "VM_RELEASE", -1, 3, 0),
    ]


def test_fcfs_reserve_holds_the_idle_vm_for_the_head_job():
    r = simulate(one_cloud(), JOBS, "fcfs-reserve", "on-demand")
    assert trace(r, *KINDS) == [
        (0, "VM_LEASE", -1, 0, 0),
        (0, "VM_LEASE", -1, 1, 0),
        (10, "START", 1, -1, 1),
        (10, "START", 2, -1, 1),
        (40, "RESERVE", 3, 1, 1),  # job 2's VM is held for job 3: never released
        (1010, "VM_LEASE", -1, 2, 0),  # job 1's VM is free too: one more VM is enough
        (1010, "RESERVE", 3, 0, 1),
        (1020, "RESERVE", 3, 1, 0),  # the hold ends with the start
        (1020, "RESERVE", 3, 0, 0),
        (1020, "START", 3, -1, 3),
        (1170, "VM_RELEASE", -1, 1, 0),
        (1170, "VM_RELEASE", -1, 0, 0),
        (1170, "VM_RELEASE", -1, 2, 0),
    ]
    assert sum(e.kind is EventKind.VM_LEASE for e in r.log) == 3  # one lease fewer than FCFS


def harness_with_two_idle_vms() -> Harness:
    h = Harness(one_cloud(), "fcfs-reserve", "none")
    h.vms(0, 2)
    h.queue(job(1, 0, 3, 100))
    h.queue(job(2, 0, 1, 100))
    return h


def test_reservation_is_a_decision_with_statuses_and_a_why():
    h = harness_with_two_idle_vms()
    eng = h.engine
    eng.run_round()
    backend = eng.backends[0]
    assert isinstance(backend, CloudBackend)
    assert backend.reservations == {1: [0, 1]} and backend.reserved_cores == 2
    why = eng.why_status(1)
    assert why.code is StatusCode.HELD and why.policy == "fcfs-reserve"
    assert why.reason == "holds 2 reserved VMs (2 processors) of cloud; needs 3 processors and waits for the rest"
    # another job may not use them, nor may a release take them
    refused = eng.apply(StartJob(2, 0), "manual")
    assert refused.code is StatusCode.RESERVED
    assert refused.reason == "needs 1 processors; site cloud has 2 free, 2 of them reserved for other jobs"
    refused = eng.apply(ReleaseVms(0, (1,)), "manual")
    assert (refused.code, refused.reason) == (StatusCode.RESERVED, "VM 1 of cloud is reserved for job 1")
    # a count below what is held gives back the latest VM; it is free for others then
    assert eng.apply(ReserveVms(1, 0, 1), "manual").accepted
    assert backend.reservations == {1: [0]}
    assert eng.apply(StartJob(2, 0), "manual").accepted
    assert eng.apply(ReserveVms(2, 0, 1), "manual").code is StatusCode.WRONG_STATE  # job 2 runs
    assert eng.apply(ReserveVms(1, 0, 4), "manual").code is StatusCode.INVALID  # over max_vms
    # cancelling the job gives its VM back, logged
    assert eng.cancel(1)
    assert backend.reservations == {} and backend.reserved_cores == 0
    given_back = [(e.job, e.vm, e.value) for e in eng.log if e.kind is EventKind.RESERVE]
    assert given_back == [(1, 0, 1), (1, 1, 1), (1, 1, 0), (1, 0, 0)]
    assert eng.apply(ReleaseVms(0, (0,)), "manual").accepted


def test_reserve_refuses_a_cluster_and_an_unknown_job():
    h = harness_with_two_idle_vms()
    assert h.engine.apply(ReserveVms(9, 0, 1), "manual").code is StatusCode.WRONG_STATE
    env = Environment("c", (Site("c", nodes=2),), round_interval=None)
    h2 = Harness(env, "fcfs", "none")
    h2.queue(job(1, 0, 1, 10))
    assert h2.engine.apply(ReserveVms(1, 0, 1), "manual").code is StatusCode.INVALID


def held_vms_never_released_nor_used_by_others(log) -> None:
    """From the log: a VM held for a queued job (RESERVE 1 .. RESERVE 0) is never released."""
    holder: dict[tuple[int, int], int] = {}
    for e in log:
        key = (e.site, e.vm)
        if e.kind is EventKind.RESERVE:
            if e.value == 1:
                assert key not in holder, f"VM {key} reserved twice"
                holder[key] = e.job
            else:
                assert holder.pop(key) == e.job
        elif e.kind is EventKind.VM_RELEASE:
            assert key not in holder, f"VM {key} released at {e.time} while held for job {holder.get(key)}"


@settings(max_examples=150, deadline=None)
@given(
    jobs=workloads(max_size=4),
    provisioning=st.sampled_from(["on-demand", "od-s", "od-g", "od-exectime", "startup"]),
    interval=st.sampled_from([None, 10.0, 20.0]),
    boot=st.integers(0, 120),
    idle=st.integers(0, 120),
)
def test_reserved_vms_are_never_released_nor_run_another_job(jobs, provisioning, interval, boot, idle):
    starts_on: dict[int, list[int]] = defaultdict(list)
    original = CloudBackend.start

    def checked_start(self, entry, now, alloc=None):
        original(self, entry, now, alloc)
        for vm_id, _ in entry.alloc:
            holder = self.vms[vm_id].reserved_for
            assert holder in (-1, entry.job.id), f"job {entry.job.id} started on VM {vm_id} held for job {holder}"
            starts_on[entry.job.id].append(vm_id)

    env = one_cloud(max_vms=4, boot=boot, idle=idle, interval=interval)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(CloudBackend, "start", checked_start)
        r = simulate(env, jobs, "fcfs-reserve", provisioning, check_purity=True)
    held_vms_never_released_nor_used_by_others(r.log)
    done = [e.job for e in r.log if e.kind is EventKind.END]
    assert sorted(done) == sorted(j.id for j in jobs)  # everything completes, exactly once
