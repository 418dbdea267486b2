"""The one way trainers derive randomness from a run's seed: ``SeedSequence(seed, spawn_key=key)``.

A key is a tuple of small integers naming the purpose and the party, e.g. ``(purpose, round,
client)``: two keys that differ give independent streams, and the same key gives the same stream
on every run and every platform numpy supports.
"""

from __future__ import annotations

import numpy as np

__all__ = ["derived_seed", "stream"]


def stream(seed: int, *key: int) -> np.random.Generator:
    """The generator of ``key`` under ``seed``.

    Examples
    --------
    >>> float(stream(7, 1, 2).random()) == float(stream(7, 1, 2).random())
    True
    >>> float(stream(7, 1, 2).random()) == float(stream(7, 2, 1).random())
    False
    """
    return np.random.default_rng(np.random.SeedSequence(seed, spawn_key=key))


def derived_seed(seed: int, *key: int) -> int:
    """A 256-bit integer seed for ``key`` under ``seed`` (for APIs that take an int seed).

    Examples
    --------
    >>> derived_seed(7, 3) == derived_seed(7, 3), derived_seed(7, 3).bit_length() <= 256
    (True, True)
    """
    words = np.random.SeedSequence(seed, spawn_key=key).generate_state(4, dtype=np.uint64)
    return sum(int(word) << (64 * i) for i, word in enumerate(words))
