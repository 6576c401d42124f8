"""The Gymnasium environment over the engine: the checker, reproducible resets, the reward parts,
and a linear agent trained for a few thousand steps beating a random agent."""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("gymnasium")

from gymnasium.utils.env_checker import check_env

from isthmus.config.bundled import single_cluster
from isthmus.gym.agent import LinearAgent, run_episode, train_cross_entropy
from isthmus.gym.env import SchedulingEnv
from isthmus.model.job import Job
from isthmus.policies import registry
from isthmus.sim.runner import simulate

WORKLOAD = "lublin:max_size=16"


def _env(**kw: object) -> SchedulingEnv:
    return SchedulingEnv(single_cluster(16), WORKLOAD, jobs=kw.pop("jobs", 30), **kw)  # type: ignore[arg-type]


def test_the_environment_passes_gymnasiums_checker() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the checker's warnings (unbounded boxes, dtypes) fail too
        check_env(_env(), skip_render_check=True)
        check_env(SchedulingEnv("koala-c-multicloud", WORKLOAD, jobs=20, reward="cost"), skip_render_check=True)


def _trajectory(env: SchedulingEnv, seed: int) -> tuple[list[np.ndarray], list[float]]:
    obs, info = env.reset(seed=seed)
    seen, rewards = [obs["queue"].copy()], []
    done = False
    while not done:
        mask = info["action_mask"]
        obs, reward, terminated, truncated, info = env.step(int(np.flatnonzero(mask)[-1 if len(seen) % 3 else 0]))
        seen.append(obs["queue"].copy())
        rewards.append(reward)
        done = terminated or truncated
    return seen, rewards


def test_reset_with_a_seed_replays_the_same_episode_and_another_seed_another() -> None:
    env = _env()
    a, ra = _trajectory(env, 7)
    b, rb = _trajectory(env, 7)
    _, rc = _trajectory(env, 8)
    assert ra == rb and all(np.array_equal(x, y) for x, y in zip(a, b, strict=True))
    assert ra != rc
    assert "gym-seat" not in registry.names("allocation")  # registered only while an engine is built


def test_starting_every_job_first_fit_is_fcfs_and_the_return_is_minus_the_mean_bounded_slowdown() -> None:
    """Always starting the first job that fits, never waiting, with the whole queue visible, is
    what `ff` (first fit over the queue) does: the engine's schedule is that of `simulate`."""
    env = _env(jobs=40, slots=40)
    _, info = env.reset(seed=3)
    total, done = 0.0, False
    while not done:
        _, reward, terminated, truncated, info = env.step(int(np.flatnonzero(info["action_mask"])[0]))
        total += reward
        done = terminated or truncated
    assert terminated and not truncated and info["ended"] == 40 and info["forced_starts"] == 0
    assert total == pytest.approx(-info["mean_bounded_slowdown"])
    jobs: list[Job] = list(env.jobs.values())
    ff = simulate(single_cluster(16), jobs, "ff", round_interval=None)
    assert env.engine is not None
    starts = lambda log: sorted((e.job, e.time) for e in log if e.kind.name == "START")  # noqa: E731
    assert starts(env.engine.log) == starts(ff.log)


def test_waiting_runs_the_clock_to_the_next_decision_and_an_idle_pool_may_not_wait() -> None:
    jobs = [Job(1, 0.0, 2, 1000.0), Job(2, 0.0, 2, 100.0), Job(3, 0.0, 2, 10.0)]
    env = SchedulingEnv(single_cluster(4), jobs, slots=2)
    obs, info = env.reset(seed=0)
    assert info["time"] == 0.0 and list(info["action_mask"]) == [1, 1, 0]  # nothing runs: no wait
    obs, reward, *_, info = env.step(1)  # job 2 starts; jobs 1 and 3 still fit beside it
    assert info["time"] == 0.0 and list(info["action_mask"]) == [1, 1, 1]
    assert list(obs["queue"][:, 2]) == [0.5, 0.5] and obs["sites"][0, 0] == 0.5  # sizes, free share
    obs, reward, *_, info = env.step(2)  # wait: until job 2 ends at 100
    assert info["time"] == 100.0 and list(info["action_mask"]) == [1, 1, 0]
    parts = info["reward_parts"]
    assert parts["utilization"] == pytest.approx(-2 * 100 / 4 / 3600)  # 2 idle processors for 100 s, work waiting
    assert parts["slowdown"] == pytest.approx(-1.0 / 3) and reward == parts["slowdown"]  # job 2: bsld 1, of 3 jobs
    obs, reward, *_, info = env.step(2)  # a wait on an idle pool: the first job that fits starts instead
    assert info["forced_starts"] == 1 and info["time"] == 100.0 and list(info["action_mask"]) == [1, 0, 1]
    assert info["reward_parts"]["wait"] == pytest.approx(-100 / 3600 / 3)  # job 1 waited 100 s
    obs, reward, terminated, truncated, info = env.step(0)  # job 3; then nothing is left to decide
    assert terminated and not truncated and info["time"] == 1100.0 and info["ended"] == 3
    assert env.engine is not None
    starts = sorted((e.time, e.job) for e in env.engine.log if e.kind.name == "START")
    assert starts == [(0.0, 2), (100.0, 1), (100.0, 3)]


def test_an_invalid_action_is_a_wait_and_says_so() -> None:
    jobs = [Job(1, 0.0, 2, 100.0), Job(2, 0.0, 2, 100.0), Job(3, 10.0, 1, 10.0)]
    env = SchedulingEnv(single_cluster(4), jobs, slots=3)
    _, info = env.reset(seed=0)
    _, _, _, _, info = env.step(0)  # job 1 runs: a wait is allowed
    _, _, _, _, info = env.step(2)  # an empty slot: a wait until job 3 arrives
    assert info["invalid_action"] and info["time"] == 10.0 and info["forced_starts"] == 0


def test_a_trained_linear_agent_beats_a_random_agent_on_mean_bounded_slowdown() -> None:
    env = _env(jobs=40, runtime="runtime")
    training = train_cross_entropy(env, seeds=(0, 1), generations=3, population=6, elite=2, rng_seed=0)
    assert 1500 <= training.steps <= 6000
    rng = np.random.default_rng(0)

    def random_agent(obs: object, mask: np.ndarray) -> int:
        return int(rng.choice(np.flatnonzero(mask)))

    seeds = range(100, 106)
    trained = np.mean([run_episode(env, training.agent.act, s) for s in seeds])
    chance = np.mean([run_episode(env, random_agent, s) for s in seeds])
    assert trained > chance  # returns are minus the mean bounded slowdown
    # and an untrained agent (all weights 0: always the first fitting slot) is not what was learned
    assert not np.allclose(training.agent.vector(), LinearAgent().vector())


def test_a_trace_gives_each_episode_a_seeded_window_starting_at_zero(tmp_path: Path) -> None:
    lines = [f"{i} {100 * i} 0 {10 + i} 1 -1 -1 1 60 -1 1 1 1 -1 -1 -1 -1 -1" for i in range(1, 21)]
    trace = tmp_path / "t.swf"
    trace.write_text("; MaxProcs: 4\n" + "\n".join(lines) + "\n")
    env = SchedulingEnv(single_cluster(4), str(trace), jobs=5)

    def window(seed: int) -> list[tuple[int, float]]:
        env.reset(seed=seed)
        return [(j.id, j.submit) for j in env.jobs.values()]

    first = window(1)
    assert len(first) == 5 and first[0][1] == 0.0 and [s for _, s in first] == [0.0, 100.0, 200.0, 300.0, 400.0]
    assert window(1) == first
    assert {tuple(i for i, _ in window(s)) for s in range(2, 8)} != {tuple(i for i, _ in first)}
