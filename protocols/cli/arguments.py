"""Argument types shared by the ``secagg-dp`` subcommands: each failure is an
``argparse.ArgumentTypeError`` whose message argparse prints as it is."""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable

__all__ = [
    "HelpFormatter",
    "examples",
    "fraction",
    "integer_list",
    "nonnegative_float",
    "nonnegative_int",
    "positive_float",
    "positive_int",
    "probability",
    "seed",
]


class HelpFormatter(argparse.ArgumentDefaultsHelpFormatter, argparse.RawDescriptionHelpFormatter):
    """Every option's default in ``--help``, and an epilog of examples kept as written."""


def examples(*commands: str) -> str:
    """An ``--help`` epilog listing example command lines.

    Examples
    --------
    >>> print(examples("secagg-dp sum --clients 10"))
    examples:
      secagg-dp sum --clients 10
    """
    return "examples:\n" + "\n".join(f"  {command}" for command in commands)


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


def nonnegative_float(text: str) -> float:
    """A finite number ≥ 0.

    Examples
    --------
    >>> nonnegative_float("0")
    0.0
    >>> nonnegative_float("nan")
    Traceback (most recent call last):
    ...
    argparse.ArgumentTypeError: must be a finite number >= 0, got 'nan'
    """
    value = _number(text)
    if not math.isfinite(value) or value < 0:
        raise argparse.ArgumentTypeError(f"must be a finite number >= 0, got {text!r}")
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


def nonnegative_int(text: str) -> int:
    """An integer ≥ 0.

    Examples
    --------
    >>> nonnegative_int("0")
    0
    >>> nonnegative_int("-1")
    Traceback (most recent call last):
    ...
    argparse.ArgumentTypeError: must be an integer >= 0, got '-1'
    """
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be an integer >= 0, got {text!r}")
    return value


def seed(text: str) -> int:
    """A seed: an integer in [0, 2^128) (every stream is derived from it).

    Examples
    --------
    >>> seed("7")
    7
    >>> seed("-3")
    Traceback (most recent call last):
    ...
    argparse.ArgumentTypeError: a seed is an integer in [0, 2^128), got '-3'
    """
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer seed, got {text!r}") from None
    if not 0 <= value < 2**128:
        raise argparse.ArgumentTypeError(f"a seed is an integer in [0, 2^128), got {text!r}")
    return value


def integer_list(choices: range) -> Callable[[str], list[int]]:
    """A comma-separated list of integers drawn from ``choices``.

    Examples
    --------
    >>> integer_list(range(1, 10))("1, 4,8")
    [1, 4, 8]
    >>> integer_list(range(1, 10))("12")
    Traceback (most recent call last):
    ...
    argparse.ArgumentTypeError: choose from 1–9; got 12
    """

    def parse(text: str) -> list[int]:
        values = []
        for item in text.split(","):
            if not item.strip():
                continue
            try:
                value = int(item)
            except ValueError:
                raise argparse.ArgumentTypeError(
                    f"expected comma-separated integers, got {text!r}"
                ) from None
            if value not in choices:
                raise argparse.ArgumentTypeError(
                    f"choose from {choices.start}–{choices.stop - 1}; got {value}"
                )
            values.append(value)
        if not values:
            raise argparse.ArgumentTypeError(f"expected at least one number, got {text!r}")
        return values

    return parse
