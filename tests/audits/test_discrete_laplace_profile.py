"""Audit 4's exact discrete Laplace profile, against direct pmf sums; the audit's checks fire."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from audits.ours import OurTarget
from audits.privacy_audits import _discrete_laplace_checks, composed_discrete_laplace_delta


def _direct_delta(epsilon0: float, rounds: int, epsilon: float, support: int = 80) -> float:
    """δ(ε) = Σₓ max(0, P(x) − e^ε Q(x)) over every x ∈ [−support, support]^T (P: noise at 0,
    Q: at 1), the tail beyond the support below 1e-30."""
    xs = np.arange(-support, support + 1)
    z = math.tanh(epsilon0 / 2)  # (1 − e^−ε₀)/(1 + e^−ε₀): the normaliser's inverse
    one_p = z * np.exp(-epsilon0 * np.abs(xs))
    one_q = z * np.exp(-epsilon0 * np.abs(xs - 1))
    total = 0.0
    for combo in itertools.product(range(xs.size), repeat=rounds):
        p = float(np.prod(one_p[list(combo)]))
        q = float(np.prod(one_q[list(combo)]))
        total += max(0.0, p - math.exp(epsilon) * q)
    return total


@pytest.mark.parametrize(("epsilon0", "rounds"), [(0.7, 1), (1.5, 1), (0.7, 2), (1.2, 2)])
def test_the_binomial_profile_is_the_direct_sum(epsilon0: float, rounds: int) -> None:
    curve = composed_discrete_laplace_delta(epsilon0, rounds)
    for epsilon in (0.0, 0.3 * epsilon0, epsilon0, 1.5 * epsilon0 * rounds):
        assert curve(epsilon) == pytest.approx(
            _direct_delta(epsilon0, rounds, epsilon), rel=1e-9, abs=1e-15
        )


def test_the_checks_pass_ours_and_catch_an_understated_or_inexact_claim() -> None:
    findings: list[str] = []
    rows = _discrete_laplace_checks(OurTarget().accountant(), "fast", findings)
    assert rows and not findings

    class Understated:
        def discrete_laplace_epsilon(self, epsilon0: float, rounds: int, delta: float) -> float:
            return 0.9 * epsilon0 * math.sqrt(rounds)  # the √T rate without its δ term

        def discrete_laplace_delta(self, epsilon0: float, rounds: int, epsilon: float) -> float:
            return 1e-9  # never 0, even at ε₀ for one release

    caught: list[str] = []
    _discrete_laplace_checks(Understated(), "fast", caught)
    assert any("privacy understated" in f for f in caught)
    assert any("pure ε₀-DP" in f for f in caught)


def test_a_claim_looser_than_the_textbook_bound_is_caught() -> None:
    # Held-out 9's survivor: the discrete Laplace's Rényi line ε₀²/2 (BS16 Prop. 3.3) as ε₀²,
    # sound but looser than composing ε₀²/2-zCDP releases by the book (0.1, T = 16, δ = 10⁻³).
    real = OurTarget().accountant()

    class Doubled:
        def discrete_laplace_epsilon(self, epsilon0: float, rounds: int, delta: float) -> float:
            if rounds == 1:
                return float(real.discrete_laplace_epsilon(epsilon0, rounds, delta))
            rho = rounds * epsilon0**2  # twice the book's ρ
            return min(rounds * epsilon0, rho + 2 * math.sqrt(rho * math.log(1 / delta)))

    caught: list[str] = []
    _discrete_laplace_checks(Doubled(), "fast", caught)
    assert caught and all("the textbook bound" in f for f in caught)
