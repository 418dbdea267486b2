"""Argument validation shared by the training harness: one message style everywhere."""

from __future__ import annotations

import math
import numbers

__all__ = ["check_fraction", "check_int", "check_real"]


def check_int(name: str, value: object, *, minimum: int) -> int:
    """Return ``value`` as an int if it is an integer ≥ ``minimum``.

    Raises ``TypeError`` for a non-integer (``bool`` included), ``ValueError`` below ``minimum``.
    """
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{name} must be an integer; got {type(value).__name__}")
    if int(value) < minimum:
        raise ValueError(f"{name} must be an integer >= {minimum}; got {value!r}")
    return int(value)


def _real(name: str, value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{name} must be a real number; got {type(value).__name__}")
    return float(value)


def check_real(name: str, value: object, *, positive: bool) -> float:
    """Return ``value`` as a float if finite and > 0 (``positive``) or ≥ 0; else ``ValueError``."""
    valid = "a finite number > 0" if positive else "a finite number >= 0"
    result = _real(name, value)
    if not math.isfinite(result) or result < 0 or (positive and result == 0):
        raise ValueError(f"{name} must be {valid}; got {value!r}")
    return result


def check_fraction(name: str, value: object, *, closed: bool) -> float:
    """Return ``value`` as a float in [0, 1] (``closed``) or [0, 1) (``ValueError`` otherwise)."""
    valid = "a number in [0, 1]" if closed else "a number in [0, 1)"
    result = _real(name, value)
    if not (0.0 <= result <= 1.0) or (not closed and result == 1.0):
        raise ValueError(f"{name} must be {valid}; got {value!r}")
    return result
