"""End to end: `isthmus server` on a local cluster and an EC2 site (a local moto
server whose VMs `VmPlayer` plays) runs a workload with VM requirements from two users under a
budget cap, with On-Demand provisioning and vm-share; the cap holds, the shares are even, the
error VM is replaced, and `isthmus validate` (`isthmus.live.validate.validate`, what the command
runs) compares the live run with the simulator.

The case, by hand (times from the workload's start; VMs boot 2 s in simulation):

* job 1 (user 2, 2 processors, 8 s, no requirements) takes the two-core cluster at once;
* jobs 2 and 3 (user 1, 4 s, 4 GB) need the "large" type ($1.20 a minute): one large VM holds both;
* job 4 (user 2, 4 s, x86_64) needs a VM: the cheapest that fits, "small" ($0.60 a minute);
* job 5 (user 2, 2 processors, 4 s, no requirements) finds the cluster busy: the cheapest VMs
  for it are one large ($1.20) or two small ($1.20): one large. $1.20 + $0.60 + $1.20 = $3.00
  would pass the $2.50 cap, so that lease is refused "over budget" and job 5 runs on the cluster
  once job 1 ends.
* Each user holds one VM: even shares. Simulated cost: $1.80.
* Live, the first small VM never boots (an error VM): after the 12 s boot timeout it is
  terminated, counted, and replaced ($0.60 more: $2.40, still within the cap); job 4 runs on
  the replacement. Live cost $2.40 <= $2.50, where the refused lease would have made $3.60.
"""

from __future__ import annotations

import csv
import dataclasses
from pathlib import Path

import pytest
from cloudkit import VmPlayer, typed_ec2

from isthmus.config import load_file
from isthmus.live.validate import ValidationCase, validate
from isthmus.metrics.run import compute_run_metrics
from isthmus.model.job import Job, VmRequirements
from isthmus.model.status import StatusCode
from isthmus.sim.runner import simulate

ENV = """
name = "e2e-cloud"
round_interval = "event"
[policies]
allocation = "ff"
provisioning = "on-demand"
fairshare = { name = "vm-share", params = { mode = "graceful" } }
[[sites]]
name = "local"
nodes = 1
cores_per_node = 2
[[sites]]
name = "ec2"
kind = "cloud"
max_vms = 4
boot_time = 2
shutdown_time = 0
billing_increment = 60
[[budgets]]
name = "ec2-total"
limit = 2.5
sites = ["ec2"]
"""

BIG = VmRequirements(memory_mb=4096)
X86 = VmRequirements(cpu_arch="x86_64")
LEAD_IN = 0.5  # what prepare_case adds with event rounds


def _jobs() -> tuple[Job, ...]:
    spec = [(1, 0, 2, 8, "2", None), (2, 1, 1, 4, "1", BIG), (3, 1, 1, 4, "1", BIG), (4, 2, 1, 4, "2", X86)]
    spec.append((5, 2, 2, 4, "2", None))
    return tuple(Job(i, t + LEAD_IN, n, float(r), float(r), user=u, vm=vm) for i, t, n, r, u, vm in spec)


def _events(path: Path) -> list[dict[str, str]]:
    with path.open() as f:
        return list(csv.DictReader(f))


def test_two_users_vm_requirements_budget_error_vm_and_validate(tmp_path: Path, tag: str, endpoint: str) -> None:
    env_file = tmp_path / "env.toml"
    cloud = typed_ec2(endpoint, small=36, large=72, boot_timeout=12)
    env_file.write_text(ENV.replace("[[budgets]]", cloud + "[[budgets]]"))
    env = load_file(env_file)
    case = ValidationCase(env, _jobs(), "e2e", 1.0, 2.5, None, LEAD_IN)

    # without the cap the same run would pass it: $3.00 simulated
    free_env = dataclasses.replace(env, budgets=())
    free = simulate(free_env, list(case.jobs))
    unbounded = compute_run_metrics(free.log, free.jobs, free_env, free.end_time).summary
    assert unbounded["cost_charged"] == pytest.approx(3.0)

    with VmPlayer(endpoint, tmp_path / "vms", tag, boot_delay=1.0) as player:
        player.dead_of_type["t2.micro"] = 1  # the first small VM never boots: an error VM
        report = validate(case, [env.allocation], out=tmp_path / "out", work_dir=tmp_path / "work", tag=tag)
    (pv,) = report.policies
    live, sim = pv.live.metrics.summary, pv.simulated.metrics.summary
    assert not pv.live.notes, pv.live.notes
    assert live["jobs_completed"] == sim["jobs_completed"] == 5

    # the cap held on both sides; the simulated run is the hand-computed one
    assert (sim["cost_charged"], live["cost_charged"]) == pytest.approx((1.8, 2.4))
    for side in ("sim", "live"):
        rows = _events(tmp_path / "out" / f"ff.{side}.events.csv")
        refused = [r for r in rows if r["kind"] == "DECISION" and float(r["value"]) == StatusCode.OVER_BUDGET]
        assert refused, side  # job 5's large VM, refused "over budget"
        ends = {int(r["job"]): r["site"] for r in rows if r["kind"] == "END"}
        assert ends == {1: "0", 2: "1", 3: "1", 4: "1", 5: "0"}, (side, ends)
    # the error VM: failed once live (never in simulation), and replaced by a second small VM
    live_rows = _events(tmp_path / "out" / "ff.live.events.csv")
    assert sum(r["kind"] == "VM_FAILED" for r in live_rows) == 1
    assert sum(r["kind"] == "VM_LEASE" for r in live_rows) == 3
    sizes = sorted(i["InstanceType"] for i in player.instances())
    assert sizes == ["t2.large", "t2.micro", "t2.micro"], sizes
    assert all(i["State"]["Name"] in ("terminated", "shutting-down") for i in player.instances())
    # even shares: each user held one VM while both held some
    for summary in (sim, live):
        assert set(summary["vm_hours_by_user"]) == {"1", "2"}, summary["vm_hours_by_user"]
        assert summary["vm_share_spread"]["ec2"]["max"] == 0, summary["vm_share_spread"]
    # validate's comparison: a row per compared figure, the cost differing by the error VM
    cost = next(r for r in pv.rows if r["metric"] == "cost_charged")
    assert abs(cost["abs_diff"] - 0.6) < 1e-9, cost
