"""The mask PRG: known answers, an independent reference, uniformity, cancellation."""

from __future__ import annotations

import hashlib
from itertools import combinations
from typing import Any

import numpy as np
import pytest
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

from secagg.masks import add_mask, expand_mask, pairwise_mask_key, self_mask_key
from secagg.ring import Ring


def reference_mask(key: bytes, bits: int, dimension: int) -> np.ndarray:
    """Non-fused reference: the whole keystream at once, read as little-endian words."""
    width = 4 if bits <= 32 else 8
    stream = (
        Cipher(algorithms.AES(key), modes.CTR(bytes(16)))
        .encryptor()
        .update(bytes(width * dimension))
    )
    words = np.frombuffer(stream, dtype=f"<u{width}").astype(np.uint64)
    return words & np.uint64((1 << bits) - 1) if bits < 64 else words


def test_aes_zero_key_known_answer() -> None:
    # FIPS-197 / NIST: AES-128 of the zero block under the zero key is 66e94bd4ef8a2c3b....
    mask = expand_mask(bytes(16), Ring(32), 4)
    assert mask.astype("<u4").tobytes().hex() == "66e94bd4ef8a2c3b884cfa59ca342b2e"


def test_committed_mask_vectors(known_answers: dict[str, Any]) -> None:
    for case in known_answers["masks"]:
        ring = Ring(case["bits"])
        mask = expand_mask(bytes.fromhex(case["key"]), ring, case["dimension"])
        assert mask[:8].tolist() == case["first"]
        assert hashlib.sha256(mask.astype("<u8").tobytes()).hexdigest() == case["sha256"]


def test_committed_key_derivations(known_answers: dict[str, Any]) -> None:
    for case in known_answers["key_derivation"]:
        sid = bytes.fromhex(case["session_id"])
        name = case["vector_name"].encode()
        if case["kind"] == "self":
            key = self_mask_key(
                bytes.fromhex(case["seed"]), session_id=sid, owner=case["owner"], vector_name=name
            )
        else:
            key = pairwise_mask_key(
                bytes.fromhex(case["seed"]),
                session_id=sid,
                first=case["first"],
                second=case["second"],
                vector_name=name,
            )
        assert key.hex() == case["key"]


@settings(max_examples=40)
@given(
    st.binary(min_size=16, max_size=16),
    st.integers(1, 64),
    st.integers(1, 200_000),
)
def test_fused_expansion_matches_reference(key: bytes, bits: int, dimension: int) -> None:
    ring = Ring(bits)
    assert np.array_equal(
        expand_mask(key, ring, dimension).astype(np.uint64), reference_mask(key, bits, dimension)
    )


def test_domain_separation() -> None:
    sid = bytes(32)
    keys = {
        self_mask_key(bytes(32), session_id=sid, owner=1),
        self_mask_key(bytes(32), session_id=sid, owner=2),
        self_mask_key(bytes(32), session_id=b"\x01" * 32, owner=1),
        self_mask_key(bytes(32), session_id=sid, owner=1, vector_name=b"b"),
        pairwise_mask_key(bytes(32), session_id=sid, first=1, second=2),
        pairwise_mask_key(bytes(32), session_id=sid, first=1, second=3),
    }
    assert len(keys) == 6
    with pytest.raises(ValueError, match="distinct"):
        pairwise_mask_key(bytes(32), session_id=sid, first=4, second=4)
    with pytest.raises(ValueError, match="16 bytes"):
        self_mask_key(b"short", session_id=sid, owner=1)


@pytest.mark.parametrize("bits", [1, 3, 5])
def test_mask_entries_uniform_on_small_rings(bits: int) -> None:
    # χ² goodness of fit against the uniform law on Z_{2^b}; three rings at α = 1e-7 each keep
    # the family-wise error below 1e-6. A randint(0, M − 1)-style bias (M − 1 never drawn) is
    # detected with overwhelming power at this size.
    ring = Ring(bits)
    mask = expand_mask(b"\x5a" * 16, ring, 400_000)
    counts = np.bincount(mask.astype(np.int64), minlength=ring.modulus)
    assert counts.size == ring.modulus and counts.min() > 0
    assert stats.chisquare(counts).pvalue > 1e-7


def test_add_then_subtract_is_identity_and_validates() -> None:
    ring = Ring(64)
    acc = np.arange(1000, dtype=np.uint64)
    add_mask(acc, b"k" * 16, ring)
    add_mask(acc, b"k" * 16, ring, subtract=True)
    assert np.array_equal(acc, np.arange(1000, dtype=np.uint64))
    with pytest.raises(TypeError, match="uint64"):
        add_mask(np.zeros(3, dtype=np.uint32), b"k" * 16, ring)
    with pytest.raises(ValueError, match="16 bytes"):
        add_mask(np.zeros(3, dtype=np.uint64), b"k", ring)


@settings(max_examples=25)
@given(st.integers(2, 9), st.integers(1, 64), st.integers(1, 50))
def test_pairwise_masks_cancel(n: int, bits: int, dimension: int) -> None:
    # Σ_u [Σ_{v>u} PRG(s_uv) − Σ_{v<u} PRG(s_uv)] = 0 over any complete set of pairs.
    ring = Ring(bits)
    total = ring.zeros(dimension)
    for u, v in combinations(range(1, n + 1), 2):
        key = pairwise_mask_key(bytes([u, v]) * 16, session_id=bytes(32), first=u, second=v)
        add_mask(total, key, ring)  # u adds +PRG(s_uv) since v > u
        add_mask(total, key, ring, subtract=True)  # v subtracts it since u < v
    assert not ring.normalize(total).any()
