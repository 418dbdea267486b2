"""What binds a round's transcript — the session id and the commitments to self-mask seeds,
recovery keys and pair keys — and the byte encoding of one Shamir share: shared by the client,
the server and anyone auditing a transcript (for example :mod:`audits.adversary`, which replays
a server's view)."""

from __future__ import annotations

import hashlib

import numpy as np

from secagg import shamir
from secagg.keys import KEY_BYTES

__all__ = [
    "SERVER_ID",
    "SHARE_BYTES",
    "SHARE_CIPHERTEXT_BYTES",
    "SHARE_PLAINTEXT_BYTES",
    "decode_share",
    "encode_share",
    "pair_key_commitment",
    "recovery_commitment",
    "seed_commitment",
    "session_id",
    "share_plaintext_bytes",
]

SERVER_ID = 0  # the peer id used in errors that blame the server
_SESSION_DOMAIN = b"secagg-dp/v2/session"
_COMMITMENT_DOMAIN = b"secagg-dp/v2/seed-commitment"
_RECOVERY_DOMAIN = b"secagg-dp/v3/recovery-commitment"
_PAIR_DOMAIN = b"secagg-dp/v3/pair-key-commitment"
SECRET_CHUNKS = shamir.sub_secret_count(KEY_BYTES)
SHARE_BYTES = 4 * SECRET_CHUNKS  # one secret's share: SECRET_CHUNKS little-endian u32
SHARE_PLAINTEXT_BYTES = 2 * SHARE_BYTES  # self-mask-seed share ‖ recovery-key share (one sum)
SHARE_CIPHERTEXT_BYTES = SHARE_PLAINTEXT_BYTES + 16  # plus the GCM tag (one sum)


def share_plaintext_bytes(iterations: int) -> int:
    """Bytes a client sends each neighbour: per sum of the session, its share of that sum's
    self-mask seed and of that sum's recovery key (seeds first, then recovery keys).

    Examples
    --------
    >>> share_plaintext_bytes(1) == SHARE_PLAINTEXT_BYTES, share_plaintext_bytes(3)
    (True, 216)
    """
    return iterations * SHARE_PLAINTEXT_BYTES


def session_id(config_digest: bytes, directory_entries: bytes) -> bytes:
    """SHA-256 over the config digest and the canonical key directory: binds the session.

    Examples
    --------
    >>> len(session_id(bytes(32), b""))
    32
    """
    return hashlib.sha256(_SESSION_DOMAIN + config_digest + directory_entries).digest()


def seed_commitment(session: bytes, owner: int, seed: bytes, iteration: int = 1) -> bytes:
    """Hiding, binding commitment to a 256-bit self-mask seed (SHA-256, domain-separated).

    Examples
    --------
    >>> seed_commitment(bytes(32), 1, bytes(32)) == seed_commitment(bytes(32), 2, bytes(32))
    False
    """
    tag = owner.to_bytes(4, "big") + iteration.to_bytes(2, "big")
    return hashlib.sha256(_COMMITMENT_DOMAIN + session + tag + seed).digest()


def recovery_commitment(session: bytes, owner: int, key: bytes, iteration: int) -> bytes:
    """Hiding, binding commitment to ``owner``'s recovery key e^r of sum ``iteration``
    (SHA-256, its own domain): the server checks a key rebuilt from shares against it.

    Examples
    --------
    >>> recovery_commitment(bytes(32), 1, bytes(32), 1) == seed_commitment(bytes(32), 1, bytes(32))
    False
    """
    tag = owner.to_bytes(4, "big") + iteration.to_bytes(2, "big")
    return hashlib.sha256(_RECOVERY_DOMAIN + session + tag + key).digest()


def pair_key_commitment(
    session: bytes, first: int, second: int, pair_key: bytes, iteration: int
) -> bytes:
    """Commitment to the sum key κ_uv^r of a pair (symmetric in the two ids: both ends commit to
    the same value). The server opens a dropped client's escrow only into a key that matches the
    surviving end's commitment, so a wrong escrow aborts the sum instead of corrupting it.

    Examples
    --------
    >>> pair_key_commitment(bytes(32), 1, 2, bytes(32), 1) == pair_key_commitment(
    ...     bytes(32), 2, 1, bytes(32), 1)
    True
    """
    low, high = sorted((first, second))
    tag = low.to_bytes(4, "big") + high.to_bytes(4, "big") + iteration.to_bytes(2, "big")
    return hashlib.sha256(_PAIR_DOMAIN + session + tag + pair_key).digest()


def encode_share(values: np.ndarray) -> bytes:
    """Field elements of one share as little-endian u32.

    Examples
    --------
    >>> encode_share(np.array([1, 2])).hex()
    '0100000002000000'
    """
    return values.astype("<u4").tobytes()


def decode_share(data: bytes) -> np.ndarray | None:
    """Inverse of :func:`encode_share`; ``None`` when the bytes are not a valid share.

    Examples
    --------
    >>> decode_share(b"short") is None
    True
    """
    if len(data) != SHARE_BYTES:
        return None
    values = np.frombuffer(data, dtype="<u4").astype(np.int64)
    if (values >= shamir.DEFAULT_PRIME).any():
        return None
    return values
