"""Exact Bernoulli trials with rational and ``exp(-rational)`` success probabilities, vectorised.

Every function works on a whole array of independent trials at once and uses integer comparisons
against exactly uniform integers only: no floating point touches a decision.
"""

from __future__ import annotations

from typing import Protocol

import numpy as np
from numpy.typing import NDArray

from dpquantile._words import WordStream, uniform_below

__all__ = [
    "LargeRatio",
    "Ratio",
    "SmallRatio",
    "bernoulli_exp",
    "bernoulli_exp_minus_one",
    "bernoulli_exp_unit",
    "chain_parity",
    "geometric_exp_minus_one",
    "resolve_tie",
]

_TWO_64 = 1 << 64
_SMALL_DENOMINATOR = 1 << 63


class Ratio(Protocol):
    """Per-element probabilities ``p_i = numerator_i / denominator`` in ``[0, 1]``."""

    def bernoulli(self, words: WordStream, index: NDArray[np.intp]) -> NDArray[np.bool_]:
        """One independent ``Bernoulli(p_i)`` trial for each ``i`` in ``index``."""
        ...


class SmallRatio:
    """Probabilities ``numerator_i / denominator``, ``denominator <= 2**63``, uint64 numerators."""

    __slots__ = ("_denominator", "_numerator")

    def __init__(self, numerator: NDArray[np.uint64], denominator: int) -> None:
        if not 1 <= denominator <= _SMALL_DENOMINATOR:
            raise ValueError(f"denominator must lie in [1, 2**63]; got {denominator}")
        self._numerator = numerator
        self._denominator = denominator

    def bernoulli(self, words: WordStream, index: NDArray[np.intp]) -> NDArray[np.bool_]:
        # Bernoulli(n/d): a uniform integer in [0, d) is below n with probability exactly n/d.
        drawn = uniform_below(words, self._denominator, index.size)
        return drawn < self._numerator[index]


class LargeRatio:
    """Probabilities ``numerator_i / denominator`` for arbitrarily large Python integers.

    A trial compares a uniform real ``V`` in ``[0, 1)``, read 64 bits at a time, with the base-2**64
    expansion of ``p_i``: the first digit ``floor(p_i * 2**64)`` is precomputed as a uint64, so a
    trial is one word and one comparison; only a tie (probability ``2**-64``) reads more digits.
    """

    __slots__ = ("_denominator", "_first_digit", "_numerator")

    def __init__(self, numerator: NDArray[np.object_], denominator: int) -> None:
        if denominator < 1:
            raise ValueError(f"denominator must be >= 1; got {denominator}")
        self._numerator = numerator
        self._denominator = denominator
        self._first_digit = ((numerator << 64) // denominator).astype(np.uint64)

    def bernoulli(self, words: WordStream, index: NDArray[np.intp]) -> NDArray[np.bool_]:
        drawn = words.take(index.size)
        digit = self._first_digit[index]
        result: NDArray[np.bool_] = drawn < digit
        for position in np.flatnonzero(drawn == digit):
            element = int(index[position])
            numerator = int(self._numerator[element])
            remainder = (numerator << 64) - int(digit[position]) * self._denominator
            result[position] = resolve_tie(words, remainder, self._denominator)
        return result


def resolve_tie(words: WordStream, remainder: int, denominator: int) -> bool:
    """Finish comparing a uniform real with ``remainder / denominator`` after a tied digit.

    ``remainder / denominator`` is the rest of the probability's expansion; each further word of
    ``V`` is compared with the next base-2**64 digit until they differ.
    """
    while True:
        digit = (remainder << 64) // denominator
        drawn = int(words.take(1)[0])
        if drawn != digit:
            return drawn < digit
        remainder = (remainder << 64) - digit * denominator
        if remainder == 0:
            return False  # p's expansion has ended and V's has not: V >= p


def chain_parity(
    words: WordStream,
    ratio: Ratio | None,
    index: NDArray[np.intp],
    out: NDArray[np.bool_],
    *,
    start: int = 1,
) -> None:
    """Run the Bernoulli(γ/k) chain of CKS20 Alg. 1 from ``k = start`` for the elements ``index``.

    ``ratio`` gives γ_i (``None`` means γ = 1). For ``start > 1`` the caller has already seen
    successes for ``k < start``. Writes ``out[i] = (K odd)``, K the first failing k.
    """
    active = index
    k = start
    while active.size:
        # Bernoulli(γ/k) = Bernoulli(1/k) AND Bernoulli(γ), independent (CKS20 §5.1).
        success = (
            np.ones(active.size, dtype=np.bool_)
            if k == 1
            else uniform_below(words, k, active.size) == 0
        )
        if ratio is not None:
            survivors = np.flatnonzero(success)
            success[survivors] = ratio.bernoulli(words, active[survivors])
        out[active[~success]] = k % 2 == 1  # CKS20 Alg. 1: return 1 iff K is odd
        active = active[success]
        k += 1


def bernoulli_exp_unit(words: WordStream, ratio: Ratio, count: int) -> NDArray[np.bool_]:
    """``Bernoulli(exp(-γ_i))`` for γ_i in ``[0, 1]`` given by ``ratio`` (CKS20 Alg. 1)."""
    out = np.empty(count, dtype=np.bool_)
    chain_parity(words, ratio, np.arange(count, dtype=np.intp), out)
    return out


def bernoulli_exp_minus_one(words: WordStream, count: int) -> NDArray[np.bool_]:
    """``count`` independent ``Bernoulli(exp(-1))`` trials (CKS20 Alg. 1 with γ = 1)."""
    out = np.empty(count, dtype=np.bool_)
    # k = 1 always succeeds when γ = 1, so the chain starts at k = 2.
    chain_parity(words, None, np.arange(count, dtype=np.intp), out, start=2)
    return out


def geometric_exp_minus_one(words: WordStream, count: int) -> NDArray[np.int64]:
    """Successes of ``Bernoulli(exp(-1))`` before the first failure (CKS20 Alg. 2)."""
    successes = np.zeros(count, dtype=np.int64)
    active = np.arange(count, dtype=np.intp)
    while active.size:
        passed = bernoulli_exp_minus_one(words, active.size)
        active = active[passed]
        successes[active] += 1
    return successes


def bernoulli_exp(
    words: WordStream, whole: NDArray[np.int64], fraction: Ratio
) -> NDArray[np.bool_]:
    """``Bernoulli(exp(-(whole_i + f_i)))`` with integer ``whole_i >= 0`` and f_i in ``[0, 1)``.

    CKS20 §5.1: ``whole_i`` trials of ``Bernoulli(exp(-1))`` and one of ``Bernoulli(exp(-f_i))``,
    all of which must succeed. A ``whole_i`` clipped by the caller to ``2**62`` is never
    decremented: such an element could differ from the unclipped algorithm only after 2**62
    consecutive successes, i.e. never within any run that terminates.
    """
    result = bernoulli_exp_unit(words, fraction, whole.size)
    alive = np.flatnonzero(result & (whole > 0))
    remaining = whole[alive].copy()
    clipped = remaining >= (1 << 62)
    while alive.size:
        passed = bernoulli_exp_minus_one(words, alive.size)
        result[alive[~passed]] = False
        alive = alive[passed]
        remaining = remaining[passed]
        clipped = clipped[passed]
        remaining[~clipped] -= 1
        keep = remaining > 0
        alive = alive[keep]
        remaining = remaining[keep]
        clipped = clipped[keep]
    return result
