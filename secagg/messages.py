"""Protocol messages and their versioned, compact binary encoding.

Every message is a frozen dataclass validated structurally on construction (types, sizes, id
ranges). Semantic checks — repeated or unknown ids, overlapping lists — belong to the receiving
party, so adversarial messages can still be built and tested.

Wire format (little-endian): ``version:u8 ‖ type:u8 ‖ session_id:32 ‖ peer:u32 ‖ body``, where
peer is the sender of a client-to-server message and the recipient of a server-to-client one.
Version 2 added the malicious-mode fields (signatures, the consistency check) and the
robustness fields (complaints, revealed seeds and pairwise keys); version 3 has one mask key per
client and session, per-sum pair-key escrows and recovery-key commitments in the shares message
(``secagg/malicious_security.md`` §5).
Masked vectors are bit-packed to ⌈log₂ M⌉ bits per entry. :func:`decode_message` raises only
:class:`~secagg.errors.RemoteProtocolError` on any input, never ``IndexError``, ``struct.error``
or ``KeyError``.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable
from dataclasses import dataclass, field
from enum import IntEnum
from typing import NamedTuple, TypeAlias

import numpy as np

from secagg.errors import RemoteProtocolError
from secagg.ring import Ring, RingArray

__all__ = [
    "PROTOCOL_VERSION",
    "AdvertiseKeys",
    "ClientKeys",
    "ConsistencyRequest",
    "ConsistencySignature",
    "EncryptedShares",
    "ForwardedShares",
    "IterationRequest",
    "KeyDirectory",
    "MaskedInput",
    "Message",
    "MessageType",
    "UnmaskRequest",
    "UnmaskResponse",
    "decode_message",
]

PROTOCOL_VERSION = 3
SESSION_ID_BYTES = 32
PUBLIC_KEY_BYTES = 32
SIGNATURE_BYTES = 64
SEED_BYTES = 32
MASK_KEY_BYTES = 16
MAX_ITERATIONS = 255  # secure sums one session may run
MAX_ITERATE_BYTES = 1 << 28  # the server's broadcast per iteration (a model, a centre)
MAX_ID = 2**31 - 2  # ids are Shamir evaluation points below the prime 2^31 − 1
MAX_DIMENSION = 2**40  # entries of one summed vector (SecAggConfig's bound)
_HEADER = struct.Struct("<BB32sI")
_U8 = struct.Struct("<B")
_U16 = struct.Struct("<H")
_U32 = struct.Struct("<I")
_U64 = struct.Struct("<Q")
_BLOB_HEAD = struct.Struct("<IH")  # a blob entry: peer id, payload length


def _record(signed: bool) -> struct.Struct:
    """A directory record: id ‖ c_pk ‖ s_pk (‖ signature)."""
    return struct.Struct("<I32s32s" + ("64s" if signed else ""))


_ENTRY = _record(False)


class MessageType(IntEnum):
    """Wire type codes (1–7 in protocol order; 8–9 the malicious mode's consistency check; 10
    starts each further sum of a session)."""

    ADVERTISE_KEYS = 1
    KEY_DIRECTORY = 2
    ENCRYPTED_SHARES = 3
    FORWARDED_SHARES = 4
    MASKED_INPUT = 5
    UNMASK_REQUEST = 6
    UNMASK_RESPONSE = 7
    CONSISTENCY_REQUEST = 8
    CONSISTENCY_SIGNATURE = 9
    ITERATION_REQUEST = 10


def _check_id(name: str, value: object) -> None:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{name} must be an int; got {type(value).__name__}")
    if not 1 <= value <= MAX_ID:
        raise ValueError(f"{name} must lie in [1, {MAX_ID}]; got {value}")


def _check_bytes(name: str, value: object, length: int | None = None) -> None:
    if not isinstance(value, bytes):
        raise TypeError(f"{name} must be bytes; got {type(value).__name__}")
    if length is not None and len(value) != length:
        raise ValueError(f"{name} must be {length} bytes; got {len(value)}")


def _check_id_list(name: str, values: object) -> None:
    if not isinstance(values, tuple):
        raise TypeError(f"{name} must be a tuple of ids")
    if len(values) > 2**32 - 1:
        raise ValueError(f"{name} is too long")
    for value in values:
        _check_id(f"{name} entry", value)


def _check_iteration(value: object) -> None:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"iteration must be an int; got {type(value).__name__}")
    if not 1 <= value <= MAX_ITERATIONS:
        raise ValueError(f"iteration must lie in [1, {MAX_ITERATIONS}]; got {value}")


def _check_commitments(name: str, value: object) -> int:
    """A concatenation of 1..MAX_ITERATIONS 32-byte commitments; returns how many."""
    _check_bytes(name, value)
    assert isinstance(value, bytes)
    count, rest = divmod(len(value), 32)
    if rest or not 1 <= count <= MAX_ITERATIONS:
        raise ValueError(
            f"{name} must be 1 to {MAX_ITERATIONS} commitments of 32 bytes; got {len(value)} bytes"
        )
    return count


def _check_iterate(value: object) -> None:
    _check_bytes("iterate", value)
    assert isinstance(value, bytes)
    if len(value) > MAX_ITERATE_BYTES:
        raise ValueError(f"iterate holds at most {MAX_ITERATE_BYTES} bytes; got {len(value)}")


def _check_optional(name: str, value: object, length: int) -> None:
    _check_bytes(name, value)
    assert isinstance(value, bytes)
    if len(value) not in (0, length):
        raise ValueError(f"{name} must be empty or {length} bytes; got {len(value)}")


def _check_blobs(name: str, values: object) -> None:
    if not isinstance(values, tuple):
        raise TypeError(f"{name} must be a tuple of (id, bytes) pairs")
    for entry in values:
        if not (isinstance(entry, tuple) and len(entry) == 2):
            raise TypeError(f"{name} entries must be (id, bytes) pairs")
        peer, payload = entry
        # The common case in one test (a session's approvals hold ~n² entries per sum); any
        # other value goes through the checks that explain it.
        if type(peer) is int and 1 <= peer <= MAX_ID and type(payload) is bytes:
            if len(payload) > 0xFFFF:
                raise ValueError(f"{name} payloads hold at most 65535 bytes")
            continue
        _check_id(f"{name} id", peer)
        _check_bytes(f"{name} payload", payload)
        if len(payload) > 0xFFFF:
            raise ValueError(f"{name} payloads hold at most 65535 bytes")


def _encode_blobs(values: tuple[tuple[int, bytes], ...]) -> bytes:
    pack = _BLOB_HEAD.pack
    return _U32.pack(len(values)) + b"".join(
        [pack(peer, len(payload)) + payload for peer, payload in values]
    )


def _encode_ids(values: tuple[int, ...]) -> bytes:
    return _U32.pack(len(values)) + np.asarray(values, dtype="<u4").tobytes()


class ClientKeys(NamedTuple):
    """The public keys one client advertised — its share-encryption key and its mask key (one
    for the whole session) — and, in the malicious mode, its signature."""

    encryption_key: bytes
    mask_key: bytes
    signature: bytes = b""


@dataclass(frozen=True, slots=True)
class AdvertiseKeys:
    """Phase 0, client → server: the client's X25519 public keys.

    ``mask_key`` agrees one pair secret with each neighbour for the whole session; every sum's
    pairwise keys derive from it (:func:`secagg.keys.pair_sum_key`), and a drop is recovered
    from per-sum escrows, never from this key. ``session_id`` is the config digest: the session
    id does not exist yet. In the malicious mode ``signature``
    is the client's Ed25519 signature over :func:`secagg.identity.advertisement_message`; empty
    otherwise.
    """

    session_id: bytes
    sender: int
    encryption_key: bytes
    mask_key: bytes
    signature: bytes = b""

    message_type = MessageType.ADVERTISE_KEYS

    def __post_init__(self) -> None:
        _check_bytes("session_id", self.session_id, SESSION_ID_BYTES)
        _check_id("sender", self.sender)
        _check_bytes("encryption_key", self.encryption_key, PUBLIC_KEY_BYTES)
        _check_bytes("mask_key", self.mask_key, PUBLIC_KEY_BYTES)
        _check_optional("signature", self.signature, SIGNATURE_BYTES)

    @property
    def peer(self) -> int:
        """The client this message is from."""
        return self.sender

    def _body(self) -> bytes:
        return self.encryption_key + self.mask_key + _U8.pack(len(self.signature)) + self.signature


@dataclass(frozen=True, slots=True)
class KeyDirectory:
    """Phase 0, server → client: every advertised key, sorted by client id.

    ``entries`` is the canonical concatenation of ``id:u32 ‖ c_pk:32 ‖ s_pk:32`` records (with
    ``‖ signature:64`` when ``signed``, the malicious mode), strictly increasing in id; the
    session id is a hash of it, so all parties hash identical bytes. ``session_id`` is the
    config digest.

    Examples
    --------
    >>> keys = {5: ClientKeys(b"c" * 32, b"s" * 32), 2: ClientKeys(b"C" * 32, b"S" * 32)}
    >>> directory = KeyDirectory.build(bytes(32), 2, keys)
    >>> directory.ids_array().tolist(), directory.lookup([5])[5].mask_key[:1]
    ([2, 5], b's')
    """

    session_id: bytes
    recipient: int
    entries: bytes
    signed: bool = False

    message_type = MessageType.KEY_DIRECTORY

    def __post_init__(self) -> None:
        _check_bytes("session_id", self.session_id, SESSION_ID_BYTES)
        _check_id("recipient", self.recipient)
        _check_bytes("entries", self.entries)
        if not isinstance(self.signed, bool):
            raise TypeError("signed must be a bool")
        if len(self.entries) % self._record.size:
            raise ValueError(f"entries must be a multiple of {self._record.size} bytes")
        ids = self.ids_array()
        if ids.size and (ids[0] < 1 or ids[-1] > MAX_ID or (np.diff(ids) <= 0).any()):
            raise ValueError("directory ids must be strictly increasing in [1, 2^31 − 2]")

    @property
    def _record(self) -> struct.Struct:
        return _record(self.signed)

    @classmethod
    def build(
        cls,
        session_id: bytes,
        recipient: int,
        keys: dict[int, ClientKeys],
        *,
        signed: bool = False,
    ) -> KeyDirectory:
        """A directory from a mapping id → keys (sorted here); ``signed`` keeps the signatures."""
        record = _record(signed)
        if signed:
            blob = b"".join(record.pack(u, *keys[u]) for u in sorted(keys))
        else:
            blob = b"".join(
                record.pack(u, keys[u].encryption_key, keys[u].mask_key) for u in sorted(keys)
            )
        return cls(session_id, recipient, blob, signed)

    @property
    def peer(self) -> int:
        """The client this message is for."""
        return self.recipient

    def ids_array(self) -> np.ndarray[tuple[int], np.dtype[np.int64]]:
        """The listed client ids, ascending."""
        size = self._record.size
        records = np.frombuffer(self.entries, dtype=np.uint8).reshape(-1, size)
        return records[:, :4].copy().view("<u4").reshape(-1).astype(np.int64)

    def _entry(self, index: int) -> ClientKeys:
        fields = self._record.unpack_from(self.entries, index * self._record.size)
        return ClientKeys(*fields[1:])

    def keys(self) -> dict[int, ClientKeys]:
        """The directory as a mapping id → keys."""
        return {
            int(fields[0]): ClientKeys(*fields[1:])
            for fields in self._record.iter_unpack(self.entries)
        }

    def lookup(self, client_ids: Iterable[int]) -> dict[int, ClientKeys]:
        """The keys of the given clients only (binary search; no full parse).

        Raises
        ------
        KeyError
            If a client is not listed.
        """
        ids = self.ids_array()
        out: dict[int, ClientKeys] = {}
        for u in client_ids:
            index = int(np.searchsorted(ids, u))
            if index >= ids.size or ids[index] != u:
                raise KeyError(u)
            out[u] = self._entry(index)
        return out

    def _body(self) -> bytes:
        count = len(self.entries) // self._record.size
        return _U8.pack(int(self.signed)) + _U32.pack(count) + self.entries


@dataclass(frozen=True, slots=True)
class EncryptedShares:
    """Phase 1, client → server: one AEAD ciphertext of Shamir shares per neighbour, and what
    the server keeps to recover this client's sums if it drops.

    ``seed_commitment`` and ``recovery_commitment`` hold one SHA-256 commitment per sum of the
    session (concatenated; domain-separated, bound to the session, the client and the sum) to
    the self-mask seed b^r and the recovery key e^r: the server checks a seed or key it is
    given or rebuilds, so corrupted shares are detected instead of silently spoiling the sum.
    ``escrows`` holds, per neighbour v, for each sum r: the escrow of the pair key κ_uv^r under
    e^r (:func:`secagg.keys.seal_pair_key`) ‖ the commitment to κ_uv^r
    (:func:`secagg.transcript.pair_key_commitment`) — 64 bytes per sum.
    """

    session_id: bytes
    sender: int
    seed_commitment: bytes
    ciphertexts: tuple[tuple[int, bytes], ...]
    recovery_commitment: bytes = b""
    escrows: tuple[tuple[int, bytes], ...] = ()

    message_type = MessageType.ENCRYPTED_SHARES

    def __post_init__(self) -> None:
        _check_bytes("session_id", self.session_id, SESSION_ID_BYTES)
        _check_id("sender", self.sender)
        count = _check_commitments("seed_commitment", self.seed_commitment)
        _check_blobs("ciphertexts", self.ciphertexts)
        _check_bytes("recovery_commitment", self.recovery_commitment, 32 * count)
        _check_blobs("escrows", self.escrows)
        for _, escrow in self.escrows:
            if len(escrow) != 64 * count:
                raise ValueError(
                    f"each escrow entry must hold 64 bytes per sum ({64 * count}); got "
                    f"{len(escrow)}"
                )

    @property
    def peer(self) -> int:
        """The client this message is from."""
        return self.sender

    def commitment_of(self, iteration: int) -> bytes:
        """The commitment to the self-mask seed of ``iteration`` (1-based)."""
        return self.seed_commitment[32 * (iteration - 1) : 32 * iteration]

    def recovery_commitment_of(self, iteration: int) -> bytes:
        """The commitment to the recovery key of ``iteration`` (1-based)."""
        return self.recovery_commitment[32 * (iteration - 1) : 32 * iteration]

    def escrow_of(self, iteration: int) -> dict[int, tuple[bytes, bytes]]:
        """Neighbour → (escrow of the pair key of ``iteration``, its commitment)."""
        start = 64 * (iteration - 1)
        return {
            v: (blob[start : start + 32], blob[start + 32 : start + 64]) for v, blob in self.escrows
        }

    def _body(self) -> bytes:
        count = len(self.seed_commitment) // 32
        return (
            _U8.pack(count)
            + self.seed_commitment
            + self.recovery_commitment
            + _encode_blobs(self.ciphertexts)
            + _encode_blobs(self.escrows)
        )


@dataclass(frozen=True, slots=True)
class ForwardedShares:
    """Phase 1, server → client: the ciphertexts addressed to the recipient, by sender; it also
    starts the session's first sum.

    The senders are the recipient's neighbours that completed share_keys. ``iterate`` is what
    the server broadcasts for the first sum (a model, a centre; may be empty): the client's input
    is computed from it, and the malicious mode binds it into the consistency approvals.
    """

    session_id: bytes
    recipient: int
    ciphertexts: tuple[tuple[int, bytes], ...]
    iterate: bytes = b""

    message_type = MessageType.FORWARDED_SHARES

    def __post_init__(self) -> None:
        _check_bytes("session_id", self.session_id, SESSION_ID_BYTES)
        _check_id("recipient", self.recipient)
        _check_blobs("ciphertexts", self.ciphertexts)
        _check_iterate(self.iterate)

    @property
    def peer(self) -> int:
        """The client this message is for."""
        return self.recipient

    def _body(self) -> bytes:
        return _encode_blobs(self.ciphertexts) + _U32.pack(len(self.iterate)) + self.iterate


@dataclass(frozen=True, slots=True)
class IterationRequest:
    """Session, server → client: start sum ``iteration`` (≥ 2) over the ``members`` — the
    recipient's neighbours still in the session — with the server's broadcast ``iterate``.

    ``dimension`` is the length of this sum's vectors; 0 means the session's configured
    dimension (a session may sum vectors of different lengths, e.g. a count, then a model).
    """

    session_id: bytes
    recipient: int
    iteration: int
    members: tuple[int, ...]
    iterate: bytes = b""
    dimension: int = 0

    message_type = MessageType.ITERATION_REQUEST

    def __post_init__(self) -> None:
        _check_bytes("session_id", self.session_id, SESSION_ID_BYTES)
        _check_id("recipient", self.recipient)
        _check_iteration(self.iteration)
        _check_id_list("members", self.members)
        _check_iterate(self.iterate)
        if isinstance(self.dimension, bool) or not isinstance(self.dimension, int):
            raise TypeError(f"dimension must be an int; got {type(self.dimension).__name__}")
        if not 0 <= self.dimension <= MAX_DIMENSION:
            raise ValueError(f"dimension must lie in [0, 2^40]; got {self.dimension}")

    @property
    def peer(self) -> int:
        """The client this message is for."""
        return self.recipient

    def _body(self) -> bytes:
        return (
            _U16.pack(self.iteration)
            + _encode_ids(self.members)
            + _U32.pack(len(self.iterate))
            + self.iterate
            + _U64.pack(self.dimension)
        )


@dataclass(frozen=True, slots=True)
class MaskedInput:
    """Phase 2, client → server: y_u = x_u + masks (mod M), bit-packed on the wire.

    ``complaints`` lists the neighbours whose share ciphertext did not authenticate: the client
    masked with them as usual but holds no share of their secrets (so the server knows whom to
    blame and which shares not to expect).

    Examples
    --------
    >>> msg = MaskedInput(bytes(32), 1, 12, np.arange(8, dtype=np.uint32))
    >>> len(encode_message(msg)) - 53  # 8 entries × 12 bits
    12
    """

    session_id: bytes
    sender: int
    modulus_bits: int
    vector: RingArray = field(compare=False)
    complaints: tuple[int, ...] = ()
    iteration: int = 1

    message_type = MessageType.MASKED_INPUT

    def __post_init__(self) -> None:
        _check_bytes("session_id", self.session_id, SESSION_ID_BYTES)
        _check_id("sender", self.sender)
        ring = Ring(self.modulus_bits)
        if not isinstance(self.vector, np.ndarray):
            raise TypeError("vector must be a numpy array")
        if self.vector.ndim != 1 or self.vector.dtype != ring.dtype:
            raise ValueError(f"vector must be a 1-D {ring.dtype} array")
        _check_id_list("complaints", self.complaints)
        _check_iteration(self.iteration)

    @property
    def peer(self) -> int:
        """The client this message is from."""
        return self.sender

    def _body(self) -> bytes:
        return b"".join(self._chunks())

    def _chunks(self) -> list[bytes | memoryview]:
        # The vector is joined straight into the message (no intermediate copy).
        ring = Ring(self.modulus_bits)
        return [
            _U16.pack(self.iteration),
            _U8.pack(self.modulus_bits),
            _encode_ids(self.complaints),
            _U64.pack(self.vector.size),
            ring.pack_buffer(self.vector),
        ]


@dataclass(frozen=True, slots=True)
class ConsistencyRequest:
    """Malicious mode, server → client: U3, every client whose masked input the server holds.

    The client signs (session, U3) only if it is in U3 and U3 agrees with what it knows; two
    honest clients shown different sets sign different messages, and no set gathers the quorum
    of signatures twice (Bonawitz et al. 2017, the ConsistencyCheck round).
    """

    session_id: bytes
    recipient: int
    survivors: tuple[int, ...]
    iteration: int = 1

    message_type = MessageType.CONSISTENCY_REQUEST

    def __post_init__(self) -> None:
        _check_bytes("session_id", self.session_id, SESSION_ID_BYTES)
        _check_id("recipient", self.recipient)
        _check_id_list("survivors", self.survivors)
        _check_iteration(self.iteration)

    @property
    def peer(self) -> int:
        """The client this message is for."""
        return self.recipient

    def _body(self) -> bytes:
        return _U16.pack(self.iteration) + _encode_ids(self.survivors)


@dataclass(frozen=True, slots=True)
class ConsistencySignature:
    """Malicious mode, client → server: the client's approval of (session, iteration, U3, the
    iterate it received) — one Ed25519 ``signature`` in a single sum, or in a session of several
    sums ``approvals``: (recipient, 32-byte MAC tag) for every other member of U3
    (:func:`secagg.identity.approval_tag`)."""

    session_id: bytes
    sender: int
    signature: bytes
    iteration: int = 1
    approvals: tuple[tuple[int, bytes], ...] = ()

    message_type = MessageType.CONSISTENCY_SIGNATURE

    def __post_init__(self) -> None:
        _check_bytes("session_id", self.session_id, SESSION_ID_BYTES)
        _check_id("sender", self.sender)
        _check_optional("signature", self.signature, SIGNATURE_BYTES)
        _check_iteration(self.iteration)
        _check_blobs("approvals", self.approvals)

    @property
    def peer(self) -> int:
        """The client this message is from."""
        return self.sender

    def _body(self) -> bytes:
        return (
            _U16.pack(self.iteration)
            + _U8.pack(len(self.signature))
            + self.signature
            + _encode_blobs(self.approvals)
        )


@dataclass(frozen=True, slots=True)
class UnmaskRequest:
    """Last phase, server → client: which of the recipient's neighbours survived or dropped.

    The client answers with the self-mask-seed share of each survivor and the recovery-key share
    of each dropped neighbour (for this sum) — never both for one neighbour. In the malicious
    mode ``signatures`` carries the consistency signatures (id, signature) over the U3 the
    client signed — in a session of several sums, the approvals (id, MAC tag) addressed to this
    client — and the client answers only if a quorum of them verifies.
    """

    session_id: bytes
    recipient: int
    survivors: tuple[int, ...]
    dropped: tuple[int, ...]
    signatures: tuple[tuple[int, bytes], ...] = ()
    iteration: int = 1

    message_type = MessageType.UNMASK_REQUEST

    def __post_init__(self) -> None:
        _check_bytes("session_id", self.session_id, SESSION_ID_BYTES)
        _check_id("recipient", self.recipient)
        _check_id_list("survivors", self.survivors)
        _check_id_list("dropped", self.dropped)
        _check_blobs("signatures", self.signatures)
        _check_iteration(self.iteration)

    @property
    def peer(self) -> int:
        """The client this message is for."""
        return self.recipient

    def _body(self) -> bytes:
        return (
            _U16.pack(self.iteration)
            + _encode_ids(self.survivors)
            + _encode_ids(self.dropped)
            + _encode_blobs(self.signatures)
        )


@dataclass(frozen=True, slots=True)
class UnmaskResponse:
    """Last phase, client → server: what the server needs to remove the masks.

    ``self_mask_seed`` is the sender's own seed b_u (the server would reconstruct it from shares
    anyway, as the sender survived; revealing it lets the server skip the reconstruction and
    survive shares that were dealt wrong). ``seed_shares`` and ``key_shares`` are (owner id,
    share bytes) for surviving and dropped neighbours — a share is the little-endian ``u32``
    field elements of one secret's sub-secret shares — and ``pairwise_keys`` are (dropped
    neighbour, the pair's 32-byte sum key κ_uv^r) so the server can cancel those masks without
    the dropped client's shares; it checks each κ against the sender's commitment to it.
    """

    session_id: bytes
    sender: int
    seed_shares: tuple[tuple[int, bytes], ...]
    key_shares: tuple[tuple[int, bytes], ...]
    self_mask_seed: bytes = b""
    pairwise_keys: tuple[tuple[int, bytes], ...] = ()
    iteration: int = 1

    message_type = MessageType.UNMASK_RESPONSE

    def __post_init__(self) -> None:
        _check_bytes("session_id", self.session_id, SESSION_ID_BYTES)
        _check_id("sender", self.sender)
        _check_blobs("seed_shares", self.seed_shares)
        _check_blobs("key_shares", self.key_shares)
        _check_optional("self_mask_seed", self.self_mask_seed, SEED_BYTES)
        _check_blobs("pairwise_keys", self.pairwise_keys)
        _check_iteration(self.iteration)

    @property
    def peer(self) -> int:
        """The client this message is from."""
        return self.sender

    def _body(self) -> bytes:
        return (
            _U16.pack(self.iteration)
            + _U8.pack(len(self.self_mask_seed))
            + self.self_mask_seed
            + _encode_blobs(self.seed_shares)
            + _encode_blobs(self.key_shares)
            + _encode_blobs(self.pairwise_keys)
        )


Message: TypeAlias = (
    AdvertiseKeys
    | KeyDirectory
    | EncryptedShares
    | ForwardedShares
    | IterationRequest
    | MaskedInput
    | ConsistencyRequest
    | ConsistencySignature
    | UnmaskRequest
    | UnmaskResponse
)
MESSAGE_CLASSES: tuple[type[Message], ...] = (
    AdvertiseKeys,
    KeyDirectory,
    EncryptedShares,
    ForwardedShares,
    IterationRequest,
    MaskedInput,
    ConsistencyRequest,
    ConsistencySignature,
    UnmaskRequest,
    UnmaskResponse,
)


def encode_message(message: Message) -> bytes:
    """The wire bytes of a message.

    Examples
    --------
    >>> msg = AdvertiseKeys(bytes(32), 3, bytes(32), bytes(32))
    >>> data = encode_message(msg)
    >>> len(data), decode_message(data) == msg
    (103, True)
    """
    header = _HEADER.pack(
        PROTOCOL_VERSION, int(message.message_type), message.session_id, message.peer
    )
    if isinstance(message, MaskedInput):
        return b"".join([header, *message._chunks()])
    return header + message._body()


class _Reader:
    """Bounds-checked cursor over received bytes; every failure is a RemoteProtocolError."""

    __slots__ = ("data", "offset", "peer")

    def __init__(self, data: bytes, offset: int, peer: int | None) -> None:
        self.data = data
        self.offset = offset
        self.peer = peer

    def fail(self, reason: str) -> RemoteProtocolError:
        return RemoteProtocolError(f"malformed message: {reason}", peer_id=self.peer)

    def take(self, size: int) -> bytes:
        if size < 0 or self.offset + size > len(self.data):
            raise self.fail("truncated")
        chunk = self.data[self.offset : self.offset + size]
        self.offset += size
        return chunk

    def view(self, size: int) -> memoryview:
        """Like :meth:`take`, without copying (for a large vector)."""
        if size < 0 or self.offset + size > len(self.data):
            raise self.fail("truncated")
        chunk = memoryview(self.data)[self.offset : self.offset + size]
        self.offset += size
        return chunk

    def unpack(self, fmt: struct.Struct) -> int:
        value: int = fmt.unpack(self.take(fmt.size))[0]
        return value

    def count(self, item_size: int) -> int:
        count = self.unpack(_U32)
        if count * item_size > len(self.data) - self.offset:
            raise self.fail("count exceeds the message length")
        return count

    def blobs(self) -> tuple[tuple[int, bytes], ...]:
        count = self.count(_BLOB_HEAD.size)
        data, offset, end = self.data, self.offset, len(self.data)
        unpack = _BLOB_HEAD.unpack_from
        out = []
        for _ in range(count):
            if offset + _BLOB_HEAD.size > end:
                raise self.fail("truncated")
            peer, size = unpack(data, offset)
            offset += _BLOB_HEAD.size
            if offset + size > end:
                raise self.fail("truncated")
            out.append((peer, data[offset : offset + size]))
            offset += size
        self.offset = offset
        return tuple(out)

    def ids(self) -> tuple[int, ...]:
        count = self.count(4)
        return tuple(np.frombuffer(self.take(4 * count), dtype="<u4").tolist())

    def sized(self) -> bytes:
        """A u32 length, then that many bytes."""
        size = self.unpack(_U32)
        if size > MAX_ITERATE_BYTES:
            raise self.fail(f"a field of {size} bytes exceeds {MAX_ITERATE_BYTES}")
        return self.take(size)

    def optional(self, length: int) -> bytes:
        size = self.unpack(_U8)
        if size not in (0, length):
            raise self.fail(f"field of {size} bytes; expected 0 or {length}")
        return self.take(size)

    def finish(self) -> None:
        if self.offset != len(self.data):
            raise self.fail(f"{len(self.data) - self.offset} trailing bytes")


def decode_message(data: bytes | bytearray | memoryview, *, peer_id: int | None = None) -> Message:
    """Decode wire bytes into a message.

    Parameters
    ----------
    data
        The received bytes.
    peer_id
        The transport's idea of who sent them, for error attribution (optional).

    Raises
    ------
    RemoteProtocolError
        On any malformed, truncated, non-canonical or unsupported input (and only that).

    Examples
    --------
    >>> decode_message(b"\\x01\\x09")
    Traceback (most recent call last):
    ...
    secagg.errors.RemoteProtocolError: malformed message: truncated
    """
    data = bytes(data)
    reader = _Reader(data, 0, peer_id)
    if len(data) < _HEADER.size:
        raise reader.fail("truncated")
    version, type_code, session_id, peer = _HEADER.unpack_from(data)
    reader.offset = _HEADER.size
    if peer_id is None:
        reader.peer = peer
    if version != PROTOCOL_VERSION:
        raise RemoteProtocolError(
            f"unsupported protocol version {version} (this is version {PROTOCOL_VERSION})",
            peer_id=reader.peer,
        )
    try:
        kind = MessageType(type_code)
    except ValueError:
        raise reader.fail(f"unknown message type {type_code}") from None
    try:
        message: Message
        if kind is MessageType.ADVERTISE_KEYS:
            encryption_key = reader.take(PUBLIC_KEY_BYTES)
            message = AdvertiseKeys(
                session_id,
                peer,
                encryption_key,
                reader.take(PUBLIC_KEY_BYTES),
                reader.optional(SIGNATURE_BYTES),
            )
        elif kind is MessageType.KEY_DIRECTORY:
            signed = reader.unpack(_U8)
            if signed not in (0, 1):
                raise reader.fail(f"directory flag {signed}")
            record = _record(bool(signed))
            count = reader.count(record.size)
            message = KeyDirectory(session_id, peer, reader.take(count * record.size), bool(signed))
        elif kind is MessageType.ENCRYPTED_SHARES:
            commitments = reader.unpack(_U8)
            seeds = reader.take(32 * commitments)
            recovery = reader.take(32 * commitments)
            message = EncryptedShares(
                session_id, peer, seeds, reader.blobs(), recovery, reader.blobs()
            )
        elif kind is MessageType.FORWARDED_SHARES:
            message = ForwardedShares(session_id, peer, reader.blobs(), reader.sized())
        elif kind is MessageType.ITERATION_REQUEST:
            iteration = reader.unpack(_U16)
            members, iterate = reader.ids(), reader.sized()
            message = IterationRequest(
                session_id, peer, iteration, members, iterate, reader.unpack(_U64)
            )
        elif kind is MessageType.MASKED_INPUT:
            iteration = reader.unpack(_U16)
            bits = reader.unpack(_U8)
            if not 1 <= bits <= 64:
                raise reader.fail(f"modulus bits {bits} outside [1, 64]")
            ring = Ring(bits)
            complaints = reader.ids()
            dimension = reader.unpack(_U64)
            if ring.packed_size(dimension) != len(data) - reader.offset:
                raise reader.fail("vector length does not match its dimension")
            vector = ring.unpack(reader.view(ring.packed_size(dimension)), dimension)
            message = MaskedInput(session_id, peer, bits, vector, complaints, iteration)
        elif kind is MessageType.CONSISTENCY_REQUEST:
            iteration = reader.unpack(_U16)
            message = ConsistencyRequest(session_id, peer, reader.ids(), iteration)
        elif kind is MessageType.CONSISTENCY_SIGNATURE:
            iteration = reader.unpack(_U16)
            signature = reader.optional(SIGNATURE_BYTES)
            message = ConsistencySignature(session_id, peer, signature, iteration, reader.blobs())
        elif kind is MessageType.UNMASK_REQUEST:
            iteration = reader.unpack(_U16)
            message = UnmaskRequest(
                session_id, peer, reader.ids(), reader.ids(), reader.blobs(), iteration
            )
        else:
            iteration = reader.unpack(_U16)
            seed = reader.optional(SEED_BYTES)
            message = UnmaskResponse(
                session_id, peer, reader.blobs(), reader.blobs(), seed, reader.blobs(), iteration
            )
        reader.finish()
    except (ValueError, TypeError) as exc:
        raise reader.fail(str(exc)) from None
    return message
