"""Decision kinds are open: a kind defined anywhere (here, a throwaway one in this file, one
file like every built-in kind) is applied by the engine with no other file edited, the built-in
kinds are found by scanning their package, each beside its decision's dataclass, and a decision
no kind handles is refused."""

from __future__ import annotations

import ast
import dataclasses
import importlib
import inspect
import pkgutil
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

import isthmus.decisions
import isthmus.engine
from helpers import cloud_env, clusters, job
from isthmus.decisions import decision_kind, kinds, unregister
from isthmus.decisions.grow import GrowBag
from isthmus.decisions.hold_release import HoldBagRelease
from isthmus.decisions.ops import B, C, E, KindOps, S
from isthmus.decisions.start import StartJob
from isthmus.model.events import EventKind
from isthmus.model.job import Job, JobKind, PriorityClass, VmRequirements
from isthmus.model.states import JobState
from isthmus.model.status import ACCEPTED, Refused, StatusCode
from isthmus.sim.harness import Harness


@dataclass(frozen=True, slots=True)
class Withdraw:
    """Take queued job `job_id` out of its queue, unrun (a throwaway kind of decision)."""

    job_id: int
    by: str = ""


class WithdrawKind:
    """Valid when the job is queued; applied through the operations the engine offers kinds."""

    decision = Withdraw

    def validate(self, ops: KindOps[E, B, S, C], d: Withdraw) -> E:
        entry = ops.entries.get(d.job_id)
        if entry is None or entry.state is not JobState.QUEUED:
            raise Refused(StatusCode.WRONG_STATE, f"job {d.job_id} is not queued")
        return entry

    def apply(self, ops: KindOps[E, B, S, C], d: Withdraw, ctx: E) -> None:
        ops.cancel(ctx.job.id)
        ops.log.reasons[d.job_id] = f"withdrawn by {d.by or ops.deciding}"


@pytest.fixture
def withdraw() -> Iterator[None]:
    decision_kind(WithdrawKind)
    try:
        yield
    finally:
        unregister(Withdraw)


def test_a_kind_defined_outside_the_package_is_applied(withdraw: None) -> None:
    h = Harness(clusters(1), "fcfs", "none")
    eng = h.engine
    for i in (1, 2, 3):
        eng.submit(job(i, 0, 1, 10))
    # before any round: the three jobs wait in submission order
    assert [e.job.id for e in eng.view.queue(0)] == [1, 2, 3]
    assert eng.apply(Withdraw(1), "tester") is ACCEPTED
    assert [e.job.id for e in eng.view.queue(0)] == [2, 3]
    assert 1 not in eng.entries
    assert eng.log.reasons[1] == "withdrawn by tester"
    eng.run_round()  # strict FCFS starts the new head
    assert eng.entries[2].state is JobState.RUNNING
    refused = eng.apply(Withdraw(2), "tester")  # running, not queued: the kind's validation refuses
    assert refused.code is StatusCode.WRONG_STATE and refused.policy == "tester"
    decisions_logged = [e for e in eng.log if e.kind is EventKind.DECISION]
    assert [(d.job, d.value) for d in decisions_logged] == [(2, StatusCode.WRONG_STATE)]


def test_a_decision_without_a_kind_is_refused() -> None:
    eng = Harness(clusters(1), "fcfs", "none").engine
    eng.submit(job(1, 0, 1, 10))
    status = eng.apply(Withdraw(1), "tester")  # its kind is not registered here
    assert status.code is StatusCode.INVALID and "unknown decision" in status.reason
    assert [e.job.id for e in eng.view.queue(0)] == [1]


def test_a_second_kind_for_one_decision_class_is_refused(withdraw: None) -> None:
    with pytest.raises(ValueError, match="already has a kind"):
        decision_kind(WithdrawKind)


def _decision_modules() -> list[str]:
    return [f"isthmus.decisions.{m.name}" for m in pkgutil.iter_modules(isthmus.decisions.__path__)]


def test_every_decision_class_has_its_kind_in_its_own_module_found_by_scanning() -> None:
    """One file a kind: each dataclass of the package's modules has a registered kind, defined in
    the same module, and the scan registers every one of them."""
    found = kinds()
    classes = {
        c
        for name in _decision_modules()
        for _, c in inspect.getmembers(importlib.import_module(name), inspect.isclass)
        if dataclasses.is_dataclass(c) and c.__module__ == name
    }
    assert len(classes) >= 13 and classes <= set(found)
    for c in classes:
        assert type(found[c]).__module__ == c.__module__, c


def test_the_decisions_package_imports_only_the_model_and_itself() -> None:
    """Policies import the decisions and the engine imports their kinds: below both, the package
    reaches the engine only through its own protocols (`isthmus.decisions.ops`), type-only imports
    included."""
    root = Path(isthmus.decisions.__file__).parent
    offenders = []
    for path in root.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            names = [node.module or ""] if isinstance(node, ast.ImportFrom) else []
            names += [a.name for a in node.names] if isinstance(node, ast.Import) else []
            for name in names:
                top = name.split(".")[:2]
                if top[0] == "isthmus" and top[1:] not in (["model"], ["decisions"]):
                    offenders.append((path.name, name))
    assert offenders == []


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


def test_kinds_tell_a_cluster_from_a_cloud_through_the_engine() -> None:
    """The kinds name no backend class: `cloud_at` answers which site is a cloud. Growth that
    avoids VMs is invalid on a cluster; a bag-release hold is for a cluster, not a cloud; a job
    asking for a VM does not start on a cluster."""
    eng = Harness(cloud_env(4, 2), "fcfs", "none").engine
    eng.submit(Job(10, 0.0, 1, 100.0, kind=JobKind.MALLEABLE, tasks=4, priority=PriorityClass.SUPER_LOW))
    eng.submit(job(1, 0, 2, 10))
    eng.submit(Job(2, 0.0, 1, 10.0, vm=VmRequirements(cores=1)))
    grow = eng.apply(GrowBag(10, 0, 1, avoid=(0,)), "tester")
    assert grow.code is StatusCode.INVALID and "has no VMs to avoid" in grow.reason
    hold = eng.apply(HoldBagRelease(1, 1), "tester")
    assert hold.code is StatusCode.NOT_ALLOWED and "not a cluster that holds bags" in hold.reason
    start = eng.apply(StartJob(2, 0), "tester")
    assert start.code is StatusCode.NOT_ALLOWED and "is a cluster" in start.reason
    assert eng.apply(GrowBag(10, 0, 1), "tester") is ACCEPTED
