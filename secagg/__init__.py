"""Pairwise-masking secure sum over Z_M (SecAgg and SecAgg+) with dropout recovery."""

from __future__ import annotations

from secagg.randomness import KeystreamRandom, RandomSource

__all__ = ["KeystreamRandom", "RandomSource"]
