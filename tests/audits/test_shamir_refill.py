"""Audit 8's Shamir refill cell: over Z_257 a rejection sampler of coefficients often draws
again, and one holder's shares must stay uniform whichever path a call took (χ² at α/m; the
planted defect is far from the boundary)."""

from __future__ import annotations

import numpy as np
import pytest

import secagg.shamir
from audits.ours import OurTarget
from audits.protocol_audits import _REFILL_PRIME, _shamir_sampled_secrecy


def test_ours_shares_uniformly_over_the_refill_prime() -> None:
    tests, findings, p_values = _shamir_sampled_secrecy(OurTarget().secret_sharing(), 0, 1e-6)
    assert findings == [] and tests == 15
    assert p_values[f"Z_{_REFILL_PRIME} refills, holder 1"] > 1e-6 / tests


def test_a_refill_that_draws_from_half_the_field_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    real = secagg.shamir._uniform_field_elements
    redrawn = []

    def biased(source: secagg.shamir.RandomSource, count: int, prime: int) -> np.ndarray:
        first = real(source, count, prime)
        # As if the first draw had fallen short by a third: the rest comes from a refill that
        # keeps the low half of the field only.
        if prime == _REFILL_PRIME and count >= 1000:
            redrawn.append(count)
            first[2 * count // 3 :] %= (prime + 1) // 2
        return first

    monkeypatch.setattr(secagg.shamir, "_uniform_field_elements", biased)
    _, findings, _ = _shamir_sampled_secrecy(OurTarget().secret_sharing(), 0, 1e-6)
    assert redrawn and any(f"Z_{_REFILL_PRIME}" in f and "not uniform" in f for f in findings)
