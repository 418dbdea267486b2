"""Audit 1's tail test at the exact sampler's int64 guard: draws made in batches, as a client
draws its noise vector, at σ² = 4·10⁸ (b = 1), where the candidates' products meet the 2^31
bound below which the acceptance test squares them in int64. The error rate of the test is
α/m; the planted case is far from the boundary (≈ 15 draws beyond 7σ against 2.6·10⁻⁷ expected)."""

from __future__ import annotations

import pytest

from audits.ours import OurTarget
from audits.sampler_audits import _INT64_GUARD_SIGMA, _guard_tail_cell, audit_sampler_fit


def _exact() -> object:
    return next(s for s in OurTarget().samplers() if s.exact)


def test_ours_puts_no_draw_beyond_seven_sigma_at_the_guard() -> None:
    cell = _guard_tail_cell(_exact(), 700)  # type: ignore[arg-type]
    assert cell["sigma"] == _INT64_GUARD_SIGMA and cell["samples"] == 100_000
    assert cell["beyond_7_sigma"] == 0 and cell["tail_p"] == 1.0


def test_a_guard_that_lets_squares_overflow_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    import dpquantile.samplers  # noqa: PLC0415

    # |u| < 2^32 lets u² pass 2^63: the acceptance exponent wraps negative and far-tail
    # candidates (≈ 9σ) are accepted with probability ≥ e⁻¹ instead of ≈ e⁻³².
    monkeypatch.setattr(dpquantile.samplers, "_SMALL_PRODUCT", 1 << 32)
    cell = _guard_tail_cell(_exact(), 700)  # type: ignore[arg-type]
    assert cell["beyond_7_sigma"] >= 5 and cell["tail_p"] < 1e-20


def test_audit_1_runs_the_guard_cell_for_every_sampler_and_only_on_its_own_grid() -> None:
    overridden = audit_sampler_fit(OurTarget(), sigmas=[2.0], samples=2_000)
    assert overridden.details["int64_guard_tail"] == "n/a: σ overridden"
