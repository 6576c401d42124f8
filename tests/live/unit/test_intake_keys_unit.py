"""Intake's Idempotency-Keys without a server: a key is found while its jobs wait for their
write and afterwards, and it is stored in the same transaction as they are, never before."""

from __future__ import annotations

from pathlib import Path

import pytest
from rig import Rig, spec

from isthmus.live.errors import PersistError


def test_a_key_is_stored_with_its_jobs_and_only_with_them(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    rig = Rig(tmp_path)
    job = rig.intake.submit("alice", spec())
    rig.intake.remember("alice", "k", "digest", [job])
    assert rig.intake.key_pending("alice", "k")
    assert rig.intake.replay("alice", "k") == ("digest", [job])  # found while pending
    assert rig.intake.replay("bob", "k") is None  # keys are per user
    working = rig.store.begin

    def refuse() -> object:
        raise OSError("disk full")

    monkeypatch.setattr(rig.store, "begin", refuse)
    with pytest.raises(PersistError):
        rig.step()
    assert rig.store.idempotency_key("alice", "k", 0.0) is None and rig.store.job(job) is None
    assert rig.intake.replay("alice", "k") == ("digest", [job])  # still pending: still found
    monkeypatch.setattr(rig.store, "begin", working)
    rig.ctx._persist_retry_at = 0.0  # the half-second pause between retries is over
    rig.step()
    assert rig.store.job(job) is not None
    assert rig.store.idempotency_key("alice", "k", 0.0) == ("digest", [job])
    assert not rig.intake.key_pending("alice", "k")
    again = Rig(tmp_path)  # a new manager on the same database finds it
    assert again.intake.replay("alice", "k") == ("digest", [job])
