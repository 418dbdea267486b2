"""The statistics the audits rest on: reference values and behaviour at the edges."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from audits.sampler_audits import DiscreteGaussianLaw
from audits.statistics import (
    chi_square_against_pmf,
    clopper_pearson,
    composed_discrete_gaussian_delta,
    epsilon_from_delta_curve,
    gaussian_epsilon,
    one_run_epsilon_lower_bound,
    threshold_epsilon_lower_bound,
)


@pytest.mark.parametrize(("sigma", "expected"), [(1.0, 4.4302), (2.0, 2.0113), (5.0, 0.7266)])
def test_single_release_profile_matches_cks20_reference(sigma: float, expected: float) -> None:
    # REFERENCES §2: exact ε at δ = 1e-5 of one discrete Gaussian release, Δ = 1 (CKS20 Thm. 7).
    curve = composed_discrete_gaussian_delta(sigma, 1.0, 1)
    assert epsilon_from_delta_curve(curve, 1e-5) == pytest.approx(expected, abs=1e-4)


@pytest.mark.parametrize(("sigma", "expected"), [(1.0, 4.4302), (2.0, 2.0113), (5.0, 0.7266)])
def test_the_cks20_reference_values_are_rederived_here(sigma: float, expected: float) -> None:
    # The numbers above, derived in this repository with nothing but math.exp: the hockey-stick
    # divergence δ(ε) = Σₓ max(0, p(x) − e^ε·p(x − 1)) of N_Z(0, σ²) against N_Z(1, σ²) (the
    # pair is symmetric), summed over |x| ≤ 60σ, and bisected for δ(ε) = 1e-5.
    reach = int(60 * sigma) + 5
    weights = [math.exp(-x * x / (2 * sigma * sigma)) for x in range(-reach - 1, reach + 1)]
    total = math.fsum(weights[1:])

    def delta(epsilon: float) -> float:
        factor = math.exp(epsilon)
        return math.fsum(
            max(0.0, (weights[i] - factor * weights[i - 1]) / total) for i in range(1, len(weights))
        )

    low, high = 0.0, 50.0
    for _ in range(80):
        middle = (low + high) / 2
        low, high = (middle, high) if delta(middle) > 1e-5 else (low, middle)
    assert high == pytest.approx(expected, abs=1e-4)


def test_composed_profile_matches_an_independent_accountant() -> None:
    # dp_accounting's privacy-loss distribution (discretisation 1e-4) gives 6.2076 for two
    # releases of N_Z(0, 0.8²), Δ = 1, at δ = 1e-3 (computed here once, committed as a number).
    curve = composed_discrete_gaussian_delta(0.8, 1.0, 2)
    assert epsilon_from_delta_curve(curve, 1e-3) == pytest.approx(6.2076, abs=2e-4)


def test_composed_profile_approaches_the_gaussian_for_large_sigma() -> None:
    # T releases of N_Z(0, σ²) with σ = 20 behave as one Gaussian with μ = √T/σ.
    curve = composed_discrete_gaussian_delta(20.0, 1.0, 64)
    assert epsilon_from_delta_curve(curve, 1e-5) == pytest.approx(
        gaussian_epsilon(1e-5, 8.0 / 20.0), rel=1e-3
    )


def test_gaussian_epsilon_reference() -> None:
    assert gaussian_epsilon(1e-5, 1.0) == pytest.approx(4.3772, abs=1e-4)  # Balle–Wang


def test_clopper_pearson_matches_the_beta_quantiles_and_covers() -> None:
    low, high = clopper_pearson(3, 20, 0.05)
    assert low == pytest.approx(stats.beta.ppf(0.05, 3, 18))
    assert high == pytest.approx(stats.beta.isf(0.05, 4, 17))
    assert clopper_pearson(20, 20, 0.05)[1] == 1.0
    with pytest.raises(ValueError, match="successes"):
        clopper_pearson(5, 4, 0.05)


def test_threshold_bound_is_zero_without_separation() -> None:
    assert threshold_epsilon_lower_bound(500, 1000, 500, 1000, delta=1e-5, alpha=1e-3) == 0.0


def test_one_run_bound_grows_with_correct_guesses() -> None:
    bounds = [
        one_run_epsilon_lower_bound(1000, 200, v, delta=1e-10, alpha=1e-6)
        for v in (100, 150, 180, 200)
    ]
    assert bounds[0] == 0.0
    assert bounds == sorted(bounds) and bounds[-1] > 2.0
    with pytest.raises(ValueError):
        one_run_epsilon_lower_bound(10, 20, 5, delta=0.0, alpha=0.05)


def test_chi_square_catches_a_wrong_scale_and_passes_the_right_one() -> None:
    rng = np.random.default_rng(0)
    law = DiscreteGaussianLaw(2.0)
    support = np.arange(-40, 41)
    probabilities = law.pmf(support)
    draws = rng.choice(support, size=50_000, p=probabilities / probabilities.sum())
    assert chi_square_against_pmf(draws, law.pmf).p_value > 1e-6
    assert chi_square_against_pmf(draws, DiscreteGaussianLaw(2.2).pmf).p_value < 1e-6
    # Mass outside the support the pmf allows is caught by the tail bins.
    assert chi_square_against_pmf(np.append(draws, [10**6] * 50), law.pmf).p_value < 1e-6


def test_discrete_gaussian_law_moments() -> None:
    law = DiscreteGaussianLaw(0.5)
    assert law.variance == pytest.approx(0.215013, abs=1e-6)
    assert law.fourth_moment > law.variance**2
    assert math.isclose(float(law.pmf(np.arange(-30, 31)).sum()), 1.0, rel_tol=1e-12)
