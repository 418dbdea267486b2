"""Audit 8's refusals: a sharing must never hand out a share at a point ≡ 0 (the secret), two
shares at congruent points, or shares of a secret outside the field."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pytest
from numpy.typing import NDArray

from audits.ours import OurTarget
from audits.protocol_audits import _shamir_refusals, audit_shamir_masks_graph
from secagg.randomness import KeystreamRandom


class _Unchecked:
    """Shamir over Z_p with no input checks: evaluation at whatever it is given (only what
    the refusal check calls)."""

    def share_in_field(
        self, secret: int, *, copies: int, points: Sequence[int], prime: int, **_: int
    ) -> NDArray[np.int64] | None:
        slopes = (KeystreamRandom(0).uint64(copies) % np.uint64(prime)).astype(np.int64)
        return np.array([(secret + slopes * x) % prime for x in points], dtype=np.int64)


def test_our_sharing_refuses_every_case() -> None:
    assert _shamir_refusals(OurTarget().secret_sharing()) == (7, [])  # type: ignore[arg-type]


def test_a_sharing_without_input_checks_hands_out_the_secret_at_point_zero() -> None:
    sharing = _Unchecked()
    rows = sharing.share_in_field(3, copies=1, threshold=2, points=(0, 1, 2), prime=7, seed=0)
    assert rows is not None and int(rows[0, 0]) == 3  # the share at 0 is the secret
    checked, findings = _shamir_refusals(sharing)  # type: ignore[arg-type]
    assert checked == 7 and len(findings) == 7
    assert any("point 0 (the secret itself)" in f for f in findings)
    assert any("outside Z_7" in f for f in findings)
    assert sum("not a field" in f for f in findings) == 2  # Z_9 and the Carmichael 252601


def test_a_fixed_field_sharing_is_not_asked() -> None:
    class Fixed(_Unchecked):
        def share_in_field(self, *args: Any, **kwargs: Any) -> None:  # type: ignore[override]
            return None

    assert _shamir_refusals(Fixed()) == (0, [])  # type: ignore[arg-type]


@pytest.mark.parametrize("point", [0, 7])
def test_audit_8_fails_a_sharing_that_accepts_a_point_congruent_to_zero(
    monkeypatch: pytest.MonkeyPatch, point: int
) -> None:
    import secagg.shamir as shamir  # noqa: PLC0415

    checked = shamir._check_points

    def lets_one_through(points: Sequence[int], prime: int) -> tuple[int, ...]:
        return checked([x for x in points if x != point], prime) and tuple(points)

    monkeypatch.setattr(shamir, "_check_points", lets_one_through)
    result = audit_shamir_masks_graph(OurTarget())
    assert result.verdict.value == "fail"
    assert any(f"point {point}" in f for f in result.findings)


def test_a_sharing_that_refuses_the_smallest_field_is_caught(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import secagg.shamir as shamir  # noqa: PLC0415

    checked = shamir._check_prime

    def from_five(prime: int) -> int:
        if prime < 5:
            raise ValueError("prime too small")
        return checked(prime)

    monkeypatch.setattr(shamir, "_check_prime", from_five)
    _, findings = _shamir_refusals(OurTarget().secret_sharing())  # type: ignore[arg-type]
    assert findings == ["Shamir over Z_3 refused: prime too small"]


def test_a_join_accepting_sub_secrets_above_the_range_is_caught(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The seed-6 survivor `0 <= chunk != 1 << bits`: only 2^bits itself refused; 2^bits + 1 and
    # p − 1 (outside the documented [0, 2^bits)) joined into some other key.
    import secagg.shamir as shamir  # noqa: PLC0415
    from audits.targets import refusal_findings  # noqa: PLC0415

    bits = shamir.sub_secret_bits(shamir.DEFAULT_PRIME)
    real = shamir.join_secret

    def lenient(chunks: Any, secret_bytes: int) -> bytes:
        return real(
            [c if c != (1 << bits) + 1 and c != shamir.DEFAULT_PRIME - 1 else 0 for c in chunks],
            secret_bytes,
        )

    monkeypatch.setattr(shamir, "join_secret", lenient)
    _, findings = refusal_findings(OurTarget().secret_sharing())
    assert len(findings) == 2 and all("accepted" in f for f in findings), findings


def test_a_primality_test_refusing_larger_primes_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    # Seed-7 survivor: `x is n - 1` for `x == n - 1` in the Miller–Rabin loop — identity holds
    # for CPython's cached ints (≤ 256) only, so primes ≡ 1 (mod 4) from 269 on were refused.
    import secagg.shamir as shamir  # noqa: PLC0415

    real = shamir._is_prime
    monkeypatch.setattr(shamir, "_is_prime", lambda n: real(n) and (n < 257 or n % 4 == 3))
    checked, findings = _shamir_refusals(OurTarget().secret_sharing())  # type: ignore[arg-type]
    assert checked == 7
    refused = [f.split(" refused")[0] for f in findings]
    assert refused == ["Shamir over Z_269", "Shamir over Z_65537"]


def test_sub_secrets_too_wide_for_an_even_bit_length_prime_are_caught(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Held-out 9's survivor `bit_length() ^ 1` for `bit_length() − 1`: equal for the default
    # 31-bit prime, one bit too many for every prime of even bit length.
    from audits.protocol_audits import _SPLIT_PRIMES, _shamir_split_join  # noqa: PLC0415
    from secagg import shamir  # noqa: PLC0415

    sharing = OurTarget().secret_sharing()
    assert _shamir_split_join(sharing) == (2 * len(_SPLIT_PRIMES), [])
    monkeypatch.setattr(
        shamir, "sub_secret_bits", lambda prime=shamir.DEFAULT_PRIME: prime.bit_length() ^ 1
    )
    _, findings = _shamir_split_join(sharing)
    assert sorted({f.split("p = ")[1].split(" ")[0] for f in findings}) == [
        "1073741789",
        "13",
        "251",
        "65521",
    ]
