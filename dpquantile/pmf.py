"""Probability mass functions and tails of the discrete Gaussian and discrete Laplace (float64).

These are the *targets* the samplers are tested against and the tail sums the accountant's exact
single-release bound (CKS20 Thm. 7) uses. They are numerical evaluations, never used to draw noise.
"""

from __future__ import annotations

import math

import numpy as np
from numpy.typing import ArrayLike, NDArray

from dpquantile._checks import check_positive

__all__ = [
    "discrete_gaussian_pmf",
    "discrete_gaussian_tail",
    "discrete_gaussian_variance",
    "discrete_laplace_pmf",
]

# Above this σ the Poisson-summation correction exp(-2π²σ²) to the normaliser is below 1e-137.
_POISSON_SIGMA = 4.0
# Direct tail sums run over at most this many terms (about 40σ); beyond it, tails are refused.
_MAX_TAIL_TERMS = 50_000_000


def _gauss(x: NDArray[np.float64], sigma: float) -> NDArray[np.float64]:
    """exp(-x²/2σ²), well defined even when 2σ² underflows (then a point mass at 0)."""
    two_var = max(2.0 * sigma * sigma, 5e-324)
    with np.errstate(over="ignore"):
        return np.exp(-(x * x) / two_var)


def _normaliser(sigma: float) -> float:
    """Z(σ) = Σ_{x∈ℤ} exp(-x²/2σ²)."""
    if sigma >= _POISSON_SIGMA:
        # Poisson summation: Z = σ√(2π)·(1 + 2Σ_k exp(-2π²σ²k²)); the sum is < 1e-137 here.
        return sigma * math.sqrt(2.0 * math.pi)
    reach = math.ceil(40.0 * sigma) + 2
    x = np.arange(1, reach + 1, dtype=np.float64)
    return float(1.0 + 2.0 * _gauss(x, sigma).sum())


def discrete_gaussian_pmf(x: ArrayLike, sigma: float) -> NDArray[np.float64]:
    """Return P[X = x] for X ~ N_ℤ(0, σ²), the discrete Gaussian.

    Parameters
    ----------
    x
        Integer point(s).
    sigma
        The scale σ > 0; P[X = x] ∝ exp(-x²/2σ²).

    Returns
    -------
    numpy.ndarray
        float64 probabilities with the shape of ``x``.

    Examples
    --------
    >>> p = discrete_gaussian_pmf([-1, 0, 1], 1.0)
    >>> [round(float(v), 6) for v in p]
    [0.241971, 0.398942, 0.241971]
    """
    sigma = check_positive("sigma", sigma)
    points = np.asarray(x, dtype=np.float64)
    return _gauss(points, sigma) / _normaliser(sigma)


def discrete_gaussian_tail(threshold: float, sigma: float) -> float:
    """Return P[X > threshold] for X ~ N_ℤ(0, σ²), by direct summation of the pmf.

    Parameters
    ----------
    threshold
        Any real number.
    sigma
        The scale σ > 0 (at most about 1.2e6, so that the sum stays below 5e7 terms).

    Returns
    -------
    float
        The upper tail probability.

    Examples
    --------
    >>> round(discrete_gaussian_tail(0.5, 1.0), 6)
    0.300529
    >>> round(discrete_gaussian_tail(-0.5, 1.0) - discrete_gaussian_tail(0.5, 1.0), 6)
    0.398942
    """
    sigma = check_positive("sigma", sigma)
    if math.isnan(threshold):
        raise ValueError("threshold must not be NaN")
    if math.ceil(40.0 * sigma) > _MAX_TAIL_TERMS:
        raise ValueError(f"sigma too large for direct tail sums (at most ~1.2e6); got {sigma}")
    if threshold > 1e15 * max(sigma, 1.0):
        return 0.0  # below exp(-5e29) (also covers +inf)
    if threshold < -(40.0 * sigma + 20):
        return 1.0
    first = math.floor(threshold) + 1  # smallest integer strictly above the threshold
    if first >= 1:
        return _upper_sum(first, sigma) / _normaliser(sigma)
    # P[X >= first] = 1 - P[X <= first - 1] = 1 - P[X >= 1 - first] by symmetry.
    return 1.0 - _upper_sum(1 - first, sigma) / _normaliser(sigma)


def _upper_sum(first: int, sigma: float) -> float:
    """Σ_{x >= first} exp(-x²/2σ²) for first >= 1, to relative error below 1e-17.

    Terms j steps on are below exp(-j(2·first + j)/2σ²) times the first; the sum stops once that
    factor is below e^-50, leaving a geometric remainder under 2σ²·e^-50 ≤ 1e-17 (σ ≤ 1.2e6).
    """
    steps = math.ceil(-first + math.sqrt(first * first + 100.0 * sigma * sigma)) + 2
    x = np.arange(first, first + steps, dtype=np.float64)
    return float(_gauss(x, sigma).sum())


def discrete_gaussian_variance(sigma: float) -> float:
    """Return Var[X] for X ~ N_ℤ(0, σ²) (below σ², markedly so for σ < 1; CKS20 §2).

    Examples
    --------
    >>> round(discrete_gaussian_variance(0.5), 6)
    0.215013
    >>> discrete_gaussian_variance(10.0) == 100.0
    True
    """
    sigma = check_positive("sigma", sigma)
    if sigma >= _POISSON_SIGMA:
        # By Poisson summation the deficit σ² - Var is O(σ⁴·exp(-2π²σ²)) < 1e-130 here.
        return sigma * sigma
    reach = math.ceil(40.0 * sigma) + 2
    x = np.arange(1, reach + 1, dtype=np.float64)
    weights = _gauss(x, sigma)
    return float(2.0 * (x * x * weights).sum() / (1.0 + 2.0 * weights.sum()))


def discrete_laplace_pmf(x: ArrayLike, scale: float) -> NDArray[np.float64]:
    """Return P[X = x] for the discrete Laplace law P[X = x] ∝ exp(-|x|/scale) on ℤ.

    Examples
    --------
    >>> round(float(discrete_laplace_pmf(0, 1.0)), 6)
    0.462117
    """
    scale = check_positive("scale", scale)
    points = np.abs(np.asarray(x, dtype=np.float64))
    ratio = math.exp(-1.0 / scale)
    # Normaliser Σ_x r^|x| = (1 + r)/(1 - r): a two-sided geometric series.
    return (1.0 - ratio) / (1.0 + ratio) * np.exp(-points / scale)
