"""Key agreement and share encryption."""

from __future__ import annotations

import pytest

from secagg.errors import RemoteProtocolError
from secagg.keys import agree, decrypt_shares, encrypt_shares, public_key, share_encryption_key

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
    key = share_encryption_key(SHARED, session_id=bytes(32))
    context: dict[str, object] = {"session_id": bytes(32), "sender": 1, "recipient": 2}
    ciphertext = encrypt_shares(key, b"shares", **context)  # type: ignore[arg-type]
    with pytest.raises(RemoteProtocolError, match=r"^share decryption failed"):
        decrypt_shares(key, ciphertext, **{**context, **change})  # type: ignore[arg-type]


def test_tampering_and_wrong_key_give_one_opaque_error() -> None:
    key = share_encryption_key(SHARED, session_id=bytes(32))
    ciphertext = bytearray(
        encrypt_shares(key, b"s" * 72, session_id=bytes(32), sender=1, recipient=2)
    )
    messages = set()
    for candidate_key, data in [
        (key, bytes(ciphertext[:-1]) + bytes([ciphertext[-1] ^ 1])),
        (key, bytes(ciphertext[:10])),
        (share_encryption_key(SHARED, session_id=b"\x02" * 32), bytes(ciphertext)),
        (key, b""),
    ]:
        with pytest.raises(RemoteProtocolError) as info:
            decrypt_shares(candidate_key, data, session_id=bytes(32), sender=1, recipient=2)
        messages.add(str(info.value))
    assert messages == {"share decryption failed (peer 1)"}
