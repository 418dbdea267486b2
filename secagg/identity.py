"""Long-term client identities (Ed25519) and the trust store that maps client ids to them.

The malicious-server mode (Bonawitz et al. 2017, §"active adversary"; Bell et al. 2020) needs a
public-key infrastructure: every client holds a long-term Ed25519 signing key, and every party
holds a :class:`TrustStore` that binds each client id to its verification key. Clients sign what
they advertise and their view of the survivors; a server that substitutes keys or shows different
clients different views is then caught by signatures it cannot forge.

The trust store is the root of trust: it must reach each party out of band (a file deployed with
the node, a callback into an existing PKI), never through the aggregation server, which is the
adversary this mode defends against.

Signed messages are domain-separated byte strings (see :func:`advertisement_message` and
:func:`consistency_message`); Ed25519 itself is RFC 8032 (``cryptography``'s OpenSSL binding).
In a session of several sums the consistency check is approved with pairwise MACs instead of
signatures (:func:`approval_tag`; ``secagg/malicious_security.md`` §5): keys agreed once per
session with every client whose signed advertisement checks out, then one HMAC per pair and sum
instead of a quorum of Ed25519 verifications per client and sum.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import struct
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from secagg.messages import MAX_ID
from secagg.randomness import KeystreamRandom, RandomSource

__all__ = [
    "SIGNATURE_BYTES",
    "VERIFY_KEY_BYTES",
    "IdentityKey",
    "TrustStore",
    "advertisement_message",
    "approval_tag",
    "consistency_message",
    "generate_identities",
    "iterate_digest",
    "load_identity",
    "sum_binding",
    "write_identities",
]

SIGNATURE_BYTES = 64
VERIFY_KEY_BYTES = 32
_ADVERTISE_DOMAIN = b"secagg-dp/v2/advertise-keys"
_CONSISTENCY_DOMAIN = b"secagg-dp/v2/consistency"
_APPROVAL_DOMAIN = b"secagg-dp/v3/approval"
APPROVAL_TAG_BYTES = 32
_ITERATE_DOMAIN = b"secagg-dp/v2/iterate"
_STORE_VERSION = 1


def _check_id(client_id: object) -> int:
    if isinstance(client_id, bool) or not isinstance(client_id, int):
        raise TypeError(f"client ids must be ints; got {type(client_id).__name__}")
    if not 1 <= client_id <= MAX_ID:
        raise ValueError(f"client ids must lie in [1, {MAX_ID}]; got {client_id}")
    return client_id


def advertisement_message(
    config_digest: bytes, client_id: int, encryption_key: bytes, mask_key: bytes
) -> bytes:
    """The bytes a client signs when it advertises its two X25519 keys (phase 0).

    Bound to the round (the config digest hashes every public parameter, the round nonce and
    the threat model), the client's id and both public keys, so an advertisement cannot be
    replayed into another round or attached to another id.

    Examples
    --------
    >>> len(advertisement_message(bytes(32), 7, bytes(32), bytes(32)))
    127
    """
    return (
        _ADVERTISE_DOMAIN + config_digest + struct.pack(">I", client_id) + encryption_key + mask_key
    )


def iterate_digest(iterate: bytes, *, dimension: int | None = None) -> bytes:
    """SHA-256 of what the server broadcast for one sum (domain-separated).

    ``dimension``: the sum's vector length, when it differs from the session's configured one
    (a session summing vectors of several lengths) — bound too, so clients asked for sums of
    different lengths mask for different sums.

    Examples
    --------
    >>> len(iterate_digest(b"centre"))
    32
    >>> iterate_digest(b"centre") == iterate_digest(b"centre", dimension=3)
    False
    """
    layout = b"" if dimension is None else b"dimension" + struct.pack(">Q", dimension)
    return hashlib.sha256(_ITERATE_DOMAIN + layout + iterate).digest()


EMPTY_ITERATE = iterate_digest(b"")


def sum_binding(iterate: bytes, *, dimension: int, configured: int) -> tuple[bytes, bytes]:
    """What one sum of a session is bound to: (the digest its consistency approvals cover, the
    digest its pairwise-mask keys take — empty for a plain sum of the configured length, as a
    single secure sum's keys always were).

    The sum's length is bound only when it differs from the session's ``configured`` one, so
    single sums and same-length sessions derive the keys they always did. Client, server and
    the audits' reconstruction all call this, so they cannot disagree.

    Examples
    --------
    >>> digest, bound = sum_binding(b"", dimension=4, configured=4)
    >>> digest == EMPTY_ITERATE, bound
    (True, b'')
    >>> sum_binding(b"", dimension=1, configured=4)[1] == iterate_digest(b"", dimension=1)
    True
    """
    resized = dimension != configured
    digest = iterate_digest(iterate, dimension=dimension if resized else None)
    return digest, digest if iterate or resized else b""


def consistency_message(
    session_id: bytes,
    survivors: Iterable[int],
    *,
    iteration: int = 1,
    iterate: bytes = EMPTY_ITERATE,
) -> bytes:
    """The bytes a client signs in the consistency check of one sum: the session, the sum's
    number in the session, the survivor set U3 and the iterate the server broadcast for it.

    ``survivors`` is hashed in ascending order, so every party that holds the same set signs and
    verifies the same 32-byte digest however the ids were listed. Binding the iterate means at
    most one iterate per sum (models, Weiszfeld centres) gathers the quorum, so the server never
    gets two aggregates of one sum to subtract. A minority shown another iterate is not stopped
    here: the pairwise-mask key derivation binds the iterate too
    (:func:`secagg.masks.pairwise_mask_key`), so such a minority's masks do not cancel and the
    sum is uniformly random — which defeats the model-inconsistency attack (Pasquini et al.,
    CCS 2022) of showing one client alone a crafted model.

    Examples
    --------
    >>> consistency_message(bytes(32), [3, 1]) == consistency_message(bytes(32), (1, 3))
    True
    >>> other = iterate_digest(b"another centre")
    >>> consistency_message(bytes(32), [1], iterate=other) == consistency_message(bytes(32), [1])
    False
    """
    if len(iterate) != 32:
        raise ValueError("iterate must be the 32-byte iterate_digest of the broadcast")
    ids = sorted(int(u) for u in survivors)
    digest = hashlib.sha256(b"".join(struct.pack(">I", u) for u in ids)).digest()
    header = struct.pack(">HI", iteration, len(ids))
    return _CONSISTENCY_DOMAIN + session_id + header + digest + iterate


def approval_tag(key: bytes, message: bytes, *, approver: int, recipient: int) -> bytes:
    """``approver``'s approval of a :func:`consistency_message`, for ``recipient`` alone:
    HMAC-SHA256(K, "secagg-dp/v3/approval" ‖ approver ‖ recipient ‖ message), K the pair's
    approval key (:func:`secagg.keys.approval_key`).

    The MAC form of a consistency signature (sessions of several sums). Only the two clients of
    the pair hold K, so the server can forge no honest client's approval; naming both ids stops
    a tag from being reflected back to its sender or passed to a third client. Unlike a
    signature it convinces only its recipient — which is all the quorum argument needs (each
    recipient counts its own q approvals; ``secagg/malicious_security.md`` §5).

    Examples
    --------
    >>> tag = approval_tag(bytes(32), b"set", approver=1, recipient=2)
    >>> len(tag), tag == approval_tag(bytes(32), b"set", approver=2, recipient=1)
    (32, False)
    """
    ids = struct.pack(">II", approver, recipient)
    return hmac.digest(key, _APPROVAL_DOMAIN + ids + message, "sha256")


@dataclass(frozen=True, slots=True, repr=False)
class IdentityKey:
    """A client's long-term Ed25519 signing key. The representation never shows the secret.

    Examples
    --------
    >>> key = IdentityKey.from_private_bytes(bytes(32))
    >>> key.public.hex()[:16], repr(key)
    ('3b6a27bcceb6a42d', 'IdentityKey(public=3b6a27bcceb6a42d…)')
    >>> TrustStore({1: key.public}).verify(1, b"m", key.sign(b"m"))
    True
    """

    public: bytes
    _key: Ed25519PrivateKey = field(compare=False)

    @classmethod
    def from_private_bytes(cls, private_key: bytes) -> IdentityKey:
        """Parse a 32-byte Ed25519 seed (RFC 8032 §5.1.5)."""
        if not isinstance(private_key, bytes) or len(private_key) != 32:
            raise ValueError("an Ed25519 private key is 32 bytes")
        key = Ed25519PrivateKey.from_private_bytes(private_key)
        return cls(key.public_key().public_bytes_raw(), key)

    @classmethod
    def generate(cls, source: RandomSource | None = None) -> IdentityKey:
        """A fresh identity from 32 bytes of ``source`` (default: operating-system randomness)."""
        source = source if source is not None else KeystreamRandom()
        return cls.from_private_bytes(source.random_bytes(32))

    def private_bytes(self) -> bytes:
        """The 32-byte seed, for storing the key (keep it secret; it never leaves the node)."""
        from cryptography.hazmat.primitives import serialization  # noqa: PLC0415

        return self._key.private_bytes(
            serialization.Encoding.Raw,
            serialization.PrivateFormat.Raw,
            serialization.NoEncryption(),
        )

    def sign(self, message: bytes) -> bytes:
        """A 64-byte Ed25519 signature over ``message``."""
        return self._key.sign(message)

    def __repr__(self) -> str:
        return f"IdentityKey(public={self.public.hex()[:16]}…)"


class TrustStore:
    """The verification keys of the clients, by client id: the root of trust of the malicious mode.

    Parameters
    ----------
    keys
        Client id → 32-byte Ed25519 public key (raw bytes or hex). Alternatively use
        :meth:`from_file` or :meth:`from_callback`.
    lookup
        A callback ``lookup(client_id) -> bytes | None`` (for an existing PKI); used for ids
        not in ``keys``. Results are cached.

    Attributes
    ----------
    verifications
        How many signatures this store has checked (the benchmark counts them).

    Raises
    ------
    ValueError, TypeError
        On malformed ids or keys, or one key listed under two ids.

    Examples
    --------
    >>> key = IdentityKey.from_private_bytes(bytes(range(32)))
    >>> store = TrustStore({4: key.public})
    >>> 4 in store, 5 in store, store.verify(4, b"x", key.sign(b"y")), store.verifications
    (True, False, False, 1)
    """

    def __init__(
        self,
        keys: Mapping[int, bytes | str] | None = None,
        *,
        lookup: Callable[[int], bytes | None] | None = None,
    ) -> None:
        if keys is not None and not isinstance(keys, Mapping):
            raise TypeError("keys must map client ids to public keys")
        if lookup is not None and not callable(lookup):
            raise TypeError("lookup must be callable")
        self._keys: dict[int, bytes] = {}
        self._parsed: dict[int, Ed25519PublicKey] = {}
        self._lookup = lookup
        self.verifications = 0
        seen: dict[bytes, int] = {}
        for client_id, value in (keys or {}).items():
            public = self._parse_key(_check_id(client_id), value)
            if public in seen:
                raise ValueError(f"clients {seen[public]} and {client_id} share one public key")
            seen[public] = client_id
            self._keys[client_id] = public

    @staticmethod
    def _parse_key(client_id: int, value: bytes | str) -> bytes:
        if isinstance(value, str):
            try:
                value = bytes.fromhex(value)
            except ValueError:
                raise ValueError(f"the key of client {client_id} is not hex") from None
        if not isinstance(value, bytes) or len(value) != VERIFY_KEY_BYTES:
            raise ValueError(f"the key of client {client_id} must be 32 bytes")
        try:
            Ed25519PublicKey.from_public_bytes(value)
        except ValueError:
            raise ValueError(f"the key of client {client_id} is not an Ed25519 key") from None
        return value

    @classmethod
    def from_file(cls, path: str | Path) -> TrustStore:
        """Read a JSON trust store: ``{"version": 1, "clients": {"<id>": "<hex key>", ...}}``.

        Raises
        ------
        ValueError
            If the file is not a well-formed trust store.

        Examples
        --------
        >>> import tempfile, os
        >>> store = TrustStore({1: IdentityKey.from_private_bytes(bytes(32)).public})
        >>> with tempfile.TemporaryDirectory() as tmp:
        ...     path = os.path.join(tmp, "trust.json")
        ...     store.to_file(path)
        ...     TrustStore.from_file(path).ids()
        (1,)
        """
        try:
            data = json.loads(Path(path).read_text())
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as error:
            raise ValueError(f"cannot read the trust store {str(path)!r}: {error}") from None
        if not isinstance(data, dict) or data.get("version") != _STORE_VERSION:
            raise ValueError(f"{str(path)!r} is not a version-{_STORE_VERSION} trust store")
        clients = data.get("clients")
        if not isinstance(clients, dict):
            raise ValueError(f"{str(path)!r} has no 'clients' object")
        keys: dict[int, bytes | str] = {}
        for name, value in clients.items():
            if not (isinstance(name, str) and name.isdigit() and isinstance(value, str)):
                raise ValueError(f"{str(path)!r}: entries must be \"<id>\": \"<hex key>\"")
            keys[int(name)] = value
        return cls(keys)

    @classmethod
    def from_callback(cls, lookup: Callable[[int], bytes | None]) -> TrustStore:
        """A store that asks ``lookup(client_id)`` (``None``: unknown id) and caches the answer."""
        return cls(lookup=lookup)

    def to_file(self, path: str | Path) -> None:
        """Write the listed keys as JSON (see :meth:`from_file`)."""
        clients = {str(u): self._keys[u].hex() for u in sorted(self._keys)}
        Path(path).write_text(json.dumps({"version": _STORE_VERSION, "clients": clients}) + "\n")

    def ids(self) -> tuple[int, ...]:
        """The ids listed so far (a callback store lists those it has been asked for)."""
        return tuple(sorted(self._keys))

    def public_key(self, client_id: int) -> bytes | None:
        """The verification key of ``client_id``, or ``None`` if the store does not know it."""
        if isinstance(client_id, bool) or not isinstance(client_id, int):
            return None
        public = self._keys.get(client_id)
        if public is None and self._lookup is not None and 1 <= client_id <= MAX_ID:
            found = self._lookup(client_id)
            if found is not None:
                public = self._parse_key(client_id, found)
                self._keys[client_id] = public
        return public

    def id_of(self, public_key: bytes) -> int | None:
        """The id listed with ``public_key`` (``None`` if none is; a callback store only knows
        the ids it has been asked for).

        Examples
        --------
        >>> key = IdentityKey.from_private_bytes(bytes(32))
        >>> TrustStore({8: key.public}).id_of(key.public)
        8
        """
        for client_id, public in self._keys.items():
            if public == public_key:
                return client_id
        return None

    def __contains__(self, client_id: object) -> bool:
        return isinstance(client_id, int) and self.public_key(client_id) is not None

    def verify(self, client_id: int, message: bytes, signature: bytes) -> bool:
        """Whether ``signature`` is ``client_id``'s valid Ed25519 signature over ``message``.

        An unknown id, a malformed signature and a wrong one all give ``False`` (one answer, no
        detail).
        """
        parsed = self._parsed.get(client_id)
        if parsed is None:
            public = self.public_key(client_id)
            if public is None:
                return False
            parsed = Ed25519PublicKey.from_public_bytes(public)
            self._parsed[client_id] = parsed
        self.verifications += 1
        if not isinstance(signature, bytes) or len(signature) != SIGNATURE_BYTES:
            return False
        try:
            parsed.verify(signature, message)
        except InvalidSignature:
            return False
        return True

    def __repr__(self) -> str:
        return f"TrustStore({len(self._keys)} clients)"


def generate_identities(
    client_ids: Iterable[int], seed: int | bytes | None = None
) -> tuple[dict[int, IdentityKey], TrustStore]:
    """Identities for an in-memory run: one key per client and the store that lists them all.

    With a ``seed`` the keys are reproducible, and therefore known to whoever knows the seed:
    fine for simulations and tests, never for a deployment (there, each node generates its own
    key and only the public halves are collected into the trust store).

    Examples
    --------
    >>> keys, store = generate_identities([1, 2, 3], seed=0)
    >>> store.ids(), store.verify(2, b"m", keys[2].sign(b"m"))
    ((1, 2, 3), True)
    """
    root = KeystreamRandom(seed, label=b"secagg-dp/v2/identities")
    keys = {_check_id(u): IdentityKey.generate(root.spawn(b"%d" % u)) for u in client_ids}
    return keys, TrustStore({u: key.public for u, key in keys.items()})


def load_identity(path: str | Path) -> IdentityKey:
    """Read an identity key file: the 32-byte Ed25519 seed as 64 hex digits.

    Raises
    ------
    ValueError
        If the file cannot be read or is not a key file.

    Examples
    --------
    >>> import tempfile, os
    >>> with tempfile.TemporaryDirectory() as tmp:
    ...     store = write_identities(tmp, [1, 2], seed=0)
    ...     load_identity(os.path.join(tmp, "identity-2.key")).public == store.public_key(2)
    True
    """
    try:
        text = Path(path).read_text().strip()
        return IdentityKey.from_private_bytes(bytes.fromhex(text))
    except (OSError, UnicodeDecodeError, ValueError) as error:
        raise ValueError(f"cannot read the identity key {str(path)!r}: {error}") from None


def write_identities(
    directory: str | Path, client_ids: Iterable[int], seed: int | bytes | None = None
) -> TrustStore:
    """Generate one identity per client into ``directory`` (``identity-<id>.key``, readable by
    its owner only) and the trust store that lists them (``trust-store.json``).

    For provisioning a deployment or a simulation: each node gets its own key file; every
    party gets the trust store. ``seed`` makes the keys reproducible (tests only).
    """
    target = Path(directory)
    target.mkdir(parents=True, exist_ok=True)
    keys, store = generate_identities(client_ids, seed)
    for client_id, key in keys.items():
        path = target / f"identity-{client_id}.key"
        path.write_text(key.private_bytes().hex() + "\n")
        path.chmod(0o600)
    store.to_file(target / "trust-store.json")
    return store
