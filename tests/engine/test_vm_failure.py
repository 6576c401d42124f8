"""A VM that fails (boot timeout, error state) is an event: `Engine.vm_failed` kills its runs as
lost and requeues them, frees nothing it did not hold, ends the lease and logs why."""

from __future__ import annotations

from helpers import cloud_env, job
from isthmus.engine.backend import CloudBackend
from isthmus.engine.state import JobState
from isthmus.model.events import EventKind, KillCause
from isthmus.sim.harness import Harness


def test_a_failed_vm_requeues_its_run_and_ends_its_lease() -> None:
    h = Harness(cloud_env(1, 3, price=3.6, increment=60), "ff", "none", now=100.0)
    ready = h.vms(1, 2, leased_at=40.0)
    (booting,) = h.vms(1, 1, leased_at=90.0, ready=False)
    cloud = h.engine.backends[1]
    assert isinstance(cloud, CloudBackend) and (cloud.online, cloud.leased, cloud.booting) == (2, 3, 1)
    entry = h.running(job(7, 50, 1, 500), 1, started=60.0)
    ((vm_of_job, _),) = entry.alloc
    other = next(v for v in ready if v != vm_of_job)

    assert h.engine.vm_failed(1, vm_of_job, "error state")
    assert entry.state is JobState.QUEUED and entry.restarts == 1  # lost and requeued
    assert (cloud.online, cloud.free, cloud.leased, cloud.booting) == (1, 1, 2, 1)
    assert vm_of_job not in cloud.vms and other in cloud.vms
    assert h.engine.vm_failed(1, booting, "boot timeout")  # a booting VM may fail too
    assert (cloud.online, cloud.leased, cloud.booting) == (1, 1, 0)
    assert not h.engine.vm_failed(1, booting, "again")  # already gone
    assert not h.engine.vm_failed(1, 99, "unknown")

    log = list(h.engine.log)
    kinds = [(e.kind, e.vm) for e in log if e.site == 1 or e.job == 7]
    assert kinds == [
        (EventKind.START, -1),
        (EventKind.KILL, -1),
        (EventKind.REQUEUE, -1),
        (EventKind.VM_FAILED, vm_of_job),
        (EventKind.VM_RELEASE, vm_of_job),
        (EventKind.VM_GONE, vm_of_job),
        (EventKind.VM_FAILED, booting),
        (EventKind.VM_RELEASE, booting),
        (EventKind.VM_GONE, booting),
    ]
    kill = next(e for e in log if e.kind is EventKind.KILL)
    assert kill.value == KillCause.LOST
    failures = [i for i, e in enumerate(log) if e.kind is EventKind.VM_FAILED]
    assert [h.engine.log.notes[i] for i in failures] == ["error state", "boot timeout"]
    assert next(e.policy for e in log if e.kind is EventKind.VM_RELEASE) == "vm-failed"
    # billing stops at the failure: the release that ends each lease in the metrics is stamped then
    assert [e.time for e in log if e.kind is EventKind.VM_RELEASE] == [100.0, 100.0]
