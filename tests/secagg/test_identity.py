"""Identities: RFC 8032 Ed25519 vectors, our signed-message formats, and the trust store."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from secagg.identity import (
    IdentityKey,
    TrustStore,
    advertisement_message,
    consistency_message,
    generate_identities,
    iterate_digest,
)

# RFC 8032 §7.1, TEST 1–3 (secret key, public key, message, signature).
RFC8032 = [
    (
        "9d61b19deffd5a60ba844af492ec2cc44449c5697b326919703bac031cae7f60",
        "d75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a",
        "",
        "e5564300c360ac729086e2cc806e828a84877f1eb8e5d974d873e065224901555fb8821590a33bacc61e3970"
        "1cf9b46bd25bf5f0595bbe24655141438e7a100b",
    ),
    (
        "4ccd089b28ff96da9db6c346ec114e0f5b8a319f35aba624da8cf6ed4fb8a6fb",
        "3d4017c3e843895a92b70aa74d1b7ebc9c982ccf2ec4968cc0cd55f12af4660c",
        "72",
        "92a009a9f0d4cab8720e820b5f642540a2b27b5416503f8fb3762223ebdb69da085ac1e43e15996e458f3613"
        "d0f11d8c387b2eaeb4302aeeb00d291612bb0c00",
    ),
    (
        "c5aa8df43f9f837bedb7442f31dcb7b166d38535076f094b85ce3a2e0b4458f7",
        "fc51cd8e6218a1a38da47ed00230f0580816ed13ba3303ac5deb911548908025",
        "af82",
        "6291d657deec24024827e69c3abe01a30ce548a284743a445e3680d7db5ac3ac18ff9b538d16f290ae67f760"
        "984dc6594a7c15e9716ed28dc027beceea1ec40a",
    ),
]


@pytest.mark.parametrize(("secret", "public", "message", "signature"), RFC8032)
def test_rfc8032_vectors(secret: str, public: str, message: str, signature: str) -> None:
    key = IdentityKey.from_private_bytes(bytes.fromhex(secret))
    assert key.public.hex() == public
    assert key.sign(bytes.fromhex(message)).hex() == signature  # Ed25519 is deterministic
    store = TrustStore({9: public})
    assert store.verify(9, bytes.fromhex(message), bytes.fromhex(signature))
    tampered = bytes.fromhex(signature)[:-1] + bytes([bytes.fromhex(signature)[-1] ^ 1])
    assert not store.verify(9, bytes.fromhex(message), tampered)
    assert not store.verify(9, b"other" + bytes.fromhex(message), bytes.fromhex(signature))


def test_committed_signatures_over_our_messages(known_answers: dict[str, Any]) -> None:
    # The signed formats themselves are frozen: a change of layout would silently change every
    # signature, so the committed vectors pin them.
    for case in known_answers["signatures"]:
        key = IdentityKey.from_private_bytes(bytes.fromhex(case["identity"]))
        if case["kind"] == "advertise":
            message = advertisement_message(
                bytes.fromhex(case["config_digest"]),
                case["client_id"],
                bytes.fromhex(case["encryption_key"]),
                bytes.fromhex(case["mask_key"]),
            )
        else:
            message = consistency_message(
                bytes.fromhex(case["session_id"]),
                case["survivors"],
                iteration=case["iteration"],
                iterate=iterate_digest(bytes.fromhex(case["iterate"])),
            )
        assert message.hex() == case["message"]
        assert key.sign(message).hex() == case["signature"]


def test_signed_messages_bind_every_field() -> None:
    base = advertisement_message(bytes(32), 5, b"c" * 32, b"s" * 32)
    variants = {
        advertisement_message(b"\x01" * 32, 5, b"c" * 32, b"s" * 32),
        advertisement_message(bytes(32), 6, b"c" * 32, b"s" * 32),
        advertisement_message(bytes(32), 5, b"C" * 32, b"s" * 32),
        advertisement_message(bytes(32), 5, b"c" * 32, b"S" * 32),
        advertisement_message(bytes(32), 5, b"s" * 32, b"c" * 32),
    }
    assert base not in variants and len(variants) == 5
    view = consistency_message(bytes(32), [1, 2, 3])
    assert view != consistency_message(bytes(32), [1, 2])
    assert view != consistency_message(b"\x01" * 32, [1, 2, 3])
    assert view != consistency_message(bytes(32), [1, 2, 3], iteration=2)
    assert view != consistency_message(bytes(32), [1, 2, 3], iterate=iterate_digest(b"x"))
    assert view == consistency_message(bytes(32), (3, 2, 1))
    assert view[: len(b"secagg-dp/v2/consistency")] != base[: len(b"secagg-dp/v2/consistency")]


def test_trust_store_sources_and_errors(tmp_path: Path) -> None:
    keys, store = generate_identities([3, 1, 2], seed=4)
    path = tmp_path / "trust.json"
    store.to_file(path)
    assert TrustStore.from_file(path).ids() == (1, 2, 3)
    calls: list[int] = []

    def lookup(client_id: int) -> bytes | None:
        calls.append(client_id)
        return keys[client_id].public if client_id in keys else None

    remote = TrustStore.from_callback(lookup)
    assert 2 in remote and 2 in remote and 9 not in remote
    assert calls == [2, 9]  # cached after the first answer
    assert remote.verify(2, b"m", keys[2].sign(b"m")) and not remote.verify(9, b"m", bytes(64))
    with pytest.raises(ValueError, match="share one public key"):
        TrustStore({1: keys[1].public, 2: keys[1].public})
    with pytest.raises(ValueError, match="32 bytes"):
        TrustStore({1: b"short"})
    with pytest.raises(ValueError, match="client ids"):
        TrustStore({0: keys[1].public})
    bad = tmp_path / "bad.json"
    for content in ("{", json.dumps({"version": 7}), json.dumps({"version": 1, "clients": []})):
        bad.write_text(content)
        with pytest.raises(ValueError):
            TrustStore.from_file(bad)
    with pytest.raises(ValueError, match="cannot read"):
        TrustStore.from_file(tmp_path / "missing.json")
    assert "…" in repr(keys[1]) and keys[1].private_bytes() not in repr(keys[1]).encode()
