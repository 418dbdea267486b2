"""Audit 4's far-tail exactness: where the accountant states a composition's profile exactly,
ε(δ) at δ = 10⁻³⁰ and 10⁻¹⁰⁰ must be the exact one (deterministic)."""

from __future__ import annotations

import math

import numpy as np
import pytest

import dpquantile.accounting as accounting
from audits.ours import OurTarget
from audits.privacy_audits import _far_tail_exactness
from audits.statistics import composed_discrete_gaussian_delta

_WHERE = (1.0, 1.0, 3)


def _checked(findings: list[str]) -> int:
    curve = composed_discrete_gaussian_delta(*_WHERE[:2], _WHERE[2])
    return _far_tail_exactness(OurTarget().accountant(), curve, _WHERE, findings)


def test_ours_is_exact_far_in_the_tail() -> None:
    findings: list[str] = []
    assert _checked(findings) == 2 and findings == []


def test_a_convolution_truncated_at_ten_sigma_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    # Held-out 14's survivor `reach = math.ceil(20.0 * sigma) // 2`: the pmf cut at 10σ loses
    # mass ≈ e^-50, invisible at δ ≥ 10⁻⁹ and deciding at 10⁻¹⁰⁰ (ε 31.5 where it is 37.7).
    def truncated(sigma: float, sensitivity: int, count: int) -> object:
        reach = math.ceil(20.0 * sigma) // 2
        base = accounting.discrete_gaussian_pmf(np.arange(-reach, reach + 1), sigma)
        pmf = base
        for _ in range(count - 1):
            pmf = np.convolve(pmf, base)
        suffix = np.cumsum(pmf[::-1])[::-1]
        return accounting._ComposedProfile(sigma, sensitivity, count, -reach * count, suffix)

    monkeypatch.setattr(accounting, "_composed_profile", truncated)
    findings: list[str] = []
    _checked(findings)
    assert any("δ=1e-100" in f and "claimed ε 31.5" in f for f in findings), findings


def test_delta_past_the_profiles_support_is_answered(monkeypatch: pytest.MonkeyPatch) -> None:
    # Held-out 14's survivor `index is not self.suffix.size` in _ComposedProfile._greater: past
    # the support (ε = 1000) it indexed out of bounds instead of answering P[S > x] = 0.
    from audits.privacy_audits import _ACCOUNTANT_GRID, _delta_side_checks  # noqa: PLC0415

    findings: list[str] = []
    rows = _delta_side_checks(OurTarget().accountant(), _ACCOUNTANT_GRID["fast"], findings)
    assert findings == [] and any(r["epsilon"] == 1000.0 and r["claimed"] == 0.0 for r in rows)

    def unbounded(self: accounting._ComposedProfile, threshold: float) -> float:
        index = math.floor(threshold) + 1 - self.lowest
        return 1.0 if index <= 0 else float(self.suffix[index])

    monkeypatch.setattr(accounting._ComposedProfile, "_greater", unbounded)
    _delta_side_checks(OurTarget().accountant(), _ACCOUNTANT_GRID["fast"], findings)
    assert findings and all("ε=1000" in f and "raised IndexError" in f for f in findings)
