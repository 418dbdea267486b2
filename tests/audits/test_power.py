"""The stated power of the audits is the power they have: the formulas of ``audits.power``
against simulation, and what the fast tier is sized to catch."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from audits.ours import OurTarget
from audits.power import (
    chi2_variance_shortfall,
    laplace_scale_shortfall,
    sigma_shortfall,
    stuck_fraction,
)
from audits.sampler_audits import DiscreteGaussianLaw, discrete_laplace_moments
from audits.suite import run_audits
from dpquantile import FastDiscreteGaussian
from secagg.randomness import KeystreamRandom

TRIALS = 400
# Each check below: the empirical power of TRIALS simulated tests at the computed threshold is
# within [0.90, 0.99] — binomial SD at 0.95 is 0.011, so a correct formula fails w.p. < 1e-5.


def test_the_variance_tests_power_at_its_stated_shortfall_is_95_percent() -> None:
    sigma, n, alpha = 3.0, 4_000, 0.01
    shortfall = sigma_shortfall(sigma, n, alpha)
    law, alternative = DiscreteGaussianLaw(sigma), FastDiscreteGaussian(sigma * (1 - shortfall))
    spread = np.sqrt((law.fourth_moment - law.variance**2) / n)
    critical = stats.norm.isf(alpha / 2)
    draws = alternative.sample(TRIALS * n, rng=KeystreamRandom(seed=7)).reshape(TRIALS, n)
    z = ((draws.astype(np.float64) ** 2).mean(axis=1) - law.variance) / spread
    assert 0.90 <= float(np.mean(z < -critical)) <= 0.99


def test_the_laplace_variance_tests_power_at_its_stated_shortfall_is_95_percent() -> None:
    # Draws at the shortfall's scale from an independent construction: the difference of two
    # geometric variables with success 1 − r is discrete Laplace with parameter r.
    scale, n, alpha = 2.5, 4_000, 0.01
    shortfall = laplace_scale_shortfall(scale, n, alpha)
    variance, fourth = discrete_laplace_moments(scale)
    r = np.exp(-1.0 / (scale * (1 - shortfall)))
    rng = np.random.default_rng(5)
    draws = rng.geometric(1 - r, size=(TRIALS, n)) - rng.geometric(1 - r, size=(TRIALS, n))
    z = ((draws.astype(np.float64) ** 2).mean(axis=1) - variance) / np.sqrt(
        (fourth - variance**2) / n
    )
    assert 0.90 <= float(np.mean(z < -stats.norm.isf(alpha / 2))) <= 0.99


def test_the_chi2_tests_power_at_its_stated_shortfall_is_95_percent() -> None:
    coordinates, alpha = 2_000, 0.01
    ratio = 1 - chi2_variance_shortfall(coordinates, alpha)
    rng = np.random.default_rng(3)
    values = rng.normal(0.0, np.sqrt(ratio), size=(TRIALS, coordinates))
    statistic = (values**2).sum(axis=1)
    assert 0.90 <= float(np.mean(stats.chi2.cdf(statistic, coordinates) < alpha)) <= 0.99


def test_the_uniformity_tests_power_at_its_stated_stuck_fraction_is_95_percent() -> None:
    entries, cells, alpha = 4_096, 16, 0.01
    stuck = stuck_fraction(entries, cells, alpha)
    rng = np.random.default_rng(11)
    values = rng.integers(0, cells, size=(TRIALS, entries))
    values[rng.random(size=values.shape) < stuck] = 0  # each entry stuck at 0 w.p. δ
    counts = np.stack([np.bincount(row, minlength=cells) for row in values])
    rejected = stats.chisquare(counts, axis=1).pvalue < alpha
    assert 0.90 <= float(np.mean(rejected)) <= 0.99


def test_more_samples_detect_smaller_defects() -> None:
    assert sigma_shortfall(1.0, 10**6, 1e-8) < sigma_shortfall(1.0, 10**5, 1e-8)
    assert chi2_variance_shortfall(10**5, 1e-8) < chi2_variance_shortfall(10**4, 1e-8)
    assert stuck_fraction(10**5, 16, 1e-8) < stuck_fraction(10**4, 16, 1e-8)
    assert sigma_shortfall(1.0, 10, 1e-8) == 1.0  # nothing detectable from 10 draws


@pytest.fixture(scope="module")
def fast_tier() -> dict[int, object]:
    return {r.audit: r for r in run_audits(OurTarget(), only=[1, 4, 6, 10])}


def test_the_fast_tier_catches_a_10_percent_variance_or_a_5_percent_rho_shortfall(
    fast_tier: dict[int, object],
) -> None:
    # A 5 % ρ understatement is σ·√0.95, a 2.5 % σ shortfall; audit 1 sees ≤ 2.5 %, audit 6 ≤ 10 %.
    one, six = fast_tier[1], fast_tier[6]
    assert one.details["sigma_shortfall_detected"] <= 0.025  # type: ignore[attr-defined]
    assert one.details["laplace_scale_shortfall_detected"] <= 0.025  # type: ignore[attr-defined]
    assert six.details["variance_shortfall_detected"] <= 0.10  # type: ignore[attr-defined]
    for result in fast_tier.values():
        assert result.power  # type: ignore[attr-defined]
        assert result.to_dict()["power"] == result.power  # type: ignore[attr-defined]
