"""A cloud site on a real EC2 API (a local moto server) through Libcloud: VMs leased with their
tags and a boot script that starts the pilot, jobs run on them, idle VMs terminated; error VMs
replaced; reconciliation after a manager crash. `cloudkit.VmPlayer` plays the VMs."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

from cloudkit import AMI, VmPlayer, ec2_client, wait_until
from livekit import LiveServer, wait_for, wait_state

TERMINAL = ("completed", "failed", "cancelled", "timeout")

ENV = """
name = "ec2-live"
round_interval = "event"
[[sites]]
name = "local"
nodes = 1
cores_per_node = 1
[[sites]]
name = "ec2"
kind = "cloud"
cores_per_node = 1
max_vms = 2
boot_time = 2
shutdown_time = 0
price_per_hour = 0.065
billing_increment = 60
idle_release_time = 3
[sites.provider]
driver = "ec2"
image = "{ami}"
instance_type = "t2.micro"
endpoint = "{endpoint}"
key_env = "ISTHMUS_TEST_EC2_KEY"
secret_env = "ISTHMUS_TEST_EC2_SECRET"
boot_timeout = {boot_timeout}
[policies]
allocation = "ff"
provisioning = "on-demand"
"""


def _env(tmp_path: Path, endpoint: str, boot_timeout: float = 20) -> Path:
    path = tmp_path / "env.toml"
    path.write_text(ENV.format(ami=AMI, endpoint=endpoint, boot_timeout=boot_timeout))
    return path


def _alive(player: VmPlayer) -> list[dict]:  # type: ignore[type-arg]
    return [i for i in player.instances() if i["State"]["Name"] not in ("terminated", "shutting-down")]


def test_jobs_overflow_onto_ec2_vms_that_are_terminated_when_idle(tmp_path: Path, tag: str, endpoint: str) -> None:
    live = LiveServer(_env(tmp_path, endpoint), tmp_path / "state", f"sqlite:///{tmp_path / 'db'}", tag).start()
    with VmPlayer(endpoint, tmp_path / "vms", tag) as player:
        try:
            c = live.client()
            jobs = [c.submit(command="sh", args=["-c", "sleep 2; echo $ISTHMUS_SITE"]) for _ in range(3)]
            for job in jobs:
                j = wait_state(c, job, TERMINAL, timeout=60)
                assert j["state"] == "completed", j["history"]
            sites = sorted(c.output(job)[0].strip() for job in jobs)
            assert sites.count("ec2") >= 1 and "local" in sites, sites
            # every instance carries the manager's id and its VM's key
            site = c.request("GET", "/sites")[1]
            assert site["provider"] == {"driver": "ec2", "error_vms": 0, "last_error": "", "leasing": "ok"}, site
            instances = player.instances()
            assert instances and all(
                {t["Key"] for t in i["Tags"]} >= {"isthmus-manager", "isthmus-vm"} for i in instances
            ), instances
            # idle VMs are released and their instances terminated
            wait_until(lambda: not _alive(player), timeout=60, what="every instance terminated")
            wait_for(lambda: not c.vms(), timeout=30, what="no VM leased")
        finally:
            live.stop()


def test_a_vm_whose_pilot_never_registers_is_terminated_and_replaced(tmp_path: Path, tag: str, endpoint: str) -> None:
    live = LiveServer(_env(tmp_path, endpoint, boot_timeout=3), tmp_path / "state", f"sqlite:///{tmp_path / 'db'}", tag)
    with VmPlayer(endpoint, tmp_path / "vms", tag) as player:
        player.dead_on_arrival = 1
        try:
            live.start()
            c = live.client()
            blocker = c.submit(command="sleep", args=["30"])  # holds the local node
            wait_state(c, blocker, ("running",), timeout=30)
            job = c.submit(command="sh", args=["-c", "echo $ISTHMUS_SITE"])
            j = wait_state(c, job, TERMINAL, timeout=60)
            assert j["state"] == "completed" and c.output(job)[0] == "ec2\n", j["history"]
            (dead,) = player.refuse
            assert next(i for i in player.instances() if i["InstanceId"] == dead)["State"]["Name"] == "terminated"
            assert c.request("GET", "/sites")[1]["provider"]["error_vms"] == 1
            c.cancel(blocker)
        finally:
            live.stop()


def test_a_restarted_manager_keeps_its_vms_and_terminates_instances_nobody_claims(
    tmp_path: Path, tag: str, endpoint: str
) -> None:
    # pilots wait 30 s for their manager (4 s by default in these tests): the restart below
    # must not outlast their patience on a loaded machine
    live = LiveServer(
        _env(tmp_path, endpoint), tmp_path / "state", f"sqlite:///{tmp_path / 'db'}", tag, pilot_timeout=30.0
    ).start()
    with VmPlayer(endpoint, tmp_path / "vms", tag) as player:
        try:
            c = live.client()
            blocker = c.submit(command="sleep", args=["60"])
            wait_state(c, blocker, ("running",), timeout=30)
            ledger = tmp_path / "ledger"
            job = c.submit(command="sh", args=["-c", f"echo $ISTHMUS_RUN >> {ledger}; sleep 4; echo $ISTHMUS_SITE"])
            wait_state(c, job, ("running",), timeout=60)
            (vm,) = _alive(player)
            manager = next(t["Value"] for t in vm["Tags"] if t["Key"] == "isthmus-manager")
            live.kill(signal.SIGKILL)
            # an instance of this manager no VM claims (a lease whose answer a crash lost)
            ec2 = ec2_client(endpoint)
            stray = ec2.run_instances(
                ImageId=AMI,
                MinCount=1,
                MaxCount=1,
                InstanceType="t2.micro",
                TagSpecifications=[
                    {
                        "ResourceType": "instance",
                        "Tags": [
                            {"Key": "isthmus-manager", "Value": manager},
                            {"Key": "isthmus-vm", "Value": "1/vm99"},
                        ],
                    }
                ],
            )["Instances"][0]["InstanceId"]
            player.refuse.add(stray)
            live.start()
            c = live.client()
            j = wait_state(c, job, TERMINAL, timeout=60)
            assert j["state"] == "completed" and j["run"] == 1 and c.output(job)[0] == "ec2\n", j["history"]
            assert ledger.read_text().split() == ["1"]  # ran once: the VM and its pilot were kept
            wait_until(
                lambda: (
                    next(i for i in player.instances() if i["InstanceId"] == stray)["State"]["Name"] == "terminated"
                ),
                timeout=30,
                what="the unclaimed instance terminated",
            )
            c.cancel(blocker)
            wait_until(lambda: not _alive(player), timeout=60, what="every instance terminated")
        finally:
            live.stop()


def test_killing_the_manager_while_it_leases_and_releases_leaves_no_orphan_and_no_double_lease(
    tmp_path: Path, tag: str, endpoint: str
) -> None:
    """Cycles of: submit short jobs (VMs are leased), SIGKILL the manager at a random moment
    (during leases, boots, runs or releases), restart it. At the end every job completed once per
    run recorded, every instance is terminated, and no VM key was ever leased twice.
    ISTHMUS_CLOUD_CYCLES sets the number of cycles (8; docs/clouds.md records a run of 50)."""
    import random
    from collections import Counter

    rng = random.Random(7)
    env = tmp_path / "env.toml"
    env.write_text(
        ENV.format(ami=AMI, endpoint=endpoint, boot_timeout=20).replace("release_time = 3", "release_time = 1")
    )
    live = LiveServer(env, tmp_path / "state", f"sqlite:///{tmp_path / 'db'}", tag).start()
    jobs: list[int] = []
    with VmPlayer(endpoint, tmp_path / "vms", tag) as player:
        try:
            for _ in range(int(os.environ.get("ISTHMUS_CLOUD_CYCLES", "8"))):
                c = live.client()
                jobs += [c.submit(command="sleep", args=["0.5"]) for _ in range(rng.randint(1, 3))]
                # half the kills right after the submissions, while On-Demand's leases are under way
                time.sleep(rng.uniform(0.0, 0.15) if rng.random() < 0.5 else rng.uniform(0.1, 2.5))
                live.kill(signal.SIGKILL)
                live.start()
            c = live.client()
            for job in jobs:
                j = wait_state(c, job, TERMINAL, timeout=90)
                assert j["state"] == "completed", j["history"]
            wait_until(lambda: not _alive(player), timeout=90, what="every instance terminated")
            wait_for(lambda: not c.vms(), timeout=30, what="no VM leased")
        finally:
            live.stop()
        keys = Counter(next(t["Value"] for t in i["Tags"] if t["Key"] == "isthmus-vm") for i in player.instances())
        assert keys and max(keys.values()) == 1, keys  # one instance per VM: none leased twice


def test_the_provider_lists_every_instance_beyond_the_first_page(endpoint: str) -> None:
    """DescribeInstances answers in pages (100 reservations each here); a listing that read only
    the first made every later VM look gone, and the manager failed 100 booting VMs at once in
    the KOALA-C real-world experiment."""
    from isthmus.backends.libcloud_provider import MANAGER_TAG, Ec2Options, LibcloudProvider
    from isthmus.model.cloud import ProviderSettings

    ec2 = ec2_client(endpoint)
    tags = [{"ResourceType": "instance", "Tags": [{"Key": MANAGER_TAG, "Value": "m1"}]}]
    for _ in range(130):  # one reservation each, as isthmus leases them
        ec2.run_instances(ImageId=AMI, MinCount=1, MaxCount=1, TagSpecifications=tags)
    ec2.run_instances(ImageId=AMI, MinCount=1, MaxCount=1)  # not this manager's
    options = Ec2Options(endpoint=endpoint, key_env="ISTHMUS_TEST_EC2_KEY", secret_env="ISTHMUS_TEST_EC2_SECRET")
    settings = ProviderSettings(driver="ec2", image=AMI, instance_type="t2.micro", driver_options=options)
    found = LibcloudProvider("ec2", "m1", settings).instances()
    assert len(found) == 130
    assert len({i.provider_id for i in found}) == 130


def test_the_vm_player_boots_instances_beyond_the_first_page(endpoint: str, tmp_path: Path, tag: str) -> None:
    """The player reads every page of the listing: the 101st VM boots too."""
    ec2 = ec2_client(endpoint)
    with VmPlayer(endpoint, tmp_path / "vms", tag) as player:
        for _ in range(105):
            ec2.run_instances(ImageId=AMI, MinCount=1, MaxCount=1, UserData="sleep 30")
        wait_until(lambda: len(player.procs) == 105, 60, "105 VMs playing")


def test_stop_release_terminates_every_vm_after_its_jobs_end(tmp_path: Path, tag: str, endpoint: str) -> None:
    # VMs are never idle long enough to be released: only the stop releases them
    env = _env(tmp_path, endpoint)
    env.write_text(env.read_text().replace("idle_release_time = 3", "idle_release_time = 600"))
    live = LiveServer(env, tmp_path / "state", f"sqlite:///{tmp_path / 'db'}", tag).start()
    with VmPlayer(endpoint, tmp_path / "vms", tag) as player:
        try:
            c = live.client()
            done = tmp_path / "done"
            jobs = [c.submit(command="sh", args=["-c", f"sleep 8; echo $ISTHMUS_SITE >> {done}"]) for _ in range(2)]
            for job in jobs:
                wait_state(c, job, ("running",), timeout=60)
            assert len(_alive(player)) == 1
            answer = c.stop("drain", release=True)
            assert answer["mode"] == "drain" and answer["running"] == 2, answer
            assert live.proc is not None
            assert live.proc.wait(timeout=60) == 0
            # the drain let both jobs end (one of them on the VM) before the VM was terminated
            assert sorted(done.read_text().split()) == ["ec2", "local"]
            assert player.instances() and not _alive(player), player.instances()
        finally:
            live.stop()


def test_a_vm_whose_manager_is_killed_terminates_itself_after_its_lease_patience(
    tmp_path: Path, tag: str, endpoint: str
) -> None:
    env = _env(tmp_path, endpoint)
    text = env.read_text().replace("idle_release_time = 3", "idle_release_time = 600")
    env.write_text(text.replace("[sites.provider]\n", "[sites.provider]\nlease_patience = 3\n"))
    live = LiveServer(env, tmp_path / "state", f"sqlite:///{tmp_path / 'db'}", tag).start()
    with VmPlayer(endpoint, tmp_path / "vms", tag) as player:
        try:
            c = live.client()
            jobs = [c.submit(command="sleep", args=["60"]) for _ in range(2)]
            for job in jobs:
                wait_state(c, job, ("running",), timeout=60)
            (vm,) = _alive(player)
            assert {"Key": "isthmus-lease-patience", "Value": "3"} in vm["Tags"], vm["Tags"]
            live.kill(signal.SIGKILL)  # no stop, no release: only the VM itself can end its lease
            time.sleep(1.5)
            assert _alive(player), "the VM must outlive a silence shorter than its patience"
            wait_until(lambda: not _alive(player), timeout=30, what="the VM terminated itself")
            assert next(i for i in player.instances() if i["InstanceId"] == vm["InstanceId"])["State"]["Name"] in (
                "terminated",
                "shutting-down",
            )
        finally:
            live.stop()
