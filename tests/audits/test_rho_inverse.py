"""Audit 4: the ρ planned for a target (ε, δ) is the inverse of the accountant's own ε(ρ),
to 10⁻⁹ — and a planner that stops early, overshoots or refuses a reachable target is caught."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from audits.ours import OurTarget
from audits.privacy_audits import _inverse_problems

_ACCOUNTANT = OurTarget().accountant()


def test_our_planner_inverts_our_conversion() -> None:
    assert _inverse_problems(_ACCOUNTANT.zcdp_epsilon, _ACCOUNTANT.rho_for_epsilon) == []  # type: ignore[attr-defined]


def _refuse_small(epsilon: float, delta: float) -> float:
    if epsilon < 1:
        raise ValueError(f"no ρ > 0 gives ε ≤ {epsilon:g}")
    return float(_ACCOUNTANT.rho_for_epsilon(epsilon, delta))  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    ("planner", "words"),
    [
        # Held-out 13's survivor `_RHO_PRECISION ** high`: the bisection stopped at an absolute
        # width (1e-9)^ρ — loose for ρ < 1, and no search at all below ε ≈ 1.
        (lambda e, d: 0.999 * _ACCOUNTANT.rho_for_epsilon(e, d), "not the largest"),  # type: ignore[attr-defined]
        (lambda e, d: 1.001 * _ACCOUNTANT.rho_for_epsilon(e, d), "gives ε ="),  # type: ignore[attr-defined]
        (_refuse_small, "raised ValueError"),
    ],
)
def test_a_wrong_planner_is_caught(planner: Callable[[float, float], float], words: str) -> None:
    problems = _inverse_problems(_ACCOUNTANT.zcdp_epsilon, planner)
    assert problems and words in problems[0], problems


def test_an_accountant_charging_for_nothing_is_caught() -> None:
    # Held-out 13's survivor `self._linear_rho == -1`: the zero-history shortcut never fired,
    # and the order search stated ε ≈ 1.3·10⁻⁹ at δ = 10⁻¹⁰ for events that leak nothing.
    from audits.privacy_audits import _zcdp_checks  # noqa: PLC0415

    class Charging:
        def zcdp_epsilon(self, rho: float, rounds: int, delta: float) -> float:
            value = float(_ACCOUNTANT.zcdp_epsilon(rho, rounds, delta))
            return value if rho > 0 or delta > 1e-6 else 1.3e-9

    findings: list[str] = []
    _zcdp_checks(Charging(), "fast", findings)
    assert any("ρ=0" in f and "not 0" in f for f in findings), findings


def test_ours_states_nothing_for_nothing() -> None:
    from audits.privacy_audits import _zcdp_checks  # noqa: PLC0415

    findings: list[str] = []
    _zcdp_checks(_ACCOUNTANT, "fast", findings)
    assert findings == []
