"""vm-share (Cloud Scheduler §3.3) on hand-computed schedules: even shares with two then three
users, graceful and kill rebalancing, shares by max-min fairness, per-user VM-hours."""

from __future__ import annotations

import pytest

from isthmus.decisions.kill import KillJob
from isthmus.decisions.lease import LeaseVms
from isthmus.decisions.release import ReleaseVms
from isthmus.decisions.retire import RetireVms
from isthmus.metrics.run import compute_run_metrics
from isthmus.model import Environment, Job, Site, SiteKind
from isthmus.model.environment import PolicyChoice
from isthmus.model.events import EventKind, EventLog
from isthmus.policies.build import build_policies
from isthmus.policies.fairshare.vm_share import even_shares
from isthmus.policies.registry import PolicyError
from isthmus.sim.harness import Harness
from isthmus.sim.runner import SimulationResult, simulate


def cloud(max_vms: int, boot: float = 10.0) -> Environment:
    return Environment(
        "share", (Site("cloud", kind=SiteKind.CLOUD, max_vms=max_vms, boot_time=boot),), round_interval=None
    )


def jobs_of(user: str, first: int, count: int, submit: float, runtime: float = 100.0) -> list[Job]:
    return [Job(first + k, submit, 1, runtime, user=user) for k in range(count)]


def run(env: Environment, jobs: list[Job], mode: str) -> SimulationResult:
    return simulate(env, jobs, "ff", "none", fairshare=PolicyChoice("vm-share", {"mode": mode}), check_purity=True)


def held(log: EventLog, at: float) -> dict[str, int]:
    """VMs each user holds (leased for it, not released) once every event at time `at` happened."""
    owner: dict[int, str] = {}
    count: dict[str, int] = {}
    for i, e in enumerate(log):
        if e.time > at:
            break
        if e.kind is EventKind.VM_USER:
            owner[e.vm] = log.notes[i]
            count[owner[e.vm]] = count.get(owner[e.vm], 0) + 1
        elif e.kind is EventKind.VM_RELEASE and e.vm in owner:
            count[owner[e.vm]] -= 1
    return {u: n for u, n in count.items() if n}


def starts(result: SimulationResult) -> dict[int, float]:
    return {e.job: e.time for e in result.log if e.kind is EventKind.START}


def kills(result: SimulationResult) -> list[tuple[float, int]]:
    return [(e.time, e.job) for e in result.log if e.kind is EventKind.KILL]


def test_even_shares_by_max_min_fairness():
    assert even_shares({"a": 6}, 4, {}) == {"a": 4}
    assert even_shares({"a": 6, "b": 2}, 4, {}) == {"b": 2, "a": 2}
    assert even_shares({"a": 6, "b": 1}, 4, {}) == {"b": 1, "a": 3}
    # the remainder goes to whoever holds more now, so that it moves no VM
    assert even_shares({"a": 6, "b": 6}, 5, {"b": 3}) == {"b": 3, "a": 2}
    assert even_shares({"a": 6, "b": 3, "c": 2}, 6, {}) == {"c": 2, "a": 2, "b": 2}
    assert even_shares({"a": 0, "b": 3}, 6, {}) == {"b": 3}


# Two users, 4 VMs, boot 10 s. alice submits 6 one-processor jobs of 100 s at t=0: she gets all
# 4 VMs (ready at 10, jobs 1-4 start). bob submits 2 jobs at t=50: wants are alice 6 (4 busy +
# 2 queued), bob 2, so the shares are 2 and 2 and alice gives 2 VMs back, the last started first
# (all at 10: the highest ids, VMs 3 and 2).


def test_graceful_two_users_half_of_the_first_users_vms_retire_when_their_jobs_end():
    result = run(cloud(4), jobs_of("alice", 1, 6, 0) + jobs_of("bob", 11, 2, 50), "graceful")
    log = result.log
    assert held(log, 0) == {"alice": 4}
    retired = [(e.time, e.vm) for e in log if e.kind is EventKind.VM_RETIRE]
    assert retired == [(50, 3), (50, 2)]
    assert kills(result) == []
    # nothing moves until the retiring VMs' jobs end at 110: then they are released, bob's two
    # VMs are leased (ready at 120) and alice's last jobs take her two remaining VMs at once
    assert held(log, 50) == {"alice": 4}
    assert held(log, 110) == {"alice": 2, "bob": 2}
    assert starts(result) == {1: 10, 2: 10, 3: 10, 4: 10, 5: 110, 6: 110, 11: 120, 12: 120}


def test_kill_two_users_the_jobs_on_over_share_vms_are_requeued():
    result = run(cloud(4), jobs_of("alice", 1, 6, 0) + jobs_of("bob", 11, 2, 50), "kill")
    log = result.log
    # at 50 the jobs on VMs 3 and 2 (jobs 4 and 3) are killed and requeued, their VMs released
    # and bob's leased at once (ready at 60)
    assert kills(result) == [(50, 4), (50, 3)]
    assert held(log, 50) == {"alice": 2, "bob": 2}
    s = starts(result)
    assert (s[11], s[12]) == (60, 60)
    # alice's queue is now 5, 6, 4, 3: 5 and 6 take her VMs when jobs 1 and 2 end at 110; at
    # 160 bob's jobs end and he has no more work: his VMs are released, alice's share is 4, two
    # VMs are leased for her (ready at 170) and jobs 4 and 3 start on them
    assert (s[5], s[6]) == (110, 110)
    assert (s[4], s[3]) == (170, 170)
    assert held(log, 160) == {"alice": 4}


# Three users, 6 VMs, boot 10 s: alice 6 jobs at 0, bob 3 at 20, carol 2 at 30 (100 s each).
# Kill mode, by hand:
#  t=0   alice wants 6: VMs 0-5, ready at 10, jobs 1-6 start there.
#  t=20  wants alice 6, bob 3: shares 3 and 3. Alice's VMs 5, 4, 3 retire (jobs 6, 5, 4 killed
#        and requeued); bob's VMs 6, 7, 8 leased (ready at 30).
#  t=30  bob's VMs are ready, his jobs still queued (allocation decides after fair share): wants
#        alice 6 (3 busy + 3 queued), bob 3 (3 idle VMs his jobs claim), carol 2: the even share
#        is 2 each. Bob gives back one idle VM (6), alice retires VM 2 (job 3 killed), carol gets
#        VMs 9, 10 (ready at 40). Bob's jobs 11, 12 start on VMs 7, 8.
#  t=40  carol's jobs 21, 22 start.
#  t=110 alice's jobs 1, 2 end: her queue 6, 5, 4, 3 takes her two VMs (6 and 5 start).
#  t=130 bob's 11, 12 end: wants bob 1 (job 13), carol 2, alice 4: shares 1, 2, 3. Bob keeps
#        one VM (7, job 13 starts on it), releases 8; alice leases one more (VM 11, ready 140).
#  t=140 carol's jobs end: carol has no work, her VMs go; alice wants 4 (2 busy + 2 queued) and
#        gets VM 12; job 4 starts on VM 11 at 140, job 3 on VM 12 at 150.


def test_kill_three_users_even_shares_rebalanced_as_users_come_and_go():
    jobs = jobs_of("alice", 1, 6, 0) + jobs_of("bob", 11, 3, 20) + jobs_of("carol", 21, 2, 30)
    result = run(cloud(6), jobs, "kill")
    log = result.log
    assert held(log, 0) == {"alice": 6}
    assert held(log, 20) == {"alice": 3, "bob": 3}
    assert held(log, 30) == {"alice": 2, "bob": 2, "carol": 2}
    assert kills(result) == [(20, 6), (20, 5), (20, 4), (30, 3)]
    assert held(log, 130) == {"alice": 3, "bob": 1, "carol": 2}
    assert held(log, 140) == {"alice": 4, "bob": 1}
    assert starts(result) == {
        1: 10, 2: 10, 11: 30, 12: 30, 21: 40, 22: 40, 6: 110, 5: 110, 13: 130, 4: 140, 3: 150
    }  # fmt: skip
    summary = compute_run_metrics(log, result.jobs, cloud(6), result.end_time).summary
    # VM-hours per user from the log: alice's VMs 0-1 (0..210), 2 (0..30), 3-5 (0..20),
    # 11 (130..240), 12 (140..250); bob's 6 (20..30), 7 (20..230), 8 (20..130); carol's 9-10 (30..140)
    assert summary["vm_hours_by_user"] == pytest.approx(
        {
            "alice": (2 * 210 + 30 + 3 * 20 + 110 + 110) / 3600,
            "bob": (10 + 210 + 110) / 3600,
            "carol": 2 * 110 / 3600,
        }
    )
    # spread of the shares while two users or more hold VMs: 0 from 20 to 130 (3/3, then 2/2/2),
    # 2 from 130 to 140 (3/1/2), 3 from 140 to 210 (4/1: bob has no queued work, alice does),
    # 1 from 210 to 230 (2/1): mean (2*10 + 3*70 + 1*20) / 210
    spread = summary["vm_share_spread"]["cloud"]
    assert spread == pytest.approx({"mean": 250 / 210, "max": 3})


def test_graceful_three_users_wait_for_the_retiring_jobs():
    jobs = jobs_of("alice", 1, 6, 0) + jobs_of("bob", 11, 3, 20) + jobs_of("carol", 21, 2, 30)
    result = run(cloud(6), jobs, "graceful")
    log = result.log
    retired = [(e.time, e.vm) for e in log if e.kind is EventKind.VM_RETIRE]
    assert retired == [(20, 5), (20, 4), (20, 3), (30, 2)]  # shares 3 at t=20, then 2 at t=30
    assert kills(result) == []
    assert held(log, 30) == {"alice": 6}  # nobody else's VM until the retiring ones end
    # at 110 every alice job ends (her retiring VMs are released, her last VMs idle with no
    # work left): bob gets 3, carol 2, and their jobs start when the VMs are ready at 120
    assert held(log, 110) == {"bob": 3, "carol": 2}
    assert {j: t for j, t in starts(result).items() if j > 10} == {11: 120, 12: 120, 13: 120, 21: 120, 22: 120}


def test_decisions_go_through_the_engine_with_statuses():
    env = cloud(4)
    h = Harness(env, "ff", "none", others={"fairshare": PolicyChoice("vm-share", {"mode": "kill"})})
    ids = h.vms(0, 4, owner="alice")
    for k, vm in enumerate(ids):
        h.running(Job(k + 1, 0, 1, 100, user="alice"), 0, 0.0)
        assert h.engine.entries[k + 1].alloc == ((vm, 1),)
    h.queue(Job(10, 0, 1, 100, user="bob"))
    out = h.decide("fairshare")
    got = [(type(o.decision).__name__, o.status.accepted) for o in out]
    assert got == [("RetireVms", True), ("KillJob", True), ("LeaseVms", True)]
    assert isinstance(out[0].decision, RetireVms) and out[0].decision.vm_ids == (ids[3],)
    assert isinstance(out[1].decision, KillJob) and out[1].decision.requeue
    lease = out[2].decision
    assert isinstance(lease, LeaseVms) and (lease.count, lease.user) == (1, "bob")
    # a retirement of a VM already retiring is refused with its status
    status = h.engine.apply(RetireVms(0, (ids[0],)))
    assert status.accepted
    again = h.engine.apply(RetireVms(0, (ids[0],)))
    assert not again.accepted and "already retiring" in again.reason
    assert not h.engine.apply(ReleaseVms(0, (ids[0],))).accepted  # busy: not released


def test_with_on_demand_shares_are_even_and_idle_vms_go_by_on_demands_rule():
    # The graceful schedule above, provisioning "on-demand": the same leases, retirements and
    # starts (even shares, alice 2 and bob 2 from 110), but once each user's jobs end nobody else
    # needs their VMs: On-Demand's rule keeps them for the cloud's idle time (300 s), so alice's
    # go at 210 + 300 and bob's at 220 + 300, released by "on-demand" (vm-share alone: at once).
    jobs = jobs_of("alice", 1, 6, 0) + jobs_of("bob", 11, 2, 50)
    fair = PolicyChoice("vm-share", {"mode": "graceful"})
    result = simulate(cloud(4), jobs, "ff", "on-demand", fairshare=fair, check_purity=True)
    log = result.log
    assert [(e.time, e.vm) for e in log if e.kind is EventKind.VM_RETIRE] == [(50, 3), (50, 2)]
    assert held(log, 110) == {"alice": 2, "bob": 2}
    assert starts(result) == {1: 10, 2: 10, 3: 10, 4: 10, 5: 110, 6: 110, 11: 120, 12: 120}
    released = [(e.time, e.vm, e.policy) for e in log if e.kind is EventKind.VM_RELEASE]
    assert released == [
        (110, 2, "vm-share"),
        (110, 3, "vm-share"),
        (510, 0, "on-demand"),
        (510, 1, "on-demand"),
        (520, 4, "on-demand"),
        (520, 5, "on-demand"),
    ]


def test_vm_share_runs_with_provisioning_none_or_on_demand():
    with pytest.raises(PolicyError, match="provisioning 'none' or 'on-demand', not 'startup'"):
        build_policies(PolicyChoice("ff"), PolicyChoice("startup"), None, {"fairshare": PolicyChoice("vm-share")})
    # paired: one round decides both (the provisioning slot holds "none")
    built = build_policies(PolicyChoice("ff"), PolicyChoice("on-demand"), None, {"fairshare": PolicyChoice("vm-share")})
    assert built.provisioning.name == "none" and [p.name for p in built.deciders] == ["none", "vm-share", "ff"]
    with pytest.raises(PolicyError, match="mode"):
        build_policies(
            PolicyChoice("ff"), PolicyChoice("none"), None, {"fairshare": PolicyChoice("vm-share", {"mode": "soft"})}
        )
