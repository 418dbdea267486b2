"""The distributed discrete Gaussian mechanism: one object from calibration to the event.

Every noisy secure sum of the toolkit — the DP quantile's histogram, the secure average's
[βw ; β ; extras], the Flower strategy's rounds — uses :class:`DistributedDiscreteGaussianMechanism`
for the four things such a release needs: the per-client σ that meets a ρ target for the planned
number of survivors (KLS21 Thm. 1), each client's noise, the event of the survivors who actually
contributed, and the bound on the summed noise at a stated failure probability (used for the
ring's headroom).

KLS21 = Kairouz, Liu, Steinke, ICML 2021 (arXiv:2102.06387); CKS20 = Canonne, Kamath, Steinke,
NeurIPS 2020 (arXiv:2004.00010).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Literal

import numpy as np
from numpy.typing import NDArray

from dpquantile._fast_sampler import MAX_FAST_SIGMA, FastDiscreteGaussian
from dpquantile.accounting import (
    NEIGHBOURING_RELATIONS,
    DistributedDiscreteGaussian,
    Neighbouring,
)
from dpquantile.samplers import ExactDiscreteGaussian
from secagg import RandomSource

__all__ = [
    "TAIL_FAILURE_PROBABILITY",
    "DistributedDiscreteGaussianMechanism",
    "noise_tail_bound",
    "sigma_for_rho",
    "tail_factor",
]

# The summed noise of a release exceeds its tail bound with probability at most this.
TAIL_FAILURE_PROBABILITY = 2.0**-40
# σ is searched to this relative precision (the result never falls below the target's σ).
_SIGMA_PRECISION = 1e-9

SamplerKind = Literal["fast", "exact"]


def tail_factor(dimension: int, failure_probability: float = TAIL_FAILURE_PROBABILITY) -> float:
    """t with 2·D·exp(−t²/2) = p: every coordinate of a sum of σ²-subgaussian noise stays within
    t·σ·√n except with probability p (union bound over D coordinates; the discrete Gaussian is
    σ²-subgaussian, CKS20 Cor. 9).

    Examples
    --------
    >>> round(tail_factor(1), 3), round(tail_factor(1, 1e-9), 3)
    (7.539, 6.545)
    """
    if not 0.0 < failure_probability < 1.0:
        raise ValueError(f"failure_probability must lie in (0, 1); got {failure_probability!r}")
    if dimension < 1:
        raise ValueError(f"dimension must be >= 1; got {dimension!r}")
    return math.sqrt(2.0 * math.log(2.0 * dimension / failure_probability))


def noise_tail_bound(
    sigma: float,
    clients: int,
    dimension: int,
    failure_probability: float = TAIL_FAILURE_PROBABILITY,
) -> int:
    """⌈t·σ·√n⌉: every coordinate of the sum of ``clients`` clients' N_ℤ(0, σ²)^d noise lies
    within it except with probability ``failure_probability`` (t from :func:`tail_factor`).

    Examples
    --------
    >>> noise_tail_bound(1.0, 4, 1, 1e-9)
    14
    """
    return math.ceil(tail_factor(dimension, failure_probability) * sigma * math.sqrt(clients))


def sigma_for_rho(
    rho: float, *, clients: int, l1_sensitivity: float, l2_sensitivity: float, dimension: int
) -> float:
    """The smallest per-client grid σ ≥ 1/2 whose KLS21 event over ``clients`` has ρ ≤ ``rho``.

    Found by bisection to a relative 1e-9 (the event's ρ is decreasing in σ); the result always
    meets the target.

    Examples
    --------
    >>> sigma = sigma_for_rho(0.5, clients=10, l1_sensitivity=1.0, l2_sensitivity=1.0,
    ...                       dimension=1)
    >>> round(sigma, 4), DistributedDiscreteGaussian(10, sigma, 1.0, 1.0, 1).rho <= 0.5
    (0.6101, True)
    """
    if not (isinstance(rho, int | float) and math.isfinite(rho) and rho > 0):
        raise ValueError(f"rho must be a positive finite float; got {rho!r}")

    def achieved(sigma: float) -> float:
        return DistributedDiscreteGaussian(
            clients, sigma, l1_sensitivity, l2_sensitivity, dimension
        ).rho

    # ρ ≥ Δ₂²/(2nσ²) on every KLS21 line, so this σ is a lower bound (KLS21 Thm. 1).
    low = max(0.5, l2_sensitivity / math.sqrt(2.0 * clients * rho))
    if achieved(low) <= rho:
        return low
    high = 2.0 * low
    while achieved(high) > rho:
        low, high = high, 2.0 * high
    while high - low > _SIGMA_PRECISION * high:
        middle = 0.5 * (low + high)
        if achieved(middle) <= rho:
            high = middle
        else:
            low = middle
    return high


@dataclass(frozen=True, slots=True)
class DistributedDiscreteGaussianMechanism:
    """Each client adds N_ℤ(0, σ²)^d to its integer vector before the secure sum (KLS21).

    Parameters
    ----------
    sigma
        Per-client σ in grid units (≥ 1/2, KLS21's condition).
    l1_sensitivity, l2_sensitivity
        Δ₁ ≥ Δ₂ of one client's integer vector under ``neighbouring``.
    dimension
        d, the length of the summed vector.
    planned_survivors
        The number of clients whose noise the privacy target counts on.
    neighbouring
        ``"add_remove"`` or ``"replace_one"``: the relation the sensitivities are for.
    sampler
        ``"fast"`` (table sampler; its total-variation bound is charged in the event) or
        ``"exact"`` (CKS20's sampler).

    Examples
    --------
    >>> mechanism = DistributedDiscreteGaussianMechanism.calibrated(
    ...     0.5, planned_survivors=10, l1_sensitivity=4.0, l2_sensitivity=2.0, dimension=8)
    >>> round(mechanism.sigma, 4), mechanism.event(10).rho <= 0.5 < mechanism.event(5).rho
    (0.7357, True)
    >>> mechanism.tail_bound(10)  # |summed noise| per coordinate, except w.p. 2^-40
    19
    """

    sigma: float
    l1_sensitivity: float
    l2_sensitivity: float
    dimension: int
    planned_survivors: int
    neighbouring: Neighbouring = "add_remove"
    sampler: SamplerKind = "fast"
    _noise: FastDiscreteGaussian | ExactDiscreteGaussian = field(
        init=False, repr=False, compare=False
    )

    def __post_init__(self) -> None:
        if self.neighbouring not in NEIGHBOURING_RELATIONS:
            raise ValueError(
                f"neighbouring must be one of {', '.join(NEIGHBOURING_RELATIONS)}; "
                f"got {self.neighbouring!r}"
            )
        if self.sampler not in ("fast", "exact"):
            raise ValueError(f"sampler must be 'fast' or 'exact'; got {self.sampler!r}")
        if self.sampler == "fast" and not self.sigma <= MAX_FAST_SIGMA:
            raise ValueError(f"the fast sampler needs σ ≤ {MAX_FAST_SIGMA:g}; got {self.sigma!r}")
        # Validates σ ≥ 1/2, the sensitivities, d and n exactly as every event will.
        DistributedDiscreteGaussian(
            self.planned_survivors,
            self.sigma,
            self.l1_sensitivity,
            self.l2_sensitivity,
            self.dimension,
        )
        noise = (
            FastDiscreteGaussian(self.sigma)
            if self.sampler == "fast"
            else ExactDiscreteGaussian(self.sigma)
        )
        object.__setattr__(self, "_noise", noise)

    @classmethod
    def calibrated(
        cls,
        rho: float,
        *,
        planned_survivors: int,
        l1_sensitivity: float,
        l2_sensitivity: float,
        dimension: int,
        neighbouring: Neighbouring = "add_remove",
        sampler: SamplerKind = "fast",
    ) -> DistributedDiscreteGaussianMechanism:
        """The mechanism with the smallest σ meeting ρ-zCDP if ``planned_survivors`` contribute.

        Examples
        --------
        >>> DistributedDiscreteGaussianMechanism.calibrated(
        ...     2.0, planned_survivors=4, l1_sensitivity=1.0, l2_sensitivity=1.0, dimension=1
        ... ).sigma
        0.5
        """
        sigma = sigma_for_rho(
            rho,
            clients=planned_survivors,
            l1_sensitivity=l1_sensitivity,
            l2_sensitivity=l2_sensitivity,
            dimension=dimension,
        )
        return cls(
            sigma,
            l1_sensitivity,
            l2_sensitivity,
            dimension,
            planned_survivors,
            neighbouring,
            sampler,
        )

    @property
    def noise_sampler(self) -> FastDiscreteGaussian | ExactDiscreteGaussian:
        """Each client's N_ℤ(0, σ²) sampler.

        Examples
        --------
        >>> DistributedDiscreteGaussianMechanism(1.0, 1.0, 1.0, 1, 2).noise_sampler.sigma
        1.0
        """
        return self._noise

    def noise(self, rng: RandomSource) -> NDArray[np.int64]:
        """One client's noise vector (length d) from its own cryptographic stream.

        Examples
        --------
        >>> from secagg import KeystreamRandom
        >>> mechanism = DistributedDiscreteGaussianMechanism(1.0, 1.0, 1.0, 3, 2)
        >>> mechanism.noise(KeystreamRandom(0)).shape
        (3,)
        """
        return self._noise.sample(self.dimension, rng=rng)

    def event(self, survivors: int) -> DistributedDiscreteGaussian:
        """The release's event when ``survivors`` clients' noise is in the sum (the fast
        sampler's total-variation bound charged for each of their d draws).

        Examples
        --------
        >>> DistributedDiscreteGaussianMechanism(1.0, 1.0, 1.0, 1, 4).event(4).num_clients
        4
        """
        tv = survivors * self.dimension * self._noise.tv_bound  # 0 for the exact sampler
        return DistributedDiscreteGaussian(
            num_clients=survivors,
            sigma=self.sigma,
            l1_sensitivity=self.l1_sensitivity,
            l2_sensitivity=self.l2_sensitivity,
            dimension=self.dimension,
            sampler_tv_bound=tv,
            neighbouring=self.neighbouring,
        )

    def worst_case_event(self, participants: int) -> DistributedDiscreteGaussian:
        """What a release can cost at most when it is withheld below the planned survivors:
        the planned survivors' ρ, and the sampler's total variation of all ``participants``
        (everyone draws noise before anyone knows who survives). A budget spends this before
        the noise is drawn.

        Examples
        --------
        >>> mechanism = DistributedDiscreteGaussianMechanism(1.0, 1.0, 1.0, 4, 8)
        >>> event = mechanism.worst_case_event(10)
        >>> event.num_clients, event.sampler_tv_bound == mechanism.event(10).sampler_tv_bound
        (8, True)
        """
        if participants < self.planned_survivors:
            raise ValueError(
                f"{participants} participants cannot reach the {self.planned_survivors} planned "
                "survivors"
            )
        return DistributedDiscreteGaussian(
            num_clients=self.planned_survivors,
            sigma=self.sigma,
            l1_sensitivity=self.l1_sensitivity,
            l2_sensitivity=self.l2_sensitivity,
            dimension=self.dimension,
            sampler_tv_bound=participants * self.dimension * self._noise.tv_bound,
            neighbouring=self.neighbouring,
        )

    @property
    def planned_rho(self) -> float:
        """ρ of the release if exactly the planned survivors contribute.

        Examples
        --------
        >>> round(DistributedDiscreteGaussianMechanism(1.0, 1.0, 1.0, 1, 4).planned_rho, 4)
        0.1253
        """
        return self.event(self.planned_survivors).rho

    def tail_bound(
        self, clients: int, failure_probability: float = TAIL_FAILURE_PROBABILITY
    ) -> int:
        """An integer T with |Σ noise| ≤ T on every coordinate of a sum over ``clients`` except
        with probability ``failure_probability``: T = ⌈t·σ·√n⌉ (:func:`tail_factor`).

        Examples
        --------
        >>> DistributedDiscreteGaussianMechanism(1.0, 1.0, 1.0, 1, 4).tail_bound(4, 1e-9)
        14
        """
        return noise_tail_bound(self.sigma, clients, self.dimension, failure_probability)
