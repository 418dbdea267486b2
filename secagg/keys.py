"""Key agreement (X25519 + HKDF-SHA256) and authenticated share encryption (AES-256-GCM).

Each client owns two X25519 key pairs (Bonawitz et al. 2017, §4): ``c`` encrypts the Shamir shares
it sends through the server, ``s`` agrees the pairwise mask seeds. Share encryption keys are

    K_uv = HKDF-SHA256(ikm = X25519(c_sk_u, c_pk_v), salt = session_id,
                       info = "secagg-dp/v1/share-encryption")

(symmetric in u and v). The GCM nonce is sender ‖ recipient ‖ 0⁴, unique per direction under a
key that is unique per session and pair; the associated data binds the session id, the phase, the
sender and the recipient, so a ciphertext cannot be replayed into another session, phase or pair.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey, X25519PublicKey
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

from secagg.errors import RemoteProtocolError
from secagg.randomness import RandomSource

__all__ = [
    "KEY_BYTES",
    "KeyPair",
    "agree",
    "decrypt_shares",
    "encrypt_shares",
    "generate_private_key",
    "public_key",
    "share_encryption_key",
]

KEY_BYTES = 32
_SHARE_INFO = b"secagg-dp/v1/share-encryption"
_SHARE_AAD = b"secagg-dp/v1/shares"
SHARE_PHASE = 1  # the phase number bound into the associated data


@dataclass(frozen=True, slots=True, repr=False)
class KeyPair:
    """An X25519 key pair, parsed once (parsing a private key costs a scalar multiplication).

    The representation never shows the private key.

    Examples
    --------
    >>> pair = KeyPair.from_private_bytes(bytes(32))
    >>> pair.public.hex()[:16], repr(pair)
    ('2fe57da347cd6243', 'KeyPair(public=2fe57da347cd6243…)')
    """

    private: bytes
    public: bytes
    _key: X25519PrivateKey = field(compare=False)

    @classmethod
    def from_private_bytes(cls, private_key: bytes) -> KeyPair:
        """Parse 32 private-key bytes (any 32 bytes are valid: X25519 clamps them)."""
        key = X25519PrivateKey.from_private_bytes(private_key)
        return cls(bytes(private_key), key.public_key().public_bytes_raw(), key)

    @classmethod
    def generate(cls, source: RandomSource) -> KeyPair:
        """A fresh key pair from 32 bytes of ``source``."""
        return cls.from_private_bytes(source.random_bytes(KEY_BYTES))

    def __repr__(self) -> str:
        return f"KeyPair(public={self.public.hex()[:16]}…)"

    def agree(self, peer_public_key: bytes, *, peer_id: int | None = None) -> bytes:
        """Raw X25519 shared secret with a peer's public key.

        Raises
        ------
        RemoteProtocolError
            If the peer's public key is malformed or of low order.
        """
        try:
            return self._key.exchange(X25519PublicKey.from_public_bytes(peer_public_key))
        except ValueError:
            raise RemoteProtocolError("invalid public key", peer_id=peer_id) from None


def generate_private_key(source: RandomSource) -> bytes:
    """32 random bytes from ``source``: an X25519 private key (clamped when used).

    Examples
    --------
    >>> from secagg.randomness import KeystreamRandom
    >>> len(generate_private_key(KeystreamRandom(seed=1)))
    32
    """
    return source.random_bytes(KEY_BYTES)


def public_key(private_key: bytes) -> bytes:
    """The raw 32-byte X25519 public key of a private key.

    Examples
    --------
    >>> public_key(bytes(32)).hex()[:16]
    '2fe57da347cd6243'
    """
    return KeyPair.from_private_bytes(private_key).public


def agree(
    private_key: KeyPair | bytes, peer_public_key: bytes, *, peer_id: int | None = None
) -> bytes:
    """Raw X25519 shared secret; an invalid (low-order) peer key is the peer's fault.

    Raises
    ------
    RemoteProtocolError
        If the peer's public key is malformed or of low order.

    Examples
    --------
    >>> a, b = bytes(31) + b"\\x01", bytes(31) + b"\\x02"
    >>> agree(a, public_key(b)) == agree(b, public_key(a))
    True
    """
    pair = (
        private_key if isinstance(private_key, KeyPair) else KeyPair.from_private_bytes(private_key)
    )
    return pair.agree(peer_public_key, peer_id=peer_id)


def share_encryption_key(shared_secret: bytes, *, session_id: bytes) -> bytes:
    """The AES-256-GCM key K_uv for shares exchanged between two clients in one session.

    Examples
    --------
    >>> len(share_encryption_key(bytes(32), session_id=bytes(32)))
    32
    """
    return HKDF(algorithm=hashes.SHA256(), length=32, salt=session_id, info=_SHARE_INFO).derive(
        shared_secret
    )


def _nonce_and_aad(session_id: bytes, sender: int, recipient: int) -> tuple[bytes, bytes]:
    nonce = struct.pack(">II", sender, recipient) + bytes(4)
    aad = _SHARE_AAD + session_id + struct.pack(">BII", SHARE_PHASE, sender, recipient)
    return nonce, aad


def encrypt_shares(
    key: bytes, plaintext: bytes, *, session_id: bytes, sender: int, recipient: int
) -> bytes:
    """Encrypt ``plaintext`` from ``sender`` to ``recipient`` (ciphertext ‖ 16-byte tag).

    Examples
    --------
    >>> key = bytes(32)
    >>> ct = encrypt_shares(key, b"share", session_id=bytes(32), sender=1, recipient=2)
    >>> decrypt_shares(key, ct, session_id=bytes(32), sender=1, recipient=2)
    b'share'
    """
    nonce, aad = _nonce_and_aad(session_id, sender, recipient)
    return AESGCM(key).encrypt(nonce, plaintext, aad)


def decrypt_shares(
    key: bytes, ciphertext: bytes, *, session_id: bytes, sender: int, recipient: int
) -> bytes:
    """Decrypt and authenticate; any failure is one opaque error naming the sender.

    Raises
    ------
    RemoteProtocolError
        On any authentication failure (wrong key, session, phase, pair or tampered bytes).

    Examples
    --------
    >>> ct = encrypt_shares(bytes(32), b"x", session_id=bytes(32), sender=1, recipient=2)
    >>> decrypt_shares(bytes(32), ct, session_id=bytes(32), sender=2, recipient=1)
    Traceback (most recent call last):
    ...
    secagg.errors.RemoteProtocolError: share decryption failed (peer 2)
    """
    nonce, aad = _nonce_and_aad(session_id, sender, recipient)
    try:
        return AESGCM(key).decrypt(nonce, ciphertext, aad)
    except (InvalidTag, ValueError):
        raise RemoteProtocolError("share decryption failed", peer_id=sender) from None
