"""Noisy releases that spend the budget first and return the event that describes them."""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

import numpy as np
from numpy.typing import ArrayLike, NDArray

from dpquantile._checks import check_nonnegative
from dpquantile._fast_sampler import FastDiscreteGaussian
from dpquantile.accounting import DiscreteGaussian, PrivacyBudget
from dpquantile.samplers import ExactDiscreteGaussian
from secagg.randomness import RandomSource

__all__ = ["NoisyRelease", "add_discrete_gaussian_noise"]

_INT64_MAX = np.iinfo(np.int64).max


@dataclass(frozen=True, slots=True)
class NoisyRelease:
    """An integer array with discrete Gaussian noise added, and the event describing it.

    Examples
    --------
    >>> from secagg.randomness import KeystreamRandom
    >>> release = add_discrete_gaussian_noise(
    ...     [1, 2], sigma=2.0, l2_sensitivity=1.0, rng=KeystreamRandom(seed=2), exact=True)
    >>> release.event
    DiscreteGaussian(sigma=2.0, l2_sensitivity=1.0, dimension=2, sampler_tv_bound=0.0)
    """

    values: NDArray[np.int64]
    event: DiscreteGaussian


def add_discrete_gaussian_noise(
    values: ArrayLike,
    *,
    sigma: float | Fraction,
    l2_sensitivity: float,
    rng: RandomSource | None = None,
    budget: PrivacyBudget | None = None,
    exact: bool = False,
) -> NoisyRelease:
    """Add N_ℤ(0, σ²) noise to an integer array, spending ``budget`` before any noise is drawn.

    Parameters
    ----------
    values
        Integer query answers (quantise real values first); any shape.
    sigma
        Noise scale σ in grid units.
    l2_sensitivity
        L2 sensitivity Δ₂ of ``values`` (grid units).
    rng
        Cryptographic byte stream; ``None`` seeds one from the OS.
    budget
        If given, the release's event is spent first; an overrun raises
        :class:`~dpquantile.BudgetExceededError` and no noise is drawn.
    exact
        Use the exact CKS20 sampler (about 1e6 draws/s) instead of the fast one (tens of millions
        per second, with a TV bound of about 2e-58 per draw that the event carries).

    Returns
    -------
    NoisyRelease
        The noisy int64 values and their :class:`~dpquantile.DiscreteGaussian` event.

    Examples
    --------
    >>> from secagg.randomness import KeystreamRandom
    >>> from dpquantile.accounting import PrivacyBudget
    >>> budget = PrivacyBudget(epsilon=3.0, delta=1e-5)
    >>> release = add_discrete_gaussian_noise(
    ...     np.arange(4), sigma=5.0, l2_sensitivity=1.0, rng=KeystreamRandom(seed=1), budget=budget)
    >>> release.values.shape, release.event.rho
    ((4,), 0.02)
    """
    data = np.asarray(values)
    if not np.issubdtype(data.dtype, np.integer):
        raise TypeError(f"values must be an integer array (quantise first); got {data.dtype}")
    l2 = check_nonnegative("l2_sensitivity", l2_sensitivity)
    sampler: FastDiscreteGaussian | ExactDiscreteGaussian = (
        ExactDiscreteGaussian(sigma) if exact else FastDiscreteGaussian(sigma)
    )
    event = sampler.event(l2, dimension=max(1, data.size))
    if budget is not None:
        budget.spend(event)  # raises before any noise exists
    noise = sampler.sample(data.shape, rng=rng)
    data64 = data.astype(np.int64)
    if data.size and int(np.abs(data64).max()) > _INT64_MAX - int(np.abs(noise).max()):
        raise OverflowError("values plus noise leave the int64 range")
    return NoisyRelease(values=data64 + noise, event=event)
