"""Statistical tests of the discrete Gaussian samplers against the exact pmf.

The suite, for each σ in {0.5, 1, 2, 5, 100} and each Gaussian sampler (exact, fast), runs three
tests on N draws from a fixed seed:

* χ² against the exact pmf, bins merged until each expects >= 50 draws, plus one tail bin
  |x| > L (L the least integer with N·P[|X| > L] <= 50);
* variance z-test: z = (S² − Var) / √((E[X⁴] − Var²)/N), with the moments from the exact pmf;
* symmetry: #{X > 0} against #{X < 0}, a two-sided binomial z-test.

Family-wise error: 2 samplers × 5 σ × 3 tests = 30 tests, Bonferroni α = 1e-6/30 = 3.3e-8 per
test (|z| > 5.52), so the whole family fails by chance with probability <= 1e-6.

Power: a σ that is 2 % off moves Var by r = Var(1.02σ)/Var(σ) − 1 (4.0 % for σ >= 1, 6.5 % at
σ = 0.5). The variance test detects it with probability >= 1 − 1e-3 when
√N·r/κ >= 5.52 + 3.09, κ = √(E[X⁴] − Var²)/Var (√2 for large σ, 2.0 at σ = 0.5): N >= 90 861 at
σ >= 1 and 72 279 at σ = 0.5. The default tier uses N = 200 000 (power > 1 − 1e-9 at σ >= 1);
``test_power_calculation`` recomputes these numbers from the exact pmf, and the "suite bites"
tests run a sampler with a 2 %-off σ and a rounded continuous Gaussian through the same suite.
The slow tier repeats everything with N = 4 000 000 (detects a 0.5 % error).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pytest
from numpy.typing import NDArray
from scipy import special, stats

from dpquantile import (
    ExactDiscreteGaussian,
    FastDiscreteGaussian,
    IntegerNoiseSampler,
    discrete_gaussian_pmf,
)
from secagg.randomness import KeystreamRandom

SIGMAS = (0.5, 1.0, 2.0, 5.0, 100.0)
SAMPLERS: dict[str, Callable[[float], IntegerNoiseSampler]] = {
    "exact": ExactDiscreteGaussian,
    "fast": FastDiscreteGaussian,
}
TESTS_PER_CASE = 3
FAMILY_ALPHA = 1e-6
PER_TEST_ALPHA = FAMILY_ALPHA / (len(SAMPLERS) * len(SIGMAS) * TESTS_PER_CASE)
CRITICAL_Z = float(stats.norm.isf(PER_TEST_ALPHA / 2))  # 5.52
POWER_Z = float(stats.norm.isf(1e-3))  # 3.09: miss a 2 % error with probability <= 1e-3
DEFAULT_N = 200_000
SLOW_N = 4_000_000
MIN_EXPECTED = 50.0


@dataclass(frozen=True)
class Moments:
    """Exact moments of N_ℤ(0, σ²) from its pmf."""

    variance: float
    fourth: float

    @classmethod
    def of(cls, sigma: float) -> Moments:
        reach = math.ceil(40 * sigma) + 5
        x = np.arange(-reach, reach + 1, dtype=np.float64)
        p = discrete_gaussian_pmf(x, sigma)
        return cls(float((x**2 * p).sum()), float((x**4 * p).sum()))

    @property
    def kappa(self) -> float:
        """Relative standard deviation of X²."""
        return math.sqrt(self.fourth - self.variance**2) / self.variance


def _bins(sigma: float, n: int) -> tuple[NDArray[np.int64], NDArray[np.float64], int]:
    """Interior bin edges on [-L, L] (each expecting >= 50), their probabilities, and L."""
    reach = math.ceil(40 * sigma) + 5
    support = np.arange(-reach, reach + 1)
    pmf = discrete_gaussian_pmf(support, sigma)
    # L: least integer with N·P[|X| > L] <= 50 (the tail bin).
    outside = 2 * np.cumsum(pmf[::-1])[::-1][reach + 1 :]  # P[|X| >= k] for k = 1..reach
    limit = int(np.argmax(n * np.append(outside[1:], 0.0) <= MIN_EXPECTED))
    edges = [-limit]
    probabilities: list[float] = []
    mass = 0.0
    for x in range(-limit, limit + 1):
        mass += float(pmf[x + reach])
        if n * mass >= MIN_EXPECTED and (limit - x) > 0:
            edges.append(x + 1)
            probabilities.append(mass)
            mass = 0.0
    if mass > 0:
        if probabilities:
            probabilities[-1] += mass
            edges[-1] = limit + 1
        else:
            edges.append(limit + 1)
            probabilities.append(mass)
    return np.array(edges, dtype=np.int64), np.array(probabilities), limit


@dataclass(frozen=True)
class SuiteResult:
    chi2_p: float
    variance_z: float
    symmetry_z: float

    def passes(self) -> bool:
        return (
            self.chi2_p >= PER_TEST_ALPHA
            and abs(self.variance_z) <= CRITICAL_Z
            and abs(self.symmetry_z) <= CRITICAL_Z
        )


def run_suite(draws: NDArray[np.int64], sigma: float) -> SuiteResult:
    """χ² with a tail bin, variance z and symmetry z of ``draws`` against N_ℤ(0, σ²)."""
    n = draws.size
    edges, probabilities, limit = _bins(sigma, n)
    counts = np.histogram(draws, bins=edges.astype(np.float64) - 0.5)[0]
    tail_count = int(np.count_nonzero(np.abs(draws) > limit))
    observed = np.append(counts, tail_count)
    expected = np.append(probabilities, max(0.0, 1.0 - probabilities.sum())) * n
    expected = np.maximum(expected, 1e-300)
    chi2 = float(((observed - expected) ** 2 / expected).sum())
    chi2_p = float(stats.chi2.sf(chi2, observed.size - 1))
    moments = Moments.of(sigma)
    variance_z = (float(np.mean(draws.astype(np.float64) ** 2)) - moments.variance) / math.sqrt(
        (moments.fourth - moments.variance**2) / n
    )
    positive = int(np.count_nonzero(draws > 0))
    negative = int(np.count_nonzero(draws < 0))
    symmetry_z = (positive - negative) / math.sqrt(max(positive + negative, 1))
    return SuiteResult(chi2_p, variance_z, symmetry_z)


def _draws(sampler: str, sigma: float, n: int, seed: int) -> NDArray[np.int64]:
    stream = KeystreamRandom(seed=seed, label=b"dpquantile/statistics")
    return SAMPLERS[sampler](sigma).sample(n, rng=stream)


class RoundedContinuousGaussian:
    """round(N(0, σ²)) from inverse-CDF floats: the classic wrong sampler the suite must reject."""

    def __init__(self, sigma: float) -> None:
        self.sigma = sigma

    def sample(self, size: int, *, rng: KeystreamRandom) -> NDArray[np.int64]:
        words = rng.uint64(size)
        uniform = ((words >> np.uint64(11)).astype(np.float64) + 0.5) * 2.0**-53
        rounded: NDArray[np.int64] = np.rint(special.ndtri(uniform) * self.sigma).astype(np.int64)
        return rounded


def test_power_calculation() -> None:
    """The sample sizes detect a 2 %-off σ with probability >= 1 − 1e-3 (see module doc)."""
    assert PER_TEST_ALPHA <= 1e-6 / 30 and pytest.approx(5.52, abs=0.01) == CRITICAL_Z
    for sigma in SIGMAS:
        base, shifted = Moments.of(sigma), Moments.of(1.02 * sigma)
        shift = shifted.variance / base.variance - 1.0
        required = ((CRITICAL_Z + POWER_Z) * max(base.kappa, shifted.kappa) / shift) ** 2
        assert required <= DEFAULT_N, (sigma, required)
        assert shift >= 0.0399


@pytest.mark.parametrize("sigma", SIGMAS)
@pytest.mark.parametrize("sampler", sorted(SAMPLERS))
def test_sampler_matches_exact_pmf(sampler: str, sigma: float) -> None:
    result = run_suite(_draws(sampler, sigma, DEFAULT_N, seed=int(sigma * 1000) + 1), sigma)
    assert result.passes(), result


@pytest.mark.slow
@pytest.mark.parametrize("sigma", SIGMAS)
@pytest.mark.parametrize("sampler", sorted(SAMPLERS))
def test_sampler_matches_exact_pmf_large_sample(sampler: str, sigma: float) -> None:
    result = run_suite(_draws(sampler, sigma, SLOW_N, seed=int(sigma * 1000) + 7), sigma)
    assert result.passes(), result


@pytest.mark.parametrize("sigma", [1.0, 100.0])
@pytest.mark.parametrize("sampler", sorted(SAMPLERS))
def test_suite_detects_two_percent_wrong_sigma(sampler: str, sigma: float) -> None:
    draws = _draws(sampler, 1.02 * sigma, DEFAULT_N, seed=99)
    result = run_suite(draws, sigma)
    assert not result.passes(), result
    assert abs(result.variance_z) > CRITICAL_Z


def test_suite_detects_two_percent_wrong_sigma_at_half() -> None:
    result = run_suite(_draws("fast", 0.51, DEFAULT_N, seed=98), 0.5)
    assert not result.passes(), result


def test_suite_rejects_rounded_continuous_gaussian() -> None:
    """Var(round(N(0,1))) ≈ 1 + 1/12 and P[0] ≈ 0.383 instead of 0.399: both tests must fire."""
    draws = RoundedContinuousGaussian(1.0).sample(DEFAULT_N, rng=KeystreamRandom(seed=5))
    result = run_suite(draws, 1.0)
    assert not result.passes()
    assert result.chi2_p < PER_TEST_ALPHA
    assert abs(result.variance_z) > CRITICAL_Z


def test_suite_rejects_an_asymmetric_sampler() -> None:
    """Moving 1 in 20 zeros to +1 (2 % of the mass) must trip the symmetry test (z ≈ 11)."""
    draws = _draws("fast", 1.0, DEFAULT_N, seed=4)
    shifted = np.where((draws == 0) & (np.arange(draws.size) % 20 == 0), 1, draws)
    result = run_suite(shifted, 1.0)
    assert abs(result.symmetry_z) > CRITICAL_Z
