"""What binds a round's transcript — the session id and the self-mask-seed commitment — and the
byte encoding of one Shamir share: shared by the client, the server and anyone auditing a
transcript (for example :mod:`audits.adversary`, which replays a server's view)."""

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
    "seed_commitment",
    "session_id",
    "share_plaintext_bytes",
]

SERVER_ID = 0  # the peer id used in errors that blame the server
_SESSION_DOMAIN = b"secagg-dp/v2/session"
_COMMITMENT_DOMAIN = b"secagg-dp/v2/seed-commitment"
SECRET_CHUNKS = shamir.sub_secret_count(KEY_BYTES)
SHARE_BYTES = 4 * SECRET_CHUNKS  # one secret's share: SECRET_CHUNKS little-endian u32
SHARE_PLAINTEXT_BYTES = 2 * SHARE_BYTES  # self-mask-seed share ‖ mask-key share (one sum)
SHARE_CIPHERTEXT_BYTES = SHARE_PLAINTEXT_BYTES + 16  # plus the GCM tag (one sum)


def share_plaintext_bytes(iterations: int) -> int:
    """Bytes a client sends each neighbour: per sum of the session, its share of that sum's
    self-mask seed and of that sum's mask key (seeds first, then keys).

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
