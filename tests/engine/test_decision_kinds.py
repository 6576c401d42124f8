"""Decision kinds are open: a kind defined anywhere (here, a throwaway one in this file) is applied
by the engine with no other file edited, the built-in kinds are found by scanning their package,
and a decision no kind handles is refused."""

from __future__ import annotations

import ast
import dataclasses
import inspect
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

import isthmus.engine
import isthmus.model.decisions as decisions
from helpers import clusters, job
from isthmus.engine.kinds import decision_kind, kinds, unregister
from isthmus.engine.ops import EngineOps
from isthmus.engine.state import JobEntry
from isthmus.model.events import EventKind
from isthmus.model.states import JobState
from isthmus.model.status import ACCEPTED, Refused, StatusCode
from isthmus.sim.harness import Harness


@dataclass(frozen=True, slots=True)
class SendToBack:
    """Move queued job `job_id` to the back of its queue (a throwaway kind of decision)."""

    job_id: int
    by: str = ""


class SendToBackKind:
    """Valid when the job is queued; applied through the operations the engine offers kinds."""

    decision = SendToBack

    def validate(self, ops: EngineOps, d: SendToBack) -> JobEntry:
        entry = ops.entries.get(d.job_id)
        if entry is None or entry.state is not JobState.QUEUED:
            raise Refused(StatusCode.WRONG_STATE, f"job {d.job_id} is not queued")
        return entry

    def apply(self, ops: EngineOps, d: SendToBack, ctx: JobEntry) -> None:
        ops.queue_book.move(ctx, ctx.stage)
        ops.log.reasons[d.job_id] = f"sent to the back by {d.by or ops.deciding}"


@pytest.fixture
def send_to_back() -> Iterator[None]:
    decision_kind(SendToBackKind)
    try:
        yield
    finally:
        unregister(SendToBack)


def test_a_kind_defined_outside_the_engine_is_applied(send_to_back: None) -> None:
    h = Harness(clusters(1), "fcfs", "none")
    eng = h.engine
    for i in (1, 2, 3):
        eng.submit(job(i, 0, 1, 10))
    # before any round: the three jobs wait in submission order
    assert [e.job.id for e in eng.view.queue(0)] == [1, 2, 3]
    assert eng.apply(SendToBack(1), "tester") is ACCEPTED
    assert [e.job.id for e in eng.view.queue(0)] == [2, 3, 1]
    assert eng.log.reasons[1] == "sent to the back by tester"
    eng.run_round()  # strict FCFS starts the new head
    assert eng.entries[2].state is JobState.RUNNING
    refused = eng.apply(SendToBack(2), "tester")  # running, not queued: the kind's validation refuses
    assert refused.code is StatusCode.WRONG_STATE and refused.policy == "tester"
    decisions_logged = [e for e in eng.log if e.kind is EventKind.DECISION]
    assert [(d.job, d.value) for d in decisions_logged] == [(2, StatusCode.WRONG_STATE)]


def test_a_decision_without_a_kind_is_refused() -> None:
    eng = Harness(clusters(1), "fcfs", "none").engine
    eng.submit(job(1, 0, 1, 10))
    status = eng.apply(SendToBack(1), "tester")  # its kind is not registered here
    assert status.code is StatusCode.INVALID and "unknown decision" in status.reason
    assert [e.job.id for e in eng.view.queue(0)] == [1]


def test_a_second_kind_for_one_decision_class_is_refused(send_to_back: None) -> None:
    with pytest.raises(ValueError, match="already has a kind"):
        decision_kind(SendToBackKind)


def test_every_decision_class_of_the_model_has_a_kind_found_by_scanning() -> None:
    classes = {
        c
        for _, c in inspect.getmembers(decisions, inspect.isclass)
        if dataclasses.is_dataclass(c) and c.__module__ == decisions.__name__
    }
    assert classes and classes <= set(kinds())


def test_no_module_of_the_engine_package_imports_the_engine_class_at_run_time() -> None:
    """Parts and kinds reach the engine through `isthmus.engine.ops`, not the engine module
    (build.py, which assembles an engine, is the one module above it)."""
    root = Path(isthmus.engine.__file__).parent
    offenders = []
    for path in root.rglob("*.py"):
        if path.name in ("engine.py", "build.py") and path.parent == root:
            continue
        tree = ast.parse(path.read_text())
        typing_only = {
            id(n)
            for block in ast.walk(tree)
            if isinstance(block, ast.If) and isinstance(block.test, ast.Name) and block.test.id == "TYPE_CHECKING"
            for n in ast.walk(block)
        }
        for node in ast.walk(tree):  # lazy imports included; those under `if TYPE_CHECKING:` are for types only
            if id(node) in typing_only:
                continue
            if isinstance(node, ast.ImportFrom) and node.module == "isthmus.engine.engine":
                offenders.append(str(path.relative_to(root)))
            if isinstance(node, ast.Import) and any(a.name == "isthmus.engine.engine" for a in node.names):
                offenders.append(str(path.relative_to(root)))
    assert offenders == []
