"""Audit 1's discrete Laplace fit: ours passes at integer and rational scales, and a sampler at
the wrong scale, or one that skips the division by s, is caught (the error rate of the test is
α/m per p-value; the cases below are far from the boundary)."""

from __future__ import annotations

import numpy as np

from audits.ours import OurTarget
from audits.sampler_audits import _LAPLACE_SCALES, _laplace_tests, audit_sampler_fit


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
