"""Audit 4's budget trials: a PrivacyBudget accepts releases while they fit, refuses the first
that does not, never lets the exact ε of what it accepted exceed its limit, and reports what it
spent — and budgets that measure the wrong thing, never refuse, or refuse early are caught."""

from __future__ import annotations

from typing import Any

import pytest

from audits.ours import OurTarget
from audits.privacy_audits import _budget_checks, audit_accountant
from dpquantile import accounting


def _findings() -> list[str]:
    findings: list[str] = []
    _budget_checks(OurTarget().accountant(), findings)
    return findings


def test_our_budgets_spend_what_they_state() -> None:
    result = audit_accountant(OurTarget())
    rows = result.details["budget_rows"]
    assert result.verdict.value == "pass" and len(rows) == 39  # 29 add/remove, 10 replace-one
    restated = [r for r in rows if r["neighbouring"] == "replace_one"]
    assert len(restated) == 10
    assert all(r["accepted"] >= 1 for r in restated if r["limit"] == "rho 2")
    # Each limit admits some release somewhere, and the ε rows stay under their exact limit.
    assert all(r["accepted"] >= 1 for r in rows if r["limit"] in ("epsilon 10", "rho 2"))
    assert all(r["exact"] <= 10.0 for r in rows if r["limit"] == "epsilon 10")


def test_a_budget_that_measures_rho_against_an_epsilon_limit_is_caught(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A held-out survivor: `if self._rho is not None` negated — an (ε, δ) budget compares the
    # composed ρ (far below ε) with its ε limit, and a ρ budget fails outright.
    def measure(self: Any, trial: Any) -> float:
        if self._rho is None:
            return float(trial.rho)
        assert self._delta is not None
        return float(trial.epsilon(self._delta))

    monkeypatch.setattr(accounting.PrivacyBudget, "_measure", measure)
    findings = _findings()
    assert any("privacy overspent" in f for f in findings)
    assert any("budget rho 2" in f and "raised AssertionError" in f for f in findings)


def test_a_budget_that_never_refuses_or_refuses_early_is_caught(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(accounting.PrivacyBudget, "_limit", lambda self: float("inf"))
    assert any("never refused" in f for f in _findings())
    monkeypatch.setattr(accounting.PrivacyBudget, "_limit", lambda self: 0.5 * self._rho_or_eps)
    monkeypatch.setattr(
        accounting.PrivacyBudget,
        "_rho_or_eps",
        property(lambda self: self._rho if self._rho is not None else self._epsilon),
        raising=False,
    )
    assert any("which fits" in f or "which its own accountant fits" in f for f in _findings())


def test_a_budget_that_misreports_what_it_spent_is_caught(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    real = accounting.PrivacyBudget.spent
    monkeypatch.setattr(accounting.PrivacyBudget, "spent", lambda self: 0.9 * real(self))
    assert any("spent after" in f for f in _findings())


def test_a_replace_one_budget_that_does_not_restate_add_remove_releases_is_caught(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The held-out survivor (seed 4): `event.relation == self._neighbouring` negated in
    # PrivacyBudget.stated — a replace-one budget books add/remove releases as they are (Δ not
    # doubled, ρ a quarter of the truth) and refuses add/remove budgets' own events.
    def stated(self: Any, event: Any) -> Any:
        if self._neighbouring is None or event.relation != self._neighbouring:
            return event
        if self._neighbouring == "replace_one":
            return event.under_replace_one()
        raise accounting.NeighbouringMismatchError("add/remove budget")

    monkeypatch.setattr(accounting.PrivacyBudget, "stated", stated)
    findings = _findings()
    overspent = [f for f in findings if "replace-one budget" in f]
    assert len(overspent) == 10
    assert all("privacy overspent" in f or "let ρ reach" in f for f in overspent)


def test_a_would_exceed_query_that_disagrees_with_spend_is_caught(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The held-out survivor (seed 4): would_exceed by == instead of >, so it says an over-budget
    # release fits (spend still refuses it).
    def would_exceed(self: Any, event: Any, count: int = 1) -> bool:
        return bool(self._prospective(event, count)[1] == self._limit())

    monkeypatch.setattr(accounting.PrivacyBudget, "would_exceed", would_exceed)
    findings = _findings()
    assert findings and all("would_exceed query disagreed" in f for f in findings)


def test_rho_understated_for_a_non_integer_sensitivity_is_caught(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The held-out survivor (seed 7): `l2_den ** 3` for `l2_den ** 2` in DiscreteGaussian's
    # exact ρ = Δ²/2σ² — the same for every integer Δ (denominator 1), ρ/2^j for Δ with a
    # 2^j denominator: Δ = 1/2 gets half its ρ, Δ = √2 (float) about 2^-52 of it.
    real = accounting.DiscreteGaussian.__post_init__

    def understated(self: Any) -> None:
        real(self)
        _, l2_den = self.l2_sensitivity.as_integer_ratio()
        (order, rho), *_ = self._bounds
        object.__setattr__(self, "_bounds", ((order, rho / l2_den),))

    monkeypatch.setattr(accounting.DiscreteGaussian, "__post_init__", understated)
    findings = _findings()
    assert findings and all("Δ=1.414" in f or "Δ=0.5" in f for f in findings)
    assert any("never refused" in f for f in findings)
    assert any("let ρ reach" in f for f in findings)


@pytest.mark.parametrize("field", ["epsilon", "delta", "rho"])
def test_a_budget_stating_another_limit_is_caught(
    monkeypatch: pytest.MonkeyPatch, field: str
) -> None:
    # Held-out 10's survivor: PrivacyBudget.epsilon lost its @property, so reading the limit
    # gave a bound method (the limit it enforces unchanged; the one it reports, wrong).
    original = getattr(accounting.PrivacyBudget, field)
    monkeypatch.setattr(
        accounting.PrivacyBudget, field, property(lambda self: (original.fget(self) or 0) * 2)
    )
    findings = _findings()
    assert findings and all("states its limit as (ε, δ, ρ" in f for f in findings)


def test_a_budget_stating_no_relation_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    # Held-out 12's survivor: PrivacyBudget.neighbouring lost its @property, so the relation a
    # budget reports was a bound method whether it was stated for replace-one or not.
    plain = accounting.PrivacyBudget.neighbouring.fget
    monkeypatch.setattr(accounting.PrivacyBudget, "neighbouring", plain)
    findings = _findings()
    assert findings and all("states its limit as (ε, δ, ρ[, relation])" in f for f in findings)
    assert any("replace-one budget" in f for f in findings)  # both relations are read
