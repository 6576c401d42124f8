"""A trained agent as the allocation policy `gym-agent`: its weights file, its schedule (the one it
made in the environment), and `isthmus simulate -p gym-agent:model=PATH`."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from isthmus.cli.main import app
from isthmus.config.bundled import single_cluster
from isthmus.gym.agent import JOB_WEIGHTS, WAIT_WEIGHTS, LinearAgent
from isthmus.model.environment import PolicyChoice
from isthmus.policies import registry
from isthmus.policies.build import DEFAULT_PREDICTOR, build_policies
from isthmus.policies.registry import PolicyError
from isthmus.sim.runner import simulate
from isthmus.workloads.resolve import resolve_workload


@pytest.fixture(autouse=True)
def _registered() -> None:
    """The entry point of pyproject.toml, where the installed metadata predates it."""
    if "gym-agent" not in registry.names("allocation"):
        registry.register("allocation", "gym-agent", "isthmus.gym.policy:AgentPolicy")


def _shortest_first(path: Path, runtime: str = "runtime") -> Path:
    job = np.zeros(JOB_WEIGHTS)
    job[3] = -1.0  # the runtime column: the shorter, the better
    wait = np.zeros(WAIT_WEIGHTS)
    wait[-1] = -10.0  # never wait while a job fits
    return LinearAgent(job, wait, slots=8, sites=1, runtime=runtime).save(path)  # type: ignore[arg-type]


def _starts(log: object) -> list[tuple[int, float]]:
    return sorted((e.job, e.time) for e in log if e.kind.name == "START")  # type: ignore[attr-defined]


def test_the_saved_agent_reads_back_and_a_foreign_file_is_refused(tmp_path: Path) -> None:
    path = _shortest_first(tmp_path / "a.json")
    agent = LinearAgent.load(path)
    assert agent.runtime == "runtime" and agent.vector()[3] == -1.0
    doc = json.loads(path.read_text())
    doc["slot_features"] = ["size"]
    (tmp_path / "b.json").write_text(json.dumps(doc))
    with pytest.raises(ValueError, match="other observation columns"):
        LinearAgent.load(tmp_path / "b.json")
    (tmp_path / "c.json").write_text("{}")
    with pytest.raises(ValueError, match="not a saved linear agent"):
        LinearAgent.load(tmp_path / "c.json")


def test_the_policy_makes_in_simulate_the_schedule_the_agent_made_in_the_environment(tmp_path: Path) -> None:
    pytest.importorskip("gymnasium")
    from isthmus.gym.agent import run_episode
    from isthmus.gym.env import SchedulingEnv

    path = _shortest_first(tmp_path / "sjf.json")
    agent = LinearAgent.load(path)
    jobs = list(resolve_workload("lublin:max_size=16", seed=5, jobs=50).jobs)
    env = SchedulingEnv(single_cluster(16), jobs, runtime="runtime")
    run_episode(env, agent.act, 0)
    assert env.engine is not None
    result = simulate(single_cluster(16), jobs, PolicyChoice("gym-agent", {"model": str(path)}), round_interval=None)
    assert _starts(result.log) == _starts(env.engine.log)
    assert not result.unfinished
    # shortest first among the visible jobs is not first come first served
    assert _starts(result.log) != _starts(simulate(single_cluster(16), jobs, "ff", round_interval=None).log)


def test_an_agent_that_would_always_wait_still_starts_jobs_on_an_idle_pool(tmp_path: Path) -> None:
    """The environment and the policy share the rule: no wait while nothing runs (a wait there
    could last for ever); the schedules agree and every job ends."""
    pytest.importorskip("gymnasium")
    from isthmus.gym.agent import run_episode
    from isthmus.gym.env import SchedulingEnv

    wait = np.zeros(WAIT_WEIGHTS)
    wait[-1] = 10.0
    path = LinearAgent(np.zeros(JOB_WEIGHTS), wait, slots=8, sites=1).save(tmp_path / "waiter.json")
    jobs = list(resolve_workload("lublin:max_size=16", seed=6, jobs=30).jobs)
    env = SchedulingEnv(single_cluster(16), jobs)
    run_episode(env, LinearAgent.load(path).act, 0)
    assert env.engine is not None
    result = simulate(single_cluster(16), jobs, PolicyChoice("gym-agent", {"model": str(path)}), round_interval=None)
    assert not result.unfinished and _starts(result.log) == _starts(env.engine.log)


def test_an_agent_trained_on_real_runtimes_is_refused_where_they_are_unknown(tmp_path: Path) -> None:
    real = PolicyChoice("gym-agent", {"model": str(_shortest_first(tmp_path / "r.json"))})
    with pytest.raises(PolicyError):
        build_policies(real, PolicyChoice("none"), DEFAULT_PREDICTOR, true_runtimes_known=False)
    estimate = PolicyChoice("gym-agent", {"model": str(_shortest_first(tmp_path / "e.json", "estimate"))})
    build_policies(estimate, PolicyChoice("none"), DEFAULT_PREDICTOR, true_runtimes_known=False)


def test_simulate_runs_the_trained_agent_by_name(tmp_path: Path) -> None:
    path = _shortest_first(tmp_path / "sjf.json")
    out = tmp_path / "out"
    args = ["simulate", "--cluster", "16", "-w", "lublin:max_size=16", "-n", "40", "--no-plots", "-o", str(out)]
    result = CliRunner().invoke(app, [*args, "-p", f"gym-agent:model={path}", "-p", "fcfs", "--json"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout[result.stdout.index("{") :])
    rows = {p["policy"].partition("[")[0]: p for p in report["policies"]}
    assert set(rows) == {"gym-agent", "fcfs"}
    assert rows["gym-agent"]["jobs_completed"] == 40
    missing = CliRunner().invoke(app, [*args, "-p", f"gym-agent:model={tmp_path / 'none.json'}"])
    assert missing.exit_code != 0 and "none.json" in missing.output
