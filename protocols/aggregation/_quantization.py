"""The quantisation plan of a secure average: grid scale, noise σ and sensitivities (private).

Derivations: ``secure_average_notes.md`` §1 (scale and headroom) and §2 (sensitivity).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from dataclasses import dataclass

from dpquantile import (
    MAX_FAST_SIGMA,
    DistributedDiscreteGaussianMechanism,
    FastDiscreteGaussian,
    Neighbouring,
    kls21_sensitivities,
    noise_tail_bound,
    sigma_for_rho,
    tail_factor,
)
from protocols.aggregation._rotation import padded_dimension, rotation_block
from secagg import HeadroomError, Quantizer, required_bits

# Float64 resolves the stochastic-rounding grid only while |x·scale| <= 2^52 (secagg.Quantizer).
_MAX_SCALED = float(2**52)


@dataclass(frozen=True, slots=True)
class QuantizationPlan:
    """The grid and noise of one secure average.

    Attributes
    ----------
    quantizer
        Per-coordinate clip and scale s shared by every client (the clip is B·c, or the row's
        L2 bound after a rotation, where it never binds).
    mechanism
        The clients' distributed discrete Gaussian (grid units; its sensitivities are for the
        noise's neighbouring relation), or ``None`` without noise.
    noise_bound
        |noise in the sum of all n clients| ≤ noise_bound except with probability 2^-40
        (``mechanism.tail_bound(n)``; 0 without noise).
    wire_dimension
        Coordinates on the wire: the row's d + 1 + k, or when rotated that padded to a multiple
        of its rotation block (``_rotation.padded_dimension``).
    rotate
        Whether each row is flattened by the randomised Walsh–Hadamard rotation (KLS21 §4).
    rounding_bound
        With conditional rounding: the L2 norm every client's rounded row is re-drawn until it
        meets (the add/remove Δ₂ the noise is calibrated for); ``None``: plain rounding.
    """

    quantizer: Quantizer
    mechanism: DistributedDiscreteGaussianMechanism | None
    noise_bound: int
    wire_dimension: int
    rotate: bool = False
    rounding_bound: float | None = None

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


def _largest_within(bound: Callable[[float], int], budget: int, scale: float) -> float:
    """The largest scale ≤ ``scale`` (to float resolution) with bound(s) ≤ budget, for a bound
    non-decreasing in s that falls to ≤ budget on a coarse enough grid.

    Examples
    --------
    >>> _largest_within(lambda s: math.ceil(3 * s), 6, 100.0)
    2.0
    """
    low = scale
    while bound(low) > budget:
        low /= 2.0
        if low < 1e-300:
            raise ValueError(f"no scale keeps the bound within {budget}")
    high = scale
    while True:
        middle = (low + high) / 2.0
        if middle in (low, high):
            return low
        low, high = (middle, high) if bound(middle) <= budget else (low, middle)


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
    rotate: bool = False,
    rounding_beta: float | None = None,
) -> QuantizationPlan:
    """The finest scale whose sum cannot wrap (secure_average_notes.md §1, §6).

    Unrotated: n·max|q| + noise tail < 2^(b−1). Rotated (KLS21's flattening, blocks of B): each
    coordinate of the rotated sum is within s·n·‖x‖·t/√B + n (rounding) of 0 except with
    probability 2^-40 over the public rotation, plus the noise tail.

    Examples
    --------
    >>> plan = plan_quantization(10, 3, 1.0, 1.0, 32, None, None, 10)
    >>> plan.quantizer.max_abs * 10 <= 2**31 - 1, plan.sampler is None
    (True, True)
    >>> flat = plan_quantization(10, 1000, 1.0, 1.0, 20, None, None, 10, "add_remove", True)
    >>> flat.wire_dimension, flat.quantizer.scale > 3 * plan_quantization(
    ...     10, 1000, 1.0, 1.0, 20, None, None, 10).quantizer.scale
    (1024, True)
    """
    budget = (1 << (bits - 1)) - 1
    n = num_clients
    wire = padded_dimension(dimension) if rotate else dimension
    # Rotated rows: |coordinate| ≤ ‖x‖₂, a clip that never binds; unrotated: B·c.
    clip = l2_norm if rotate else magnitude
    spread = tail_factor(wire) / math.sqrt(rotation_block(dimension)) if rotate else 1.0

    def signal_bound(scale: float) -> int:
        """|Σᵢ qᵢⱼ| for every coordinate j (except w.p. 2^-40 over the rotation)."""
        worst = n * _quantizer(clip, scale).max_abs
        if not rotate:
            return worst
        return min(worst, math.ceil(n * l2_norm * scale * spread) + n)

    # The largest admissible scale without noise (bisected below when noise is added).
    candidates = []
    if budget // n >= 1:  # the worst case: n·⌈clip·s⌉ ≤ budget
        candidates.append(_scale_for(clip, min(budget // n, int(_MAX_SCALED))))
    if rotate and budget > n:  # the flattened bound: ⌈n·‖x‖·s·t/√B⌉ + n ≤ budget
        candidates.append(min((budget - n) / (n * l2_norm * spread), _MAX_SCALED / clip))
    if not candidates:
        minimum_bits = required_bits(n, 1)
        raise HeadroomError(
            f"{bits} bits leave no room for {n} clients; use at least {minimum_bits} bits",
            required_bits=minimum_bits,
        )
    s_max = max(candidates)
    for _ in range(64):  # float rounding at the boundary: a few ulps down
        if signal_bound(s_max) <= budget:
            break
        s_max = math.nextafter(s_max, 0.0) * (1.0 - 1e-12)
    else:  # never for the candidates above, which sit at the boundary: bisect, do not crawl
        s_max = _largest_within(signal_bound, budget, s_max)
    if noise_rho is None and noise_sigma is None:
        return QuantizationPlan(_quantizer(clip, s_max), None, 0, wire, rotate)

    # Replace-one moves one client's vector by up to twice its norm (triangle inequality).
    factor = 2.0 if neighbouring == "replace_one" else 1.0

    def sigma_at(scale: float) -> tuple[float, float, float, float]:
        l1, l2 = kls21_sensitivities(l2_norm, 1.0 / scale, wire, beta=rounding_beta)
        if noise_sigma is not None:
            return noise_sigma * scale, factor * l1, factor * l2, l2
        assert noise_rho is not None
        sigma = sigma_for_rho(
            noise_rho,
            clients=planned_survivors,
            l1_sensitivity=factor * l1,
            l2_sensitivity=factor * l2,
            dimension=wire,
        )
        return sigma, factor * l1, factor * l2, l2

    def need(scale: float) -> bool:
        sigma = sigma_at(scale)[0]
        noise_bound = noise_tail_bound(sigma, n, wire)
        return signal_bound(scale) + noise_bound <= budget and sigma <= MAX_FAST_SIGMA

    s_min = min(1.0 / magnitude, s_max)  # one grid step per clip: the coarsest grid worth having
    if not need(s_min):
        sigma = sigma_at(s_min)[0]
        noise_bound = noise_tail_bound(sigma, n, wire)
        bits_needed = required_bits(n, max(1, signal_bound(s_min) // n), noise_bound)
        raise HeadroomError(
            f"{bits} bits cannot hold {n} clients plus discrete Gaussian noise "
            f"(noise bound {noise_bound} grid units even on the coarsest grid); use at least "
            f"{max(bits_needed, bits + 1)} bits",
            required_bits=max(bits_needed, bits + 1),
        )
    scale = s_max
    if not need(s_max):
        low, high = math.log(s_min), math.log(s_max)
        for _ in range(60):  # geometric bisection: the feasible set is an interval [s_min, s*]
            middle = 0.5 * (low + high)
            if need(math.exp(middle)):
                low = middle
            else:
                high = middle
        scale = math.exp(low)
    sigma, l1, l2, rounding_l2 = sigma_at(scale)
    if sigma < 0.5:
        raise ValueError(
            f"noise σ = {noise_sigma} is below half a quantisation step (1/{scale:.4g}) even on "
            "the finest grid; KLS21's bound needs σ ≥ 1/2 grid unit: raise sigma or bits"
        )
    mechanism = DistributedDiscreteGaussianMechanism(
        sigma, l1, l2, wire, planned_survivors, neighbouring, "fast"
    )
    return QuantizationPlan(
        _quantizer(clip, scale),
        mechanism,
        mechanism.tail_bound(n),
        wire,
        rotate,
        rounding_l2 if rounding_beta is not None else None,
    )
