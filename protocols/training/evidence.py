"""Confidence intervals over seeds and the verdict rule of the results files.

A result is a set of runs that differ only in their seed (and, under DP, their noise draw). A goal
compares one number per seed — usually a *paired* difference, method minus baseline on the same
seed — with a threshold. :func:`mean_interval` gives the two-sided Student-t interval of the mean
of those numbers; :func:`decide` turns an interval and a threshold into one of three verdicts:

* ``"met"``: the whole interval is on the goal's side of the threshold;
* ``"not met"``: the whole interval is on the other side;
* ``"not established"``: the interval straddles the threshold (more seeds might decide it).

The t interval assumes the per-seed values are independent and roughly normal; with ≥ 10 seeds it
is robust to moderate skew (Student 1908; e.g. Wasserman, *All of Statistics*, §6.3.2). Noise
draws under DP are averaged per seed *before* the interval, so draws of one seed (which share the
dataset and the run) are not counted as independent samples.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np
from scipy import stats

__all__ = ["Interval", "Verdict", "combine", "decide", "mean_interval", "per_seed_means"]

Verdict = Literal["met", "not met", "not established"]


@dataclass(frozen=True, slots=True)
class Interval:
    """A two-sided confidence interval of a mean over ``n`` independent values.

    Attributes
    ----------
    mean
        Sample mean.
    low, high
        Interval ends (equal to ``mean`` when ``n == 1``: no interval can be given, see
        :attr:`half_width`).
    n
        Number of values (seeds).
    level
        Confidence level, e.g. 0.95.

    Examples
    --------
    >>> interval = mean_interval([1.0, 2.0, 3.0])
    >>> round(interval.half_width, 3), interval.text(digits=2)
    (2.484, '2.00 ± 2.48')
    """

    mean: float
    low: float
    high: float
    n: int
    level: float

    @property
    def half_width(self) -> float:
        """Half the interval's width (``nan`` for a single value)."""
        return (self.high - self.low) / 2 if self.n > 1 else math.nan

    def scaled(self, factor: float) -> Interval:
        """The same interval in other units (e.g. ``100`` for percentage points).

        Examples
        --------
        >>> mean_interval([0.1, 0.2, 0.3]).scaled(100).text(digits=1)
        '20.0 ± 24.8'
        """
        ends = sorted((self.low * factor, self.high * factor))
        return Interval(self.mean * factor, ends[0], ends[1], self.n, self.level)

    def text(self, digits: int = 3, *, signed: bool = False) -> str:
        """``"mean ± half-width"`` (just the mean when there is one value).

        Examples
        --------
        >>> mean_interval([-0.5, 0.5, 1.5]).text(digits=1, signed=True)
        '+0.5 ± 2.5'
        """
        sign = "+" if signed else ""
        if self.n < 2:
            return f"{self.mean:{sign}.{digits}f} (n = 1)"
        return f"{self.mean:{sign}.{digits}f} ± {self.half_width:.{digits}f}"


def mean_interval(values: Sequence[float] | np.ndarray, level: float = 0.95) -> Interval:
    """Student-t confidence interval of the mean of ``values``.

    Parameters
    ----------
    values
        One finite number per seed.
    level
        Two-sided confidence level in (0, 1).

    Returns
    -------
    Interval

    Raises
    ------
    ValueError
        On no values, non-finite values or a level outside (0, 1).

    Examples
    --------
    >>> interval = mean_interval([0.0, 1.0, 2.0, 3.0])
    >>> round(interval.low, 3), round(interval.high, 3)
    (-0.554, 3.554)
    >>> mean_interval([1.0, float("nan")])
    Traceback (most recent call last):
    ...
    ValueError: values must be finite; got 1 non-finite of 2
    """
    array = np.asarray(values, dtype=np.float64).ravel()
    if array.size == 0:
        raise ValueError("values must not be empty")
    bad = int((~np.isfinite(array)).sum())
    if bad:
        raise ValueError(f"values must be finite; got {bad} non-finite of {array.size}")
    if not 0.0 < level < 1.0:
        raise ValueError(f"level must be in (0, 1); got {level!r}")
    mean = float(array.mean())
    if array.size == 1:
        return Interval(mean, mean, mean, 1, level)
    half = float(stats.t.ppf(0.5 + level / 2, array.size - 1) * array.std(ddof=1))
    half /= math.sqrt(array.size)
    return Interval(mean, mean - half, mean + half, int(array.size), level)


def per_seed_means(values: Sequence[Sequence[float]]) -> list[float]:
    """Average each seed's noise draws: the per-seed values an interval is computed from.

    Examples
    --------
    >>> per_seed_means([[0.1, 0.3], [0.5, 0.5, 0.8]])
    [0.2, 0.6]
    """
    if any(len(draws) == 0 for draws in values):
        raise ValueError("every seed needs at least one draw")
    return [float(np.mean(draws)) for draws in values]


def decide(interval: Interval, threshold: float, goal: Literal["below", "above"]) -> Verdict:
    """The verdict of a goal "the mean is below (or above) ``threshold``" from its interval.

    Parameters
    ----------
    interval
        The interval of the per-seed values.
    threshold
        The goal's threshold (in the interval's units).
    goal
        ``"below"``: the goal asks for a mean < threshold; ``"above"``: for a mean > threshold.

    Returns
    -------
    Verdict
        ``"met"`` when the whole interval is strictly on the goal's side, ``"not met"`` when none
        of it is (an interval that only touches the threshold, e.g. a method identical to its
        baseline asked to beat it, is ``"not met"``), ``"not established"`` otherwise — always
        ``"not established"`` from a single seed.

    Examples
    --------
    >>> decide(mean_interval([-5.0, -5.2, -4.8]), -3.0, "below")
    'met'
    >>> decide(mean_interval([-5.0, 1.0, -2.0]), -3.0, "below")
    'not established'
    >>> decide(mean_interval([0.5, 0.6, 0.7]), 0.9, "above")
    'not met'
    >>> decide(mean_interval([0.0, 0.0, 0.0]), 0.0, "below")   # equal is not better
    'not met'
    """
    if goal not in ("below", "above"):
        raise ValueError(f"goal must be 'below' or 'above'; got {goal!r}")
    if not math.isfinite(threshold):
        raise ValueError(f"threshold must be finite; got {threshold!r}")
    if interval.n < 2:
        return "not established"
    low, high = (interval.low, interval.high)
    if goal == "above":
        low, high, threshold = -high, -low, -threshold
    if high < threshold:
        return "met"
    if low >= threshold:
        return "not met"
    return "not established"


def combine(verdicts: Sequence[Verdict]) -> Verdict:
    """The verdict of a goal made of several parts that must all hold.

    Examples
    --------
    >>> combine(["met", "not established"]), combine(["met", "not met", "not established"])
    ('not established', 'not met')
    """
    if not verdicts:
        raise ValueError("verdicts must not be empty")
    if "not met" in verdicts:
        return "not met"
    if "not established" in verdicts:
        return "not established"
    return "met"
