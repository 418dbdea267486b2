"""Exact discrete Gaussian and discrete Laplace samplers (CKS20 Alg. 1–3), vectorised.

Both samplers draw *exactly* from their target law: every decision is an integer comparison against
an exactly uniform integer taken from a cryptographic byte stream; the variance σ² is handled as an
exact rational (a float σ is converted with :class:`fractions.Fraction`, then squared exactly).
The rejection loops of CKS20 run over whole arrays of candidates with numpy integer operations;
only quantities that outgrow 64 bits (large σ or σ² with large denominators) fall back to Python
integers held in object arrays, still vectorised.

Timing: a batch's running time depends on the random stream, not on the data the noise protects,
and a batch hides the per-sample rejection counts that timing attacks on samplers exploit.
"""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Protocol, runtime_checkable

import numpy as np
from numpy.typing import ArrayLike, NDArray

from dpquantile._bernoulli import (
    LargeRatio,
    Ratio,
    SmallRatio,
    bernoulli_exp,
    bernoulli_exp_unit,
    geometric_exp_minus_one,
)
from dpquantile._checks import (
    exact_positive_rational,
    float_at_most,
)
from dpquantile._sampler_base import BatchSampler, DiscreteGaussianSampler
from dpquantile._words import WordStream, uniform_below
from dpquantile.accounting import DiscreteLaplace
from dpquantile.pmf import (
    discrete_laplace_pmf,
)
from secagg.randomness import RandomSource

__all__ = [
    "MAX_EXACT_SIGMA",
    "ExactDiscreteGaussian",
    "ExactDiscreteLaplace",
    "IntegerNoiseSampler",
    "sample_discrete_gaussian_exact",
    "sample_discrete_laplace",
]

#: Largest σ (and Laplace scale) the exact samplers accept; samples then stay far inside int64.
MAX_EXACT_SIGMA = float(2**40)

_INT64_HEADROOM = 1 << 62
_SMALL_PRODUCT = 1 << 31  # |u| below this keeps u² inside int64
_WHOLE_CLIP = 1 << 62


@runtime_checkable
class IntegerNoiseSampler(Protocol):
    """What every integer-noise sampler offers (the contract tests run against this).

    Examples
    --------
    >>> isinstance(ExactDiscreteGaussian(1.0), IntegerNoiseSampler)
    True
    """

    @property
    def tv_bound(self) -> float:
        """Total-variation distance of one draw from :meth:`pmf` (0 for an exact sampler)."""
        ...

    def sample(
        self, size: int | tuple[int, ...], *, rng: RandomSource | None = None
    ) -> NDArray[np.int64]:
        """Draw an int64 array of shape ``size`` from the cryptographic stream ``rng``."""
        ...

    def pmf(self, x: ArrayLike) -> NDArray[np.float64]:
        """The target probability mass function (float64, for tests and audits)."""
        ...

    def variance(self) -> float:
        """The target variance."""
        ...


def _sqrt_at_most(value: Fraction) -> float:
    """The largest float whose square is <= ``value`` (value > 0)."""
    # A start within a few ulps, even where float(value) under- or overflows.
    log_root = 0.5 * (math.log(value.numerator) - math.log(value.denominator))
    result = math.exp(min(log_root, 709.0))
    while result > 0 and Fraction(result) ** 2 > value:
        result = math.nextafter(result, -math.inf)
    while Fraction(math.nextafter(result, math.inf)) ** 2 <= value:
        result = math.nextafter(result, math.inf)
    return result


def _sign_bits(words: WordStream, count: int) -> NDArray[np.bool_]:
    """``count`` independent fair bits, 64 per word."""
    packed = words.take((count + 63) // 64)
    bits = np.unpackbits(packed.astype("<u8").view(np.uint8), bitorder="little")
    return bits[:count].astype(np.bool_)


def _discrete_laplace(words: WordStream, t: int, s: int, count: int) -> NDArray[np.int64]:
    """``count`` exact draws with P[y] ∝ exp(-|y|·s/t) (CKS20 Alg. 2, scale t/s)."""
    out = np.empty(count, dtype=np.int64)
    filled = 0
    while filled < count:
        need = count - filled
        batch = need + need // 2 + 8
        # CKS20 Alg. 2: U uniform in {0..t-1}, kept with probability exp(-U/t).
        u = uniform_below(words, t, batch)
        u = u[bernoulli_exp_unit(words, SmallRatio(u, t), batch)]
        # V: successes of Bernoulli(exp(-1)) before the first failure; X = U + t·V.
        v = geometric_exp_minus_one(words, u.size)
        if u.size and (int(v.max()) + 1) * t < _INT64_HEADROOM and s < _INT64_HEADROOM:
            y = (u.astype(np.int64) + np.int64(t) * v) // np.int64(s)
        else:
            y_obj = (u.astype(object) + v.astype(object) * t) // s
            if u.size and int(np.max(y_obj)) >= _INT64_HEADROOM:
                raise OverflowError("a discrete Laplace draw left the int64 range")
            y = y_obj.astype(np.int64)
        # Sign B ~ Bernoulli(1/2); (B = 1, Y = 0) is rejected so that 0 is not counted twice.
        negative = _sign_bits(words, y.size)
        keep = ~(negative & (y == 0))
        values = np.where(negative, -y, y)[keep]
        taken = min(values.size, need)
        out[filled : filled + taken] = values[:taken]
        filled += taken
    return out


class ExactDiscreteGaussian(DiscreteGaussianSampler):
    """Exact sampler for the discrete Gaussian N_ℤ(0, σ²) (CKS20 Alg. 3), batched and vectorised.

    Parameters
    ----------
    sigma
        σ > 0 as an int, float or :class:`~fractions.Fraction` (at most :data:`MAX_EXACT_SIGMA`).
        σ² is computed exactly as ``Fraction(sigma) ** 2``; use :meth:`from_variance` for a σ²
        that is not the square of a rational.

    Examples
    --------
    >>> from secagg.randomness import KeystreamRandom
    >>> sampler = ExactDiscreteGaussian(3.0)
    >>> noise = sampler.sample(5, rng=KeystreamRandom(seed=1))
    >>> noise.dtype, noise.shape
    (dtype('int64'), (5,))
    >>> sampler.event(l2_sensitivity=1.0).rho
    0.05555555555555556
    """

    __slots__ = ("_accept_denominator", "_sigma", "_sigma_squared", "_t")
    words_per_sample = 24

    def __init__(self, sigma: float | Fraction) -> None:
        root = exact_positive_rational("sigma", sigma, maximum=MAX_EXACT_SIGMA)
        self._set_variance(root * root, sigma=float_at_most(root))

    @classmethod
    def from_variance(cls, sigma_squared: float | Fraction) -> ExactDiscreteGaussian:
        """Build the sampler from an exact rational variance parameter σ².

        Examples
        --------
        >>> ExactDiscreteGaussian.from_variance(Fraction(2)).sigma_squared
        Fraction(2, 1)
        """
        sampler = cls.__new__(cls)
        sampler._set_variance(
            exact_positive_rational("sigma_squared", sigma_squared, maximum=MAX_EXACT_SIGMA**2)
        )
        return sampler

    def _set_variance(self, sigma_squared: Fraction, *, sigma: float | None = None) -> None:
        self._sigma_squared = sigma_squared
        self._sigma = _sqrt_at_most(sigma_squared) if sigma is None else sigma
        a, b = sigma_squared.numerator, sigma_squared.denominator
        # CKS20 Alg. 3: t = ⌊σ⌋ + 1, with ⌊√(a/b)⌋ = isqrt(⌊a/b⌋).
        self._t = math.isqrt(a // b) + 1
        # Acceptance exponent (|Y|·t·b − a)² / (2·a·b·t²): this is its denominator.
        self._accept_denominator = 2 * a * b * self._t * self._t

    @property
    def sigma_squared(self) -> Fraction:
        """The exact variance parameter σ².

        Examples
        --------
        >>> ExactDiscreteGaussian(0.5).sigma_squared
        Fraction(1, 4)
        """
        return self._sigma_squared

    @property
    def target_sigma_squared(self) -> Fraction:
        """σ² itself: the exact sampler targets the requested law."""
        return self._sigma_squared

    @property
    def tv_bound(self) -> float:
        """0: the sampler is exact.

        Examples
        --------
        >>> ExactDiscreteGaussian(1.0).tv_bound
        0.0
        """
        return 0.0

    def _draw(self, words: WordStream, count: int) -> NDArray[np.int64]:
        """Draw ``count`` samples from an existing word stream (for composite samplers)."""
        out = np.empty(count, dtype=np.int64)
        filled = 0
        while filled < count:
            need = count - filled
            candidates = _discrete_laplace(words, self._t, 1, need + need // 2 + 8)
            accepted = candidates[self._accept(words, candidates)]
            taken = min(accepted.size, need)
            out[filled : filled + taken] = accepted[:taken]
            filled += taken
        return out

    def _accept(self, words: WordStream, candidates: NDArray[np.int64]) -> NDArray[np.bool_]:
        """Bernoulli(exp(-(|Y| − σ²/t)²/(2σ²))) for every candidate Y (CKS20 Alg. 3)."""
        if candidates.size == 0:
            return np.zeros(0, dtype=np.bool_)
        a, b = self._sigma_squared.numerator, self._sigma_squared.denominator
        t, denominator = self._t, self._accept_denominator
        magnitude = np.abs(candidates)
        # With σ² = a/b: (|Y| − σ²/t)²/(2σ²) = (|Y|·t·b − a)²/(2·a·b·t²), all integers.
        scale = t * b
        ratio: Ratio
        if denominator <= _INT64_HEADROOM and int(magnitude.max()) * scale + a < _SMALL_PRODUCT:
            offset = magnitude * np.int64(scale) - np.int64(a)
            numerator = offset * offset
            whole = numerator // np.int64(denominator)
            fraction = (numerator - whole * np.int64(denominator)).astype(np.uint64)
            ratio = SmallRatio(fraction, denominator)
        else:
            offset_obj = magnitude.astype(object) * scale - a
            numerator_obj = offset_obj * offset_obj
            whole_obj = numerator_obj // denominator
            fraction_obj = numerator_obj - whole_obj * denominator
            whole = np.minimum(whole_obj, _WHOLE_CLIP).astype(np.int64)
            if denominator <= _INT64_HEADROOM:
                ratio = SmallRatio(fraction_obj.astype(np.uint64), denominator)
            else:
                ratio = LargeRatio(fraction_obj, denominator)
        return bernoulli_exp(words, whole, ratio)


class ExactDiscreteLaplace(BatchSampler):
    """Exact sampler for the discrete Laplace law P[X = x] ∝ exp(-|x|/scale) (CKS20 Alg. 2).

    Parameters
    ----------
    scale
        scale > 0 as an int, float or :class:`~fractions.Fraction` (converted exactly to t/s).

    Examples
    --------
    >>> from secagg.randomness import KeystreamRandom
    >>> ExactDiscreteLaplace(2.5).sample(4, rng=KeystreamRandom(seed=3)).dtype
    dtype('int64')
    >>> ExactDiscreteLaplace(2.0).event(l1_sensitivity=1.0).epsilon0
    0.5
    """

    __slots__ = ("_scale", "_scale_float")
    words_per_sample = 12

    def __init__(self, scale: float | Fraction) -> None:
        self._scale = exact_positive_rational("scale", scale, maximum=MAX_EXACT_SIGMA)
        if self._scale.numerator >= _INT64_HEADROOM:
            raise ValueError(
                f"scale's numerator must be below 2**62 (pass a float or a simpler Fraction); "
                f"got {self._scale}"
            )
        self._scale_float = float_at_most(self._scale)

    @property
    def scale(self) -> Fraction:
        """The exact scale t/s.

        Examples
        --------
        >>> ExactDiscreteLaplace(0.5).scale
        Fraction(1, 2)
        """
        return self._scale

    @property
    def tv_bound(self) -> float:
        """0: the sampler is exact.

        Examples
        --------
        >>> ExactDiscreteLaplace(1.0).tv_bound
        0.0
        """
        return 0.0

    def pmf(self, x: ArrayLike) -> NDArray[np.float64]:
        """The target pmf.

        Examples
        --------
        >>> round(float(ExactDiscreteLaplace(1.0).pmf(0)), 6)
        0.462117
        """
        return discrete_laplace_pmf(x, float(self._scale))

    def variance(self) -> float:
        """Var[X] = 2r/(1 − r)² with r = exp(-1/scale).

        Examples
        --------
        >>> round(ExactDiscreteLaplace(1.0).variance(), 6)
        1.841347
        """
        r = math.exp(-1.0 / float(self._scale))
        return 2.0 * r / (1.0 - r) ** 2

    def event(self, l1_sensitivity: float) -> DiscreteLaplace:
        """The privacy event of adding this noise to a query of L1 sensitivity Δ₁.

        Examples
        --------
        >>> ExactDiscreteLaplace(4.0).event(2.0)
        DiscreteLaplace(scale=4.0, l1_sensitivity=2.0)
        """
        return DiscreteLaplace(scale=self._scale_float, l1_sensitivity=l1_sensitivity)

    def _draw(self, words: WordStream, count: int) -> NDArray[np.int64]:
        """Draw ``count`` samples from an existing word stream."""
        return _discrete_laplace(words, self._scale.numerator, self._scale.denominator, count)


def sample_discrete_gaussian_exact(
    sigma: float | Fraction, size: int | tuple[int, ...], *, rng: RandomSource | None = None
) -> NDArray[np.int64]:
    """Draw exact N_ℤ(0, σ²) samples with integer arithmetic only (CKS20 Alg. 1–3).

    Parameters
    ----------
    sigma
        σ > 0 (int, float or Fraction; σ² = Fraction(σ)² exactly), at most 2**40.
    size
        Output shape.
    rng
        Cryptographic byte stream (``secagg.KeystreamRandom``); ``None`` seeds one from the OS.

    Returns
    -------
    numpy.ndarray
        int64 samples.

    Examples
    --------
    >>> from secagg.randomness import KeystreamRandom
    >>> x = sample_discrete_gaussian_exact(10.0, 1000, rng=KeystreamRandom(seed=1))
    >>> x.dtype, bool(60 < x.var() < 140)
    (dtype('int64'), True)
    """
    return ExactDiscreteGaussian(sigma).sample(size, rng=rng)


def sample_discrete_laplace(
    scale: float | Fraction, size: int | tuple[int, ...], *, rng: RandomSource | None = None
) -> NDArray[np.int64]:
    """Draw exact discrete Laplace samples, P[x] ∝ exp(-|x|/scale) (CKS20 Alg. 2).

    Parameters
    ----------
    scale
        scale > 0 (int, float or Fraction, converted exactly), at most 2**40.
    size
        Output shape.
    rng
        Cryptographic byte stream; ``None`` seeds one from the OS.

    Returns
    -------
    numpy.ndarray
        int64 samples.

    Examples
    --------
    >>> from secagg.randomness import KeystreamRandom
    >>> x = sample_discrete_laplace(3.0, 1000, rng=KeystreamRandom(seed=1))
    >>> x.dtype, bool(10 < x.var() < 30)
    (dtype('int64'), True)
    """
    return ExactDiscreteLaplace(scale).sample(size, rng=rng)
