"""Intake without a server: submissions reach the engine and the database, invalid ones are
refused before anything changes, cancellations end jobs."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from rig import Rig, spec

from isthmus.live.errors import PersistError, RequestError


def test_a_submitted_job_is_stored_and_started_on_a_free_node(tmp_path: Path) -> None:
    rig = Rig(tmp_path)
    job = rig.intake.submit("alice", spec(2, name="first"))
    assert job in rig.engine.entries
    assert rig.store.job(job) is None  # stored by the next persist, not before
    rig.step()
    row = rig.store.job(job)
    assert row is not None and row["user"] == "alice" and row["name"] == "first"
    assert row["state"] == "starting"
    [(_, cmd)] = rig.hub.nodes["0/n0"].outbox
    assert (cmd["op"], cmd["job"], cmd["run"], cmd["command"]) == ("start", job, 1, "/bin/true")
    assert [h["state"] for h in rig.store.history(job)] == ["queued", "starting"]


def test_job_ids_follow_the_stored_ones(tmp_path: Path) -> None:
    rig = Rig(tmp_path)
    first = rig.intake.submit("alice", spec())
    rig.step()
    again = Rig(tmp_path)  # a new manager on the same database
    assert again.intake.submit("alice", spec()) == first + 1


def test_committed_waits_for_one_transaction_holding_every_pending_submission(tmp_path: Path) -> None:
    rig = Rig(tmp_path)

    async def submit_two() -> list[int]:
        ids = [rig.intake.submit("alice", spec()), rig.intake.submit("bob", spec())]
        await asyncio.gather(rig.intake.committed(), rig.intake.committed())
        return ids

    ids = asyncio.run(submit_two())
    assert [rig.store.job(i)["user"] for i in ids] == ["alice", "bob"]  # type: ignore[index]


def test_a_job_larger_than_every_site_is_refused_before_it_exists(tmp_path: Path) -> None:
    rig = Rig(tmp_path)
    with pytest.raises(RequestError) as err:
        rig.intake.submit("alice", spec(5))
    assert err.value.status == 400 and "larger than any site" in str(err.value)
    assert not rig.engine.entries and not rig.intake.pending()
    assert rig.intake.submit("alice", spec(4)) == 1  # the refused one took no id


def test_unmatched_vm_requirements_name_the_field(tmp_path: Path) -> None:
    rig = Rig(tmp_path)
    with pytest.raises(RequestError) as err:
        rig.intake.check_vm("alice", spec(vm={"memory_mb": 10**9}))
    assert err.value.status == 400 and "vm.memory_mb" in str(err.value)


def test_a_bag_needs_a_fair_share_policy(tmp_path: Path) -> None:
    rig = Rig(tmp_path)
    with pytest.raises(RequestError) as err:
        rig.intake.submit_bag("alice", {"command": "/bin/true"}, ["true", "true"])
    assert err.value.status == 400 and "fair-share" in str(err.value)
    assert not rig.engine.entries


def test_submissions_are_refused_while_stopping_or_while_writes_fail(tmp_path: Path) -> None:
    rig = Rig(tmp_path)
    rig.ctx.stop_mode = "drain"
    with pytest.raises(RequestError) as err:
        rig.intake.submit("alice", spec())
    assert err.value.status == 503 and "drain" in str(err.value)
    rig.ctx.stop_mode = None
    rig.ctx.persist_error = "cannot write the database: disk full"
    with pytest.raises(PersistError, match="disk full"):
        rig.intake.submit("alice", spec())
    assert not rig.engine.entries


def test_cancel_ends_a_queued_job_once(tmp_path: Path) -> None:
    rig = Rig(tmp_path)
    running = rig.intake.submit("alice", spec(4))
    queued = rig.intake.submit("bob", spec(4))
    rig.step()
    assert (rig.state(running), rig.state(queued)) == ("starting", "queued")
    assert rig.intake.cancel(queued) is True
    assert rig.state(queued) == "cancelled"  # the bracket persisted it
    assert rig.intake.cancel(queued) is False
    assert rig.intake.why(queued) is None


def test_cancel_of_a_running_job_tells_its_pilot_to_kill_it(tmp_path: Path) -> None:
    rig = Rig(tmp_path)
    job = rig.intake.submit("alice", spec(2))
    rig.step()
    assert rig.intake.cancel(job) is True
    ops = [c["op"] for _, c in rig.hub.nodes["0/n0"].outbox]
    assert ops in (["kill"], ["start", "kill"])  # an undelivered start is withdrawn first
    assert rig.state(job) == "cancelled"
