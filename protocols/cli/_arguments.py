"""Argument types shared by the ``secagg-dp`` subcommands: each failure is an
``argparse.ArgumentTypeError`` whose message argparse prints as it is."""

from __future__ import annotations

import argparse
import math

__all__ = ["fraction", "positive_float", "positive_int", "probability"]


def _number(text: str) -> float:
    try:
        return float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None


def positive_int(text: str) -> int:
    """An integer ≥ 1.

    Examples
    --------
    >>> positive_int("3")
    3
    >>> positive_int("abc")
    Traceback (most recent call last):
    ...
    argparse.ArgumentTypeError: expected an integer, got 'abc'
    """
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be an integer >= 1, got {text!r}")
    return value


def positive_float(text: str) -> float:
    """A finite number > 0.

    Examples
    --------
    >>> positive_float("0.5")
    0.5
    >>> positive_float("inf")
    Traceback (most recent call last):
    ...
    argparse.ArgumentTypeError: must be a finite number > 0, got 'inf'
    """
    value = _number(text)
    if not math.isfinite(value) or value <= 0:
        raise argparse.ArgumentTypeError(f"must be a finite number > 0, got {text!r}")
    return value


def probability(text: str) -> float:
    """A number in the open interval (0, 1).

    Examples
    --------
    >>> probability("0.9")
    0.9
    """
    value = _number(text)
    if not 0.0 < value < 1.0:
        raise argparse.ArgumentTypeError(f"must lie in the open interval (0, 1), got {text!r}")
    return value


def fraction(text: str) -> float:
    """A number in [0, 1).

    Examples
    --------
    >>> fraction("0")
    0.0
    """
    value = _number(text)
    if not 0.0 <= value < 1.0:
        raise argparse.ArgumentTypeError(f"must lie in [0, 1), got {text!r}")
    return value
