"""A linear agent: it scores each visible queued job and waiting with linear functions of the
observation and takes the best possible action; trained by the cross-entropy method.

Its weights are saved as JSON (`LinearAgent.save`), the file the `gym-agent` allocation policy
reads (`isthmus simulate -p gym-agent:model=PATH`). Training needs the Gymnasium environment;
deciding needs only NumPy.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
from numpy.typing import NDArray

from isthmus.gym.features import GLOBAL_FEATURES, SLOT_FEATURES, RuntimeSource

if TYPE_CHECKING:
    from isthmus.gym.env import SchedulingEnv

FORMAT = "isthmus-linear-agent/1"
"""The `format` field of a saved agent."""

#: Weights of a job's score: its slot's columns, the global columns, then a constant.
JOB_WEIGHTS = len(SLOT_FEATURES) + len(GLOBAL_FEATURES) + 1
#: Weights of waiting's score: the global columns, then a constant.
WAIT_WEIGHTS = len(GLOBAL_FEATURES) + 1


@dataclass
class LinearAgent:
    """Scores slot k as ``job · [queue[k], globals, 1]`` and waiting as ``wait · [globals, 1]``;
    acts on the highest score among the possible actions (ties: the first slot)."""

    job: NDArray[np.float64] = field(default_factory=lambda: np.zeros(JOB_WEIGHTS))
    wait: NDArray[np.float64] = field(default_factory=lambda: np.zeros(WAIT_WEIGHTS))
    #: the queue slots and sites of the observations it was trained on
    slots: int = 8
    sites: int = 4
    #: what the runtime column read in training ("runtime": real runtimes, simulation only)
    runtime: RuntimeSource = "estimate"

    @classmethod
    def from_vector(cls, theta: NDArray[np.float64], **shape: Any) -> LinearAgent:
        """An agent whose weights are `theta` (job weights, then wait weights)."""
        return cls(np.array(theta[:JOB_WEIGHTS], dtype=float), np.array(theta[JOB_WEIGHTS:], dtype=float), **shape)

    def vector(self) -> NDArray[np.float64]:
        """The weights as one vector (job weights, then wait weights)."""
        return np.concatenate([self.job, self.wait])

    def scores(self, obs: Mapping[str, NDArray[Any]]) -> NDArray[np.float64]:
        """One score per action: each slot, then wait."""
        queue = np.asarray(obs["queue"], dtype=float)
        glob = np.asarray(obs["globals"], dtype=float)
        ones = np.ones((queue.shape[0], 1))
        rows = np.hstack([queue, np.broadcast_to(glob, (queue.shape[0], glob.size)), ones])
        return np.append(rows @ self.job, float(np.append(glob, 1.0) @ self.wait))

    def act(self, obs: Mapping[str, NDArray[Any]], mask: NDArray[np.int8]) -> int:
        """The best action among those `mask` allows (wait is always allowed)."""
        scores = np.where(np.asarray(mask, dtype=bool), self.scores(obs), -np.inf)
        return int(np.argmax(scores))

    def save(self, path: str | os.PathLike[str]) -> Path:
        """Write the agent as JSON (`FORMAT`): weights, observation shape and runtime source."""
        out = Path(path)
        doc = {
            "format": FORMAT,
            "slots": self.slots,
            "sites": self.sites,
            "runtime": self.runtime,
            "slot_features": list(SLOT_FEATURES),
            "global_features": list(GLOBAL_FEATURES),
            "job_weights": [float(x) for x in self.job],
            "wait_weights": [float(x) for x in self.wait],
        }
        out.write_text(json.dumps(doc, indent=2) + "\n")
        return out

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> LinearAgent:
        """Read an agent written by `save`; ValueError naming what does not match."""
        doc = json.loads(Path(path).read_text())
        if not isinstance(doc, dict) or doc.get("format") != FORMAT:
            raise ValueError(f"{path}: not a saved linear agent (format {FORMAT!r} expected)")
        if doc.get("slot_features") != list(SLOT_FEATURES) or doc.get("global_features") != list(GLOBAL_FEATURES):
            raise ValueError(f"{path}: trained on other observation columns than {SLOT_FEATURES} + {GLOBAL_FEATURES}")
        job = np.array(doc["job_weights"], dtype=float)
        wait = np.array(doc["wait_weights"], dtype=float)
        if job.shape != (JOB_WEIGHTS,) or wait.shape != (WAIT_WEIGHTS,):
            raise ValueError(f"{path}: expected {JOB_WEIGHTS} job and {WAIT_WEIGHTS} wait weights")
        runtime = doc.get("runtime", "estimate")
        if runtime not in ("estimate", "runtime"):
            raise ValueError(f"{path}: runtime must be 'estimate' or 'runtime', got {runtime!r}")
        return cls(job, wait, int(doc["slots"]), int(doc["sites"]), runtime)


def run_episode(env: SchedulingEnv, act: Callable[[Mapping[str, Any], NDArray[np.int8]], int], seed: int) -> float:
    """Play one episode of `env` from `reset(seed=seed)` choosing with `act(obs, mask)`; returns
    the episode's return (the sum of its rewards)."""
    obs, info = env.reset(seed=seed)
    total = 0.0
    done = False
    while not done:
        obs, reward, terminated, truncated, info = env.step(act(obs, info["action_mask"]))
        total += float(reward)
        done = terminated or truncated
    return total


@dataclass
class Training:
    """What `train_cross_entropy` did: the agent, the mean return of its elites per generation
    and the environment steps taken."""

    agent: LinearAgent
    history: list[float]
    steps: int


def train_cross_entropy(
    env: SchedulingEnv,
    *,
    seeds: tuple[int, ...] = (0, 1),
    generations: int = 5,
    population: int = 10,
    elite: int = 3,
    rng_seed: int = 0,
) -> Training:
    """Train a `LinearAgent` on `env` with the cross-entropy method: each generation draws
    `population` weight vectors from a Gaussian, plays each on the episodes of `seeds`, and moves
    the Gaussian to the `elite` best (highest mean return). Returns the mean of the last Gaussian
    as the agent."""
    rng = np.random.default_rng(rng_seed)
    size = JOB_WEIGHTS + WAIT_WEIGHTS
    mean = np.zeros(size)
    std = np.ones(size)
    shape = {"slots": env.slots, "sites": env.site_rows, "runtime": env.runtime}
    history: list[float] = []
    steps_before = env.steps_taken
    for _ in range(generations):
        thetas = rng.normal(mean, std, size=(population, size))
        returns = []
        for theta in thetas:
            agent = LinearAgent.from_vector(theta, **shape)
            returns.append(float(np.mean([run_episode(env, agent.act, s) for s in seeds])))
        best = np.argsort(returns)[::-1][:elite]
        mean = thetas[best].mean(axis=0)
        std = thetas[best].std(axis=0) + 0.05
        history.append(float(np.mean([returns[i] for i in best])))
    return Training(LinearAgent.from_vector(mean, **shape), history, env.steps_taken - steps_before)
