"""One layout of a client's contribution to a secure weighted average, and its bounds.

Client i sends the row [βᵢwᵢ ; λcβᵢ ; λcB·eᵢ/E] (d + 1 + k coordinates) with ‖wᵢ‖₂ ≤ c (the L2
clip), 0 ≤ βᵢ ≤ B (the public weight cap) and |eᵢⱼ| ≤ Eⱼ (the extras' public bounds), λ =
:data:`WEIGHT_COORDINATE_SCALE`. Every entry lies in [−B·c, B·c] and the row's L2 norm is at most
B·c·√(1 + λ²(w + k)), w = 1 when the weight coordinate is carried and 0 under a fixed (public)
denominator, where it holds 0 (``secure_average_notes.md`` §2, §7). Every aggregation that
releases a weighted average — the secure average, the iterative aggregates, the Flower strategy
— builds and reads its rows here, so they share one sensitivity.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike, NDArray

from dpquantile import Neighbouring
from protocols.aggregation._quantization import QuantizationPlan, plan_quantization
from secagg.validation import check_int, check_positive

__all__ = ["WEIGHT_COORDINATE_SCALE", "ContributionLayout", "DecodedSum"]

#: λ: the weight coordinate carries λ·c·βᵢ and extra j carries λ·c·B·eᵢⱼ/Eⱼ, so every auxiliary
#: coordinate spans at most a quarter of the vector block's range (costs 1 + λ² in Δ₂², see notes).
WEIGHT_COORDINATE_SCALE = 0.25


@dataclass(frozen=True, slots=True)
class DecodedSum:
    """The three blocks of a summed row, in the clients' units.

    Attributes
    ----------
    weighted_sum
        Σᵢ βᵢwᵢ (d coordinates).
    weight_sum
        Σᵢ βᵢ as carried by the weight coordinate (0 when the layout carries none).
    extras
        Σᵢ eᵢ (k coordinates).
    """

    weighted_sum: NDArray[np.float64]
    weight_sum: float
    extras: NDArray[np.float64]


@dataclass(frozen=True, slots=True)
class ContributionLayout:
    """The row [βw ; λcβ ; λcB·e/E] of one client, its bounds, and the decoding of a sum of rows.

    Parameters
    ----------
    dimension
        d, the length of the vector block.
    clip
        c, the public L2 bound on a client's vector w (> 0).
    weight_cap
        B, the public cap on a client's weight β (> 0).
    extra_bounds
        Eⱼ > 0, the public bounds of the k extra scalars (summed, not averaged).
    weight_coordinate
        Whether the row carries λcβ (``False`` under a public denominator: the coordinate holds
        0 and adds nothing to the sensitivity).
    unit
        The rows are divided by this (1: the clients' units; ``B·c``: every entry in [−1, 1],
        the Flower strategy's rows). :meth:`decode` multiplies it back.

    Examples
    --------
    >>> layout = ContributionLayout(2, clip=1.0, weight_cap=2.0)
    >>> row = layout.encode([0.6, 0.8], 2.0)
    >>> row.tolist(), layout.magnitude, round(layout.l2_bound, 4)
    ([1.2, 1.6, 0.5], 2.0, 2.0616)
    >>> decoded = layout.decode(row + layout.encode([1.0, 0.0], 1.0))
    >>> decoded.weighted_sum.tolist(), decoded.weight_sum
    ([2.2, 1.6], 3.0)
    """

    dimension: int
    clip: float
    weight_cap: float
    extra_bounds: tuple[float, ...] = ()
    weight_coordinate: bool = True
    unit: float = 1.0

    def __post_init__(self) -> None:
        check_int("dimension", self.dimension, minimum=0)
        check_positive("clip", self.clip)
        check_positive("weight_cap", self.weight_cap)
        check_positive("unit", self.unit)
        bounds = tuple(check_positive("extra bound", b) for b in self.extra_bounds)
        object.__setattr__(self, "extra_bounds", bounds)

    @property
    def width(self) -> int:
        """Coordinates of a row: d + 1 + k."""
        return self.dimension + 1 + len(self.extra_bounds)

    @property
    def weight_scale(self) -> float:
        """λc when the weight coordinate is carried, else 0 (clients' units)."""
        return WEIGHT_COORDINATE_SCALE * self.clip if self.weight_coordinate else 0.0

    @property
    def magnitude(self) -> float:
        """The largest |entry| of a row: B·c ÷ unit."""
        return self.weight_cap * self.clip / self.unit

    @property
    def l2_bound(self) -> float:
        """The largest L2 norm of a row: B·c·√(1 + λ²(w + k)) ÷ unit (notes §2)."""
        auxiliary = int(self.weight_coordinate) + len(self.extra_bounds)
        return self.magnitude * math.sqrt(1.0 + WEIGHT_COORDINATE_SCALE**2 * auxiliary)

    def encode(
        self,
        vector: ArrayLike,
        weight: float,
        extras: ArrayLike | None = None,
        *,
        factor: float = 1.0,
    ) -> NDArray[np.float64]:
        """One client's row from its vector w, weight β ≤ B and extras |eⱼ| ≤ Eⱼ.

        ``factor`` multiplies the vector block only (the client's L2 clipping factor, so that
        ‖factor·w‖₂ ≤ c). The caller clips; the bounds above hold only for inputs within them.

        Examples
        --------
        >>> ContributionLayout(1, 1.0, 1.0, (2.0,)).encode([1.0], 1.0, [1.0]).tolist()
        [1.0, 0.25, 0.125]
        """
        row = np.empty(self.width, dtype=np.float64)
        np.multiply(vector, weight * factor, out=row[: self.dimension])  # one pass over w
        return self._finish(row, weight, extras)

    def encode_sums(
        self, weighted_sum: ArrayLike, weight_sum: float, extras_sum: ArrayLike | None = None
    ) -> NDArray[np.float64]:
        """The sum of rows from the blocks' sums Σβw, Σβ, Σe (the layout is linear in them).

        Examples
        --------
        >>> layout = ContributionLayout(1, 1.0, 1.0)
        >>> (layout.encode([1.0], 1.0) + layout.encode([2.0], 1.0)).tolist()
        [3.0, 0.5]
        >>> layout.encode_sums([3.0], 2.0).tolist()
        [3.0, 0.5]
        """
        row = np.empty(self.width, dtype=np.float64)
        row[: self.dimension] = weighted_sum
        return self._finish(row, weight_sum, extras_sum)

    def _finish(
        self, row: NDArray[np.float64], weight: float, extras: ArrayLike | None
    ) -> NDArray[np.float64]:
        """Fill the weight and extras coordinates of ``row`` (its block set) and apply the unit."""
        d = self.dimension
        row[d] = self.weight_scale * weight
        if self.extra_bounds:
            row[d + 1 :] = self._extra_scale * np.asarray(extras, dtype=np.float64)
        if self.unit != 1.0:
            row /= self.unit
        return row

    def decode(self, total: ArrayLike) -> DecodedSum:
        """The blocks of a sum of rows (noise and rounding included, as released).

        Examples
        --------
        >>> ContributionLayout(1, 2.0, 1.0).decode([3.0, 1.0]).weight_sum
        2.0
        """
        values = np.asarray(total, dtype=np.float64) * self.unit
        if values.shape != (self.width,):
            raise ValueError(f"a summed row has {self.width} coordinates; got {values.shape}")
        d = self.dimension
        weight_sum = float(values[d]) / self.weight_scale if self.weight_coordinate else 0.0
        extras = values[d + 1 :] / self._extra_scale if self.extra_bounds else np.zeros(0)
        return DecodedSum(values[:d].copy(), weight_sum, extras)

    def plan(
        self,
        num_clients: int,
        bits: int,
        *,
        noise_rho: float | None = None,
        noise_sigma: float | None = None,
        planned_survivors: int | None = None,
        neighbouring: Neighbouring = "add_remove",
        rotate: bool = False,
        rounding_beta: float | None = None,
    ) -> QuantizationPlan:
        """The grid and noise of a secure sum of ``num_clients`` such rows in a 2^bits ring.

        The finest grid scale at which the sum of the rows (at :attr:`magnitude` per entry,
        :attr:`l2_bound` in L2) and the clients' noise cannot wrap (``secure_average_notes.md``
        §1); with ``noise_rho`` (or ``noise_sigma``) the clients' distributed discrete Gaussian,
        calibrated for ``planned_survivors`` (default: all) to contribute.

        Examples
        --------
        >>> layout = ContributionLayout(3, clip=1.0, weight_cap=1.0)
        >>> plan = layout.plan(10, 32, noise_rho=1.0)
        >>> plan.wire_dimension, plan.mechanism is not None
        (4, True)
        >>> plan.quantizer.max_abs * 10 + plan.noise_bound < 2**31
        True
        """
        return plan_quantization(
            num_clients,
            self.width,
            self.magnitude,
            self.l2_bound,
            bits,
            noise_rho,
            noise_sigma,
            num_clients if planned_survivors is None else planned_survivors,
            neighbouring,
            rotate,
            rounding_beta,
        )

    def weight_grid_unit(self, scale: float) -> float:
        """One grid unit of the weight coordinate in weight units, at grid scale ``scale``
        (rows quantised as round(row·scale)): 1/(scale·λc) × unit.

        Examples
        --------
        >>> ContributionLayout(1, 4.0, 1.0).weight_grid_unit(1.0)
        1.0
        """
        return self.unit / (scale * WEIGHT_COORDINATE_SCALE * self.clip)

    @property
    def _extra_scale(self) -> NDArray[np.float64]:
        bounds = np.asarray(self.extra_bounds, dtype=np.float64)
        return WEIGHT_COORDINATE_SCALE * self.clip * self.weight_cap / bounds
