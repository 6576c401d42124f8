"""Synthetic models: determinism, the loads and runtimes the seeds ask for, Lublin & Feitelson."""

from __future__ import annotations

import itertools
import random

import numpy as np
import pytest

from isthmus.model.job import Job
from isthmus.workloads import MODELS, WorkloadError, generate, get_model, model_names
from isthmus.workloads.generators.dissertation import (
    BurstyParams,
    IncreasingParams,
    StreamParams,
    bursty_segments,
    increasing_segments,
    stream_gaps,
)
from isthmus.workloads.generators.lublin import LublinParams, bucket_weights, gamma_cdf, generate_lublin
from isthmus.workloads.generators.params import parse_params, split_spec


def offered_load(jobs: list[Job], procs: int, span: float) -> float:
    return sum(j.size * j.runtime for j in jobs) / (procs * span)


def runtimes(jobs: list[Job]) -> np.ndarray:
    return np.array([j.runtime for j in jobs])


@pytest.mark.parametrize("name", list(MODELS))
def test_every_model_is_deterministic_for_a_seed(name: str) -> None:
    a = generate(name, seed=11, jobs=300)
    b = generate(name, seed=11, jobs=300)
    c = generate(name, seed=12, jobs=300)
    assert a.jobs == b.jobs
    assert a.jobs != c.jobs
    assert len(a) == 300
    assert [j.id for j in a.jobs] == list(range(1, 301))
    submits = [j.submit for j in a.jobs]
    assert submits == sorted(submits)
    assert all(j.runtime >= 1 and j.size >= 1 for j in a.jobs)
    assert a.max_procs is not None
    assert a.header.max_procs == a.max_procs
    assert "(seed 11)" in a.source


def test_generators_never_touch_global_random_state() -> None:
    np_state = np.random.get_state()
    py_state = random.getstate()
    for name in MODELS:
        generate(name, seed=5, jobs=50)
    after = np.random.get_state()
    assert np_state[0] == after[0] and np.array_equal(np_state[1], after[1])
    assert random.getstate() == py_state


def test_a_generator_can_be_passed_in() -> None:
    a = generate("uniform", rng=np.random.default_rng(3))
    b = generate("uniform", rng=np.random.default_rng(3))
    assert a.jobs == b.jobs
    assert "seed" not in a.source


def test_uniform_meets_its_load_and_runtime_distribution() -> None:
    workload = generate("uniform", seed=2)
    assert 1500 < len(workload) < 1950  # Poisson count around 0.7*32/47*3600 = 1716
    assert offered_load(workload.jobs, 32, 3600.0) == pytest.approx(0.7, rel=0.1)
    big = generate("uniform", seed=3, jobs=20_000)
    r = runtimes(big.jobs)
    assert r.mean() == pytest.approx(47.0, rel=0.03)
    assert r.std() == pytest.approx(41.1, rel=0.05)
    span = 3600.0 * 20_000 / (0.7 * 32 / 47.0 * 3600.0)
    assert offered_load(big.jobs, 32, span) == pytest.approx(0.7, rel=0.03)


def test_increasing_rises_in_steps_around_half_load() -> None:
    params = IncreasingParams()
    levels = [s.load for s in increasing_segments(params)]
    assert levels == pytest.approx([0.2, 0.4, 0.6, 0.8])
    assert np.mean(levels) == pytest.approx(0.5)
    workload = generate("increasing", seed=4, jobs=8000)
    span = max(j.submit for j in workload.jobs)
    quarters = np.histogram([j.submit for j in workload.jobs], bins=4, range=(0, span))[0]
    assert all(a < b for a, b in itertools.pairwise(quarters))
    assert quarters / quarters.sum() == pytest.approx([0.1, 0.2, 0.3, 0.4], abs=0.02)
    default = generate("increasing", seed=4)
    assert offered_load(default.jobs, 32, 3600.0) == pytest.approx(0.5, rel=0.1)


def test_bursty_averages_15_percent_with_spikes_at_170() -> None:
    params = BurstyParams(procs=128)
    segments = bursty_segments(params)
    spikes = [s for s in segments if s.load == pytest.approx(1.7)]
    assert len(spikes) == 2
    assert sum((s.end - s.start) * s.load for s in segments) / 3600.0 == pytest.approx(0.15)
    assert params.burst_length == pytest.approx(0.1 / 1.65 * 1800)
    workload = generate("bursty:procs=128", seed=5)
    assert offered_load(workload.jobs, 128, 3600.0) == pytest.approx(0.15, rel=0.1)
    in_spikes = [j for j in workload.jobs if any(s.start <= j.submit < s.end for s in spikes)]
    spike_time = sum(s.end - s.start for s in spikes)
    assert offered_load(in_spikes, 128, spike_time) == pytest.approx(1.7, rel=0.12)
    with pytest.raises(WorkloadError, match="base < load < peak"):
        generate("bursty:base=0.2")


def test_periodic_gaps_go_from_60_to_5_and_back_four_times() -> None:
    gaps = stream_gaps(StreamParams())
    assert len(gaps) == 999
    assert gaps[0] == pytest.approx(60.0)
    assert gaps.max() == pytest.approx(60.0)
    assert gaps.min() == pytest.approx(5.0)
    minima = [i for i in range(1, len(gaps) - 1) if gaps[i] < gaps[i - 1] and gaps[i] <= gaps[i + 1]]
    assert len(minima) == 4
    workload = generate("periodic", seed=1)
    assert len(workload) == 1000
    assert workload.jobs[0].submit == 0.0
    assert np.diff([j.submit for j in workload.jobs]) == pytest.approx(gaps)
    r = runtimes(workload.jobs)
    assert r.mean() == pytest.approx(47.0, rel=0.1)
    assert r.std() == pytest.approx(41.1, rel=0.15)


def test_other_arrival_patterns_of_section_6_5_4() -> None:
    uniform = stream_gaps(StreamParams(arrivals="uniform"))
    assert set(uniform.tolist()) == {10.0}
    bursty = stream_gaps(StreamParams(arrivals="bursty"))
    # five periods of 200 jobs: 30 s, 2 s, 30 s, 2 s, 30 s between jobs
    assert list(bursty[:199]) == [30.0] * 199
    assert list(bursty[199:399]) == [2.0] * 200
    assert list(bursty[399:599]) == [30.0] * 200
    assert list(bursty[799:]) == [30.0] * 200


@pytest.mark.parametrize(("name", "fraction"), [("sr25", 0.25), ("sr50", 0.5), ("sr75", 0.75)])
def test_short_long_mixtures(name: str, fraction: float) -> None:
    sharp = generate(f"{name}:cv=0.05", seed=9)
    r = runtimes(sharp.jobs)
    assert int((r < 100).sum()) == round(fraction * 1000)  # exactly that many short jobs
    short, long_ = r[r < 100], r[r >= 100]
    assert short.mean() == pytest.approx(10.0, rel=0.05)
    assert long_.mean() == pytest.approx(3600.0, rel=0.05)
    workload = generate(name, seed=9, jobs=20_000)  # default spread (CV 41.1/47): means still hold
    r = runtimes(workload.jobs)
    assert r.mean() == pytest.approx(fraction * 10.0 + (1 - fraction) * 3600.0, rel=0.05)
    assert get_model(name).defaults.short_fraction == fraction


def test_sr50_with_bursty_arrivals_reproduces_section_6_5_4() -> None:
    workload = generate("sr50:arrivals=bursty", seed=1)
    gaps = np.diff([j.submit for j in workload.jobs])
    assert sorted(set(gaps.round(6).tolist())) == [2.0, 30.0]


def test_estimates_exact() -> None:
    workload = generate("uniform:estimates=exact", seed=1, jobs=20)
    assert all(j.requested_runtime == j.runtime for j in workload.jobs)
    assert all(j.requested_runtime is None for j in generate("uniform", seed=1, jobs=20).jobs)


# --------------------------------------------------------------------------- Lublin & Feitelson


def test_lublin_default_is_2000_jobs_for_32_processors() -> None:
    workload = generate("lublin")
    assert len(workload) == 2000
    assert workload.max_procs == 32
    sizes = np.array([j.size for j in workload.jobs])
    assert sizes.max() <= 32 and sizes.min() >= 1
    assert "Lublin" in (workload.header.get("Acknowledge") or "")


def test_lublin_size_distribution_follows_the_published_parameters() -> None:
    jobs = generate_lublin(LublinParams(jobs=20_000, max_size=128), np.random.default_rng(1))
    sizes = np.array([j.size for j in jobs])
    assert (sizes == 1).mean() == pytest.approx(0.2927, abs=0.015)
    parallel = sizes[sizes > 1]
    pow2 = (parallel & (parallel - 1)) == 0
    assert pow2.mean() > 0.9  # 0.6686 / (1 - 0.2927) = 0.945, plus a few by chance
    assert parallel.min() >= 2  # ulow = 1.2: the smallest parallel job has 2 processors
    assert sizes.max() == 128


def test_lublin_runtimes_grow_with_size_and_stay_bounded() -> None:
    jobs = generate_lublin(LublinParams(jobs=20_000, max_size=128), np.random.default_rng(2))
    r = runtimes(jobs)
    assert r.min() >= 1 and r.max() <= np.exp(12)
    sizes = np.array([j.size for j in jobs])
    assert np.median(r[sizes >= 32]) > np.median(r[sizes == 1])


def test_lublin_daily_cycle_has_more_arrivals_by_day() -> None:
    jobs = generate_lublin(LublinParams(jobs=20_000), np.random.default_rng(3))
    hours = (np.array([j.submit for j in jobs]) % 86_400) / 3600
    day = ((hours >= 9) & (hours < 17)).sum()
    night = ((hours >= 0) & (hours < 8)).sum()
    assert day > 2 * night
    weights = bucket_weights(6.1271, 5.2740)
    assert len(weights) == 48
    assert np.mean(weights) == pytest.approx(1.0)


def test_lublin_load_parameter_is_met() -> None:
    for target in (0.5, 0.9):
        workload = generate(f"lublin:load={target}", seed=4)
        span = workload.jobs[-1].submit - workload.jobs[0].submit
        assert offered_load(workload.jobs, 32, span) == pytest.approx(target, rel=0.01)
    inter = generate("lublin:interactive=true,load=0.7,max_size=64", seed=4)
    span = inter.jobs[-1].submit - inter.jobs[0].submit
    assert offered_load(inter.jobs, 64, span) == pytest.approx(0.7, rel=0.02)


def test_lublin_parameters_are_checked() -> None:
    with pytest.raises(WorkloadError, match="procs"):
        generate("lublin:max_size=64,procs=32")
    with pytest.raises(WorkloadError, match="serial_prob"):
        generate("lublin:serial_prob=1.5")
    assert generate("lublin:max_size=1", seed=1, jobs=50).jobs[0].size == 1
    assert max(j.size for j in generate("lublin:max_size=100", seed=1, jobs=500).jobs) <= 100


def test_gamma_cdf_matches_scipy() -> None:
    from scipy import stats

    for x, shape, scale in [(0.5, 2, 1), (3, 6.1, 5.27), (40, 6.1271, 5.274), (9.9, 639.1, 0.0156), (1e-3, 0.5, 2)]:
        assert gamma_cdf(x, shape, scale) == pytest.approx(stats.gamma.cdf(x, shape, scale=scale), abs=1e-12)
    assert gamma_cdf(-1.0, 2.0, 1.0) == 0.0


# --------------------------------------------------------------------------- specs and parameters


def test_spec_parsing() -> None:
    assert split_spec("Lublin:jobs=5, max-size=64") == ("lublin", {"jobs": "5", "max_size": "64"})
    with pytest.raises(ValueError, match="key=value"):
        split_spec("lublin:jobs")
    with pytest.raises(ValueError, match="twice"):
        split_spec("lublin:jobs=1,jobs=2")
    params = parse_params(LublinParams, {"interactive": "yes", "load": "7/10", "umed": "none", "jobs": "1e3"})
    assert params.interactive is True and params.load == pytest.approx(0.7) and params.umed is None
    assert params.jobs == 1000
    with pytest.raises(ValueError, match="one of none, exact"):
        parse_params(LublinParams, {"estimates": "maybe"})
    with pytest.raises(ValueError, match="true or false"):
        parse_params(LublinParams, {"interactive": "perhaps"})


def test_model_errors_list_valid_names() -> None:
    with pytest.raises(WorkloadError, match="valid models: lublin, uniform"):
        get_model("nope")
    with pytest.raises(WorkloadError, match="valid parameters: jobs"):
        generate("uniform:speed=3")
    with pytest.raises(WorkloadError, match="seed must be an integer"):
        generate("uniform:seed=x")
    assert model_names() == ["lublin", "uniform", "increasing", "bursty", "periodic", "sr25", "sr50", "sr75"]


def test_seed_in_spec_wins() -> None:
    assert generate("uniform:seed=7", seed=1).jobs == generate("uniform", seed=7).jobs
