"""The samplers' own argument helpers; the general checks are :mod:`secagg.validation`'s."""

from __future__ import annotations

import math
import numbers
import operator
from fractions import Fraction

import numpy as np

from secagg.randomness import KeystreamRandom, RandomSource
from secagg.validation import check_int as check_count
from secagg.validation import check_nonnegative, check_positive, check_probability

__all__ = [
    "check_count",
    "check_nonnegative",
    "check_positive",
    "check_probability",
    "exact_positive_rational",
    "float_at_most",
    "resolve_rng",
    "resolve_size",
]


def exact_positive_rational(name: str, value: object, *, maximum: float) -> Fraction:
    """Convert ``value`` (int, float or Fraction) exactly to a positive :class:`Fraction`."""
    if isinstance(value, Fraction):
        if value <= 0 or value > maximum:
            raise ValueError(
                f"{name} must be a finite number > 0 and at most {maximum:g}; got {value}"
            )
        return value
    check_positive(name, value, maximum=maximum)
    if isinstance(value, numbers.Integral):
        return Fraction(operator.index(value))
    return Fraction(float(value))  # type: ignore[arg-type]


def resolve_size(size: object) -> tuple[int, ...]:
    """Normalise a numpy-style ``size`` (int or tuple of ints, each >= 0) to a shape tuple."""
    if isinstance(size, tuple):
        return tuple(check_count("size", dim) for dim in size)
    return (check_count("size", size),)


def resolve_rng(rng: RandomSource | None) -> RandomSource:
    """Return ``rng``, or a fresh operating-system-seeded :class:`KeystreamRandom` for ``None``."""
    if rng is None:
        return KeystreamRandom()
    if isinstance(rng, KeystreamRandom):  # the common case; protocol checks are slow
        return rng
    if isinstance(rng, np.random.Generator | np.random.RandomState):
        raise TypeError(
            "rng must be a cryptographic RandomSource such as secagg.KeystreamRandom; "
            "numpy generators are not acceptable for privacy noise"
        )
    if not isinstance(rng, RandomSource):
        raise TypeError(
            f"rng must be a RandomSource (with fill and random_bytes); got {type(rng).__name__}"
        )
    return rng


def float_at_most(value: Fraction) -> float:
    """The largest float <= ``value`` (accounting with it never understates the privacy loss)."""
    result = float(value)
    while Fraction(result) > value:
        result = math.nextafter(result, -math.inf)
    return result
