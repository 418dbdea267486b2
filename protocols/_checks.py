"""Argument validation shared by the whole ``protocols`` package (private): one message style."""

from __future__ import annotations

import math
import numbers

__all__ = [
    "check_fraction",
    "check_int",
    "check_nonnegative",
    "check_positive",
    "check_real",
    "check_seed",
]


def _as_float(name: str, value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{name} must be a real number; got {type(value).__name__}")
    return float(value)


def check_real(name: str, value: object) -> float:
    """``value`` as a finite float; ``TypeError`` for non-numbers (bools included)."""
    result = _as_float(name, value)
    if not math.isfinite(result):
        raise ValueError(f"{name} must be finite; got {value!r}")
    return result


def check_positive(name: str, value: object) -> float:
    """``value`` as a finite float > 0."""
    result = check_real(name, value)
    if result <= 0:
        raise ValueError(f"{name} must be positive (a finite number > 0); got {value!r}")
    return result


def check_nonnegative(name: str, value: object) -> float:
    """``value`` as a finite float >= 0."""
    result = check_real(name, value)
    if result < 0:
        raise ValueError(f"{name} must be non-negative (a finite number >= 0); got {value!r}")
    return result


def check_int(name: str, value: object, *, minimum: int) -> int:
    """``value`` as an int >= ``minimum``; ``TypeError`` for non-integers (bools included)."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{name} must be an integer; got {type(value).__name__}")
    if int(value) < minimum:
        raise ValueError(f"{name} must be an integer >= {minimum}; got {value!r}")
    return int(value)


def check_fraction(name: str, value: object, *, zero: bool, one: bool) -> float:
    """``value`` as a float in the unit interval, with 0 and 1 allowed as ``zero``/``one`` say."""
    result = _as_float(name, value)  # NaN fails both comparisons below
    interval = f"{'[' if zero else '('}0, 1{']' if one else ')'}"
    low_ok = result > 0 or (zero and result == 0)
    high_ok = result < 1 or (one and result == 1)
    if not (low_ok and high_ok):
        raise ValueError(f"{name} must be a number in {interval}; got {value!r}")
    return result


def check_seed(value: object) -> int | None:
    """A seed: ``None`` or a non-negative int below 2**256."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(f"seed must be an int or None; got {type(value).__name__}")
    if not 0 <= int(value) < 1 << 256:
        raise ValueError(f"seed must lie in [0, 2**256); got {value}")
    return int(value)
