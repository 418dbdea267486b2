"""KLS21's flattening: a randomised Walsh–Hadamard rotation from a public seed (private module).

x ↦ H·diag(ε)·[x ; 0] with H the orthonormal 2^k × 2^k Walsh–Hadamard matrix and ε ∈ {±1}^D
random signs (KLS21 §4, "flattening"). It preserves the L2 norm (so the sensitivities are those of
the unrotated vector, in dimension D), and spreads a vector's mass over all D coordinates: each
coordinate of a rotated sum S is a Rademacher sum with ‖·‖₂ = ‖S‖/√D, so it is within
t·‖S‖/√D of 0 except with probability 2e^(−t²/2) (Hoeffding) — ``secure_average_notes.md`` §3.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from secagg import KeystreamRandom


def padded_dimension(dimension: int) -> int:
    """The smallest power of two ≥ ``dimension``.

    Examples
    --------
    >>> padded_dimension(611), padded_dimension(1024), padded_dimension(1)
    (1024, 1024, 1)
    """
    return 1 << max(0, (dimension - 1).bit_length())


def walsh_hadamard(values: NDArray[np.float64]) -> NDArray[np.float64]:
    """The orthonormal Walsh–Hadamard transform H·x of a length-2^k vector (H = H⁻¹).

    Examples
    --------
    >>> walsh_hadamard(np.array([1.0, 0.0, 0.0, 0.0])).tolist()
    [0.5, 0.5, 0.5, 0.5]
    >>> bool(np.allclose(walsh_hadamard(walsh_hadamard(np.arange(8.0))), np.arange(8.0)))
    True
    """
    out = np.array(values, dtype=np.float64, copy=True)
    size = out.size
    if size & (size - 1):
        raise ValueError(f"the Walsh–Hadamard transform needs a power-of-two length; got {size}")
    half = 1
    while half < size:
        blocks = out.reshape(-1, 2, half)
        top = blocks[:, 0, :].copy()
        blocks[:, 0, :] += blocks[:, 1, :]
        blocks[:, 1, :] = top - blocks[:, 1, :]
        half *= 2
    out /= np.sqrt(size)
    return out


@dataclass(frozen=True, slots=True)
class Rotation:
    """The rotation of one secure average: its original and padded dimensions and signs.

    Examples
    --------
    >>> rotation = Rotation.from_seed(3, KeystreamRandom(1, label=b"doc"))
    >>> rotation.padded
    4
    >>> x = np.array([3.0, -1.0, 2.0])
    >>> bool(np.allclose(rotation.inverse(rotation.forward(x)), x))
    True
    >>> round(float(np.linalg.norm(rotation.forward(x))), 12) == round(float(np.linalg.norm(x)), 12)
    True
    """

    dimension: int
    padded: int
    signs: NDArray[np.float64]

    @classmethod
    def from_seed(cls, dimension: int, random: KeystreamRandom) -> Rotation:
        """Signs from the server's public seed (its keystream ``random``)."""
        padded = padded_dimension(dimension)
        bits = random.uint64(padded) & np.uint64(1)
        return cls(dimension, padded, 1.0 - 2.0 * bits.astype(np.float64))

    def forward(self, row: NDArray[np.float64]) -> NDArray[np.float64]:
        """H·diag(ε)·[row ; 0], length :attr:`padded`."""
        padded = np.zeros(self.padded, dtype=np.float64)
        padded[: self.dimension] = row
        padded *= self.signs
        return walsh_hadamard(padded)

    def inverse(self, total: NDArray[np.float64]) -> NDArray[np.float64]:
        """diag(ε)·H·total, cut back to :attr:`dimension` (the padding carries only noise)."""
        return (walsh_hadamard(total) * self.signs)[: self.dimension]
