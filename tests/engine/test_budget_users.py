"""Per-user budget caps and the two on-limit modes, hand-computed (docs/clouds.md, "Budgets").

The cloud charges $1 per started second (price 3600 per hour, billing per second), boots at
once and releases idle VMs at once, unless a test says otherwise; rounds follow events and a
billing boundary at time t is handled after the round at t."""

from __future__ import annotations

import dataclasses

import pytest

from helpers import cloud_env, job
from isthmus.decisions.lease import LeaseVms
from isthmus.engine.budgets import Ledger, ledger_snapshot, merge_charged, restore_vm_users
from isthmus.model.budget import BudgetCap
from isthmus.model.environment import Environment
from isthmus.model.events import EventKind, KillCause
from isthmus.model.status import StatusCode
from isthmus.sim.harness import Harness
from isthmus.sim.runner import SimulationResult, simulate


def _env(*caps: BudgetCap, cluster: int = 0, max_vms: int = 2, boot: float = 0.0) -> Environment:
    env = cloud_env(cluster=cluster, max_vms=max_vms, price=3600.0, increment=1.0, idle=0.0, boot=boot)
    return dataclasses.replace(env, budgets=caps)


def _kills(result: SimulationResult) -> list[tuple[float, int]]:
    return [(e.time, e.job) for e in result.log if e.kind is EventKind.KILL and e.value == KillCause.BUDGET]


def _ends(result: SimulationResult) -> list[tuple[float, int, int]]:
    return [(e.time, e.job, e.site) for e in result.log if e.kind is EventKind.END]


def _over_budget_notes(result: SimulationResult) -> list[tuple[float, str]]:
    return [
        (e.time, result.log.notes[i])
        for i, e in enumerate(result.log)
        if e.kind is EventKind.DECISION and e.value == StatusCode.OVER_BUDGET
    ]


def _cap(result: SimulationResult, name: str) -> dict[str, object]:
    return next(b for b in result.budgets if b["name"] == name)


def test_a_users_cap_stops_their_vm_and_leases_while_another_user_proceeds() -> None:
    # t=0: two VMs leased, vm0 for alice (job 1 first in the queue), vm1 for bob; each takes
    # its user's job. alice pays $1 at 0, 1, 2: the boundary at 3 would pass her $3 cap, so
    # vm0 is released at 3 and job 1 requeued; On-Demand asks no VM for her any more (her cap
    # cannot pay one). bob's job ends at 4 on his VM (no cap covers bob); job 1 may not take
    # the idle vm1 over (its next increment, at 4, would be alice's), so vm1 is released.
    result = simulate(
        _env(BudgetCap("alice-cap", 3.0, users=("alice",))),
        [job(1, 0, 1, 10, user="alice"), job(2, 0, 1, 4, user="bob")],
        "ff",
        "on-demand",
    )
    assert _ends(result) == [(4.0, 2, 1)]
    assert _kills(result) == [(3.0, 1)]
    assert [e.time for e in result.log if e.kind is EventKind.START] == [0.0, 0.0]
    assert _over_budget_notes(result) == []
    assert list(result.unfinished) == [1]
    assert "budget alice-cap cannot pay its next increment for alice" in result.unfinished[1]
    cap = _cap(result, "alice-cap")
    assert cap["spent"] == 3.0 and cap["released_vms"] == 1 and cap["refused_leases"] == 0


def test_a_lease_goes_to_the_user_who_can_pay_and_the_capped_user_waits_for_the_cluster() -> None:
    # carol fills the one-node cluster 0-10. alice (cap $0) arrives at 1: On-Demand asks no VM
    # for her (her cap cannot pay one). bob arrives at 2: one VM is leased for him (booting
    # 10 s). At 10 carol's job ends and alice's job takes the cluster; at 12 bob's VM is ready
    # and his job runs there.
    result = simulate(
        _env(BudgetCap("alice-cap", 0.0, users=("alice",)), cluster=1, boot=10.0),
        [job(0, 0, 1, 10, user="carol"), job(1, 1, 1, 5, user="alice"), job(2, 2, 1, 5, user="bob")],
        "ff",
        "on-demand",
    )
    assert _ends(result) == [(10.0, 0, 0), (15.0, 1, 0), (17.0, 2, 1)]
    assert [e.time for e in result.log if e.kind is EventKind.VM_LEASE] == [2.0]
    assert _over_budget_notes(result) == []
    assert not _kills(result)


def test_a_lease_the_policy_asks_is_cut_to_the_users_who_can_pay() -> None:
    # a provisioning policy that does not ask View.user_can_pay: the engine gives the VMs to
    # the queued jobs in order (alice's first) and refuses the one alice cannot pay, naming her cap
    h = Harness(_env(BudgetCap("alice-cap", 0.0, users=("alice",))), "ff", "none")
    h.queue(job(1, 0, 1, 10, user="alice"))
    h.queue(job(2, 0, 1, 10, user="bob"))
    assert not h.view.user_can_pay(1, "alice", 1.0) and h.view.user_can_pay(1, "bob", 1.0)
    assert h.engine.apply(LeaseVms(1, 2)).accepted
    assert h.engine.ledger.vm_user == {(1, 0): "bob"}
    (note,) = [h.engine.log.notes[i] for i, e in enumerate(h.engine.log) if e.kind is EventKind.DECISION]
    assert "lease of 1 VMs on cloud" in note and "exceeds budget alice-cap (users alice)" in note


def test_a_capped_users_job_never_takes_over_another_users_vm_it_could_not_keep() -> None:
    # The livelock the budget property found: a job of a user whose cap cannot pay took over a
    # VM leased for another user's waiting job, was killed at the VM's next boundary (now its
    # user's), and the other job's VM was leased again, for ever. Now: bob's job 1 runs on vm0
    # 10-110 (leased at 0, boots 10 s). Job 2 (bob, 2 VMs) has no room while vm0 is busy and
    # alice (cap $0) gets no lease. At 110 vm0 is idle: alice's job may not take it (its next
    # increment, at 110, would be hers); job 2 is placed on vm0 and one more VM is leased,
    # ready at 120: job 2 runs 120-130. Both VMs are released idle at 130; alice's job waits.
    result = simulate(
        _env(BudgetCap("alice-cap", 0.0, users=("alice",)), boot=10.0),
        [job(1, 0, 1, 100, user="bob"), job(2, 5, 2, 10, user="bob"), job(3, 5, 1, 100, user="alice")],
        "ff",
        "on-demand",
    )
    assert _ends(result) == [(110.0, 1, 1), (130.0, 2, 1)]
    assert [e.time for e in result.log if e.kind is EventKind.VM_LEASE] == [0.0, 110.0]
    assert [(e.time, e.vm) for e in result.log if e.kind is EventKind.VM_RELEASE] == [(130.0, 0), (130.0, 1)]
    assert not _kills(result) and _over_budget_notes(result) == []
    assert list(result.unfinished) == [3] and result.end_time == 130.0


def _two_jobs(mode: str) -> SimulationResult:
    return simulate(
        _env(BudgetCap("total", 6.0, on_limit=mode)),
        [job(1, 0, 1, 3.5, req=4), job(2, 0.5, 1, 4, req=4)],
        "ff",
        "on-demand",
    )


def test_requeue_mode_pays_increments_first_come_and_both_jobs_are_requeued() -> None:
    # vm0 leased at 0 (job 1), vm1 at 0.5 (job 2); $1 each at 0, 0.5, 1, 1.5, 2, 2.5: $6. The
    # boundary at 3 cannot be paid: vm0 released, job 1 (which would end at 3.5) requeued; the
    # same for vm1 at 3.5. Nothing finishes.
    result = _two_jobs("requeue")
    assert _kills(result) == [(3.0, 1), (3.5, 2)]
    assert _ends(result) == []
    assert _cap(result, "total")["spent"] == 6.0


def test_finish_mode_commits_a_started_jobs_increments_so_it_finishes() -> None:
    # job 1 starts at 0 with a 4 s request: its boundaries 1, 2, 3 are committed ($1 spent +
    # $3 committed). At 0.5 the lease for job 2 fits ($1 + $3 + $1 <= $6); its own commitment
    # (1.5, 2.5, 3.5: $3) does not: it runs uncommitted. Spent: 2 at 0.5, 3 at 1 (committed),
    # 4 at 1.5 (5 with the $1 still committed: fits), 5 at 2 (committed); at 2.5 vm1's
    # boundary would make 5 + 1 committed + 1 > 6: released, job 2 requeued. The boundary at
    # 3 is job 1's, committed: paid ($6). Job 1 ends at 3.5; job 2 takes its VM at 3.5 and
    # is requeued at the unpaid boundary 4.
    result = _two_jobs("finish")
    assert _ends(result) == [(3.5, 1, 1)]
    assert _kills(result) == [(2.5, 2), (4.0, 2)]
    notes = _over_budget_notes(result)
    assert notes[0] == (
        2.5,
        "lease of 1 VMs on cloud ($1.0000 for the first increment) exceeds budget total: "
        "$5.0000 spent + $1.0000 reserved for running jobs of $6.0000 committed",
    )
    cap = _cap(result, "total")
    assert cap["spent"] == 6.0 and cap["committed"] == 0.0


def test_finish_mode_without_a_requested_runtime_commits_nothing() -> None:
    # the same jobs without requests: nothing is committed, so finish behaves like requeue
    result = simulate(
        _env(BudgetCap("total", 6.0, on_limit="finish")),
        [job(1, 0, 1, 3.5), job(2, 0.5, 1, 4)],
        "ff",
        "on-demand",
    )
    assert _kills(result) == [(3.0, 1), (3.5, 2)]


def test_a_users_cap_does_not_cover_other_users_vms() -> None:
    # bob's VM (leased at 5, his job 5-6) is charged to bob: alice's $0 cap neither pays nor
    # refuses it; the cap over everyone pays its one increment (the run ends with the job)
    result = simulate(
        _env(BudgetCap("alice-cap", 0.0, users=("alice",)), BudgetCap("all", 3.0)),
        [job(1, 5, 1, 1, user="bob")],
        "ff",
        "on-demand",
    )
    assert _ends(result) == [(6.0, 1, 1)]
    assert _cap(result, "alice-cap")["spent"] == 0.0
    assert _cap(result, "all")["spent"] == 1.0


def test_a_restart_keeps_vm_users_and_per_user_charges() -> None:
    # what a live manager records (ledger_snapshot) and rebuilds at its next start: vm 0 of
    # site 1 is alice's, her cap charged $1.50; the replay of that VM's lease (3 increments of
    # $0.60) books $1.80 to alice, vm 1's ($0.60) to no user; each cap keeps the larger figure
    caps = (BudgetCap("alice-cap", 5.0, users=("alice",)), BudgetCap("all", 9.0))
    before = Ledger(caps, {"c": 0, "cloud": 1}, frozenset({1}))
    before.vm_user[(1, 0)] = "alice"
    before.get("alice-cap").charged[""] = 1.5  # type: ignore[union-attr]
    doc = ledger_snapshot(before)
    after = Ledger(caps, {"c": 0, "cloud": 1}, frozenset({1}))
    saved = restore_vm_users(after, doc)
    assert after.vm_user == {(1, 0): "alice"}
    after.replay(1, 0.0, 150.0, 60.0, 0.6, after.vm_user.get((1, 0), ""))
    after.replay(1, 0.0, 30.0, 60.0, 0.6, after.vm_user.get((1, 1), ""))
    merge_charged(after, saved)
    assert after.get("alice-cap").charged == {"": pytest.approx(1.8)}  # type: ignore[union-attr]
    assert after.get("all").charged == {"": pytest.approx(2.4)}  # type: ignore[union-attr]
    assert restore_vm_users(Ledger(caps, {"cloud": 1}, frozenset({1})), None) == {}


def test_a_run_whose_queued_jobs_can_never_start_ends_though_a_cap_pays_its_vms_for_ever() -> None:
    # Startup leases the cloud's one VM ($0.50 an hour) at 0 for bob's job (alice's cap of $0
    # cannot pay one); bob's job runs 0-10. alice's job may never take the VM over, yet Startup
    # keeps it and the daily $50 cap would pay it for ever. Once bob's job ends at 10, only the
    # VM's billing boundaries remain: the run ends there (it used to go on paying one hour after
    # another without end), charged the one increment started.
    env = dataclasses.replace(
        cloud_env(cluster=0, max_vms=1, price=0.5, increment=3600.0),
        budgets=(BudgetCap("alice-cap", 0.0, users=("alice",)), BudgetCap("daily", 50.0, period="day")),
    )
    result = simulate(env, [job(1, 0, 1, 10, user="bob"), job(2, 0, 1, 10, user="alice")], "ff", "startup")
    assert _ends(result) == [(10.0, 1, 1)]
    assert result.end_time == 10.0 and list(result.unfinished) == [2]
    assert _cap(result, "daily")["spent"] == 0.5
