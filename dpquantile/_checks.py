"""Argument validation shared by the samplers and the accountant: one message style everywhere."""

from __future__ import annotations

import math
import numbers
import operator
from fractions import Fraction

import numpy as np

from secagg.randomness import KeystreamRandom, RandomSource

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


def _real(name: str, value: object, valid: str) -> float:
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{name} must be a real number; got {type(value).__name__}")
    result = float(value)
    if math.isnan(result) or math.isinf(result):
        raise ValueError(f"{name} must be {valid}; got {value!r}")
    return result


def check_positive(name: str, value: object, *, maximum: float | None = None) -> float:
    """Return ``value`` as a float if it is finite and > 0 (and <= ``maximum``), else raise."""
    valid = "a finite number > 0" + (f" and at most {maximum:g}" if maximum is not None else "")
    result = _real(name, value, valid)
    if result <= 0 or (maximum is not None and result > maximum):
        raise ValueError(f"{name} must be {valid}; got {value!r}")
    return result


def check_nonnegative(name: str, value: object) -> float:
    """Return ``value`` as a float if it is finite and >= 0, else raise."""
    result = _real(name, value, "a finite number >= 0")
    if result < 0:
        raise ValueError(f"{name} must be a finite number >= 0; got {value!r}")
    return result


def check_probability(name: str, value: object) -> float:
    """Return ``value`` as a float if it lies in the open interval (0, 1), else raise."""
    result = _real(name, value, "in the open interval (0, 1)")
    if not 0.0 < result < 1.0:
        raise ValueError(f"{name} must lie in the open interval (0, 1); got {value!r}")
    return result


def check_count(name: str, value: object, *, minimum: int = 0) -> int:
    """Return ``value`` as an int if it is an integer >= ``minimum``, else raise."""
    if isinstance(value, bool):
        raise TypeError(f"{name} must be an integer; got bool")
    try:
        result = operator.index(value)  # type: ignore[arg-type]
    except TypeError:
        raise TypeError(f"{name} must be an integer; got {type(value).__name__}") from None
    if result < minimum:
        raise ValueError(f"{name} must be an integer >= {minimum}; got {result}")
    return result


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
