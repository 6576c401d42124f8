"""A Gymnasium environment over the engine: an agent decides which queued job starts, or waits.

The environment drives the real engine (`engine/build.py:build_engine`, simulated site backends,
the simulated clock) one clock event at a time. Its allocation policy is the seat
(`isthmus.gym.seat`): the engine asks it in each round, like any allocation policy, and it
returns what the agent chose. A step is one decision point: a round at which some job among
the first `slots` queued can start. The agent's action is a slot (start that job on the first
site of the queue where it fits, validated and applied by the engine) or `slots` (wait: the
clock runs on until the next decision point). Rounds are event-triggered (a round after the
events of each instant), whatever the environment's round interval.

The agent may wait only while some job runs or some VM boots (`features.wait_allowed`, what the
trained-agent policy applies too): a wait on an idle pool could last for ever. The mask of such
a decision point does not allow waiting, and a wait there starts the first queued job that fits
(queue order) instead. An episode ends (`terminated`) when every job of its workload has ended
or been rejected; it is `truncated` after `max_steps` decisions, or when queued jobs can never
start (nothing runs, nothing is to come, nothing fits).

Rewards (`reward`, one name or weights by name; `info["reward_parts"]` gives each part):
- ``slowdown``: minus the bounded slowdowns (docs/metrics.md) of the jobs that ended during
  the step, over the episode's job count: an episode's return is minus its mean bounded slowdown;
- ``wait``: minus the waits (hours) of the runs that started during the step, over the job count:
  the return is minus the mean wait in hours;
- ``utilization``: minus the processor-hours left idle while jobs waited during the step, over
  the processors of all sites: the return is minus the hours of whole-pool idleness with work waiting;
- ``cost``: minus the charged cost ($) committed during the step (cloud leases).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from operator import attrgetter
from typing import Any, Literal, cast

import gymnasium as gym
import numpy as np
from gymnasium import spaces
from numpy.typing import NDArray

from isthmus.decisions.start import start_job
from isthmus.engine.build import PolicyChoices, build_engine
from isthmus.engine.clock import PRIO_SUBMIT, SimClock
from isthmus.engine.engine import Engine
from isthmus.gym.features import (
    GLOBAL_FEATURES,
    SITE_FEATURES,
    SLOT_FEATURES,
    RuntimeSource,
    Slots,
    observe,
    wait_allowed,
)
from isthmus.gym.seat import NAME as SEAT
from isthmus.gym.seat import Seat, seated
from isthmus.model.environment import Environment
from isthmus.model.events import EventKind
from isthmus.model.job import Job
from isthmus.sim.runner import simulated_backends

Reward = Literal["slowdown", "wait", "utilization", "cost"]
REWARDS: tuple[Reward, ...] = ("slowdown", "wait", "utilization", "cost")
"""The reward parts an environment can weigh."""

Observation = dict[str, Any]
"""``queue``, ``sites`` and ``globals``: float32 arrays (`isthmus.gym.features.observe`)."""
_submit = attrgetter("submit")


def _weights(reward: str | Mapping[str, float]) -> dict[str, float]:
    weights = {reward: 1.0} if isinstance(reward, str) else dict(reward)
    unknown = sorted(set(weights) - set(REWARDS))
    if unknown or not weights:
        raise ValueError(f"reward {reward!r}: expected one of {', '.join(REWARDS)} or weights by those names")
    return weights


def _environment(environment: Environment | str) -> Environment:
    if isinstance(environment, Environment):
        return environment
    from isthmus.config import load_environment

    return load_environment(environment)


class SchedulingEnv(gym.Env[Observation, np.int64]):
    """Episodes of a workload on an environment, an agent choosing which job starts or waiting.

    `workload` is what `isthmus simulate -t` takes (a trace file or a model spec such as
    ``lublin:max_size=16``) or a list of jobs. A model generates each episode's jobs with a seed
    drawn from `reset(seed=...)`; a trace gives each episode a window of `jobs` consecutive jobs
    at a seeded offset (times shifted to start at 0); a list is replayed as given. `jobs` is the
    episode's job count: the jobs a model generates, the window's length, the first jobs of a
    list replayed (None: a model's default count, the whole trace or list). `slots` is how many queued
    jobs (queue order) the agent sees and may start. `runtime` is what the observation's runtime
    column reads: "estimate" (the requested runtime, else the runtime predictor's; what a live
    manager knows) or "runtime" (the real runtime, simulation only). `provisioning` names the
    provisioning policy (default: the environment's).
    """

    metadata: dict[str, Any] = {"render_modes": []}  # noqa: RUF012  (Gymnasium's class attribute)

    def __init__(
        self,
        environment: Environment | str,
        workload: str | Sequence[Job] = "lublin",
        *,
        jobs: int | None = 100,
        reward: Reward | Mapping[str, float] = "slowdown",
        slots: int = 8,
        runtime: RuntimeSource = "estimate",
        provisioning: str | None = None,
        max_steps: int | None = None,
    ) -> None:
        if slots < 1:
            raise ValueError(f"slots must be >= 1, got {slots}")
        if runtime not in ("estimate", "runtime"):
            raise ValueError(f"runtime must be 'estimate' or 'runtime', got {runtime!r}")
        self.environment = _environment(environment)
        self.weights = _weights(reward)
        self.slots = slots
        self.runtime: RuntimeSource = runtime
        self.site_rows = len(self.environment.sites)
        self.provisioning = provisioning
        self.max_steps = max_steps
        self.job_count = jobs
        self._workload_spec: str | None = None
        self._trace: Sequence[Job] | None = None
        if isinstance(workload, str):
            from isthmus.workloads.resolve import looks_like_path, resolve_workload

            if looks_like_path(workload):
                self._trace = resolve_workload(workload).jobs
            else:
                self._workload_spec = workload
        else:
            self._trace = list(workload)
        self._replay = not isinstance(workload, str)
        self.capacity = sum(s.max_processors for s in self.environment.sites) or 1
        self.action_space = spaces.Discrete(slots + 1)
        slot_high = np.array([1, 1, 1, 2, 2], dtype=np.float32)
        self.observation_space = spaces.Dict(
            {
                "queue": spaces.Box(
                    0.0, np.broadcast_to(slot_high, (slots, len(SLOT_FEATURES))).copy(), dtype=np.float32
                ),
                "sites": spaces.Box(0.0, 1.0, (self.site_rows, len(SITE_FEATURES)), dtype=np.float32),
                "globals": spaces.Box(0.0, np.array([4.0, 1.0], dtype=np.float32), (len(GLOBAL_FEATURES),)),
            }
        )
        #: environment steps taken over the environment's life (all episodes)
        self.steps_taken = 0
        self.engine: Engine | None = None

    # --------------------------------------------------------------------------- episodes

    def _episode_jobs(self) -> list[Job]:
        if self._workload_spec is not None:
            from isthmus.workloads.resolve import resolve_workload

            seed = int(self.np_random.integers(0, 2**31 - 1))
            return list(resolve_workload(self._workload_spec, seed=seed, jobs=self.job_count).jobs)
        assert self._trace is not None
        jobs = self._trace
        n = len(jobs) if self.job_count is None else min(self.job_count, len(jobs))
        if self._replay or n >= len(jobs):
            return list(jobs[:n])
        start = int(self.np_random.integers(0, len(jobs) - n + 1))
        window = jobs[start : start + n]
        t0 = window[0].submit
        return [replace(j, submit=j.submit - t0) for j in window]

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[Observation, dict[str, Any]]:
        """Start an episode (its jobs drawn with `seed`); run the engine to the first decision point."""
        super().reset(seed=seed)
        jobs = self._episode_jobs()
        self.clock = SimClock()
        choices = PolicyChoices.of(self.environment, allocation=SEAT, provisioning=self.provisioning)
        with seated():
            self.engine = build_engine(
                self.environment,
                choices,
                clock=self.clock,
                backends=simulated_backends(self.environment),
                round_interval=None,
            )
        self.seat = cast("Seat", self.engine.allocation)
        self.jobs = {j.id: j for j in jobs}
        self.clock.feed(jobs, _submit, self.engine.submit, PRIO_SUBMIT)
        self._feed = self.clock.feeds[0]
        self._mark = 0
        self._spent = 0.0
        self._idle_area = 0.0
        self._steps = 0
        self._ended = 0
        self._bsld_sum = 0.0
        self._forced = 0
        self._done = False
        self._stuck = False
        self._advance()
        self._parts()  # the arrivals and starts before the first decision count in no step
        return self._observation(), self._info({})

    def _view_slots(self) -> tuple[Observation, Slots]:
        engine = self._engine()
        view = engine.view
        return observe(
            view,
            list(view.queue(0)),
            view.free_processors(),
            slots=self.slots,
            sites=self.site_rows,
            source=self.runtime,
        )

    def _engine(self) -> Engine:
        if self.engine is None:
            raise RuntimeError("call reset() before step()")
        return self.engine

    def _finished(self) -> bool:
        return self._feed.i >= self._feed.n and not self._engine().entries

    def _nothing_to_come(self) -> bool:
        engine = self._engine()
        return (
            self._feed.i >= self._feed.n
            and len(self.clock.heap) <= self.clock.background
            and not any(b.running for b in engine.backends)
        )

    def _advance(self) -> None:
        """Run the clock until a round at which a visible job can start, or the episode's end."""
        engine = self._engine()
        seat = self.seat
        clock = self.clock
        while True:
            if seat.asked:
                seat.asked = False
                obs, shown = self._view_slots()
                if any(s >= 0 for s in shown.sites):
                    self._current = (obs, shown)
                    return
            if self._finished():
                self._done = True
                return
            if self._nothing_to_come():
                if not self._force_start():
                    self._done = self._stuck = True
                    return
                continue
            before = clock.now
            idle = sum(max(f, 0) for f in engine.view.free_processors()) if engine.view.queued else 0
            if not clock.step():
                self._done = self._stuck = True
                return
            self._idle_area += idle * (clock.now - before)

    def _force_start(self) -> bool:
        """Start the first queued job that fits (a wait here would last for ever); False if none fits."""
        engine = self._engine()
        _, shown = observe(
            engine.view,
            list(engine.view.queue(0)),
            engine.view.free_processors(),
            slots=max(engine.view.queued, 1),
            sites=self.site_rows,
            source=self.runtime,
        )
        for entry, site in zip(shown.entries, shown.sites, strict=True):
            if site >= 0:
                self._start(entry.job.id, site)
                self._forced += 1
                return True
        return False

    def _start(self, job_id: int, site: int) -> None:
        self.seat.pending = [start_job(job_id, site, None, SEAT)]
        self._engine().request_round(self.clock.now)

    def _mask(self) -> NDArray[np.int8]:
        if self._done:
            return np.array([0] * self.slots + [1], dtype=np.int8)
        mask = self._current[1].mask()
        if not wait_allowed(self._engine().view):
            mask[-1] = 0
        return mask

    def step(self, action: np.int64 | int) -> tuple[Observation, float, bool, bool, dict[str, Any]]:
        """Start the job in slot `action` (or wait: `action == slots`); run to the next decision point."""
        if self._done:
            raise RuntimeError("the episode has ended: call reset()")
        a = int(action)
        if not 0 <= a <= self.slots:
            raise ValueError(f"action {action!r} outside 0..{self.slots}")
        shown = self._current[1]
        extra: dict[str, Any] = {}
        if a < len(shown.sites) and shown.sites[a] >= 0:
            self._start(shown.entries[a].job.id, shown.sites[a])
        else:
            if a != self.slots:
                extra["invalid_action"] = True  # an empty slot or a job that does not fit: a wait
            if not wait_allowed(self._engine().view):
                self._force_start()
        self._steps += 1
        self.steps_taken += 1
        self._advance()
        parts = self._parts()
        reward = sum(self.weights.get(k, 0.0) * v for k, v in parts.items())
        truncated = (self._stuck and not self._finished()) or (
            self.max_steps is not None and self._steps >= self.max_steps and not self._done
        )
        terminated = self._done and not truncated
        extra["reward_parts"] = parts
        return self._observation(), float(reward), terminated, truncated, self._info(extra)

    def _parts(self) -> dict[str, float]:
        """The reward parts of what happened since the last call."""
        engine = self._engine()
        log = engine.log
        n = max(len(self.jobs), 1)
        bsld = wait = 0.0
        for i in range(self._mark, len(log)):
            ev = log.event(i)
            if ev.kind == EventKind.END:
                job = self.jobs.get(ev.job)
                if job is not None:
                    b = max(1.0, (ev.time - job.submit) / max(job.runtime, 10.0))
                    bsld += b
                    self._bsld_sum += b
                    self._ended += 1
            elif ev.kind == EventKind.START:
                job = self.jobs.get(ev.job)
                if job is not None:
                    wait += ev.time - job.submit
        self._mark = len(log)
        spent = engine.spent
        cost, self._spent = spent - self._spent, spent
        idle, self._idle_area = self._idle_area, 0.0
        return {
            "slowdown": -bsld / n,
            "wait": -wait / 3600.0 / n,
            "utilization": -idle / self.capacity / 3600.0,
            "cost": -cost,
        }

    def _observation(self) -> Observation:
        if self._done:
            return self._view_slots()[0]
        return self._current[0]

    def _info(self, extra: dict[str, Any]) -> dict[str, Any]:
        info: dict[str, Any] = {
            "action_mask": self._mask(),
            "time": self.clock.now,
            "ended": self._ended,
            "forced_starts": self._forced,
        }
        if self._ended:  # the mean of the jobs ended so far (none: no key)
            info["mean_bounded_slowdown"] = self._bsld_sum / self._ended
        return {**info, **extra}
