"""Key agreement (X25519 + HKDF-SHA256), the per-sum pair keys and their escrow, and
authenticated share encryption (AES-256-GCM).

Each client owns two X25519 key pairs (Bonawitz et al. 2017, §4): ``c`` encrypts the Shamir shares
it sends through the server, ``s`` agrees one pair secret with each neighbour for the whole
session. Sum r's key with a neighbour is a PRF output of that secret, κ_uv^r (:func:`pair_sum_key`);
unlike Bonawitz et al., ``s_sk`` is never Shamir-shared. A drop in sum r is recovered from an
escrow of κ_uv^r under the client's recovery key e^r of that sum (:func:`seal_pair_key`), e^r being
what is Shamir-shared — so a recovery opens one sum of one client and nothing else
(``secagg/malicious_security.md`` §5). Share encryption keys are one per direction:

    K_{u→v} = HKDF-SHA256(ikm = X25519(c_sk_u, c_pk_v), salt = session_id,
                          info = "secagg-dp/v2/share-encryption" ‖ u ‖ v)

so a key is unique per (session, sender, recipient) and encrypts exactly one message, the sender's
shares for that recipient; the GCM nonce is therefore fixed at zero. A client derives its shares
deterministically from a per-round secret it keeps in its snapshot, so a retry after a restore
re-sends the identical ciphertext — never a different plaintext under the same key and nonce. The
associated data binds the session id, the phase, the sender and the recipient.
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
    "approval_key",
    "decrypt_shares",
    "encrypt_shares",
    "generate_private_key",
    "is_low_order",
    "pair_sum_key",
    "public_key",
    "seal_pair_key",
    "share_encryption_key",
]

KEY_BYTES = 32
_SHARE_INFO = b"secagg-dp/v2/share-encryption"
_PAIR_SUM_INFO = b"secagg-dp/v3/pair-sum-key"
_ESCROW_INFO = b"secagg-dp/v3/pair-key-escrow"
_APPROVAL_INFO = b"secagg-dp/v3/approval-key"
_SHARE_AAD = b"secagg-dp/v2/shares"
_NONCE = bytes(12)
SHARE_PHASE = 1  # the phase number bound into the associated data


_P25519 = 2**255 - 19
# u-coordinates of the points of order dividing 8 on Curve25519 and its twist: 0, 1, p − 1 and the
# two of order 8 (the list libsodium blocks). X25519 with any of them yields the all-zero secret.
_LOW_ORDER_U = frozenset(
    {
        0,
        1,
        _P25519 - 1,
        325606250916557431795983626356110631294008115727848805560023387167927233504,
        39382357235489614581723060781553021112529911719440698176882885853963445705823,
    }
)


def is_low_order(public_key: bytes) -> bool:
    """Whether an X25519 public key is a point of small order (or the encoding is malformed).

    X25519 ignores the top bit and reduces the u-coordinate modulo p (RFC 7748 §5), so the
    check does the same and compares against the five small-order u-coordinates — one big-int
    comparison instead of a scalar multiplication.

    Examples
    --------
    >>> is_low_order(bytes(32)), is_low_order(public_key(bytes(32)))
    (True, False)
    """
    if not isinstance(public_key, bytes) or len(public_key) != 32:
        return True
    u = (int.from_bytes(public_key, "little") & ((1 << 255) - 1)) % _P25519
    return u in _LOW_ORDER_U


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


def share_encryption_key(
    shared_secret: bytes, *, session_id: bytes, sender: int, recipient: int
) -> bytes:
    """The AES-256-GCM key K_{sender→recipient} of one session: one key per direction.

    Examples
    --------
    >>> k = share_encryption_key(bytes(32), session_id=bytes(32), sender=1, recipient=2)
    >>> len(k), k == share_encryption_key(bytes(32), session_id=bytes(32), sender=2, recipient=1)
    (32, False)
    """
    if sender == recipient:
        raise ValueError(f"a share-encryption key needs two distinct ids; got {sender} twice")
    info = _SHARE_INFO + struct.pack(">II", sender, recipient)
    return HKDF(algorithm=hashes.SHA256(), length=32, salt=session_id, info=info).derive(
        shared_secret
    )


def _nonce_and_aad(session_id: bytes, sender: int, recipient: int) -> tuple[bytes, bytes]:
    # The key is unique per (session, sender, recipient) and encrypts one message: nonce 0.
    aad = _SHARE_AAD + session_id + struct.pack(">BII", SHARE_PHASE, sender, recipient)
    return _NONCE, aad


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


def pair_sum_key(
    pair_secret: bytes, *, session_id: bytes, first: int, second: int, iteration: int
) -> bytes:
    """κ_uv^r: the 32-byte key of sum ``iteration`` between two clients, from their pair secret.

    κ_uv^r = HKDF-SHA256(ikm = X25519(s_sk_u, s_pk_v), salt = session_id,
    info = "secagg-dp/v3/pair-sum-key" ‖ min(u, v) ‖ max(u, v) ‖ r). Symmetric in the two ids;
    the keys of different sums are independent PRF outputs, so revealing κ^r (to recover a drop
    in sum r) says nothing of any other sum's (``secagg/malicious_security.md`` §5).

    Examples
    --------
    >>> k = pair_sum_key(bytes(32), session_id=bytes(32), first=2, second=5, iteration=1)
    >>> k == pair_sum_key(bytes(32), session_id=bytes(32), first=5, second=2, iteration=1)
    True
    >>> k == pair_sum_key(bytes(32), session_id=bytes(32), first=2, second=5, iteration=2)
    False
    """
    if first == second:
        raise ValueError(f"a pair key needs two distinct ids; got {first} twice")
    low, high = sorted((first, second))
    info = _PAIR_SUM_INFO + struct.pack(">IIH", low, high, iteration)
    return HKDF(algorithm=hashes.SHA256(), length=KEY_BYTES, salt=session_id, info=info).derive(
        pair_secret
    )


def seal_pair_key(
    pair_key: bytes,
    recovery_key: bytes,
    *,
    session_id: bytes,
    owner: int,
    other: int,
    iteration: int,
) -> bytes:
    """Escrow of ``owner``'s sum key κ with ``other`` under ``owner``'s recovery key e^r of
    that sum: κ ⊕ HKDF-SHA256(e^r, salt = session_id, info = "secagg-dp/v3/pair-key-escrow" ‖
    owner ‖ other ‖ r). The same call opens it (XOR with a one-time pad: each (owner, other, r)
    pad is used once). The server keeps the escrows; e^r is Shamir-shared and rebuilt only when
    ``owner`` drops in sum r, which opens that sum's keys and no other.

    Examples
    --------
    >>> sealed = seal_pair_key(bytes(32), b"e" * 32, session_id=bytes(32), owner=1, other=2,
    ...                        iteration=1)
    >>> seal_pair_key(sealed, b"e" * 32, session_id=bytes(32), owner=1, other=2,
    ...               iteration=1) == bytes(32)
    True
    """
    if len(pair_key) != KEY_BYTES:
        raise ValueError(f"a pair key has {KEY_BYTES} bytes; got {len(pair_key)}")
    info = _ESCROW_INFO + struct.pack(">IIH", owner, other, iteration)
    pad = HKDF(algorithm=hashes.SHA256(), length=KEY_BYTES, salt=session_id, info=info).derive(
        recovery_key
    )
    return (int.from_bytes(pair_key, "big") ^ int.from_bytes(pad, "big")).to_bytes(KEY_BYTES, "big")


def approval_key(shared_secret: bytes, *, session_id: bytes, first: int, second: int) -> bytes:
    """The MAC key with which two clients approve survivor sets to each other in a session:
    HKDF-SHA256(ikm = X25519(c_sk_u, c_pk_v), salt = session_id,
    info = "secagg-dp/v3/approval-key" ‖ min(u, v) ‖ max(u, v)) — the share-encryption
    agreement, under another label. Symmetric in the two ids.

    Examples
    --------
    >>> k = approval_key(bytes(32), session_id=bytes(32), first=3, second=9)
    >>> k == approval_key(bytes(32), session_id=bytes(32), first=9, second=3)
    True
    """
    if first == second:
        raise ValueError(f"an approval key needs two distinct ids; got {first} twice")
    low, high = sorted((first, second))
    info = _APPROVAL_INFO + struct.pack(">II", low, high)
    return HKDF(algorithm=hashes.SHA256(), length=KEY_BYTES, salt=session_id, info=info).derive(
        shared_secret
    )
