"""Key agreement and share encryption."""

from __future__ import annotations

import os

import pytest
from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey, X25519PublicKey

from secagg.errors import RemoteProtocolError
from secagg.keys import (
    agree,
    decrypt_shares,
    encrypt_shares,
    is_low_order,
    public_key,
    share_encryption_key,
)

# RFC 7748 §6.1 test vectors.
ALICE_SK = bytes.fromhex("77076d0a7318a57d3c16c17251b26645df4c2f87ebc0992ab177fba51db92c2a")
ALICE_PK = bytes.fromhex("8520f0098930a754748b7ddcb43ef75a0dbf3a0d26381af4eba4a98eaa9b4e6a")
BOB_SK = bytes.fromhex("5dab087e624a8a4b79e17f8b83800ee66f3bb1292618b6fd1c2f8b27ff88e0eb")
BOB_PK = bytes.fromhex("de9edb7d7b7dc1b4d35b61c2ece435373f8343c85b78674dadfc7e146f882b4f")
SHARED = bytes.fromhex("4a5d9d5ba4ce2de1728e3bf480350f25e07e21c947d19e3376f09b3c1e161742")


def test_x25519_rfc7748_vectors() -> None:
    assert public_key(ALICE_SK) == ALICE_PK
    assert public_key(BOB_SK) == BOB_PK
    assert agree(ALICE_SK, BOB_PK) == agree(BOB_SK, ALICE_PK) == SHARED


def test_low_order_key_is_the_peer_s_fault() -> None:
    with pytest.raises(RemoteProtocolError, match="invalid public key") as info:
        agree(ALICE_SK, bytes(32), peer_id=9)
    assert info.value.peer_id == 9


@pytest.mark.parametrize(
    "change",
    [
        {"session_id": b"\x01" * 32},
        {"sender": 3},
        {"recipient": 3},
    ],
)
def test_ciphertext_is_bound_to_session_and_pair(change: dict[str, object]) -> None:
    key = share_encryption_key(SHARED, session_id=bytes(32), sender=1, recipient=2)
    context: dict[str, object] = {"session_id": bytes(32), "sender": 1, "recipient": 2}
    ciphertext = encrypt_shares(key, b"shares", **context)  # type: ignore[arg-type]
    with pytest.raises(RemoteProtocolError, match=r"^share decryption failed"):
        decrypt_shares(key, ciphertext, **{**context, **change})  # type: ignore[arg-type]


def test_tampering_and_wrong_key_give_one_opaque_error() -> None:
    key = share_encryption_key(SHARED, session_id=bytes(32), sender=1, recipient=2)
    ciphertext = bytearray(
        encrypt_shares(key, b"s" * 72, session_id=bytes(32), sender=1, recipient=2)
    )
    messages = set()
    for candidate_key, data in [
        (key, bytes(ciphertext[:-1]) + bytes([ciphertext[-1] ^ 1])),
        (key, bytes(ciphertext[:10])),
        (
            share_encryption_key(SHARED, session_id=b"\x02" * 32, sender=1, recipient=2),
            bytes(ciphertext),
        ),
        (
            share_encryption_key(SHARED, session_id=bytes(32), sender=2, recipient=1),
            bytes(ciphertext),
        ),
        (key, b""),
    ]:
        with pytest.raises(RemoteProtocolError) as info:
            decrypt_shares(candidate_key, data, session_id=bytes(32), sender=1, recipient=2)
        messages.add(str(info.value))
    assert messages == {"share decryption failed (peer 1)"}


def test_share_keys_are_one_per_direction_and_session() -> None:
    keys = {
        share_encryption_key(SHARED, session_id=session, sender=a, recipient=b)
        for session in (bytes(32), b"\x01" * 32)
        for a, b in ((1, 2), (2, 1), (1, 3))
    }
    assert len(keys) == 6
    with pytest.raises(ValueError, match="two distinct ids"):
        share_encryption_key(SHARED, session_id=bytes(32), sender=4, recipient=4)


P = 2**255 - 19
# The five small-order u-coordinates and their non-canonical encodings (u + p, top bit set).
SMALL = [0, 1, P - 1, *(int.from_bytes(bytes.fromhex(h), "little") for h in (
    "e0eb7a7c3b41b8ae1656e3faf19fc46ada098deb9c32b1fd866205165f49b800",
    "5f9c95bca3508c24b1d0b1559c83ef5b04445cc4581c8e86d8224eddd09f1157",
))]


def _exchange_fails(encoded: bytes) -> bool:
    try:
        X25519PrivateKey.generate().exchange(X25519PublicKey.from_public_bytes(encoded))
    except ValueError:
        return True
    return False


def test_low_order_check_agrees_with_the_scalar_multiplication() -> None:
    encodings = []
    for u in SMALL:
        for value in (u, u + P):  # X25519 masks bit 255, then reduces modulo p
            if value < 2**255:
                encodings += [value.to_bytes(32, "little"), (value + 2**255).to_bytes(32, "little")]
    assert len(encodings) == 2 * (len(SMALL) + 2)  # only 0 and 1 have a u + p below 2^255
    for encoded in encodings:
        assert is_low_order(encoded) and _exchange_fails(encoded)
    for _ in range(300):
        encoded = os.urandom(32)
        assert is_low_order(encoded) == _exchange_fails(encoded)
    assert not is_low_order(ALICE_PK) and not is_low_order(BOB_PK)
    assert is_low_order(b"short")
