"""Confidence intervals and verdicts of the results files (protocols.training.evidence)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from scipy import stats

from protocols.training.evidence import combine, decide, mean_interval, per_seed_means

finite = st.floats(min_value=-1e6, max_value=1e6, allow_nan=False, allow_subnormal=False)


def test_interval_matches_scipy_known_answer() -> None:
    values = [0.12, -0.03, 0.08, 0.15, 0.02, 0.09, 0.11, -0.01, 0.05, 0.07]
    low, high = stats.t.interval(
        0.95, len(values) - 1, loc=np.mean(values), scale=stats.sem(values)
    )
    interval = mean_interval(values)
    assert interval.n == 10
    assert interval.low == pytest.approx(low, rel=1e-12)
    assert interval.high == pytest.approx(high, rel=1e-12)
    # Known answer computed by hand: t(0.975, 9) = 2.262157, sd = 0.0577831, mean 0.065.
    assert interval.half_width == pytest.approx(2.262157 * 0.0577831 / math.sqrt(10), rel=1e-5)


def test_interval_coverage_is_nominal() -> None:
    """Over 4000 normal samples of 10, the 95 % interval covers the mean 95 % of the time.

    Coverage counts are Binomial(4000, 0.95): the acceptance band [0.938, 0.962] is ±3.5 sd, a
    false-alarm rate below 5e-4 for a correct interval; a z interval (1.96) would cover ≈ 0.92.
    """
    rng = np.random.default_rng(20261202)
    covered = 0
    for _ in range(4000):
        interval = mean_interval(rng.normal(3.0, 2.0, size=10))
        covered += interval.low <= 3.0 <= interval.high
    assert 0.938 <= covered / 4000 <= 0.962


@given(st.lists(finite, min_size=2, max_size=30), finite, st.sampled_from(["below", "above"]))
def test_decide_agrees_with_the_interval(values: list[float], threshold: float, goal: str) -> None:
    interval = mean_interval(values)
    verdict = decide(interval, threshold, goal)  # type: ignore[arg-type]
    if goal == "below":
        expected = "met" if interval.high < threshold else "not met"
        if interval.low < threshold <= interval.high:
            expected = "not established"
    else:
        expected = "met" if interval.low > threshold else "not met"
        if interval.low <= threshold < interval.high:
            expected = "not established"
    assert verdict == expected
    # The verdicts of a goal and its opposite never both say "met".
    opposite = decide(interval, threshold, "above" if goal == "below" else "below")
    assert not (verdict == "met" and opposite == "met")


def test_single_seed_is_never_decided() -> None:
    interval = mean_interval([-10.0])
    assert math.isnan(interval.half_width)
    assert decide(interval, 0.0, "below") == "not established"
    assert "n = 1" in interval.text()


def test_scaled_flips_ends_for_negative_factors() -> None:
    interval = mean_interval([1.0, 2.0, 4.0]).scaled(-100)
    assert interval.low < interval.mean < interval.high
    assert interval.mean == pytest.approx(-700 / 3)


def test_bad_input_is_refused() -> None:
    with pytest.raises(ValueError, match="empty"):
        mean_interval([])
    with pytest.raises(ValueError, match="finite"):
        mean_interval([1.0, math.inf])
    with pytest.raises(ValueError, match="level"):
        mean_interval([1.0, 2.0], level=1.0)
    with pytest.raises(ValueError, match="goal"):
        decide(mean_interval([1.0, 2.0]), 0.0, "sideways")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="threshold"):
        decide(mean_interval([1.0, 2.0]), math.nan, "below")
    with pytest.raises(ValueError, match="draw"):
        per_seed_means([[1.0], []])
    with pytest.raises(ValueError, match="empty"):
        combine([])


def test_per_seed_means_average_draws_before_the_interval() -> None:
    # Three seeds, three draws each: the interval has n = 3, not 9.
    draws = [[0.1, 0.2, 0.3], [0.2, 0.2, 0.2], [0.0, 0.3, 0.3]]
    interval = mean_interval(per_seed_means(draws))
    assert interval.n == 3
    assert interval.mean == pytest.approx(0.2)
    assert combine(["met", "met"]) == "met"
