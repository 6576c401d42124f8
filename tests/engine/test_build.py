"""build_engine: the one way to assemble an engine (engine/build.py), checked directly: which
policies it creates from an environment and the choices given, what it refuses where real
runtimes are unknown, and the settings it passes to the engine."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from helpers import cloud_env, clusters, job
from isthmus.engine.backend import SiteBackend
from isthmus.engine.bags import BagSettings
from isthmus.engine.build import FROM_ENVIRONMENT, PolicyChoices, build_engine
from isthmus.engine.clock import PRIO_SUBMIT, Schedule, SimClock
from isthmus.engine.engine import Engine
from isthmus.model.environment import Environment, PolicyChoice
from isthmus.model.job import Job
from isthmus.policies.build import DEFAULT_PREDICTOR, build_policies
from isthmus.policies.registry import PolicyError
from isthmus.sim.runner import build_backends, simulated_backends


def env_with(**changes: object) -> Environment:
    """The two-cluster test environment (period 30 s) with other fields set."""
    import dataclasses

    return dataclasses.replace(clusters(4, 2, interval=30.0), **changes)  # type: ignore[arg-type]


def built(env: Environment, choices: PolicyChoices, **kw: object) -> Engine:
    return build_engine(env, choices, clock=SimClock(), backends=simulated_backends(env), **kw)  # type: ignore[arg-type]


def test_choices_default_to_the_environments_policies_and_the_default_predictor() -> None:
    env = env_with(
        allocation=PolicyChoice("sjf"), provisioning=PolicyChoice("none"), fairshare=PolicyChoice("vm-share")
    )
    c = PolicyChoices.of(env)
    assert (c.allocation.name, c.provisioning.name, c.predictor) == ("sjf", "none", DEFAULT_PREDICTOR)
    assert dict(c.others) == {"fairshare": PolicyChoice("vm-share")}
    given = PolicyChoices.of(
        env, allocation="fcfs", provisioning="on-demand", predictor=None, fairshare="sep", selection="local-first"
    )
    assert (given.allocation.name, given.provisioning.name, given.predictor) == ("fcfs", "on-demand", None)
    assert {f: p.name for f, p in given.others.items()} == {"fairshare": "sep", "selection": "local-first"}


def test_the_environments_selection_policy_is_used_only_when_given() -> None:
    # the simulator of one manager and forecasts have no peers to forward to
    env = env_with(selection=PolicyChoice("local-first"))
    assert "selection" not in PolicyChoices.of(env).others
    assert PolicyChoices.of(env, selection=env.selection).others["selection"].name == "local-first"


def test_a_predictor_is_created_only_for_a_policy_that_uses_predictions() -> None:
    env = clusters(4)
    sjf = built(env, PolicyChoices(PolicyChoice("sjf"), PolicyChoice("none")))
    assert sjf.predictor is not None and sjf.predictor.name == "user-last-two"
    assert sjf.policies.predictor is sjf.predictor
    fcfs = built(env, PolicyChoices(PolicyChoice("fcfs"), PolicyChoice("none")))
    assert fcfs.predictor is None
    other = built(env, PolicyChoices(PolicyChoice("sjf"), PolicyChoice("none"), PolicyChoice("requested")))
    assert other.predictor is not None and other.predictor.name == "requested"
    assert built(env, PolicyChoices(PolicyChoice("sjf"), PolicyChoice("none"), None)).predictor is None


def test_policies_that_read_real_runtimes_are_refused_where_they_are_unknown() -> None:
    env = clusters(4)
    ideal = PolicyChoices(PolicyChoice("sjf-ideal"), PolicyChoice("none"))
    assert built(env, ideal).allocation.name == "sjf-ideal"
    with pytest.raises(PolicyError, match="only in simulation"):
        built(env, ideal, true_runtimes_known=False)
    exact = PolicyChoices(PolicyChoice("sjf"), PolicyChoice("none"), PolicyChoice("exact"))
    with pytest.raises(PolicyError, match="'exact'"):
        built(env, exact, true_runtimes_known=False)


def test_round_interval_is_the_environments_unless_given() -> None:
    env = env_with()
    choices = PolicyChoices.of(env)
    assert built(env, choices).round_interval == 30.0
    assert built(env, choices, round_interval=FROM_ENVIRONMENT).round_interval == 30.0
    assert built(env, choices, round_interval=5).round_interval == 5.0
    assert built(env, choices, round_interval=None).round_interval is None
    assert built(env, choices, round_interval=0.0).round_interval is None  # 0: event-triggered, as None


def test_settings_reach_the_engine() -> None:
    env = cloud_env(2, 2, interval=None)
    choices = PolicyChoices.of(env)
    engine = built(
        env,
        choices,
        budget=3.5,
        enforce_walltime=True,
        check_purity=True,
        rounds="per-event",
        name="peer-a",
        bag_settings=BagSettings(preemption_time=4.0, pull_latency=1.0),
    )
    assert (engine.budget, engine.enforce_walltime, engine.check_purity, engine.round_rule) == (
        3.5,
        True,
        True,
        "per-event",
    )
    assert engine.name == "peer-a"
    assert engine.bags.settings == BagSettings(preemption_time=4.0, pull_latency=1.0)
    plain = built(env, choices)
    assert (plain.budget, plain.enforce_walltime, plain.check_purity, plain.round_rule) == (None, False, False, "batch")
    assert plain.name == env.name
    assert plain.bags.settings == BagSettings()
    with pytest.raises(ValueError, match="per-event rounds need event-triggered rounds"):
        built(env, choices, rounds="per-event", round_interval=10.0)


def test_the_backends_are_what_the_factory_builds_with_the_engines_schedule() -> None:
    env = cloud_env(2, 2)
    seen: list[Schedule] = []

    def factory(schedule: Schedule) -> Sequence[SiteBackend]:
        seen.append(schedule)
        return build_backends(env, schedule)

    clock = SimClock()
    engine = build_engine(env, PolicyChoices.of(env), clock=clock, backends=factory)
    assert seen == [engine.schedule]
    assert [b.site.name for b in engine.backends] == ["c", "cloud"]
    assert engine.clock is clock
    assert [b.site.name for b in engine.clouds] == ["cloud"]


def run(engine: Engine, jobs: list[Job]) -> list[tuple[float, int, int, int, int, float]]:
    engine.clock.feed(jobs, lambda j: j.submit, engine.submit, PRIO_SUBMIT)
    engine.clock.run(1e9, engine.idle)
    return engine.log.rows()


def test_it_schedules_as_an_engine_assembled_by_hand() -> None:
    # SJF with the user-last-two predictor: the predictions (and so the order) depend on the
    # predictor being created with the policies, as the callers did before build_engine
    env = env_with(allocation=PolicyChoice("sjf"), provisioning=PolicyChoice("none"))
    jobs = [
        job(1, 0, 4, 100, user="a"),
        job(2, 1, 4, 10, user="b"),
        job(3, 2, 4, 50, user="a"),
        job(4, 3, 4, 5, user="b"),
        job(5, 150, 4, 30, user="a"),
        job(6, 151, 4, 30, user="b"),
        job(7, 152, 4, 30, user="c", req=20),
    ]
    clock = SimClock()
    by_hand = Engine(
        env,
        build_policies(env.allocation, env.provisioning, DEFAULT_PREDICTOR),
        clock,
        lambda schedule: build_backends(env, schedule),
        round_interval=env.round_interval,
    )
    assert run(built(env, PolicyChoices.of(env)), jobs) == run(by_hand, jobs)
