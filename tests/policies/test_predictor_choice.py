"""Which runtime predictor SJF and HSDF use: their `predictor` parameter, the environment's
``[policies] predictor``, else user-last-two; an unknown predictor or a policy that uses none is
refused, naming it."""

from __future__ import annotations

import dataclasses

import pytest

from helpers import clusters, job, start_of
from isthmus.engine.build import PolicyChoices
from isthmus.model import PolicyChoice
from isthmus.policies.build import DEFAULT_PREDICTOR, build_policies
from isthmus.policies.registry import PolicyError, check_policy
from isthmus.sim.runner import simulate

# One processor. Job 1 (user a, 5 s) ends at 5; job 2 (user b, 30 s) runs 5..35. Jobs 3 (user a,
# asks 50 s) and 4 (user b, asks 20 s) arrive at 20, when only user a has a finished run:
# user-last-two predicts 5 s for job 3 and (b has none) its request, 20 s, for job 4, so job 3
# goes first at 35; the requested runtimes (50 s, 20 s) put job 4 first.
JOBS = [
    job(1, 0, 1, 5, req=5, user="a"),
    job(2, 0, 1, 30, req=30, user="b"),
    job(3, 20, 1, 10, req=50, user="a"),
    job(4, 20, 1, 10, req=20, user="b"),
]
BY_HISTORY = {1: (0, 0), 2: (5, 0), 3: (35, 0), 4: (45, 0)}
BY_REQUEST = {1: (0, 0), 2: (5, 0), 4: (35, 0), 3: (45, 0)}


def _starts(policy: PolicyChoice | str, env=None, **kw):
    return start_of(simulate(env or clusters(1), JOBS, policy, "none", **kw))


@pytest.mark.parametrize("policy", ["sjf", "hsdf"])
def test_the_predictor_parameter_changes_the_order(policy: str) -> None:
    assert _starts(policy) == BY_HISTORY  # the default: user-last-two
    assert _starts(PolicyChoice(policy, {"predictor": "user-last-two"})) == BY_HISTORY
    assert _starts(PolicyChoice(policy, {"predictor": "requested"})) == BY_REQUEST


def test_the_environment_predictor_applies_unless_the_policy_names_its_own() -> None:
    env = dataclasses.replace(clusters(1), predictor=PolicyChoice("requested"))
    assert _starts("sjf", env) == BY_REQUEST
    assert _starts(PolicyChoice("sjf", {"predictor": "user-last-two"}), env) == BY_HISTORY
    assert PolicyChoices.of(env).predictor == PolicyChoice("requested")
    assert PolicyChoices.of(clusters(1)).predictor == DEFAULT_PREDICTOR


def test_the_result_records_the_predictor_used() -> None:
    result = simulate(clusters(1), JOBS, PolicyChoice("sjf", {"predictor": "requested"}), "none")
    assert result.predictor == PolicyChoice("requested")


def test_an_unknown_predictor_is_refused_naming_it() -> None:
    with pytest.raises(PolicyError, match=r"'sjf'.*'predictor'.*requested.*user-last-two.*\"bogus\""):
        check_policy("allocation", "sjf", {"predictor": "bogus"})


def test_a_policy_without_predictions_refuses_a_predictor() -> None:
    with pytest.raises(PolicyError, match=r"allocation policy 'ff': unknown parameter 'predictor'.*hsdf, sjf"):
        check_policy("allocation", "ff", {"predictor": "requested"})


def test_a_live_manager_refuses_the_exact_predictor_named_by_the_policy() -> None:
    with pytest.raises(PolicyError, match="'exact'"):
        build_policies(PolicyChoice("sjf", {"predictor": "exact"}), PolicyChoice("none"), true_runtimes_known=False)


def test_an_environment_file_chooses_the_predictor_and_an_unknown_one_is_refused(tmp_path) -> None:
    from isthmus.config import ConfigError, load_file
    from isthmus.config.convert import environment_to_dict

    text = 'round_interval = "event"\n[[sites]]\nname = "c"\nnodes = 1\n\n'
    text += '[policies]\nallocation = "sjf"\npredictor = "{}"\n'
    good = tmp_path / "good.toml"
    good.write_text('name = "p"\n' + text.format("requested"))
    env = load_file(good)
    assert env.predictor == PolicyChoice("requested")
    assert environment_to_dict(env)["policies"]["predictor"] == "requested"
    assert _starts("sjf", env) == BY_REQUEST
    bad = tmp_path / "bad.toml"
    bad.write_text('name = "p"\n' + text.format("bogus"))
    with pytest.raises(ConfigError, match=r"predictor.*'bogus'"):
        load_file(bad)


# Two processors, one user. Job 1 (2 processors, 2 s) and job 2 (1 processor, 100 s) finish
# before jobs 3 (1 processor) and 4 (2 processors) arrive together at 103. user-last-two
# predicts 51 s for both (the user's last two runtimes), so arrival order holds and job 3 starts;
# knn with k = 1 on the size predicts 100 s for job 3 (its neighbour is job 2) and 2 s for job 4
# (job 1), so job 4 takes both processors first.
KNN_JOBS = [
    job(1, 0, 2, 2),
    job(2, 1, 1, 100),
    job(3, 103, 1, 10),
    job(4, 103, 2, 10),
]


def test_knn_predicts_from_the_nearest_completed_jobs() -> None:
    plain, knn_1 = clusters(2), dataclasses.replace(clusters(2), predictor=PolicyChoice("knn", {"k": 1}))

    def run(policy: PolicyChoice | str, env=plain) -> dict[int, tuple[float, int]]:
        return start_of(simulate(env, KNN_JOBS, policy, "none", check_purity=True))

    by_history = {1: (0, 0), 2: (2, 0), 3: (103, 0), 4: (113, 0)}
    by_neighbour = {1: (0, 0), 2: (2, 0), 4: (103, 0), 3: (113, 0)}
    assert run("sjf") == by_history
    assert run("sjf", knn_1) == by_neighbour
    assert run(PolicyChoice("sjf", {"predictor": "knn"}), knn_1) == by_neighbour  # with the environment's k
    assert run(PolicyChoice("sjf", {"predictor": "user-last-two"}), knn_1) == by_history
    # k = 5 (the default) averages both completed jobs: 51 s each, a tie kept in arrival order
    assert run(PolicyChoice("sjf", {"predictor": "knn"})) == by_history
    # HSDF: both fit at once (estimated slowdown 1 each, a tie), but it runs with knn too
    assert simulate(knn_1, KNN_JOBS, "hsdf", "none").predictor == PolicyChoice("knn", {"k": 1})
