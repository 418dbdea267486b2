"""The key schedule, the commitments and the mask PRG re-derived by an independent
implementation.

HKDF is written here from RFC 5869 on the standard library's ``hmac`` (checked against the RFC's
own test vector first); AES comes from pycryptodome (a second AES implementation, present with
the Flower extra; skipped without it). Every derivation is re-computed from the specification in
the modules' docstrings, with its constants written out literally — so a change of label, layout
or byte order in the library fails here, not only a regression vector.
"""

from __future__ import annotations

import hashlib
import hmac
import struct

import numpy as np
import pytest

from secagg import Ring
from secagg.keys import (
    decrypt_shares,
    encrypt_shares,
    pair_sum_key,
    seal_pair_key,
    share_encryption_key,
)
from secagg.masks import expand_mask, pairwise_mask_key, self_mask_key
from secagg.transcript import pair_key_commitment, recovery_commitment, seed_commitment


def hkdf_sha256(ikm: bytes, *, salt: bytes, info: bytes, length: int) -> bytes:
    """RFC 5869: PRK = HMAC(salt, IKM); T(i) = HMAC(PRK, T(i−1) ‖ info ‖ i)."""
    prk = hmac.new(salt or bytes(32), ikm, hashlib.sha256).digest()
    blocks, previous = b"", b""
    for counter in range(1, -(-length // 32) + 1):
        previous = hmac.new(prk, previous + info + bytes([counter]), hashlib.sha256).digest()
        blocks += previous
    return blocks[:length]


def test_our_reference_hkdf_meets_rfc5869_test_case_1() -> None:
    okm = hkdf_sha256(
        bytes.fromhex("0b" * 22),
        salt=bytes.fromhex("000102030405060708090a0b0c"),
        info=bytes.fromhex("f0f1f2f3f4f5f6f7f8f9"),
        length=42,
    )
    assert okm.hex() == (
        "3cb25f25faacd57a90434f64d0362f2a2d2d0a90cf1a5a4c5db02d56ecc4c5bf34007208d5b887185865"
    )


SESSION = bytes(range(32))
SECRET = hashlib.sha256(b"shared secret").digest()


@pytest.mark.parametrize(("sender", "recipient"), [(1, 2), (2, 1), (7, 2**31 - 2)])
def test_share_encryption_key_is_rfc5869_hkdf_of_the_spec(sender: int, recipient: int) -> None:
    info = b"secagg-dp/v2/share-encryption" + struct.pack(">II", sender, recipient)
    expected = hkdf_sha256(SECRET, salt=SESSION, info=info, length=32)
    derived = share_encryption_key(SECRET, session_id=SESSION, sender=sender, recipient=recipient)
    assert derived == expected


def test_mask_keys_are_rfc5869_hkdf_of_the_spec() -> None:
    seed = hashlib.sha256(b"self seed").digest()
    info = b"secagg-dp/v1/mask/self/" + struct.pack(">I", 9) + b"/"
    assert self_mask_key(seed, session_id=SESSION, owner=9) == hkdf_sha256(
        seed, salt=SESSION, info=info, length=16
    )
    pair = b"secagg-dp/v1/mask/pair/" + struct.pack(">II", 3, 11) + b"/x"
    assert pairwise_mask_key(
        SECRET, session_id=SESSION, first=11, second=3, vector_name=b"x"
    ) == hkdf_sha256(SECRET, salt=SESSION, info=pair, length=16)
    iterate = hashlib.sha256(b"model").digest()
    later = pair + b"/" + struct.pack(">H", 4) + b"/" + iterate
    assert pairwise_mask_key(
        SECRET,
        session_id=SESSION,
        first=3,
        second=11,
        vector_name=b"x",
        iteration=4,
        iterate=iterate,
    ) == hkdf_sha256(SECRET, salt=SESSION, info=later, length=16)


@pytest.mark.parametrize(("first", "second", "iteration"), [(3, 11, 1), (11, 3, 1), (5, 2, 255)])
def test_sum_pair_keys_are_rfc5869_hkdf_of_the_spec(
    first: int, second: int, iteration: int
) -> None:
    low, high = sorted((first, second))
    info = b"secagg-dp/v3/pair-sum-key" + struct.pack(">IIH", low, high, iteration)
    expected = hkdf_sha256(SECRET, salt=SESSION, info=info, length=32)
    derived = pair_sum_key(
        SECRET, session_id=SESSION, first=first, second=second, iteration=iteration
    )
    assert derived == expected


def test_escrows_are_a_one_time_pad_from_rfc5869_hkdf_of_the_recovery_key() -> None:
    recovery = hashlib.sha256(b"recovery key").digest()
    kappa = hashlib.sha256(b"pair key").digest()
    info = b"secagg-dp/v3/pair-key-escrow" + struct.pack(">IIH", 4, 9, 2)
    pad = hkdf_sha256(recovery, salt=SESSION, info=info, length=32)
    expected = bytes(a ^ b for a, b in zip(kappa, pad, strict=True))
    sealed = seal_pair_key(kappa, recovery, session_id=SESSION, owner=4, other=9, iteration=2)
    assert sealed == expected
    # The pad is directional: the other end's escrow of the same key uses another pad.
    assert sealed != seal_pair_key(
        kappa, recovery, session_id=SESSION, owner=9, other=4, iteration=2
    )


def test_commitments_are_sha256_of_the_spec() -> None:
    key = hashlib.sha256(b"committed").digest()
    tag = struct.pack(">IH", 7, 3)
    assert (
        seed_commitment(SESSION, 7, key, 3)
        == hashlib.sha256(b"secagg-dp/v2/seed-commitment" + SESSION + tag + key).digest()
    )
    assert (
        recovery_commitment(SESSION, 7, key, 3)
        == hashlib.sha256(b"secagg-dp/v3/recovery-commitment" + SESSION + tag + key).digest()
    )
    assert (
        pair_key_commitment(SESSION, 9, 7, key, 3)
        == hashlib.sha256(
            b"secagg-dp/v3/pair-key-commitment" + SESSION + struct.pack(">IIH", 7, 9, 3) + key
        ).digest()
    )


def test_share_encryption_is_aes_gcm_with_the_specified_nonce_and_aad() -> None:
    aes = pytest.importorskip("Crypto.Cipher.AES", reason="pycryptodome (the flower extra)")
    key = share_encryption_key(SECRET, session_id=SESSION, sender=4, recipient=5)
    plaintext = b"shamir shares of client 4 for client 5"
    aad = b"secagg-dp/v2/shares" + SESSION + struct.pack(">BII", 1, 4, 5)
    cipher = aes.new(key, aes.MODE_GCM, nonce=bytes(12))
    cipher.update(aad)
    body, tag = cipher.encrypt_and_digest(plaintext)
    ours = encrypt_shares(key, plaintext, session_id=SESSION, sender=4, recipient=5)
    assert ours == body + tag
    assert decrypt_shares(key, body + tag, session_id=SESSION, sender=4, recipient=5) == plaintext


@pytest.mark.parametrize("bits", [1, 8, 31, 32, 33, 48, 63, 64])
def test_masks_are_aes128_ctr_keystream_words_reduced_mod_2_to_the_b(bits: int) -> None:
    aes = pytest.importorskip("Crypto.Cipher.AES", reason="pycryptodome (the flower extra)")
    key = self_mask_key(hashlib.sha256(b"k").digest(), session_id=SESSION, owner=1)
    dimension = 1000
    word = np.dtype("<u4") if bits <= 32 else np.dtype("<u8")
    cipher = aes.new(key, aes.MODE_CTR, nonce=b"", initial_value=0)  # 128-bit counter from 0
    stream = cipher.encrypt(bytes(dimension * word.itemsize))
    words = np.frombuffer(stream, dtype=word).astype(np.uint64)
    expected = words & np.uint64((1 << bits) - 1)
    got = np.asarray(expand_mask(key, Ring(bits), dimension), dtype=np.uint64)
    assert np.array_equal(got, expected)
