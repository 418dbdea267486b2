"""Audit 8: the SecAgg+ bounds' hypergeometric tail primitive, against the exact tail in
rationals — and tails lost on a one-point support, or understated, are caught."""

from __future__ import annotations

import math

import pytest

import secagg.graph_parameters as gp
from audits.ours import OurTarget
from audits.protocol_audits import _tail_errors


def test_our_tail_matches_the_exact_one() -> None:
    checked, errors = _tail_errors(OurTarget().graph_parameters().log2_tail)  # type: ignore[attr-defined]
    assert checked > 2500 and errors == []


def test_a_tail_lost_on_a_one_point_support_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    # Held-out 13's survivor `if low >= high`: a support of one point read as empty, so a
    # certain event (every item drawn) got probability 0.
    real = gp._hypergeometric_tail_numerators

    def lost(population: int, successes: int, draws: int) -> list[int]:
        low = max(0, draws - (population - successes))
        if low == min(successes, draws):
            return [0] * (draws + 2)
        return real(population, successes, draws)

    monkeypatch.setattr(gp, "_hypergeometric_tail_numerators", lost)
    _, errors = _tail_errors(gp.log2_hypergeometric_tail)
    assert errors and "= -inf, exact 0" in errors[0], errors


def test_a_tail_rounded_down_is_caught() -> None:
    def under(population: int, successes: int, draws: int, at_least: int) -> float:
        value = gp.log2_hypergeometric_tail(population, successes, draws, at_least)
        return value if math.isinf(value) or value == 0.0 else value - 1e-6

    _, errors = _tail_errors(under)
    assert errors and "exact" in errors[0], errors


def test_a_tail_that_raises_in_range_is_caught() -> None:
    def fussy(population: int, successes: int, draws: int, at_least: int) -> float:
        if successes == population:
            raise ValueError("successes must be below population")
        return gp.log2_hypergeometric_tail(population, successes, draws, at_least)

    _, errors = _tail_errors(fussy)
    assert errors and "raised ValueError" in errors[0], errors
