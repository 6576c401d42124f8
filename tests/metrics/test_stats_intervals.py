"""Means and 95% confidence intervals over repeated runs, checked by hand."""

from __future__ import annotations

import math

import pytest

from isthmus.metrics.stats import interval, mean_ci95, overlap, t975


def test_interval_of_known_numbers() -> None:
    # 1..5: mean 3, sample sd sqrt(2.5), sem sqrt(2.5/5) = 0.70711, t(4) = 2.776 -> half 1.96293
    got = interval([1.0, 2.0, 3.0, 4.0, 5.0])
    assert got["mean"] == 3.0
    assert got["ci95"] == pytest.approx(2.776 * math.sqrt(0.5), abs=1e-12)
    assert got["ci95"] == pytest.approx(1.96293, abs=1e-5)
    assert got["low"] == pytest.approx(3.0 - 1.96293, abs=1e-5)
    assert got["high"] == pytest.approx(3.0 + 1.96293, abs=1e-5)
    assert got["n"] == 5


def test_two_values_use_t_with_one_degree_of_freedom_and_unknowns_are_left_out() -> None:
    # 10 and 14: mean 12, sd 2.828, sem 2, t(1) = 12.706 -> half 25.412
    assert mean_ci95([10.0, None, 14.0, float("nan")]) == (12.0, pytest.approx(25.412))
    assert t975(1) == 12.706 and t975(31) == 1.96


def test_one_value_has_no_interval() -> None:
    assert interval([7.0]) == {"mean": 7.0, "ci95": None, "low": None, "high": None, "n": 1}
    assert interval([None]) == {"mean": None, "ci95": None, "low": None, "high": None, "n": 0}


def test_overlap() -> None:
    a = interval([1.0, 2.0, 3.0])  # 2 ± 2.484
    b = interval([4.0, 5.0, 6.0])  # 5 ± 2.484: [2.516, 7.484] meets [-0.484, 4.484]
    c = interval([10.0, 10.5, 11.0])  # 10.5 ± 1.242: apart from a
    assert overlap(a, b) is True
    assert overlap(a, c) is False and overlap(c, a) is False
    assert overlap(a, interval([3.0])) is None
