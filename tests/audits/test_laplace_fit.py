"""Audit 1's discrete Laplace fit: ours passes at integer and rational scales, and a sampler at
the wrong scale, or one that skips the division by s, is caught (the error rate of the test is
α/m per p-value; the cases below are far from the boundary)."""

from __future__ import annotations

from fractions import Fraction
from typing import Any

import numpy as np

from audits.ours import OurTarget
from audits.sampler_audits import (
    _INT64_EDGE_LAPLACE_SCALE,
    _LAPLACE_SCALES,
    _laplace_band_test,
    _laplace_tests,
    audit_sampler_fit,
)


def test_ours_fits_at_every_scale() -> None:
    prepare = OurTarget().discrete_laplace_sampler()
    for position, scale in enumerate(_LAPLACE_SCALES):
        result = _laplace_tests(prepare(scale)(50_000, 70 + position).astype(np.int64), scale)
        assert min(result[f"{t}_p"] for t in ("chi2", "variance", "tail")) > 1e-6, result


def test_a_wrong_scale_is_caught() -> None:
    draws = OurTarget().discrete_laplace_sampler()(2.75)(200_000, 3).astype(np.int64)
    result = _laplace_tests(draws, 2.5)  # 10 % too wide
    assert result["variance_p"] < 1e-9 and result["chi2_p"] < 1e-9


def test_the_rational_scales_are_in_the_audit() -> None:
    assert any(s != int(s) for s in _LAPLACE_SCALES) and 1.0 in _LAPLACE_SCALES
    cells = audit_sampler_fit(OurTarget()).details["discrete_laplace_cells"]
    assert [c["scale"] for c in cells] == list(_LAPLACE_SCALES)
    # A σ override (a quick look at one σ) leaves the Laplace sampler out.
    quick = audit_sampler_fit(OurTarget(), sigmas=[2.0], samples=20_000)
    assert quick.details["discrete_laplace_cells"] == "n/a: none offered, or σ overridden"


def test_a_sampler_wrapping_past_int64_at_a_large_numerator_fails() -> None:
    # Held-out 10's survivor `(int(v.max()) - 1) * t`: the 64-bit path's guard let U + t·V pass
    # 2^63 at V = 2 when t = 2^62 − 1 (a Fraction scale): those draws wrapped into [λ, 2λ).
    real = OurTarget().discrete_laplace_sampler()

    class Wrapping(OurTarget):
        def discrete_laplace_sampler(self) -> Any:
            def prepare(scale: Any) -> Any:
                if Fraction(scale).numerator < 2**61:
                    return real(scale)
                lam = float(scale)

                def draw(size: int, seed: int) -> Any:
                    values = np.asarray(real(scale)(size, seed), dtype=np.int64)
                    wrapped = np.abs(values) >= 2 * lam
                    values[wrapped] -= np.sign(values[wrapped]) * round(lam)
                    return values

                return draw

            return prepare

    assert audit_sampler_fit(OurTarget()).verdict.name == "PASS"
    result = audit_sampler_fit(Wrapping())
    assert result.verdict.name == "FAIL"
    (finding,) = result.findings
    assert "numerator 2^62 − 1" in finding and "band_chi2" in finding


def test_the_band_test_holds_ours_at_the_int64_edge() -> None:
    details = audit_sampler_fit(OurTarget()).details
    cell = details["discrete_laplace_int64_edge"]
    # The same run holds every sampler at the Gaussian int64 guard (test_int64_guard.py).
    guard = details["int64_guard_tail"]
    assert [c["sampler"] for c in guard] == [s.name for s in OurTarget().samplers()]
    assert all(c["beyond_7_sigma"] == 0 and c["samples"] == 100_000 for c in guard)
    assert cell["scale"] == f"{_INT64_EDGE_LAPLACE_SCALE.numerator}/{2**22 + 1}"
    assert cell["samples"] == 3000 and cell["band_chi2_p"] > 1e-6
    # A law a fifth narrower is caught by the band test alone.
    narrower = Fraction(2**62 - 1, 5 * (2**22 + 1) // 4)
    draws = OurTarget().discrete_laplace_sampler()(narrower)(3000, 1).astype(np.int64)  # type: ignore[arg-type]
    assert _laplace_band_test(draws, _INT64_EDGE_LAPLACE_SCALE)["band_chi2_p"] < 1e-6
