"""What every integer noise sampler shares: the ``sample`` entry point and, for the discrete
Gaussian samplers, the target law's pmf, variance and privacy event (private)."""

from __future__ import annotations

import math
from fractions import Fraction
from typing import ClassVar

import numpy as np
from numpy.typing import ArrayLike, NDArray

from dpquantile._checks import check_nonnegative, resolve_rng, resolve_size
from dpquantile._words import WordStream
from dpquantile.accounting import DiscreteGaussian
from dpquantile.pmf import discrete_gaussian_pmf, discrete_gaussian_variance
from secagg.randomness import RandomSource


class BatchSampler:
    """Draws batches of integer noise from a word stream; subclasses implement ``_draw``."""

    __slots__ = ()
    #: Expected 64-bit words consumed per sample, to size the stream's first read.
    words_per_sample: ClassVar[int] = 8

    def _draw(self, words: WordStream, count: int) -> NDArray[np.int64]:
        raise NotImplementedError

    def sample(
        self, size: int | tuple[int, ...], *, rng: RandomSource | None = None
    ) -> NDArray[np.int64]:
        """Draw samples of shape ``size`` from the cryptographic stream ``rng``.

        Parameters
        ----------
        size
            Output shape (an int or a tuple of ints, each >= 0).
        rng
            Cryptographic byte stream; ``None`` draws a fresh operating-system-seeded one.

        Returns
        -------
        numpy.ndarray
            int64 array of shape ``size``.

        Examples
        --------
        >>> from dpquantile import ExactDiscreteGaussian
        >>> from secagg.randomness import KeystreamRandom
        >>> ExactDiscreteGaussian(2.0).sample((2, 3), rng=KeystreamRandom(seed=7)).shape
        (2, 3)
        """
        shape = resolve_size(size)
        count = math.prod(shape)
        words = WordStream(resolve_rng(rng), expected_words=self.words_per_sample * count + 64)
        return self._draw(words, count).reshape(shape)


class DiscreteGaussianSampler(BatchSampler):
    """A sampler whose target is N_ℤ(0, σ̃²) and whose privacy event uses the requested σ."""

    __slots__ = ()
    _sigma: float

    @property
    def target_sigma_squared(self) -> Fraction:
        """σ̃², the variance parameter of the law actually targeted."""
        raise NotImplementedError

    @property
    def tv_bound(self) -> float:
        """Total-variation distance of one draw from N_ℤ(0, σ̃²)."""
        raise NotImplementedError

    @property
    def sigma(self) -> float:
        """σ as a float, rounded down (so events built from it never understate ρ).

        Examples
        --------
        >>> from dpquantile import ExactDiscreteGaussian
        >>> ExactDiscreteGaussian(3.5).sigma
        3.5
        """
        return self._sigma

    def pmf(self, x: ArrayLike) -> NDArray[np.float64]:
        """The target pmf P[X = x] ∝ exp(−x²/2σ̃²).

        Examples
        --------
        >>> from dpquantile import ExactDiscreteGaussian
        >>> round(float(ExactDiscreteGaussian(1.0).pmf(0)), 6)
        0.398942
        """
        return discrete_gaussian_pmf(x, math.sqrt(float(self.target_sigma_squared)))

    def variance(self) -> float:
        """Var[X] of the target (below σ̃² for small σ̃).

        Examples
        --------
        >>> from dpquantile import ExactDiscreteGaussian
        >>> round(ExactDiscreteGaussian(0.5).variance(), 6)
        0.215013
        """
        return discrete_gaussian_variance(math.sqrt(float(self.target_sigma_squared)))

    def event(self, l2_sensitivity: float, *, dimension: int = 1) -> DiscreteGaussian:
        """The privacy event of adding d draws to a query of L2 sensitivity Δ₂.

        ρ uses the requested σ (σ̃ ≥ σ, so it is conservative); the event carries d·tv_bound.

        Examples
        --------
        >>> from dpquantile import ExactDiscreteGaussian
        >>> ExactDiscreteGaussian(2.0).event(1.0, dimension=3)
        DiscreteGaussian(sigma=2.0, l2_sensitivity=1.0, dimension=3, sampler_tv_bound=0.0)
        """
        return DiscreteGaussian(
            sigma=self._sigma,
            l2_sensitivity=check_nonnegative("l2_sensitivity", l2_sensitivity),
            dimension=dimension,
            sampler_tv_bound=dimension * self.tv_bound,
        )
