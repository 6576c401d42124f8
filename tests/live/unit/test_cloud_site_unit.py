"""A cloud site on the fake provider: lease, boot (its pilot registers), release, failures."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

from rig import Rig, spec

from isthmus.backends.cloud_site import ProviderCloud
from isthmus.backends.errors import CapacityError
from isthmus.backends.fake import FakeCloud
from isthmus.engine.backend import CloudBackend, SiteBackend, VmState
from isthmus.live.context import LiveContext
from isthmus.model.site import Site

ENV = """
name = "unit-cloud"
round_interval = "event"
[[sites]]
name = "ec2"
kind = "cloud"
cores_per_node = 1
max_vms = 2
boot_time = 2
shutdown_time = 0
price_per_hour = 0.1
billing_increment = 60
idle_release_time = 3
[sites.provider]
driver = "ec2"
image = "ami-unit"
instance_type = "t2.micro"
key_env = "ISTHMUS_UNIT_KEY"
secret_env = "ISTHMUS_UNIT_SECRET"
boot_timeout = 20
[policies]
allocation = "ff"
provisioning = "on-demand"
"""


def on(fake: FakeCloud) -> Callable[[LiveContext, int, Site], SiteBackend]:
    def make(ctx: LiveContext, index: int, site: Site) -> SiteBackend:
        cloud = ProviderCloud(index, site, fake.connect, ctx)
        ctx.hub.launchers[index] = cloud
        return cloud

    return make


def run(tmp_path: Path, body: Callable[[Rig, FakeCloud, ProviderCloud], Awaitable[None]]) -> None:
    fake = FakeCloud()
    rig = Rig(tmp_path, ENV, on(fake))
    cloud = rig.backends[0]
    assert isinstance(cloud, ProviderCloud)

    async def main() -> None:
        rig.begin()
        await rig.settle()
        rig.step()
        await body(rig, fake, cloud)

    try:
        asyncio.run(main())
    finally:
        rig.close()


async def turn(rig: Rig, seconds: float = 0.0) -> None:
    """Advance, run what is due and wait for the provider's answers (twice: an answer may call again)."""
    for _ in range(2):
        rig.step(seconds)
        await rig.settle()
        seconds = 0.0
    rig.step()


def vm_states(cloud: CloudBackend) -> list[VmState]:
    return [vm.state for vm in cloud.vms.values()]


def test_a_job_leases_a_vm_runs_on_it_once_its_pilot_registers_and_the_idle_vm_is_released(tmp_path: Path) -> None:
    async def body(rig: Rig, fake: FakeCloud, cloud: ProviderCloud) -> None:
        job = rig.intake.submit("alice", spec(1))
        await turn(rig)
        [vm] = fake.alive()
        key = vm.tags["isthmus-vm"]
        assert vm.tags["isthmus-manager"] == "unit0"
        assert (vm.request.instance_type, vm.request.image) == ("t2.micro", "ami-unit")
        assert f"--node {key}" in vm.request.user_data and "--token-stdin" in vm.request.user_data
        assert vm_states(cloud) == [VmState.BOOTING] and rig.state(job) == "queued"
        assert rig.hub.nodes[key].state == "spawned"
        assert rig.store.vm_provider_ids(0) == {0: vm.provider_id}
        fake.boot(vm.provider_id)
        pilot = rig.hub.register(key, {"pid": 0, "host": "vm0"})["pilot_id"]
        rig.step()
        assert vm_states(cloud) == [VmState.READY]
        assert rig.hub.assign[job].launcher == key
        rig.hub.report(key, pilot, {"ack": 1, "reports": [{"job": job, "run": 1, "event": "started"}]})
        rig.hub.report(key, pilot, {"ack": 1, "reports": [{"job": job, "run": 1, "event": "ended", "exit_code": 0}]})
        assert rig.state(job) == "completed"
        await turn(rig, 4.0)  # idle past idle_release_time: released, terminated, gone
        await turn(rig)
        assert fake.released == [vm.provider_id] and not fake.alive()
        assert cloud.vms == {}
        [row] = rig.store.vm_rows()
        assert row["state"] == "gone"

    run(tmp_path, body)


def test_a_capacity_refusal_fails_the_vm_and_backs_off(tmp_path: Path) -> None:
    async def body(rig: Rig, fake: FakeCloud, cloud: ProviderCloud) -> None:
        fake.max_instances = 0
        job = rig.intake.submit("alice", spec(1))
        await turn(rig)
        assert cloud.error_vms == 1 and "insufficient capacity" in cloud.last_error
        assert cloud.lease_refusal(rig.ctx.clock.now).startswith("backing off")
        assert not fake.alive() and rig.state(job) == "queued"
        [row] = rig.store.vm_rows()
        assert row["state"] == "gone"

    run(tmp_path, body)


def test_a_refused_lease_of_any_kind_counts_as_an_error_vm(tmp_path: Path) -> None:
    async def body(rig: Rig, fake: FakeCloud, cloud: ProviderCloud) -> None:
        fake.refuse_next(CapacityError("zone full"))
        rig.intake.submit("alice", spec(1))
        await turn(rig)
        assert cloud.error_vms == 1 and cloud.last_error == "zone full"

    run(tmp_path, body)


def test_a_vm_whose_pilot_never_registers_failed_to_boot_and_is_terminated(tmp_path: Path) -> None:
    async def body(rig: Rig, fake: FakeCloud, cloud: ProviderCloud) -> None:
        rig.intake.submit("alice", spec(1))
        await turn(rig)
        [vm] = fake.alive()
        node = rig.hub.nodes[vm.tags["isthmus-vm"]]
        node.deadline = time.time() - 1  # its boot_timeout passed
        rig.hub.housekeeping()
        await turn(rig)
        assert vm.provider_id in fake.released
        assert cloud.error_vms == 1
        # the job still waits: provisioning leases a replacement
        assert [(r["vm"], r["state"]) for r in rig.store.vm_rows()] == [(0, "gone"), (1, "booting")]
        assert [v.provider_id for v in fake.alive()] == ["i-0002"]

    run(tmp_path, body)


def test_an_instance_gone_at_the_provider_fails_its_vm_at_reconciliation(tmp_path: Path) -> None:
    async def body(rig: Rig, fake: FakeCloud, cloud: ProviderCloud) -> None:
        rig.intake.submit("alice", spec(1))
        await turn(rig)
        [vm] = fake.alive()
        fake.vanish(vm.provider_id)
        await turn(rig, 61.0)  # the next reconciliation
        assert [(r["vm"], r["state"]) for r in rig.store.vm_rows()] == [(0, "gone"), (1, "booting")]
        assert [v.provider_id for v in fake.alive()] == ["i-0002"]
        assert cloud.instance_of == {1: "i-0002"}

    run(tmp_path, body)
