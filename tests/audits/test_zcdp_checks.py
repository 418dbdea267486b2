"""Audit 4's generic zCDP check (the Gaussian mechanism bounds every sound conversion) and its
sampler-TV check (a negligible claimed TV must cost a negligible ε)."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest
from scipy import integrate, stats

from audits.ours import OurTarget
from audits.privacy_audits import (
    _ACCOUNTANT_GRID,
    _kls21_checks,
    _rho_sum_checks,
    _sampler_tv_checks,
    _zcdp_checks,
    kls21_renyi_exact,
    kls21_renyi_reference,
)
from audits.statistics import gaussian_delta


@pytest.mark.parametrize(("mu", "epsilon"), [(0.5, 0.2), (1.0, 1.0), (2.0, 3.0)])
def test_the_gaussian_profile_is_the_privacy_loss_integral(mu: float, epsilon: float) -> None:
    # δ(ε) = E_P[(1 − e^(ε − L))₊] with L ~ N(μ²/2, μ²), the Gaussian's privacy loss.
    def integrand(loss: float) -> float:
        return max(0.0, 1.0 - math.exp(epsilon - loss)) * stats.norm.pdf(loss, mu**2 / 2, mu)

    direct, _ = integrate.quad(integrand, epsilon, mu**2 / 2 + 12 * mu)
    assert gaussian_delta(epsilon, mu) == pytest.approx(direct, rel=1e-7, abs=1e-12)


def test_the_check_passes_ours_and_catches_an_understated_or_loose_claim() -> None:
    findings: list[str] = []
    rows = _zcdp_checks(OurTarget().accountant(), "fast", findings)
    assert len(rows) == 36 and not findings
    assert all(r["exact"] <= r["claimed"] <= 1.3 * r["exact"] for r in rows)

    class Understated:  # Bun–Steinke's conversion with its ln(1/δ) term halved
        def zcdp_epsilon(self, rho: float, rounds: int, delta: float) -> float:
            total = rho * rounds
            return total + math.sqrt(2 * total * math.log(1 / delta))

    class Loose:  # basic composition of the one-event conversion: ε grows like T
        def zcdp_epsilon(self, rho: float, rounds: int, delta: float) -> float:
            return rounds * (rho + 2 * math.sqrt(rho * math.log(rounds / delta)))

    caught: list[str] = []
    _zcdp_checks(Understated(), "fast", caught)
    assert any("privacy understated" in f for f in caught)
    loose: list[str] = []
    _zcdp_checks(Loose(), "fast", loose)
    assert loose and all("> 1.3 × exact" in f for f in loose)


def test_the_tv_check_passes_ours_and_catches_a_tv_term_that_costs_epsilon() -> None:
    target = OurTarget()
    grid = _ACCOUNTANT_GRID["fast"]
    findings: list[str] = []
    rows = _sampler_tv_checks(target, target.accountant(), grid, findings)
    assert rows and not findings and all(r["tv"] > 0 for r in rows)

    class AddsOne:  # ours plus one unit of ε whenever a TV is given
        def __init__(self) -> None:
            self.ours = target.accountant()

        def discrete_gaussian_epsilon_with_tv(
            self, sigma: float, sensitivity: float, rounds: int, delta: float, tv: float
        ) -> float:
            ideal = self.ours.discrete_gaussian_epsilon(sigma, sensitivity, rounds, delta)
            return float(ideal) + (1.0 if tv > 0 else 0.0)

    caught: list[str] = []
    _sampler_tv_checks(target, AddsOne(), grid, caught)
    assert caught and all("> 1.15 × exact" in f for f in caught)

    class ExactOnly(OurTarget):  # no inexact sampler: nothing to check
        def samplers(self):  # type: ignore[no-untyped-def]
            return [s for s in super().samplers() if s.exact]

    assert _sampler_tv_checks(ExactOnly(), AddsOne(), grid, []) == []


def test_cks20_optimum_is_the_conversion_minimised_by_brute_force() -> None:
    from audits.privacy_audits import cks20_epsilon  # noqa: PLC0415

    for rho, delta in ((0.01, 1e-3), (0.5, 1e-6), (20.0, 1e-9)):
        alphas = 1.0 + np.exp(np.linspace(-12, 14, 400_001))
        values = rho * alphas + (
            math.log(1 / delta) + (alphas - 1) * np.log1p(-1 / alphas) - np.log(alphas)
        ) / (alphas - 1)
        assert cks20_epsilon(rho, delta) == pytest.approx(float(values.min()), rel=1e-9)
        assert cks20_epsilon(rho, delta) <= float(values.min())


def test_an_accountant_claiming_the_best_order_is_held_to_it() -> None:
    ours = OurTarget().accountant()

    class WorseOrder:  # ε 10⁻⁷ above CKS20 at its best order: valid, looser than claimed
        zcdp_conversion = "cks20"

        def zcdp_epsilon(self, rho: float, rounds: int, delta: float) -> float:
            return float(ours.zcdp_epsilon(rho, rounds, delta)) * (1 + 1e-7)  # type: ignore[attr-defined]

    findings: list[str] = []
    _zcdp_checks(WorseOrder(), "fast", findings)
    assert len(findings) == 36 and all("best order" in f for f in findings)
    unclaimed = WorseOrder()
    unclaimed.zcdp_conversion = ""  # type: ignore[misc]
    quiet: list[str] = []
    _zcdp_checks(unclaimed, "fast", quiet)
    assert not quiet  # looser by 10⁻⁷ is no finding without the claim


def test_rounding_sensitivities_are_recomputed_from_kls21() -> None:
    from audits.privacy_audits import _rounding_sensitivity_checks  # noqa: PLC0415

    ours = OurTarget().accountant()
    findings: list[str] = []
    rows = _rounding_sensitivity_checks(ours, findings)
    assert len(rows) == 81 and not findings

    class CrossTermDivided:  # Prop. 22's √(2 log 1/β)·(c/γ + √d/2) divided instead of multiplied
        def kls21_sensitivities(
            self, l2_clip: float, granularity: float, dimension: int, beta: float | None
        ) -> tuple[float, float]:
            ratio = l2_clip / granularity
            squared = (ratio + math.sqrt(dimension)) ** 2
            if beta is not None:
                cross = math.sqrt(2 * math.log(1 / beta)) / (ratio + math.sqrt(dimension) / 2)
                squared = min(squared, ratio**2 + dimension / 4 + cross)
            l2 = math.sqrt(squared)
            return l2 * min(math.sqrt(dimension), l2), l2

    caught: list[str] = []
    _rounding_sensitivity_checks(CrossTermDivided(), caught)
    assert caught and all("noise understated" in f for f in caught)


@pytest.mark.parametrize(("stated", "words"), [("mirrored", "conversion gives nan"),
                                               ("larger", "not its claimed ε")])  # fmt: skip
def test_an_accountant_stating_another_best_order_is_caught(stated: str, words: str) -> None:
    # Held-out 10's survivor `alpha = 1.0 - math.exp(...)`: the refined order's ε was right but
    # the order the accountant states (optimal_order) was 2 − α, below 1 (no Rényi order).
    ours = OurTarget().accountant()

    class Misstated:
        def zcdp_epsilon(self, rho: float, rounds: int, delta: float) -> float:
            return float(ours.zcdp_epsilon(rho, rounds, delta))  # type: ignore[attr-defined]

        def zcdp_optimal_order(self, rho: float, rounds: int, delta: float) -> float:
            alpha = float(ours.zcdp_optimal_order(rho, rounds, delta))  # type: ignore[attr-defined]
            return 2.0 - alpha if stated == "mirrored" else 1.5 * alpha

    findings: list[str] = []
    _zcdp_checks(Misstated(), "fast", findings)
    # 36 grid cells and the 3 whose best order lies at a search range's ends
    assert len(findings) == 39 and all(words in f for f in findings), findings[:2]


def test_an_order_misstated_only_at_the_search_range_s_ends_is_caught(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Held-out 11's survivor `best_alpha = 1.0 / math.exp(...)` (and earlier samples' `2.0 +`,
    # `1.0 *`): the order is misstated only when the grid point beats the bounded refinement,
    # i.e. when the best order lies at the grid's ends — never on the audit's (ρ, T, δ) grid.
    from dpquantile import accounting  # noqa: PLC0415

    real = accounting._minimise_over_orders

    def edge_misstated(objective: Any) -> tuple[float, float]:
        value, alpha = real(objective)
        on_grid = np.any(np.isclose(alpha, 1.0 + np.exp(accounting._ORDER_GRID), rtol=1e-15))
        return value, alpha + 1.0 if on_grid else alpha

    findings: list[str] = []
    _zcdp_checks(OurTarget().accountant(), "fast", findings)
    assert findings == []
    monkeypatch.setattr(accounting, "_minimise_over_orders", edge_misstated)
    _zcdp_checks(OurTarget().accountant(), "fast", findings)
    assert len(findings) >= 2 and all("best Rényi order" in f for f in findings), findings


@pytest.mark.parametrize("rounding", ["none", "one ulp"])
def test_a_kls21_bound_rounded_down_is_caught(
    monkeypatch: pytest.MonkeyPatch, rounding: str
) -> None:
    # Held-out 11's survivor `if value <= 0` in accounting._round_up left every positive bound
    # unrounded; the library's own one-ulp rounding before it (2026-12-07) also left 40 of the
    # fast grid's 486 composed KLS21 bounds up to 2·10⁻¹⁶ below Thm. 1's exact value.
    from dpquantile import accounting  # noqa: PLC0415

    def one_ulp(value: float) -> float:
        return math.nextafter(value, math.inf) if value > 0 else value

    findings: list[str] = []
    _kls21_checks(OurTarget().accountant(), "fast", findings)
    assert findings == []
    monkeypatch.setattr(
        accounting, "_round_up", (lambda value: value) if rounding == "none" else one_ulp
    )
    _kls21_checks(OurTarget().accountant(), "fast", findings)
    assert findings and all("a bound rounded down" in f for f in findings), findings[:2]


def test_the_exact_kls21_reference_agrees_with_the_float_one() -> None:
    for n, sigma, l2, d, alpha in ((2, 0.6, 1.0, 1, 1.5), (10, 1.0, 30.0, 64, 4.0),
                                   (100, 3.0, 1000.0, 2**16, 32.0)):  # fmt: skip
        l1 = min(l2**2, math.sqrt(d) * l2)
        exact = kls21_renyi_exact(n, sigma, l1=l1, l2=l2, dimension=d, alpha=alpha)
        close = kls21_renyi_reference(n, sigma, l1=l1, l2=l2, dimension=d, alpha=alpha)
        assert abs(float(exact) - close) <= 1e-14 * close


def test_composed_rho_is_the_exact_sum_rounded_up() -> None:
    findings: list[str] = []
    assert _rho_sum_checks(OurTarget().accountant(), findings) == 5 and findings == []


@pytest.mark.parametrize("planted", ["float sum", "rounded to nearest"])
def test_a_composed_rho_summed_in_floating_point_is_caught(
    monkeypatch: pytest.MonkeyPatch, planted: str
) -> None:
    # Held-out 11's survivor `denominator / d` (for `//`) in accounting._exact_sum: the sum of
    # the ρ's in floating point — rounded down (1 + 2^-60 → 1.0), or overflowing at 10^-300.
    from dpquantile import accounting  # noqa: PLC0415

    def float_sum(terms: Any) -> float:
        total = math.fsum(count * x for count, x in terms)
        return total if planted == "rounded to nearest" else float(sum(c * x for c, x in terms))

    monkeypatch.setattr(accounting, "_exact_sum", float_sum)
    findings: list[str] = []
    _rho_sum_checks(OurTarget().accountant(), findings)
    assert findings and all("stated total ρ" in f for f in findings), findings


def test_a_pure_renyi_line_is_held_to_randomized_response(monkeypatch: Any) -> None:
    # Held-out 12's survivor `self._linear_xi >= 0` in ZCDPAccountant._base_delta: a release
    # known only by one line (ξ, 0) — pure ξ-DP, from a user-defined MechanismEvent — got δ(ε) = 0
    # below ε = ξ, where randomized response (exactly ξ-DP) needs (e^ξ − e^ε)/(1 + e^ξ).
    from audits.privacy_audits import (  # noqa: PLC0415
        _PURE_LINE_CELLS,
        _ZCDP_LINE_CELLS,
        _pure_line_checks,
    )
    from dpquantile import accounting  # noqa: PLC0415

    ours = OurTarget().accountant()
    clean: list[str] = []
    cells = len(_PURE_LINE_CELLS) + len(_ZCDP_LINE_CELLS)
    assert _pure_line_checks(ours, clean) == cells and clean == []
    real = accounting.ZCDPAccountant._base_delta

    def zero_without_rho(self: Any, epsilon: float) -> float:
        self._refresh()
        if self._linear_rho == 0 and not self._lines:
            return 0.0
        return float(real(self, epsilon))

    monkeypatch.setattr(accounting.ZCDPAccountant, "_base_delta", zero_without_rho)
    findings: list[str] = []
    _pure_line_checks(OurTarget().accountant(), findings)
    assert len(findings) == len(_PURE_LINE_CELLS)  # every δ side; the ε side is untouched
    assert all("claimed δ 0 <" in f and "randomized response" in f for f in findings)
