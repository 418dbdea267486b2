"""Pieces shared by the client and server state machines (private)."""

from __future__ import annotations

import hashlib

import numpy as np

from secagg import shamir
from secagg.keys import KEY_BYTES

SERVER_ID = 0  # the peer id used in errors that blame the server
_SESSION_DOMAIN = b"secagg-dp/v1/session"
_COMMITMENT_DOMAIN = b"secagg-dp/v1/seed-commitment"
SECRET_CHUNKS = shamir.sub_secret_count(KEY_BYTES)
SHARE_BYTES = 4 * SECRET_CHUNKS  # one secret's share: SECRET_CHUNKS little-endian u32
SHARE_PLAINTEXT_BYTES = 2 * SHARE_BYTES  # self-mask-seed share ‖ mask-key share
SHARE_CIPHERTEXT_BYTES = SHARE_PLAINTEXT_BYTES + 16  # plus the GCM tag


def session_id(config_digest: bytes, directory_entries: bytes) -> bytes:
    """SHA-256 over the config digest and the canonical key directory: binds the session."""
    return hashlib.sha256(_SESSION_DOMAIN + config_digest + directory_entries).digest()


def seed_commitment(session: bytes, owner: int, seed: bytes) -> bytes:
    """Hiding, binding commitment to a 256-bit self-mask seed (SHA-256, domain-separated)."""
    return hashlib.sha256(_COMMITMENT_DOMAIN + session + owner.to_bytes(4, "big") + seed).digest()


def encode_share(values: np.ndarray) -> bytes:
    """Field elements of one share as little-endian u32."""
    return values.astype("<u4").tobytes()


def decode_share(data: bytes) -> np.ndarray | None:
    """Inverse of :func:`encode_share`; ``None`` when the bytes are not a valid share."""
    if len(data) != SHARE_BYTES:
        return None
    values = np.frombuffer(data, dtype="<u4").astype(np.int64)
    if (values >= shamir.DEFAULT_PRIME).any():
        return None
    return values
