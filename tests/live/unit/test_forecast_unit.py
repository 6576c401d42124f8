"""A forecast's expected spend: the billing increments begun from now on, by the VMs it adopts
from the live pool and by those it leases, without a budget too (hand-computed)."""

from __future__ import annotations

import pytest

from isthmus.live.forecast import QueuedCopy, RunningCopy, Snapshot, VmCopy, run_forecast
from isthmus.model.environment import Environment, PolicyChoice
from isthmus.model.job import Job
from isthmus.model.site import Site, SiteKind
from isthmus.model.states import VmState

# 3.6 $/h billed per minute: 0.06 $ per begun increment
CLOUD = Site(
    "cloud", kind=SiteKind.CLOUD, max_vms=4, cores_per_node=1, price_per_hour=3.6, billing_increment=60.0,
    idle_release_time=1.0,
)  # fmt: skip
ENV = Environment(name="forecast", sites=(CLOUD,), round_interval=10.0)


def _snapshot(queued: list[QueuedCopy]) -> Snapshot:
    # a VM leased at 930 (its increments from 930 and 990 are already charged at now = 1000)
    # runs a job started at 970 for 180 s: it ends at 1150 and the VM is released a round later
    running = Job(id=1, submit=900.0, size=1, runtime=180.0, requested_runtime=180.0, user="u")
    return Snapshot(
        now=1000.0,
        env=ENV,
        allocation=PolicyChoice("ff"),
        provisioning=PolicyChoice("on-demand"),
        round_interval=10.0,
        budget=None,
        spent=0.12,
        caps={},
        enforce_walltime=False,
        running=[RunningCopy(job=running, site=0, started=970.0, run=0, restarts=0, stage=0, limit=None)],
        queued=queued,
        vms=[VmCopy(site=0, vm=0, state=VmState.READY, leased_at=930.0, ready_at=940.0)],
        basis={1: "requested", **{q.job.id: "requested" for q in queued}},
    )


def test_the_adopted_vm_pays_the_increments_it_begins_after_now() -> None:
    f = run_forecast(_snapshot([]), budget=None)
    assert [(j.job, j.end) for j in f.jobs] == [(1, 1150.0)]
    # increments begun at 1050 and 1110, before its release after 1150
    assert f.spend == pytest.approx(0.12)


def test_a_vm_the_forecast_leases_is_counted_too() -> None:
    waiting = Job(id=2, submit=990.0, size=1, runtime=100.0, requested_runtime=100.0, user="u")
    f = run_forecast(_snapshot([QueuedCopy(job=waiting, stage=0, run=0, restarts=0, queued_at=990.0)]), budget=None)
    (start, end) = next((j.start, j.end) for j in f.jobs if j.job == 2)
    # a VM (no boot time) leased at the first round (1000), the job started at the next (1010)
    assert (start, end) == (1010.0, 1110.0)
    # the new VM begins increments at 1000 and 1060 and is released idle by 1120
    assert f.spend == pytest.approx(0.12 + 0.12)
