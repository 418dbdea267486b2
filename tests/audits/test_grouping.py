"""Audit 4's grouping check: the same T releases composed in groups (nested self-compositions, a
composition of parts) give the flat claim's ε — and a composition that loses releases when
nested is caught."""

from __future__ import annotations

import math
from collections.abc import Iterator
from typing import Any

import pytest

from audits.ours import OurTarget
from audits.privacy_audits import (
    _grouping_checks,
    _groupings,
    _mixed_history_checks,
    _near_noiseless_checks,
    audit_accountant,
)
from audits.statistics import (
    composed_discrete_gaussian_delta,
    epsilon_from_delta_curve,
    gaussian_delta,
)


def test_groupings_cover_nested_factors_and_parts() -> None:
    assert _groupings(1) == []
    assert _groupings(7) == [("parts", (6, 1))]
    assert _groupings(64) == [("nested", (2, 32)), ("nested", (8, 8)), ("parts", (63, 1))]


def test_our_accountant_is_associative_on_the_grid() -> None:
    result = audit_accountant(OurTarget())
    rows = result.details["grouping_rows"]
    assert result.verdict.value == "pass" and len(rows) == 270
    assert {r["grouping"].split(" ")[0] for r in rows} == {"nested", "parts"}


def test_a_nested_composition_that_or_s_its_counts_is_caught(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from dpquantile import accounting  # noqa: PLC0415

    def leaves(self: Any) -> Iterator[tuple[Any, int]]:
        for leaf, count in self.event.leaves():
            yield leaf, count | self.count  # 2 | 2 = 2 releases where 4 ran

    monkeypatch.setattr(accounting.SelfComposedEvent, "leaves", leaves)
    rows = [
        {"sigma": 1.0, "sensitivity": 1.0, "rounds": 4, "delta": 1e-5, "exact": 9.9373,
         "claimed": 9.95},
    ]
    findings: list[str] = []
    _grouping_checks(OurTarget().accountant(), rows, findings)
    assert findings and "as nested (2, 2)" in findings[0] and "privacy understated" in findings[0]


def test_an_accountant_without_groupings_is_not_asked() -> None:
    assert _grouping_checks(object(), [{"rounds": 4}], []) == []


def test_our_accountant_states_mixed_histories_soundly_and_usefully() -> None:
    findings: list[str] = []
    rows = _mixed_history_checks(OurTarget().accountant(), findings)
    assert findings == [] and len(rows) == 4
    assert all(r["exact"] <= r["claimed"] <= 1.15 * r["exact"] for r in rows)


def test_an_exact_profile_that_drops_later_releases_is_caught(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Held-out 11's survivor `len(history) < 1` (for `!= 1`): a history whose first entry
    # repeats (T ≥ 2 releases of one scalar discrete Gaussian) was stated as that entry's exact
    # profile alone — the releases composed after it were lost.
    from dpquantile import accounting  # noqa: PLC0415

    real = accounting.ZCDPAccountant._exact_composed

    def first_entry_only(self: Any) -> Any:
        history = self.history
        if len(history) > 1 and history[0][1] >= 2:
            event, count = history[0]
            return accounting._composed_profile(event.sigma, int(event.l2_sensitivity), count)
        return real(self)

    monkeypatch.setattr(accounting.ZCDPAccountant, "_exact_composed", first_entry_only)
    findings: list[str] = []
    _mixed_history_checks(OurTarget().accountant(), findings)
    assert len(findings) == 4 and all("privacy understated" in f for f in findings), findings


def test_a_mixed_history_stated_loosely_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    target = OurTarget().accountant()
    real = target.discrete_gaussian_epsilon_then  # type: ignore[attr-defined]
    monkeypatch.setattr(
        target, "discrete_gaussian_epsilon_then", lambda *a: 1.2 * real(*a), raising=False
    )
    findings: list[str] = []
    _mixed_history_checks(target, findings)
    assert findings and all("not useful" in f for f in findings), findings


def test_the_exact_mixed_profile_matches_its_special_cases() -> None:
    # then=(1,) is one more release at Δ; at large σ the discrete law is the continuous one,
    # whose T releases at Δ and one at mΔ compose to a Gaussian of μ = √(T + m²)·Δ/σ.
    three_then_one = composed_discrete_gaussian_delta(2.0, 1.0, 3, then=(1,))
    four = composed_discrete_gaussian_delta(2.0, 1.0, 4)
    assert all(abs(three_then_one(e) - four(e)) < 1e-12 for e in (0.0, 0.5, 2.0))
    for sigma, rounds, multiple in ((20.0, 4, 2), (50.0, 1, 3)):
        mixed = composed_discrete_gaussian_delta(sigma, 1.0, rounds, then=(multiple,))
        mu = math.sqrt(rounds + multiple**2) / sigma
        ours = epsilon_from_delta_curve(mixed, 1e-5)
        continuous = epsilon_from_delta_curve(lambda e, mu=mu: gaussian_delta(e, mu), 1e-5)
        assert abs(ours - continuous) < 1e-4 * continuous  # measured: ≤ 2·10⁻⁶
    with pytest.raises(ValueError, match="positive integers"):
        composed_discrete_gaussian_delta(2.0, 1.0, 3, then=(0,))


def test_our_accountant_states_near_noiseless_releases_exactly() -> None:
    findings: list[str] = []
    rows = _near_noiseless_checks(OurTarget().accountant(), findings)
    assert findings == [] and len(rows) == 5
    assert all(r["claimed"] >= r["exact"] > 500 for r in rows)


def test_an_exact_profile_overflowing_past_e_709_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    # Held-out 11's survivor `if tail == -1.0` (for `== 0.0`) in CKS20 Thm. 7's exact δ(ε):
    # e^ε·0 was evaluated at ε > 709 (σ ≪ Δ), an OverflowError, where δ is the head alone.
    from dpquantile import accounting  # noqa: PLC0415

    def without_the_zero_tail(event: Any, epsilon: float) -> float:
        centre = epsilon * event.sigma**2 / event.l2_sensitivity
        head = accounting.discrete_gaussian_tail(centre - event.l2_sensitivity / 2, event.sigma)
        tail = accounting.discrete_gaussian_tail(centre + event.l2_sensitivity / 2, event.sigma)
        return max(0.0, head - math.exp(epsilon) * tail)

    monkeypatch.setattr(accounting, "_exact_gaussian_delta", without_the_zero_tail)
    findings: list[str] = []
    _near_noiseless_checks(OurTarget().accountant(), findings)
    assert len(findings) == 5 and all("OverflowError" in f for f in findings), findings
