"""Means over repeated runs with their 95% confidence intervals (Student's t)."""

from __future__ import annotations

import math
from collections.abc import Sequence

# t quantiles at 0.975 for 1..30 degrees of freedom; above 30 the normal 1.96 is within 2%
_T975 = (
    12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228,
    2.201, 2.179, 2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086,
    2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042,
)  # fmt: skip


def t975(df: int) -> float:
    """Student's t quantile at 0.975 for `df` degrees of freedom (1.96 above 30)."""
    if df < 1:
        raise ValueError(f"degrees of freedom must be >= 1, got {df}")
    return _T975[df - 1] if df <= len(_T975) else 1.96


def mean_sem(values: Sequence[float | None]) -> tuple[float | None, float | None]:
    """The mean of the values that are not None or NaN and its standard error σ/√n (KOALA-C's
    error bars; None with fewer than two values; (None, None) with none)."""
    xs = [float(v) for v in values if v is not None and not math.isnan(float(v))]
    if not xs:
        return None, None
    n = len(xs)
    mean = sum(xs) / n
    if n < 2:
        return mean, None
    var = sum((x - mean) ** 2 for x in xs) / (n - 1)
    return mean, math.sqrt(var / n)


def mean_ci95(values: Sequence[float | None]) -> tuple[float | None, float | None]:
    """The mean of the values that are not None and the half-width of its 95% confidence
    interval (None with fewer than two values; (None, None) with none)."""
    mean, sem = mean_sem(values)
    if sem is None:
        return mean, None
    n = sum(1 for v in values if v is not None and not math.isnan(float(v)))
    return mean, t975(n - 1) * sem


def interval(values: Sequence[float | None]) -> dict[str, float | int | None]:
    """{"mean", "ci95" (the half-width), "low", "high", "n"} of the values that are not None or
    NaN: a Student's t interval; "ci95", "low" and "high" are None with fewer than two values."""
    mean, half = mean_ci95(values)
    n = sum(1 for v in values if v is not None and not math.isnan(float(v)))
    return {
        "mean": mean,
        "ci95": half,
        "low": None if mean is None or half is None else mean - half,
        "high": None if mean is None or half is None else mean + half,
        "n": n,
    }


def overlap(a: dict[str, float | int | None], b: dict[str, float | int | None]) -> bool | None:
    """Whether two `interval` results' 95% intervals overlap (None when either has no interval)."""
    lo_a, hi_a, lo_b, hi_b = a.get("low"), a.get("high"), b.get("low"), b.get("high")
    if lo_a is None or hi_a is None or lo_b is None or hi_b is None:
        return None
    return bool(lo_a <= hi_b and lo_b <= hi_a)
