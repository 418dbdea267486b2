"""The power of the statistical audits: the smallest defect each detects with ≥ 95 % probability.

An audit that passes says little unless the defect it looks for would have failed it. For the
tests with a tractable law under the alternative, the detectable defect is computed here from
the sample size the audit actually used and its per-test level α/m:

- **variance z-test** (audit 1, per sampler and σ): the sampler draws N_ℤ(0, (fσ)²) while
  claiming σ. The statistic z = (m₂ − V)/s₀ with s₀ = √((μ₄ − V²)/n) is, under the alternative,
  approximately normal with mean (V_f − V)/s₀ and standard deviation s_f/s₀ (moments of the
  discrete Gaussian at fσ, central limit theorem); the test rejects below −z_{α/2m}. The σ
  shortfall 1 − f detected with power 0.95 is found by bisection.
  The same test on the discrete Laplace sampler (scale s drawn as f·s) gives its scale shortfall.
- **χ² lower tail** (audit 6): the noise variance is r × what was charged; the statistic
  S = Σx²/V ~ r·χ²_N, rejected when S < χ²_N⁻¹(α/m): power F_N(crit/r) ≥ 0.95 at
  r = crit / χ²_N⁻¹(0.95), so the detected variance shortfall is 1 − r.

Both are normal/χ² approximations of the exact laws (n and N are ≥ 10⁴ in every tier).
"""

from __future__ import annotations

import math
from collections.abc import Callable

from scipy import stats

__all__ = [
    "POWER",
    "chi2_variance_shortfall",
    "laplace_scale_shortfall",
    "sigma_shortfall",
    "stuck_fraction",
]

POWER = 0.95
"""The power every stated detectable defect is computed at."""


Moments = Callable[[float], tuple[float, float]]
"""A law's (E X², E X⁴) at a scale parameter."""


def _gaussian_moments(sigma: float) -> tuple[float, float]:
    from audits.sampler_audits import DiscreteGaussianLaw  # noqa: PLC0415 (no import cycle)

    law = DiscreteGaussianLaw(sigma)
    return law.variance, law.fourth_moment


def _laplace_moments(scale: float) -> tuple[float, float]:
    from audits.sampler_audits import discrete_laplace_moments  # noqa: PLC0415 (no import cycle)

    return discrete_laplace_moments(scale)


def _variance_test_power(
    moments: Moments, parameter: float, factor: float, n: int, alpha: float
) -> float:
    variance, fourth = moments(parameter)
    alt_variance, alt_fourth = moments(factor * parameter)
    null_sd = math.sqrt(max(fourth - variance**2, 1e-300) / n)
    alt_sd = math.sqrt(max(alt_fourth - alt_variance**2, 1e-300) / n)
    critical = stats.norm.isf(alpha / 2.0)  # two-sided test; the lower side rejects a shortfall
    # Reject when (m₂ − V)/s₀ < −critical, i.e. m₂ < V − critical·s₀.
    return float(stats.norm.cdf((variance - critical * null_sd - alt_variance) / alt_sd))


def _shortfall(moments: Moments, parameter: float, n: int, alpha: float, power: float) -> float:
    """The smallest 1 − f with the variance test's power ≥ ``power`` at f·parameter (bisection)."""
    low, high = 1e-6, 0.999  # shortfalls
    if _variance_test_power(moments, parameter, 1.0 - high, n, alpha) < power:
        return 1.0
    for _ in range(50):
        middle = (low + high) / 2.0
        if _variance_test_power(moments, parameter, 1.0 - middle, n, alpha) >= power:
            high = middle
        else:
            low = middle
    return high


def sigma_shortfall(sigma: float, n: int, alpha: float, power: float = POWER) -> float:
    """The smallest relative σ shortfall 1 − f that audit 1's variance test detects with
    probability ≥ ``power`` from ``n`` draws at level ``alpha`` (two-sided).

    Examples
    --------
    >>> round(sigma_shortfall(3.0, 200_000, 3.1e-8), 4)   # exact sampler, fast tier
    0.0114
    >>> sigma_shortfall(3.0, 1_000_000, 3.1e-8) < sigma_shortfall(3.0, 200_000, 3.1e-8)
    True
    """
    return _shortfall(_gaussian_moments, sigma, n, alpha, power)


def laplace_scale_shortfall(scale: float, n: int, alpha: float, power: float = POWER) -> float:
    """The smallest relative scale shortfall 1 − f (draws at f·scale) that audit 1's variance
    test of the discrete Laplace sampler detects with probability ≥ ``power`` from ``n`` draws
    at level ``alpha`` (two-sided).

    Examples
    --------
    >>> round(laplace_scale_shortfall(1.0, 200_000, 6.8e-9), 4)   # fast tier, scale 1
    0.0181
    >>> laplace_scale_shortfall(10.0, 10**6, 1e-8) < laplace_scale_shortfall(10.0, 10**5, 1e-8)
    True
    """
    return _shortfall(_laplace_moments, scale, n, alpha, power)


def chi2_variance_shortfall(coordinates: int, alpha: float, power: float = POWER) -> float:
    """The smallest relative variance shortfall 1 − r that audit 6's one-sided χ² test over
    ``coordinates`` normalised values detects with probability ≥ ``power`` at level ``alpha``.

    Examples
    --------
    >>> round(chi2_variance_shortfall(40_000, 2.5e-7), 4)
    0.0463
    """
    critical = stats.chi2.ppf(alpha, coordinates)
    return float(1.0 - critical / stats.chi2.ppf(power, coordinates))


def stuck_fraction(entries: int, cells: int, alpha: float, power: float = POWER) -> float:
    """The smallest fraction δ of mask entries stuck at one value that audit 8's χ² uniformity
    test over ``cells`` equiprobable cells detects with probability ≥ ``power`` at ``alpha``.

    Stuck entries make one cell's probability δ + (1 − δ)/K and every other (1 − δ)/K, so
    Pearson's statistic is noncentral χ²_{K−1} with λ = N·K·Σ(pᵢ − 1/K)² = N·δ²·(K − 1)
    (Cochran 1952; the large-N approximation, N ≫ K).

    Examples
    --------
    >>> round(stuck_fraction(65_536, 16, 1e-8), 4)   # a 4-bit slice of 2^16 mask entries
    0.0092
    """
    critical = stats.chi2.isf(alpha, cells - 1)
    low, high = 0.0, 1.0
    for _ in range(60):
        middle = (low + high) / 2.0
        noncentrality = entries * middle**2 * (cells - 1)
        if stats.ncx2.sf(critical, cells - 1, noncentrality) >= power:
            high = middle
        else:
            low = middle
    return high
