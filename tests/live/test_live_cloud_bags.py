"""Bags of tasks end to end on a provider cloud: a bag of tasks scavenges the cores of EC2 VMs (a local
moto server through Apache Libcloud, `cloudkit.VmPlayer` playing the VMs) that On-Demand leased
for rigid jobs, and never causes, keeps or pays for a lease (docs/bags.md, "Bags on clouds").

The case (a cluster of 1 node x 2 cores, an EC2 site of at most 2 VMs x 4 cores, free, so that
On-Demand releases a VM after 3 s idle; FCFS, SEP growing the bag, a 10 s preemption time):

* the bag (tasks of 0.3 s, each appending its index to a file of its own when it completes)
  takes the cluster's 2 cores;
* rigid job A (3 processors, 3 s) does not fit the cluster: On-Demand leases one VM; A runs
  on 3 of its cores and the bag grows onto the 4th (a lane of the VM's pilot), then onto all 4
  once A ends: the VM is idle to On-Demand since A's end;
* rigid job B (4 processors, 2 s): On-Demand counts the cores the bag holds as free and leases
  no second VM (room for one is left); SEP shrinks the bag on the VM for B, the launchers
  confirm their preemption within a pilot round trip and B starts there, well before the
  preemption time;
* the bag regrows on the VM once B ends; On-Demand releases the VM 3 s after B's end, as without
  the bag, and the launchers on it are preempted at that very moment (SHRINK by "vm-release",
  their cores given back then), their tasks back in the queue; the bag completes on the
  cluster with every task run to its end exactly once.

The VM is leased once, for A, and held exactly as long as the rigid jobs alone hold it (leased
at A's arrival, released the idle time after B's end): the bag adds no VM time, hence no cost.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

from cloudkit import AMI, VmPlayer
from livekit import LiveServer, ran_counts, wait_for, wait_state

from isthmus.model.events import EventKind

K = EventKind
TASKS = 220
PREEMPTION = 10.0
IDLE = 3.0

ENV = """
name = "ec2-bags"
round_interval = "event"
[[sites]]
name = "c1"
nodes = 1
cores_per_node = 2
[[sites]]
name = "ec2"
kind = "cloud"
cores_per_node = 4
max_vms = 2
boot_time = 2
shutdown_time = 0
idle_release_time = {idle}
[sites.provider]
driver = "ec2"
image = "{ami}"
instance_type = "t2.xlarge"
endpoint = "{endpoint}"
key_env = "ISTHMUS_TEST_EC2_KEY"
secret_env = "ISTHMUS_TEST_EC2_SECRET"
boot_timeout = 30
[policies]
allocation = "fcfs"
provisioning = "on-demand"
fairshare = "sep"
"""


def _bag(c: Any, bag_id: int) -> dict[str, Any]:
    j = c.job(bag_id)
    return {**j["bag"], "state": j["state"]}


def _events(db: Path) -> list[tuple[float, str, int, int, int, float, str | None, int]]:
    """The manager's event log from its database: (time, kind, job, site, vm, value, policy, task)."""
    with sqlite3.connect(db) as conn:
        rows = conn.execute("SELECT time, kind, job, site, vm, value, policy, task FROM events ORDER BY id").fetchall()
    return [(t, K(k).name, j, s, v, x, p, task) for t, k, j, s, v, x, p, task in rows]


def test_a_bag_scavenges_ec2_vms_leased_for_rigid_jobs_and_gives_them_up_at_once(
    tmp_path: Path, tag: str, endpoint: str
) -> None:
    ran = tmp_path / "ran"
    ran.mkdir()
    env = tmp_path / "env.toml"
    env.write_text(ENV.format(ami=AMI, endpoint=endpoint, idle=IDLE))
    db = tmp_path / "isthmus.db"
    server = LiveServer(env, tmp_path / "state", f"sqlite:///{db}", tag, pilot_timeout=15.0)
    server.args += ["--preemption-time", str(PREEMPTION)]
    with VmPlayer(endpoint, tmp_path / "vms", tag, boot_delay=0.5) as player:
        server.start()
        try:
            with server.client() as c:
                bag_id = c.submit_bag(
                    sweep={"template": f"sleep 0.3; echo {{x}} >> {ran}/{{x}}.ran", "params": [f"x=0..{TASKS - 1}"]}
                )
                wait_for(lambda: _bag(c, bag_id)["held"].get("c1") == 2, timeout=20, what="the bag on the cluster")
                a = c.submit(command="sleep", args=["3"], size=3)
                wait_state(c, a, ("running",), timeout=30)
                # beside A on the VM: the bag scavenges its 4th core
                wait_for(lambda: _bag(c, bag_id)["held"].get("ec2") == 1, timeout=10, what="the bag beside A")
                wait_state(c, a, ("completed",), timeout=30)
                wait_for(lambda: _bag(c, bag_id)["held"].get("ec2") == 4, timeout=10, what="the bag on the idle VM")
                on_vm = [n for n in _bag(c, bag_id)["nodes"] if n["site"] == "ec2"]
                assert on_vm == [{"site": "ec2", "node": "1/vm0", "processors": 4}], on_vm
                b = c.submit(command="sleep", args=["2"], size=4)
                wait_state(c, b, ("completed",), timeout=30)
                assert _bag(c, bag_id)["state"] != "completed", "the bag ended before the VM's release"
                wait_for(lambda: not c.vms(), timeout=20, what="the VM released")
                wait_state(c, bag_id, ("completed",), timeout=60)
                index = c.results(bag_id)
        finally:
            server.stop()
        instances = player.instances()
    events = _events(db)

    # every task ran to its end exactly once; some of them on the VM
    assert all(r["state"] == "done" for r in index)
    assert ran_counts(ran, TASKS) == [1] * TASKS
    assert any(r["node"] == "1/vm0" for r in index)

    def at(kind: str, job: int = -1, site: int | None = None) -> list[tuple[Any, ...]]:
        return [e for e in events if e[1] == kind and (job < 0 or e[2] == job) and (site is None or e[3] == site)]

    # one VM, leased for A before the bag ever held a core of it; no lease for B
    (lease,) = at("VM_LEASE")
    (submit_a,) = at("SUBMIT", a)
    assert 0 <= lease[0] - submit_a[0] < 1.0  # A's arrival made On-Demand lease it
    (release,) = at("VM_RELEASE")
    assert lease[4] == release[4] == 0
    assert [i["State"]["Name"] for i in instances] in (["terminated"], ["shutting-down"]), instances
    grows = at("GROW", bag_id, site=1)
    assert grows and grows[0][0] > lease[0]
    (start_a,) = at("START", a)
    (start_b,) = at("START", b)
    (end_b,) = at("END", b)
    assert start_a[3] == start_b[3] == end_b[3] == 1  # both rigid jobs ran on the VM

    # B preempted the bag's 4 launchers on the VM: a SHRINK for B, B started once they confirmed
    (for_b,) = [e for e in at("SHRINK", bag_id, site=1) if e[7] == b]
    assert for_b[5] == 4.0 and for_b[6] == "sep"
    assert start_b[0] - for_b[0] < PREEMPTION - 2.0, (for_b, start_b)

    # the VM went when it would have without the bag: its idle time after B, the last rigid job
    assert IDLE - 0.1 <= release[0] - end_b[0] < IDLE + 4.0
    # ... and its launchers were preempted at that moment, with no preemption time
    (evicted,) = [e for e in at("SHRINK", bag_id, site=1) if e[6] == "vm-release"]
    assert evicted[0] == release[0] and evicted[5] >= 1.0
    given_back = [e for e in at("BAG_RELEASE", bag_id, site=1) if e[0] >= evicted[0]]
    assert len(given_back) == evicted[5] and all(e[0] == release[0] for e in given_back)
    assert not [e for e in at("GROW", bag_id, site=1) if e[0] >= release[0]]
