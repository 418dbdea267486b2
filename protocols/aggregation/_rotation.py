"""KLS21's flattening: a randomised Walsh–Hadamard rotation from a public seed (private module).

x ↦ H·diag(ε)·[x ; 0] with H the orthonormal Walsh–Hadamard matrix of each block of B = 2^k
coordinates and ε ∈ {±1}^D random signs (KLS21 §4, "flattening"). It preserves the L2 norm (so the
sensitivities are those of the unrotated vector, in dimension D), and spreads a vector's mass over
its block: each coordinate of a rotated sum S is a Rademacher sum with ‖·‖₂ ≤ ‖S‖/√B, so it is
within t·‖S‖/√B of 0 except with probability 2e^(−t²/2) (Hoeffding) —
``secure_average_notes.md`` §6. One block when padding to a power of two costs ≤ 1/16 more
coordinates, else blocks that keep the padding within 1/16.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from secagg import KeystreamRandom

# Padding may add at most this fraction of coordinates; beyond it the row is rotated in blocks.
_MAX_PADDING = 1.0 / 16
# Blocks are never smaller than this (the flattening bound weakens as t/√B).
_MIN_BLOCK = 64


def rotation_block(dimension: int) -> int:
    """The block size B (a power of two) the rotation uses for a row of ``dimension``.

    The whole row padded to one power of two when that adds ≤ 1/16 of padding; otherwise the
    largest B whose padding to a multiple of B stays within 1/16 (each block is rotated on its
    own, so the wire carries ⌈d/B⌉·B coordinates, not up to 2d).

    Examples
    --------
    >>> rotation_block(1024), rotation_block(1000), rotation_block(10_001), rotation_block(3)
    (1024, 1024, 2048, 4)
    """
    whole = 1 << max(0, (dimension - 1).bit_length())
    if whole - dimension <= _MAX_PADDING * dimension or whole <= _MIN_BLOCK:
        return whole
    block = whole // 2
    while block > _MIN_BLOCK and -(-dimension // block) * block - dimension > (
        _MAX_PADDING * dimension
    ):
        block //= 2
    return block


def padded_dimension(dimension: int) -> int:
    """The rotated row's length: ``dimension`` rounded up to a multiple of its block.

    Examples
    --------
    >>> padded_dimension(611), padded_dimension(1024), padded_dimension(10_001)
    (640, 1024, 10240)
    """
    block = rotation_block(dimension)
    return -(-dimension // block) * block


def walsh_hadamard(values: NDArray[np.float64], block: int | None = None) -> NDArray[np.float64]:
    """The orthonormal Walsh–Hadamard transform of each consecutive ``block`` of ``values``
    (default: the whole vector, a power-of-two length). H = H⁻¹.

    Examples
    --------
    >>> walsh_hadamard(np.array([1.0, 0.0, 0.0, 0.0])).tolist()
    [0.5, 0.5, 0.5, 0.5]
    >>> bool(np.allclose(walsh_hadamard(walsh_hadamard(np.arange(8.0))), np.arange(8.0)))
    True
    >>> walsh_hadamard(np.array([1.0, 1.0, 2.0, 0.0]), block=2).round(4).tolist()
    [1.4142, 0.0, 1.4142, 1.4142]
    """
    out = np.array(values, dtype=np.float64, copy=True)
    size = out.size
    block = size if block is None else block
    if block < 1 or block & (block - 1) or size % block:
        raise ValueError(
            f"the Walsh–Hadamard transform needs power-of-two blocks that tile the vector; "
            f"got length {size}, block {block}"
        )
    half = 1
    while half < block:  # butterflies never cross a block boundary: blocks are 2^k-aligned
        pairs = out.reshape(-1, 2, half)
        top = pairs[:, 0, :].copy()
        pairs[:, 0, :] += pairs[:, 1, :]
        pairs[:, 1, :] = top - pairs[:, 1, :]
        half *= 2
    out /= np.sqrt(block)
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
    block: int = 0  # 0: one block of the whole padded length

    @classmethod
    def from_seed(cls, dimension: int, random: KeystreamRandom) -> Rotation:
        """Signs from the server's public seed (its keystream ``random``)."""
        padded = padded_dimension(dimension)
        bits = random.uint64(padded) & np.uint64(1)
        signs = 1.0 - 2.0 * bits.astype(np.float64)
        return cls(dimension, padded, signs, rotation_block(dimension))

    def forward(self, row: NDArray[np.float64]) -> NDArray[np.float64]:
        """H·diag(ε)·[row ; 0] blockwise, length :attr:`padded`."""
        padded = np.zeros(self.padded, dtype=np.float64)
        padded[: self.dimension] = row
        padded *= self.signs
        return walsh_hadamard(padded, self.block or None)

    def inverse(self, total: NDArray[np.float64]) -> NDArray[np.float64]:
        """diag(ε)·H·total blockwise, cut back to :attr:`dimension` (the padding carries only
        rounding and noise)."""
        return (walsh_hadamard(total, self.block or None) * self.signs)[: self.dimension]
