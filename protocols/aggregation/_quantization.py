"""The quantisation plan of a secure average: grid scale, noise σ and sensitivities (private).

Derivations: ``secure_average_notes.md`` §1 (scale and headroom) and §2 (sensitivity).
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

from dpquantile import (
    MAX_FAST_SIGMA,
    DistributedDiscreteGaussianMechanism,
    FastDiscreteGaussian,
    Neighbouring,
    kls21_sensitivities,
    noise_tail_bound,
    sigma_for_rho,
)
from secagg import HeadroomError, Quantizer, required_bits

# Float64 resolves the stochastic-rounding grid only while |x·scale| <= 2^52 (secagg.Quantizer).
_MAX_SCALED = float(2**52)


@dataclass(frozen=True, slots=True)
class QuantizationPlan:
    """The grid and noise of one secure average.

    Attributes
    ----------
    quantizer
        Clip ±B·c and scale s shared by every client.
    mechanism
        The clients' distributed discrete Gaussian (grid units; its sensitivities are for the
        noise's neighbouring relation), or ``None`` without noise.
    noise_bound
        |noise in the sum of all n clients| ≤ noise_bound except with probability 2^-40
        (``mechanism.tail_bound(n)``; 0 without noise).
    """

    quantizer: Quantizer
    mechanism: DistributedDiscreteGaussianMechanism | None
    noise_bound: int

    @property
    def sampler(self) -> FastDiscreteGaussian | None:
        """Each client's N_ℤ(0, σ²) sampler, or ``None`` without noise."""
        if self.mechanism is None:
            return None
        sampler = self.mechanism.noise_sampler
        assert isinstance(sampler, FastDiscreteGaussian)
        return sampler


def _quantizer(magnitude: float, scale: float) -> Quantizer:
    """Quantizer(clip=magnitude, scale), nudging the scale down past float rounding at 2^52."""
    while magnitude * scale > _MAX_SCALED:
        scale = math.nextafter(scale, 0.0)
    return Quantizer(clip=magnitude, scale=scale)


def _scale_for(magnitude: float, max_abs: int) -> float:
    """The largest float scale with ⌈magnitude·scale⌉ ≤ max_abs (a few ulps below the ratio)."""
    scale = max_abs / magnitude
    while math.ceil(magnitude * scale) > max_abs:
        scale = math.nextafter(scale, 0.0)
    return scale


@functools.lru_cache(maxsize=256)
def plan_quantization(  # noqa: PLR0917 (positional: the lru_cache key)
    num_clients: int,
    dimension: int,
    magnitude: float,
    l2_norm: float,
    bits: int,
    noise_rho: float | None,
    noise_sigma: float | None,
    planned_survivors: int,
    neighbouring: Neighbouring = "add_remove",
) -> QuantizationPlan:
    """The finest scale with n·max|q| + noise tail < 2^(b−1) (secure_average_notes.md §1).

    Examples
    --------
    >>> plan = plan_quantization(10, 3, 1.0, 1.0, 32, None, None, 10)
    >>> plan.quantizer.max_abs * 10 <= 2**31 - 1, plan.sampler is None
    (True, True)
    """
    budget = (1 << (bits - 1)) - 1
    largest = min(budget // num_clients, int(_MAX_SCALED))  # the largest admissible max|q|
    if largest < 1:
        minimum_bits = required_bits(num_clients, 1)
        raise HeadroomError(
            f"{bits} bits leave no room for {num_clients} clients; use at least "
            f"{minimum_bits} bits",
            required_bits=minimum_bits,
        )
    s_max = _scale_for(magnitude, largest)
    if noise_rho is None and noise_sigma is None:
        return QuantizationPlan(_quantizer(magnitude, s_max), None, 0)


    # Replace-one moves one client's vector by up to twice its norm (triangle inequality).
    factor = 2.0 if neighbouring == "replace_one" else 1.0

    def sigma_at(scale: float) -> tuple[float, float, float]:
        l1, l2 = kls21_sensitivities(l2_norm, 1.0 / scale, dimension, beta=None)
        l1, l2 = factor * l1, factor * l2
        if noise_sigma is not None:
            return noise_sigma * scale, l1, l2
        assert noise_rho is not None
        sigma = sigma_for_rho(
            noise_rho,
            clients=planned_survivors,
            l1_sensitivity=l1,
            l2_sensitivity=l2,
            dimension=dimension,
        )
        return sigma, l1, l2

    def need(scale: float) -> tuple[bool, int, int, float]:
        sigma = sigma_at(scale)[0]
        noise_bound = noise_tail_bound(sigma, num_clients, dimension)
        max_abs = _quantizer(magnitude, scale).max_abs
        fits = num_clients * max_abs + noise_bound <= budget and sigma <= MAX_FAST_SIGMA
        return fits, max_abs, noise_bound, sigma

    s_min = 1.0 / magnitude  # one grid step per clip: the coarsest grid worth having
    fits, max_abs, noise_bound, _ = need(s_min)
    if not fits:
        bits_needed = required_bits(num_clients, max_abs, noise_bound)
        raise HeadroomError(
            f"{bits} bits cannot hold {num_clients} clients plus discrete Gaussian noise "
            f"(noise bound {noise_bound} grid units even on the coarsest grid); use at least "
            f"{max(bits_needed, bits + 1)} bits",
            required_bits=max(bits_needed, bits + 1),
        )
    scale = s_max
    if not need(s_max)[0]:
        low, high = math.log(s_min), math.log(s_max)
        for _ in range(60):  # geometric bisection: the feasible set is an interval [s_min, s*]
            middle = 0.5 * (low + high)
            if need(math.exp(middle))[0]:
                low = middle
            else:
                high = middle
        scale = math.exp(low)
    sigma, l1, l2 = sigma_at(scale)
    if sigma < 0.5:
        raise ValueError(
            f"noise σ = {noise_sigma} is below half a quantisation step (1/{scale:.4g}) even on "
            "the finest grid; KLS21's bound needs σ ≥ 1/2 grid unit: raise sigma or bits"
        )
    mechanism = DistributedDiscreteGaussianMechanism(
        sigma, l1, l2, dimension, planned_survivors, neighbouring, "fast"
    )
    return QuantizationPlan(
        _quantizer(magnitude, scale), mechanism, mechanism.tail_bound(num_clients)
    )
