"""Audit 6: stated noise levels. The DP quantile's count scale is the documented smallest one
that keeps each client's σ at ≥ 2 grid units, so its noise stays at the central-DP level, and a
session of noisy averages plans each sum for the clients still in it — wrong scales and a
session that keeps a departed member are caught."""

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


def test_our_average_session_plans_for_the_clients_still_in_it() -> None:
    from audits.ours import _SecureAverageDropout  # noqa: PLC0415

    assert _SecureAverageDropout.noise_level(0) is None


def test_a_session_that_keeps_a_departed_member_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    # Held-out 13's survivor `if not self._state in (...)`: between sums the server reported the
    # last sum's members, the departed included, so the next sum's noise was planned for them.
    from audits.ours import _SecureAverageDropout  # noqa: PLC0415
    from secagg.server import Server  # noqa: PLC0415

    monkeypatch.setattr(Server, "members", property(lambda self: self._members))
    problem = _SecureAverageDropout.noise_level(0)
    assert problem is not None and "secure=True" in problem and "members after sum 1" in problem
