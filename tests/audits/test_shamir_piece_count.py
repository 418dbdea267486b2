"""Audit 8: a secret is cut into the fewest sub-secrets that hold it — and a split into more
pieces (more shares per neighbour) is reported as a finding, not an audit crash."""

from __future__ import annotations

import pytest

import secagg.shamir as shamir
from audits.ours import OurTarget
from audits.protocol_audits import _shamir_split_join
from audits.targets import refusal_findings


def test_ours_cuts_secrets_into_the_fewest_pieces() -> None:
    assert _shamir_split_join(OurTarget().secret_sharing())[1] == []


def test_a_split_into_too_many_pieces_is_a_finding(monkeypatch: pytest.MonkeyPatch) -> None:
    # Held-out 13's mutant `-(-8 * secret_bytes + bits)`: 226 pieces of a 32-byte secret at
    # p = 2^31 − 1 instead of 9; the adapter itself then raised while building its cases.
    real = shamir.sub_secret_count
    monkeypatch.setattr(
        shamir, "sub_secret_count", lambda b, p=shamir.DEFAULT_PRIME: 2 * real(b, p)
    )
    sharing = OurTarget().secret_sharing()
    found = _shamir_split_join(sharing)[1]
    assert found and "pieces" in found[0], found
    refusal_findings(sharing)  # the adapter builds its cases without raising
