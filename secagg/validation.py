"""Argument validation for every package: one message style everywhere.

Wrong types raise ``TypeError`` (bools are never numbers here), bad values ``ValueError`` naming
the argument, the valid range and the value received.
"""

from __future__ import annotations

import math
import numbers

__all__ = [
    "check_fraction",
    "check_int",
    "check_nonnegative",
    "check_positive",
    "check_probability",
    "check_real",
    "check_seed",
]


def check_real(name: str, value: object) -> float:
    """``value`` as a finite float.

    Examples
    --------
    >>> check_real("x", 2)
    2.0
    >>> check_real("x", float("nan"))
    Traceback (most recent call last):
    ...
    ValueError: x must be finite; got nan
    """
    result = _number(name, value)
    if not math.isfinite(result):
        raise ValueError(f"{name} must be finite; got {value!r}")
    return result


def _number(name: str, value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{name} must be a real number; got {type(value).__name__}")
    return float(value)


def check_positive(name: str, value: object, *, maximum: float | None = None) -> float:
    """``value`` as a finite float > 0 (and at most ``maximum``).

    Examples
    --------
    >>> check_positive("sigma", 0.0)
    Traceback (most recent call last):
    ...
    ValueError: sigma must be positive (a finite number > 0); got 0.0
    """
    result = _number(name, value)
    if not (math.isfinite(result) and result > 0):
        raise ValueError(f"{name} must be positive (a finite number > 0); got {value!r}")
    if maximum is not None and result > maximum:
        raise ValueError(f"{name} must be positive and at most {maximum:g}; got {value!r}")
    return result


def check_nonnegative(name: str, value: object) -> float:
    """``value`` as a finite float >= 0.

    Examples
    --------
    >>> check_nonnegative("rho", 0)
    0.0
    """
    result = _number(name, value)
    if not (math.isfinite(result) and result >= 0):
        raise ValueError(f"{name} must be non-negative (a finite number >= 0); got {value!r}")
    return result


def check_probability(name: str, value: object) -> float:
    """``value`` as a float in the open interval (0, 1).

    Examples
    --------
    >>> check_probability("delta", 1e-5)
    1e-05
    """
    result = _number(name, value)
    if not 0.0 < result < 1.0:  # NaN and infinities fail too
        raise ValueError(f"{name} must lie in the open interval (0, 1); got {value!r}")
    return result


def check_int(name: str, value: object, *, minimum: int = 0) -> int:
    """``value`` as an int >= ``minimum`` (numpy integers included, bools not).

    Examples
    --------
    >>> check_int("n", 3, minimum=2)
    3
    >>> check_int("n", 1.0)
    Traceback (most recent call last):
    ...
    TypeError: n must be an integer; got float
    """
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{name} must be an integer; got {type(value).__name__}")
    if int(value) < minimum:
        raise ValueError(f"{name} must be an integer >= {minimum}; got {value!r}")
    return int(value)


def check_fraction(name: str, value: object, *, zero: bool, one: bool) -> float:
    """``value`` as a float in the unit interval, with 0 and 1 allowed as ``zero``/``one`` say.

    Examples
    --------
    >>> check_fraction("rate", 1.0, zero=True, one=False)
    Traceback (most recent call last):
    ...
    ValueError: rate must be a number in [0, 1); got 1.0
    """
    result = _number(name, value)  # NaN fails both comparisons below
    interval = f"{'[' if zero else '('}0, 1{']' if one else ')'}"
    low_ok = result > 0 or (zero and result == 0)
    high_ok = result < 1 or (one and result == 1)
    if not (low_ok and high_ok):
        raise ValueError(f"{name} must be a number in {interval}; got {value!r}")
    return result


def check_seed(value: object) -> int | None:
    """A seed: ``None`` or a non-negative int below 2**256.

    Examples
    --------
    >>> check_seed(None), check_seed(7)
    (None, 7)
    """
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(f"seed must be an int or None; got {type(value).__name__}")
    if not 0 <= int(value) < 1 << 256:
        raise ValueError(f"seed must lie in [0, 2**256); got {value}")
    return int(value)
