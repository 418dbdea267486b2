"""Batched 64-bit words from a cryptographic byte stream, and exact uniform integers.

The samplers never ask the stream for one value at a time: they take whole arrays of words, and
the stream refills its buffer in chunks that grow with demand. Everything here is integer-only.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

from secagg.randomness import RandomSource

__all__ = ["WordStream", "uniform_below"]

_TWO_64 = 1 << 64
_MAX_BUFFER_WORDS = 1 << 15


class WordStream:
    """Uniform 64-bit words read from a :class:`~secagg.randomness.RandomSource` in batches.

    Words are the little-endian reading of consecutive 8-byte blocks of the stream, so the words a
    seeded stream yields are the same on every platform.

    Parameters
    ----------
    source
        The cryptographic byte stream.
    expected_words
        A hint for the first refill, so that small requests do not expand a large buffer.
    """

    __slots__ = ("_buffer", "_next_refill", "_position", "_source")

    def __init__(self, source: RandomSource, *, expected_words: int = 256) -> None:
        self._source = source
        self._buffer: NDArray[np.uint64] = np.empty(0, dtype=np.uint64)
        self._position = 0
        self._next_refill = max(1, min(_MAX_BUFFER_WORDS, expected_words))

    def _read(self, count: int) -> NDArray[np.uint64]:
        raw = np.empty(count, dtype="<u8")
        self._source.fill(raw)
        return raw.astype(np.uint64, copy=False)

    def take(self, count: int) -> NDArray[np.uint64]:
        """Return the next ``count`` words of the stream as a new array."""
        available = self._buffer.size - self._position
        if count <= available:
            out = self._buffer[self._position : self._position + count].copy()
            self._position += count
            return out
        head = self._buffer[self._position :]
        self._buffer = np.empty(0, dtype=np.uint64)
        self._position = 0
        missing = count - head.size
        if missing >= self._next_refill:
            tail = self._read(missing)
        else:
            self._buffer = self._read(self._next_refill)
            self._next_refill = min(_MAX_BUFFER_WORDS, 2 * self._next_refill)
            tail = self._buffer[:missing].copy()
            self._position = missing
        return np.concatenate((head, tail)) if head.size else tail


def uniform_below(words: WordStream, bound: int, count: int) -> NDArray[np.uint64]:
    """Return ``count`` independent, exactly uniform integers in ``[0, bound)``, bound <= 2**64.

    A power-of-two bound masks the word; any other bound takes the word modulo ``bound`` after
    rejecting the top ``2**64 mod bound`` words, so every residue has the same number of preimages.
    """
    if not 1 <= bound <= _TWO_64:
        raise ValueError(f"bound must lie in [1, 2**64]; got {bound}")
    if bound & (bound - 1) == 0:
        drawn = words.take(count)
        if bound < _TWO_64:
            np.bitwise_and(drawn, np.uint64(bound - 1), out=drawn)
        return drawn
    limit = np.uint64(_TWO_64 - _TWO_64 % bound)
    divisor = np.uint64(bound)
    out = words.take(count)
    redo = np.flatnonzero(out >= limit)
    while redo.size:
        fresh = words.take(redo.size)
        out[redo] = fresh
        redo = redo[fresh >= limit]
    np.remainder(out, divisor, out=out)
    return out
