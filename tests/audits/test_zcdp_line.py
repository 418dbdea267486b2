"""Audit 4's δ side of a ρ-zCDP line: a release known only by D_α ≤ ρα must be claimed at
least the Gaussian mechanism's exact δ(ε) (deterministic)."""

from __future__ import annotations

from typing import Any

import pytest

import dpquantile.accounting as accounting
from audits.ours import OurTarget
from audits.privacy_audits import _PURE_LINE_CELLS, _ZCDP_LINE_CELLS, _pure_line_checks


def test_ours_claims_at_least_the_gaussians_delta() -> None:
    findings: list[str] = []
    cells = _pure_line_checks(OurTarget().accountant(), findings)
    assert cells == len(_PURE_LINE_CELLS) + len(_ZCDP_LINE_CELLS) and findings == []


def test_a_zcdp_history_claimed_zero_delta_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    # Held-out 14's survivor `self._linear_rho >= 0 and …` in _base_delta: every history of
    # single-line events with ξ = 0 — any ρ-zCDP history — was claimed δ(ε) = 0.
    real = accounting.ZCDPAccountant._base_delta

    def zero_for_zcdp(self: Any, epsilon: float) -> float:
        self._refresh()
        if self._linear_xi == 0 and not self._lines:
            return 0.0
        return float(real(self, epsilon))

    monkeypatch.setattr(accounting.ZCDPAccountant, "_base_delta", zero_for_zcdp)
    findings: list[str] = []
    _pure_line_checks(OurTarget().accountant(), findings)
    assert len(findings) == len(_ZCDP_LINE_CELLS)
    assert all("the Gaussian mechanism's (privacy understated)" in f for f in findings)
