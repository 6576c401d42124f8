"""The live context: the bracket of external events, persistence while writes fail, and the
rule that no role depends on the daemon."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from rig import Rig, spec

from isthmus.live.errors import PersistError

LIVE = Path(__file__).resolve().parents[3] / "src" / "isthmus" / "live"


def test_the_bracket_persists_what_happened_even_when_its_body_raises(tmp_path: Path) -> None:
    rig = Rig(tmp_path)
    job = rig.intake.submit("alice", spec(4))
    rig.step()
    queued = rig.intake.submit("bob", spec(4))
    rig.step()
    with pytest.raises(ValueError, match="after the cancel"), rig.ctx.external():
        rig.engine.cancel(queued)
        raise ValueError("after the cancel")
    assert rig.state(queued) == "cancelled"
    assert rig.state(job) == "starting"


def test_the_bracket_runs_what_became_due_at_the_wall_time(tmp_path: Path) -> None:
    rig = Rig(tmp_path)
    job = rig.intake.submit("alice", spec(2, requested_runtime=5))
    rig.step()
    rig.ctx.wall += 6.0  # the wall clock moved; nothing ran since
    with rig.ctx.external():
        pass
    assert rig.state(job) == "timeout"


def test_a_failed_write_keeps_everything_for_the_next_one(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    rig = Rig(tmp_path)
    job = rig.intake.submit("alice", spec(2))
    broken = rig.store.begin

    def refuse() -> object:
        raise OSError("disk full")

    monkeypatch.setattr(rig.store, "begin", refuse)
    with pytest.raises(PersistError, match="disk full"):
        rig.step()
    assert rig.ctx.persist_error is not None and rig.ctx.projector.persisted == 0
    assert rig.intake.pending()
    monkeypatch.setattr(rig.store, "begin", broken)
    rig.ctx._persist_retry_at = 0.0  # the half-second pause between retries is over
    rig.step()
    assert rig.ctx.persist_error is None
    assert rig.state(job) == "starting"


def test_the_bracket_reports_the_bodys_error_over_a_failed_write(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    rig = Rig(tmp_path)
    rig.intake.submit("alice", spec(2))

    def refuse() -> object:
        raise OSError("disk full")

    monkeypatch.setattr(rig.store, "begin", refuse)
    with pytest.raises(KeyError), rig.ctx.external():
        raise KeyError("the body's")
    assert rig.ctx.persist_error is not None


def live_imports(path: Path) -> set[str]:
    """The isthmus.live modules `path` imports (lazy and type-checking imports included)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
        elif isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
    return {name for name in found if name.startswith("isthmus.live.")}


#: the modules of isthmus.live that are not roles: the daemon itself, what starts one
#: (launch.py) and what reads a whole daemon's state for a forecast (forecast.py)
NOT_ROLES = {"__init__.py", "manager.py", "launch.py", "forecast.py"}


def test_no_role_imports_the_daemon() -> None:
    roles = [p for p in LIVE.glob("*.py") if p.name not in NOT_ROLES]
    assert {p.name for p in roles} >= {"context.py", "intake.py", "pilots.py", "recovery.py", "bag_tasks.py"}
    importers = sorted(p.name for p in roles if "isthmus.live.manager" in live_imports(p))
    assert importers == []


def test_the_import_scan_sees_a_type_checking_import(tmp_path: Path) -> None:
    path = tmp_path / "role.py"
    path.write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from isthmus.live.manager import Manager\n"
    )
    assert live_imports(path) == {"isthmus.live.manager"}
