"""Audit 6: the DP quantile's count scale is the documented smallest one that keeps each
client's σ at ≥ 2 grid units, so its noise stays at the central-DP level — and a scale too
small (the noise inflated by KLS21's τ) or larger than needed is caught."""

from __future__ import annotations

from typing import Any

import pytest

import dpquantile.quantile as quantile
from audits.ours import _QuantileDropout


def test_our_quantile_scale_is_the_documented_one() -> None:
    assert _QuantileDropout.noise_level(0) is None


@pytest.mark.parametrize(
    ("change", "words"), [(lambda s: 1, "not the smallest"), (lambda s: s + 1, "not the smallest")]
)
def test_a_wrong_count_scale_is_caught(
    monkeypatch: pytest.MonkeyPatch, change: Any, words: str
) -> None:
    # Held-out 13's survivor `2 // num_clients * rho`: s = 1 for every n ≥ 3, so the per-client
    # σ falls to ≈ 0.6 grid units, where KLS21's τ term inflates the noise.
    real = quantile.quantile_scale
    monkeypatch.setattr(quantile, "quantile_scale", lambda *a, **k: change(real(*a, **k)))
    problem = _QuantileDropout.noise_level(0)
    assert problem is not None and words in problem, problem
