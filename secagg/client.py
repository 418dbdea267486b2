"""The SecAgg / SecAgg+ client: a sans-I/O state machine (Bonawitz et al. 2017, Fig. 4; the
malicious mode adds that paper's active-adversary checks: signed keys and the consistency round).

The client never opens a socket, sleeps or reads a clock: :meth:`Client.receive` takes a message
from the server and returns the messages to send back. Allowed (state, message type) pairs live
in one table; anything else — and any invalid content — moves the client to ``ABORTED`` and
raises. After that, every call raises.

Robustness to misbehaving peers: a neighbour's share ciphertext that does not authenticate is a
complaint (reported with the masked input), not an abort — the client still masks with that
neighbour and simply holds none of its shares, so one bad client cannot make its neighbours
abort the round.

Sessions: with ``config.iterations = R > 1`` one key setup serves R secure sums. One mask key
agreement per neighbour gives a pair secret; each sum's pairwise key is its own PRF output
κ_uv^r, each sum has its own self-mask seed b^r and its own recovery key e^r (both shared once at
setup), and κ_uv^r is escrowed under e^r with the server — so recovering a client that drops in
sum r reveals nothing of any other sum, and a further sum costs no key agreement. Sum r ≥ 2
starts with an :class:`~secagg.messages.IterationRequest` carrying the server's broadcast (the
iterate), bound into that sum's pairwise keys and, in the malicious mode, its consistency
approvals — MAC tags under keys agreed once with every client, not signatures
(``secagg/malicious_security.md`` §5).
"""

from __future__ import annotations

import hmac
import logging
import struct
from collections.abc import Callable
from enum import Enum

import numpy as np
from numpy.typing import ArrayLike

from secagg import shamir
from secagg.config import SecAggConfig
from secagg.errors import (
    LocalProtocolError,
    ProtocolError,
    RemoteProtocolError,
    TooFewSurvivorsError,
)
from secagg.graph import build_graph
from secagg.identity import (
    IdentityKey,
    TrustStore,
    advertisement_message,
    approval_tag,
    consistency_message,
    sum_binding,
)
from secagg.keys import (
    KEY_BYTES,
    KeyPair,
    approval_key,
    decrypt_shares,
    encrypt_shares,
    pair_sum_key,
    seal_pair_key,
    share_encryption_key,
)
from secagg.masks import add_masks, pairwise_mask_key, self_mask_key
from secagg.messages import (
    MAX_ID,
    AdvertiseKeys,
    ClientKeys,
    ConsistencyRequest,
    ConsistencySignature,
    EncryptedShares,
    ForwardedShares,
    IterationRequest,
    KeyDirectory,
    MaskedInput,
    Message,
    UnmaskRequest,
    UnmaskResponse,
    decode_message,
    encode_message,
)
from secagg.randomness import KeystreamRandom, RandomSource
from secagg.ring import RingArray
from secagg.transcript import (
    SERVER_ID,
    SHARE_BYTES,
    encode_share,
    pair_key_commitment,
    recovery_commitment,
    seed_commitment,
    session_id,
    share_plaintext_bytes,
)

__all__ = ["Client", "ClientState"]

# Snapshot format (little-endian): version:u8 ‖ state:u8 ‖ client_id:u32 ‖ field*, each field a u32
# length and its bytes, in the order of _SNAPSHOT_FIELDS.
_SNAPSHOT_VERSION = 5
_SNAPSHOT_HEADER = struct.Struct("<BBI")
_U32 = struct.Struct("<I")
_SESSION_BYTES = 32  # a SHA-256 session id; also the length of a share-encryption key
_SNAPSHOT_FIELDS = (
    "config",
    "abort_reason",
    "encryption_key",
    "mask_key",
    "pair_secrets",
    "round_secret",
    "self_mask_seeds",
    "session_id",
    "directory_ids",
    "neighbors",
    "neighbor_keys",
    "receive_keys",
    "iteration",
    "members",
    "complaints",
    "held_seed_shares",
    "held_key_shares",
    "survivor_view",
    "iterate_digest",
    "input",
    "directory",
    "approval_keys",
    "verified",
)
_ROUND_LABEL = b"secagg-dp/v2/client-round/"


def _encode_map(entries: dict[int, bytes]) -> bytes:
    return b"".join(_U32.pack(k) + _U32.pack(len(v)) + v for k, v in sorted(entries.items()))


def _decode_map(data: bytes, value_bytes: int) -> dict[int, bytes]:
    out: dict[int, bytes] = {}
    offset = 0
    while offset < len(data):
        (key,) = _U32.unpack_from(data, offset)
        (size,) = _U32.unpack_from(data, offset + 4)
        offset += 8
        value = data[offset : offset + size]
        if len(value) != size or size != value_bytes or key in out:
            raise ValueError("corrupt client snapshot: bad map entry")
        out[key] = value
        offset += size
    return out


def _encode_ids(ids: tuple[int, ...]) -> bytes:
    return np.asarray(ids, dtype="<u4").tobytes()


def _decode_ids(data: bytes) -> tuple[int, ...]:
    if len(data) % 4:
        raise ValueError("corrupt client snapshot: bad field length")
    return tuple(int(v) for v in np.frombuffer(data, dtype="<u4"))


def _chunks(data: bytes, size: int) -> list[bytes]:
    if len(data) % size:
        raise ValueError("corrupt client snapshot: bad field length")
    return [data[i : i + size] for i in range(0, len(data), size)]


logger = logging.getLogger(__name__)


class ClientState(Enum):
    """Where a client is in the protocol."""

    INITIAL = "initial"
    AWAITING_KEY_DIRECTORY = "awaiting_key_directory"
    AWAITING_SHARES = "awaiting_shares"
    AWAITING_CONSISTENCY_REQUEST = "awaiting_consistency_request"
    AWAITING_UNMASK_REQUEST = "awaiting_unmask_request"
    AWAITING_ITERATION = "awaiting_iteration"
    COMPLETED = "completed"
    ABORTED = "aborted"


class Client:
    """One SecAgg / SecAgg+ client (of one sum, or of a session of ``config.iterations`` sums).

    Parameters
    ----------
    config
        The round's public parameters (shared with the server and all clients).
    client_id
        This client's id, in [1, 2^31 − 2]; it is also its Shamir evaluation point.
    input_vector
        The integer vector to sum (length ``config.dimension``, values in [-M/2, M)); may
        instead be given later with :meth:`set_input`, before each masked-input phase.
    random_source
        Cryptographic randomness for keys and the per-round secret; ``None`` draws a fresh
        :class:`~secagg.KeystreamRandom` seeded by the operating system.
    identity, trust_store
        Malicious mode (the default of :class:`SecAggConfig`): this client's long-term signing
        key, and the verification keys of every client (which must list ``identity`` under
        ``client_id``). Ignored in the semi-honest mode.

    Raises
    ------
    TypeError, ValueError
        On a wrong argument, or a malicious-mode client without a matching identity.

    Examples
    --------
    >>> from secagg.identity import generate_identities
    >>> keys, store = generate_identities([1, 2], seed=0)
    >>> cfg = SecAggConfig(dimension=4, threshold=1, round_nonce=bytes(16))
    >>> client = Client(cfg, 1, input_vector=[1, 2, 3, 4], identity=keys[1], trust_store=store)
    >>> [type(m).__name__ for m in client.start()]
    ['AdvertiseKeys']
    >>> client.state
    <ClientState.AWAITING_KEY_DIRECTORY: 'awaiting_key_directory'>
    """

    def __init__(
        self,
        config: SecAggConfig,
        client_id: int,
        *,
        input_vector: ArrayLike | None = None,
        random_source: RandomSource | None = None,
        identity: IdentityKey | None = None,
        trust_store: TrustStore | None = None,
    ) -> None:
        if not isinstance(config, SecAggConfig):
            raise TypeError(f"config must be a SecAggConfig; got {type(config).__name__}")
        if isinstance(client_id, bool) or not isinstance(client_id, int):
            raise TypeError(f"client_id must be an int; got {type(client_id).__name__}")
        if not 1 <= client_id <= MAX_ID:
            raise ValueError(f"client_id must lie in [1, {MAX_ID}]; got {client_id}")
        if random_source is not None and not isinstance(random_source, RandomSource):
            raise TypeError("random_source must provide fill() and random_bytes()")
        if config.malicious:
            if not isinstance(identity, IdentityKey) or not isinstance(trust_store, TrustStore):
                raise TypeError(
                    "the malicious mode needs identity= (an IdentityKey) and trust_store= (a "
                    "TrustStore); for the semi-honest mode set SecAggConfig(threat_model="
                    "'semi-honest')"
                )
            if trust_store.public_key(client_id) != identity.public:
                raise ValueError(
                    f"the trust store does not list this identity key for client {client_id}"
                )
        self.config = config
        self.client_id = client_id
        self._random = random_source if random_source is not None else KeystreamRandom()
        self._identity = identity if config.malicious else None
        self._trust_store = trust_store if config.malicious else None
        self._state = ClientState.INITIAL
        self._abort_reason: str | None = None
        self._input: RingArray | None = None
        if input_vector is not None:
            self.set_input(input_vector)
        # Secrets and per-session state, filled in as the phases go.
        self._encryption_keys: KeyPair | None = None
        self._mask_key: KeyPair | None = None  # until the pair secrets are agreed
        self._pair_secrets: dict[int, bytes] = {}  # X25519 with each neighbour, for the session
        self._round_secret = b""
        self._self_mask_seeds: list[bytes] = []  # one per sum of the session
        self._session_id = b""
        self._directory_ids: tuple[int, ...] = ()
        self._neighbors: tuple[int, ...] = ()
        self._neighbor_keys: dict[int, ClientKeys] = {}
        self._receive_keys: dict[int, bytes] = {}
        self._iteration = 0  # the sum in progress (1-based); 0 before the first
        self._members: tuple[int, ...] = ()  # the neighbours this sum masks with
        self._complaints: tuple[int, ...] = ()
        self._held_seed_shares: dict[int, bytes] = {}  # every sum's, per neighbour
        self._held_key_shares: dict[int, bytes] = {}
        self._survivor_view: tuple[int, ...] = ()
        self._iterate_digest = b""
        # Sessions in the malicious mode (config.mac_approvals): the signed directory, the
        # approval key with every other client, and whose advertisements this client checked.
        self._directory: KeyDirectory | None = None
        self._approval_keys: dict[int, bytes] = {}
        self._verified: set[int] = set()

    # -- public API ---------------------------------------------------------------------------

    @property
    def state(self) -> ClientState:
        """The current state."""
        return self._state

    @property
    def abort_reason(self) -> str | None:
        """Why the client aborted, if it did."""
        return self._abort_reason

    @property
    def session_id(self) -> bytes | None:
        """The session id once the key directory has been received."""
        return self._session_id or None

    @property
    def neighbors(self) -> tuple[int, ...]:
        """This client's neighbours in the communication graph (after the key directory)."""
        return self._neighbors

    @property
    def complaints(self) -> tuple[int, ...]:
        """Neighbours whose share ciphertext did not authenticate (after the masked input)."""
        return self._complaints

    @property
    def iteration(self) -> int:
        """The sum of the session in progress, or last completed (1-based; 0 before)."""
        return self._iteration

    def set_input(self, input_vector: ArrayLike) -> None:
        """Set the vector to sum (integers in [-M/2, M)): before the first masked-input phase
        (length ``config.dimension``), and in a session again before each further sum (the
        length that sum's :class:`~secagg.messages.IterationRequest` names, checked then).

        Raises
        ------
        LocalProtocolError
            If the client is between a masked input and its unmask request, or finished.
        TypeError, ValueError
            On a non-integer vector, a wrong length or values out of range.
        """
        if self._state in (
            ClientState.AWAITING_CONSISTENCY_REQUEST,
            ClientState.AWAITING_UNMASK_REQUEST,
            ClientState.COMPLETED,
            ClientState.ABORTED,
        ):
            raise LocalProtocolError(f"cannot set the input in state {self._state.name}")
        vector = self.config.ring.reduce(input_vector)
        later = self._state is ClientState.AWAITING_ITERATION
        if vector.size != self.config.dimension and not (later and vector.size > 0):
            raise ValueError(
                f"input has {vector.size} entries; this round sums vectors of dimension "
                f"{self.config.dimension}"
            )
        self._input = vector

    def start(self) -> list[Message]:
        """Begin the round: draw the round's secrets and advertise the public keys (the
        share-encryption key and the session's mask key).

        In the malicious mode the advertisement is signed with the identity key, bound to the
        round (config digest), the id and every key.

        Raises
        ------
        LocalProtocolError
            If the client has already started.
        """
        if self._state is not ClientState.INITIAL:
            self._raise_if_aborted()
            raise self._fail(LocalProtocolError(f"start() called in state {self._state.name}"))
        # Every later secret of the round derives from these draws, so a restored client that
        # handles the same directory again re-sends identical bytes.
        self._round_secret = self._random.random_bytes(KEY_BYTES)
        self._encryption_keys = KeyPair.generate(self._random)
        self._mask_key = KeyPair.generate(self._random)
        self._state = ClientState.AWAITING_KEY_DIRECTORY
        encryption = self._encryption_keys.public
        masks = self._mask_key.public
        signature = b""
        if self._identity is not None:
            signature = self._identity.sign(
                advertisement_message(self.config.digest, self.client_id, encryption, masks)
            )
        return [AdvertiseKeys(self.config.digest, self.client_id, encryption, masks, signature)]

    def receive(self, message: Message) -> list[Message]:
        """Process one message from the server; return the messages to send back.

        Raises
        ------
        RemoteProtocolError
            If the message is unexpected in this state or invalid; the client aborts.
        TooFewSurvivorsError
            If too few neighbours remain for the round to be safe; the client aborts.
        LocalProtocolError
            If the client had already aborted, or the input was never set.
        """
        self._raise_if_aborted()
        handler = _TRANSITIONS.get((self._state, type(message)))
        if handler is None:
            raise self._fail(
                RemoteProtocolError(
                    f"unexpected {type(message).__name__} in state {self._state.name}",
                    peer_id=SERVER_ID,
                )
            )
        try:
            return handler(self, message)
        except ProtocolError as exc:
            raise self._fail(exc) from None

    def receive_bytes(self, data: bytes) -> list[bytes]:
        """Decode wire bytes, process them, and encode the replies.

        Examples
        --------
        >>> cfg = SecAggConfig(dimension=2, threshold=1, round_nonce=bytes(16),
        ...                    threat_model="semi-honest")
        >>> client = Client(cfg, 1, input_vector=[0, 0])
        >>> client.start() and None
        >>> client.receive_bytes(b"garbage")
        Traceback (most recent call last):
        ...
        secagg.errors.RemoteProtocolError: malformed message: truncated (peer 0)
        >>> client.state
        <ClientState.ABORTED: 'aborted'>
        """
        self._raise_if_aborted()
        try:
            message = decode_message(data, peer_id=SERVER_ID)
        except RemoteProtocolError as exc:
            raise self._fail(exc) from None
        return [encode_message(reply) for reply in self.receive(message)]

    # -- snapshots ----------------------------------------------------------------------------

    def snapshot(self) -> bytes:
        """The client's whole state between two calls, as bytes.

        For transports whose client side is not one long-lived process (Flower re-runs its
        ClientApp for every message and keeps only the node's ``Context``). Neither the random
        source nor the identity key is saved (pass them to :meth:`restore`). The bytes hold the
        round's secret keys and seeds: they must never leave the client's node, and must never
        be rolled back (a client restored from a stale snapshot after it handled a key
        directory could be led through a second directory with the same keys).

        Returns
        -------
        bytes
            A versioned encoding that :meth:`restore` reads back.

        Examples
        --------
        >>> cfg = SecAggConfig(dimension=2, threshold=2, round_nonce=bytes(16),
        ...                    threat_model="semi-honest")
        >>> client = Client(cfg, 1, input_vector=[1, 2])
        >>> _ = client.start()
        >>> Client.restore(client.snapshot()).state
        <ClientState.AWAITING_KEY_DIRECTORY: 'awaiting_key_directory'>
        """
        values = {
            "config": self.config.to_bytes(),
            "abort_reason": (self._abort_reason or "").encode(),
            "encryption_key": b""
            if self._encryption_keys is None
            else self._encryption_keys.private,
            "mask_key": b"" if self._mask_key is None else self._mask_key.private,
            "pair_secrets": _encode_map(self._pair_secrets),
            "round_secret": self._round_secret,
            "self_mask_seeds": b"".join(self._self_mask_seeds),
            "session_id": self._session_id,
            "directory_ids": _encode_ids(self._directory_ids),
            "neighbors": _encode_ids(self._neighbors),
            "neighbor_keys": _encode_map(
                {v: keys[0] + keys[1] for v, keys in self._neighbor_keys.items()}
            ),
            "receive_keys": _encode_map(self._receive_keys),
            "iteration": _U32.pack(self._iteration),
            "members": _encode_ids(self._members),
            "complaints": _encode_ids(self._complaints),
            "held_seed_shares": _encode_map(self._held_seed_shares),
            "held_key_shares": _encode_map(self._held_key_shares),
            "survivor_view": _encode_ids(self._survivor_view),
            "iterate_digest": self._iterate_digest,
            "input": b"" if self._input is None else self._input.astype("<u8").tobytes(),
            "directory": b"" if self._directory is None else self._directory.entries,
            "approval_keys": _encode_map(self._approval_keys),
            "verified": _encode_ids(tuple(sorted(self._verified))),
        }
        states = tuple(ClientState)
        head = _SNAPSHOT_HEADER.pack(_SNAPSHOT_VERSION, states.index(self._state), self.client_id)
        return head + b"".join(
            _U32.pack(len(values[name])) + values[name] for name in _SNAPSHOT_FIELDS
        )

    @staticmethod
    def snapshot_config(data: bytes) -> SecAggConfig:
        """The round config a snapshot holds, read without restoring the client (to find out,
        for example, whether its restore needs an identity).

        Raises
        ------
        ValueError
            If the bytes do not start like a snapshot of this version.

        Examples
        --------
        >>> from secagg.identity import generate_identities
        >>> cfg = SecAggConfig(dimension=2, threshold=1, round_nonce=bytes(16))
        >>> keys, store = generate_identities([1], seed=0)
        >>> client = Client(cfg, 1, identity=keys[1], trust_store=store)
        >>> Client.snapshot_config(client.snapshot()) == cfg
        True
        """
        data = bytes(data)
        offset = _SNAPSHOT_HEADER.size
        if len(data) < offset + 4 or data[0] != _SNAPSHOT_VERSION:
            raise ValueError("corrupt client snapshot: truncated")
        (size,) = _U32.unpack_from(data, offset)
        return SecAggConfig.from_bytes(data[offset + 4 : offset + 4 + size])

    @classmethod
    def restore(
        cls,
        data: bytes,
        *,
        random_factory: Callable[[SecAggConfig, int], RandomSource] | None = None,
        identity: IdentityKey | None = None,
        trust_store: TrustStore | None = None,
    ) -> Client:
        """The client that :meth:`snapshot` saved, ready for its next call.

        Parameters
        ----------
        data
            Bytes from :meth:`snapshot`.
        random_factory
            ``random_factory(config, client_id)`` gives the restored client's random source;
            ``None``: fresh operating-system randomness.
        identity, trust_store
            As for the constructor (required in the malicious mode).

        Raises
        ------
        ValueError
            If the bytes are not a well-formed snapshot of this version.
        TypeError
            If a malicious-mode snapshot is restored without an identity and trust store.

        Examples
        --------
        >>> cfg = SecAggConfig(dimension=2, threshold=2, round_nonce=bytes(16),
        ...                    threat_model="semi-honest")
        >>> Client.restore(Client(cfg, 2).snapshot()).client_id
        2
        >>> Client.restore(b"junk")
        Traceback (most recent call last):
        ...
        ValueError: corrupt client snapshot: truncated
        """
        data = bytes(data)
        states = tuple(ClientState)
        try:
            version, state_index, client_id = _SNAPSHOT_HEADER.unpack_from(data)
            if version != _SNAPSHOT_VERSION or state_index >= len(states):
                raise ValueError(
                    f"unsupported client snapshot (version {version}, state {state_index}); "
                    f"this build reads version {_SNAPSHOT_VERSION}"
                )
            fields: list[bytes] = []
            offset = _SNAPSHOT_HEADER.size
            while offset < len(data):
                (size,) = _U32.unpack_from(data, offset)
                fields.append(data[offset + 4 : offset + 4 + size])
                offset += 4 + size
            if len(fields) != len(_SNAPSHOT_FIELDS) or offset != len(data):
                raise ValueError("corrupt client snapshot: truncated")
            f = dict(zip(_SNAPSHOT_FIELDS, fields, strict=True))
            if (
                len(f["input"]) % 8
                or len(f["round_secret"]) not in (0, KEY_BYTES)
                or len(f["session_id"]) not in (0, _SESSION_BYTES)
                or len(f["iterate_digest"]) not in (0, 32)
                or len(f["iteration"]) != 4
            ):
                raise ValueError("corrupt client snapshot: bad field length")
            config = SecAggConfig.from_bytes(f["config"])
            random_source = None if random_factory is None else random_factory(config, client_id)
            client = cls(
                config,
                client_id,
                random_source=random_source,
                identity=identity,
                trust_store=trust_store,
            )
            r = config.iterations
            client._state = states[state_index]
            client._abort_reason = f["abort_reason"].decode() or None
            enc = f["encryption_key"]
            client._encryption_keys = KeyPair.from_private_bytes(enc) if enc else None
            mask = f["mask_key"]
            if len(mask) not in (0, KEY_BYTES):
                raise ValueError("corrupt client snapshot: bad field length")
            client._mask_key = KeyPair.from_private_bytes(mask) if mask else None
            client._pair_secrets = _decode_map(f["pair_secrets"], KEY_BYTES)
            seeds = _chunks(f["self_mask_seeds"], KEY_BYTES)
            if len(seeds) not in (0, r):
                raise ValueError("corrupt client snapshot: bad field length")
            client._round_secret = f["round_secret"]
            client._self_mask_seeds = seeds
            client._session_id = f["session_id"]
            client._directory_ids = _decode_ids(f["directory_ids"])
            client._neighbors = _decode_ids(f["neighbors"])
            keys_of = _decode_map(f["neighbor_keys"], 2 * KEY_BYTES)
            client._neighbor_keys = {
                v: ClientKeys(keys[:KEY_BYTES], keys[KEY_BYTES:]) for v, keys in keys_of.items()
            }
            client._receive_keys = _decode_map(f["receive_keys"], _SESSION_BYTES)
            (client._iteration,) = _U32.unpack(f["iteration"])
            if client._iteration > r:
                raise ValueError("corrupt client snapshot: iteration beyond the session")
            client._members = _decode_ids(f["members"])
            client._complaints = _decode_ids(f["complaints"])
            client._held_seed_shares = _decode_map(f["held_seed_shares"], r * SHARE_BYTES)
            client._held_key_shares = _decode_map(f["held_key_shares"], r * SHARE_BYTES)
            client._survivor_view = _decode_ids(f["survivor_view"])
            client._iterate_digest = f["iterate_digest"]
            if f["input"]:
                client._input = config.ring.reduce(np.frombuffer(f["input"], dtype="<u8"))
            if f["directory"]:
                try:
                    client._directory = KeyDirectory(
                        config.digest, client_id, f["directory"], signed=config.malicious
                    )
                except ValueError as error:
                    raise ValueError(f"corrupt client snapshot: {error}") from None
            client._approval_keys = _decode_map(f["approval_keys"], KEY_BYTES)
            client._verified = set(_decode_ids(f["verified"]))
        except struct.error:
            raise ValueError("corrupt client snapshot: truncated") from None
        except (UnicodeDecodeError, ProtocolError) as error:
            raise ValueError(f"corrupt client snapshot: {error}") from None
        except TypeError as error:
            if "malicious mode needs" in str(error):
                raise
            raise ValueError(f"corrupt client snapshot: {error}") from None
        return client

    # -- internals ----------------------------------------------------------------------------

    def _raise_if_aborted(self) -> None:
        if self._state is ClientState.ABORTED:
            raise LocalProtocolError(f"client {self.client_id} aborted: {self._abort_reason}")

    def _forget_secrets(self) -> None:
        self._encryption_keys = None
        self._mask_key = None
        self._pair_secrets.clear()
        self._round_secret = b""
        self._self_mask_seeds = []
        self._input = None
        self._receive_keys.clear()
        self._held_seed_shares.clear()
        self._held_key_shares.clear()
        self._approval_keys.clear()

    def _fail(self, exc: ProtocolError) -> ProtocolError:
        self._state = ClientState.ABORTED
        self._abort_reason = str(exc)
        self._forget_secrets()  # nothing more will be sent
        logger.info("client %d aborted: %s", self.client_id, exc)
        return exc

    def _check_envelope(self, message: Message, expected_session: bytes) -> None:
        if message.session_id != expected_session:
            raise RemoteProtocolError("message from another session or phase", peer_id=SERVER_ID)
        if message.peer != self.client_id:
            raise RemoteProtocolError(
                f"message addressed to client {message.peer}", peer_id=SERVER_ID
            )

    def _check_iteration(self, message: Message) -> None:
        iteration = getattr(message, "iteration", self._iteration)
        if iteration != self._iteration:
            raise RemoteProtocolError(
                f"a message of sum {iteration} during sum {self._iteration}", peer_id=SERVER_ID
            )

    def _check_directory(self, message: KeyDirectory, ids: tuple[int, ...]) -> None:
        """Malicious mode: every id is a known client and no public key appears twice."""
        store = self._trust_store
        assert store is not None
        if not message.signed:
            raise RemoteProtocolError("the key directory carries no signatures", peer_id=SERVER_ID)
        unknown = [u for u in ids if u not in store]
        if unknown:
            raise RemoteProtocolError(
                f"the key directory lists ids outside the trust store: {unknown[:5]}",
                peer_id=SERVER_ID,
            )
        entries = message.keys().values()
        public = [keys.mask_key for keys in entries] + [keys.encryption_key for keys in entries]
        if len(set(public)) != len(public):
            raise RemoteProtocolError(
                "the key directory lists one public key twice", peer_id=SERVER_ID
            )

    def _on_key_directory(self, message: Message) -> list[Message]:
        assert isinstance(message, KeyDirectory)
        self._check_envelope(message, self.config.digest)
        assert self._encryption_keys is not None and self._mask_key is not None
        try:
            mine = message.lookup([self.client_id])[self.client_id]
        except KeyError:
            mine = None
        own = (self._encryption_keys.public, self._mask_key.public)
        if mine is None or mine[:2] != own:
            raise RemoteProtocolError(
                "the key directory does not list this client's keys", peer_id=SERVER_ID
            )
        ids = tuple(message.ids_array().tolist())
        threshold = self.config.threshold
        if len(ids) < self.config.min_clients:
            raise TooFewSurvivorsError(
                f"the key directory lists {len(ids)} clients; threshold t={threshold} needs "
                f"at least {self.config.min_clients}"
            )
        if self.config.malicious:
            self._check_directory(message, ids)
            quorum = self.config.consistency_quorum(len(ids))
            if quorum > len(ids):
                raise TooFewSurvivorsError(
                    f"{len(ids)} clients cannot give the {quorum} consistency signatures the "
                    f"malicious mode needs (c={self.config.max_colluding} colluding)"
                )
        self._session_id = session_id(self.config.digest, message.entries)
        graph = build_graph(message.ids_array(), self.config.neighbors, self._session_id)
        neighbors = graph.neighbors(self.client_id)
        if len(neighbors) < threshold:
            raise TooFewSurvivorsError(
                f"client {self.client_id} has {len(neighbors)} neighbours; threshold "
                f"t={threshold} needs at least t"
            )
        directory = message.lookup(neighbors)
        if self._trust_store is not None:
            # Each client checks its neighbours' advertisements (Bonawitz et al. 2017, round 1
            # of the active protocol; neighbours only in SecAgg+, as in Bell et al. 2020).
            digest = self.config.digest
            for v in neighbors:
                entry = directory[v]
                signed = advertisement_message(digest, v, entry.encryption_key, entry.mask_key)
                if not self._trust_store.verify(v, signed, entry.signature):
                    raise RemoteProtocolError(
                        f"the key directory entry of client {v} is not signed by its identity",
                        peer_id=SERVER_ID,
                    )
        self._directory_ids = ids
        self._neighbors = neighbors
        self._neighbor_keys = {v: ClientKeys(*directory[v][:2]) for v in neighbors}
        agreed: dict[int, bytes] = {}
        if self.config.mac_approvals:
            # One approval key with every client of the directory, for the whole session (the
            # consistency check of each sum is then HMACs, not signatures). Which of them to
            # trust is decided when an approval is counted: its advertisement must verify.
            self._directory = message
            self._verified = set(neighbors)
            for w, keys in message.keys().items():
                if w != self.client_id:
                    agreed[w] = self._encryption_keys.agree(keys.encryption_key, peer_id=w)
                    self._approval_keys[w] = approval_key(
                        agreed[w], session_id=self._session_id, first=self.client_id, second=w
                    )
        derived = KeystreamRandom(self._round_secret, label=_ROUND_LABEL + self._session_id)
        sums = range(1, self.config.iterations + 1)
        self._self_mask_seeds = [derived.random_bytes(KEY_BYTES) for _ in sums]
        recovery_keys = [derived.random_bytes(KEY_BYTES) for _ in sums]
        # Per sum r: a share of its seed and of its recovery key (seeds first, then keys).
        secrets = np.concatenate(
            [shamir.split_secret(seed) for seed in self._self_mask_seeds]
            + [shamir.split_secret(key) for key in recovery_keys]
        )
        shares = shamir.share(secrets, neighbors, threshold, derived)
        sid, me = self._session_id, self.client_id
        # One mask key agreement per neighbour for the whole session; sum r's pair key is
        # κ^r = PRF(pair secret, r), escrowed under that sum's recovery key (keys.seal_pair_key).
        self._pair_secrets = {
            v: self._mask_key.agree(directory[v].mask_key, peer_id=v) for v in neighbors
        }
        self._mask_key = None
        escrows = []
        for v in neighbors:
            sealed = []
            for r, recovery in zip(sums, recovery_keys, strict=True):
                kappa = pair_sum_key(
                    self._pair_secrets[v], session_id=sid, first=me, second=v, iteration=r
                )
                sealed.append(
                    seal_pair_key(kappa, recovery, session_id=sid, owner=me, other=v, iteration=r)
                    + pair_key_commitment(sid, me, v, kappa, r)
                )
            escrows.append((v, b"".join(sealed)))
        ciphertexts = []
        for i, v in enumerate(neighbors):
            shared = agreed.get(v) or self._encryption_keys.agree(
                directory[v].encryption_key, peer_id=v
            )
            send_key = share_encryption_key(
                shared, session_id=self._session_id, sender=self.client_id, recipient=v
            )
            self._receive_keys[v] = share_encryption_key(
                shared, session_id=self._session_id, sender=v, recipient=self.client_id
            )
            ciphertext = encrypt_shares(
                send_key,
                encode_share(shares[i]),
                session_id=self._session_id,
                sender=self.client_id,
                recipient=v,
            )
            ciphertexts.append((v, ciphertext))
        self._state = ClientState.AWAITING_SHARES
        commitments = b"".join(
            seed_commitment(sid, me, seed, r)
            for r, seed in zip(sums, self._self_mask_seeds, strict=True)
        )
        recovery = b"".join(
            recovery_commitment(sid, me, key, r) for r, key in zip(sums, recovery_keys, strict=True)
        )
        return [EncryptedShares(sid, me, commitments, tuple(ciphertexts), recovery, tuple(escrows))]

    def _on_forwarded_shares(self, message: Message) -> list[Message]:
        assert isinstance(message, ForwardedShares)
        self._check_envelope(message, self._session_id)
        senders = [v for v, _ in message.ciphertexts]
        if len(set(senders)) != len(senders):
            raise RemoteProtocolError("repeated sender in forwarded shares", peer_id=SERVER_ID)
        unknown = set(senders) - set(self._neighbors)
        if unknown:
            raise RemoteProtocolError(
                f"forwarded shares from non-neighbours {sorted(unknown)}", peer_id=SERVER_ID
            )
        if len(senders) < self.config.threshold:
            raise TooFewSurvivorsError(
                f"only {len(senders)} neighbours of client {self.client_id} shared keys; "
                f"threshold t={self.config.threshold}"
            )
        if self._input is None:
            raise LocalProtocolError(
                f"client {self.client_id} has no input: call set_input() before the "
                "masked-input phase"
            )
        expected = share_plaintext_bytes(self.config.iterations)
        half = expected // 2
        complaints = []
        for v, ciphertext in message.ciphertexts:
            try:
                plaintext = decrypt_shares(
                    self._receive_keys[v],
                    ciphertext,
                    session_id=self._session_id,
                    sender=v,
                    recipient=self.client_id,
                )
            except RemoteProtocolError:
                plaintext = b""
            if len(plaintext) != expected:
                # Not an abort: the sender (or the relay) is at fault; this client still masks
                # with v and just holds none of v's shares.
                complaints.append(v)
                logger.info("client %d: shares from %d do not authenticate", self.client_id, v)
                continue
            self._held_seed_shares[v] = plaintext[:half]
            self._held_key_shares[v] = plaintext[half:]
        self._complaints = tuple(sorted(complaints))
        self._receive_keys.clear()
        self._iteration = 1
        return self._mask(tuple(sorted(senders)), message.iterate)

    def _on_iteration_request(self, message: Message) -> list[Message]:
        assert isinstance(message, IterationRequest)
        self._check_envelope(message, self._session_id)
        if message.iteration != self._iteration + 1:
            raise RemoteProtocolError(
                f"sum {message.iteration} requested after sum {self._iteration}",
                peer_id=SERVER_ID,
            )
        members = message.members
        if list(members) != sorted(set(members)):
            raise RemoteProtocolError("the members are not strictly increasing", peer_id=SERVER_ID)
        # Only neighbours this client masked with in the previous sum and that survived it may
        # take part: a client declared dropped never comes back, a non-neighbour never joins.
        allowed = set(self._members).intersection(self._survivor_view)
        if not allowed.issuperset(members):
            raise RemoteProtocolError(
                f"sum {message.iteration} lists clients that were not its neighbours surviving "
                f"the last sum: {sorted(set(members) - allowed)}",
                peer_id=SERVER_ID,
            )
        if len(members) < self.config.threshold:
            raise TooFewSurvivorsError(
                f"only {len(members)} neighbours of client {self.client_id} remain in the "
                f"session; threshold t={self.config.threshold}"
            )
        if self._input is None:
            raise LocalProtocolError(
                f"client {self.client_id} has no input for sum {message.iteration}: call "
                "set_input() first"
            )
        dimension = message.dimension or self.config.dimension
        if self._input.size != dimension:
            raise LocalProtocolError(
                f"client {self.client_id}'s input has {self._input.size} entries; sum "
                f"{message.iteration} sums vectors of dimension {dimension}"
            )
        self._iteration = message.iteration
        return self._mask(members, message.iterate)

    def _mask(self, members: tuple[int, ...], iterate: bytes) -> list[Message]:
        """This sum's masked input over ``members`` (y_u = x_u + PRG(b_u) ± Σ PRG(s_uv))."""
        assert self._input is not None
        r = self._iteration
        ring = self.config.ring
        masked = self._input  # the client's own copy (set_input reduced it): masked in place
        self._input = None
        name = self.config.vector_name
        plus = [
            self_mask_key(
                self._self_mask_seeds[r - 1],
                session_id=self._session_id,
                owner=self.client_id,
                vector_name=name,
                iteration=r,
            )
        ]
        minus: list[bytes] = []
        # Hashed once (the iterate may be a whole model); a sum of another length than the
        # session's configured one binds its length too.
        digest, bound = sum_binding(
            iterate, dimension=masked.size, configured=self.config.dimension
        )
        for v in members:
            key = pairwise_mask_key(
                self._sum_key(v, r),
                session_id=self._session_id,
                first=self.client_id,
                second=v,
                vector_name=name,
                iteration=r,
                iterate=bound,
            )
            # y_u gets +PRG(s_uv) for v > u and −PRG(s_uv) for v < u (Bonawitz et al., §3).
            (minus if v < self.client_id else plus).append(key)
        add_masks(masked, ring, add=plus, subtract=minus)
        ring.normalize(masked)
        self._members = members
        self._iterate_digest = digest
        self._state = (
            ClientState.AWAITING_CONSISTENCY_REQUEST
            if self.config.malicious
            else ClientState.AWAITING_UNMASK_REQUEST
        )
        complaints = self._complaints if r == 1 else ()
        return [
            MaskedInput(
                self._session_id,
                self.client_id,
                self.config.modulus_bits,
                masked,
                complaints,
                r,
            )
        ]

    def _on_consistency_request(self, message: Message) -> list[Message]:
        assert isinstance(message, ConsistencyRequest)
        self._check_envelope(message, self._session_id)
        self._check_iteration(message)
        view = message.survivors
        if list(view) != sorted(set(view)):
            raise RemoteProtocolError(
                "the survivor set is not strictly increasing", peer_id=SERVER_ID
            )
        if self.client_id not in view:
            raise RemoteProtocolError(
                "this client is not in the survivor set it is asked to sign", peer_id=SERVER_ID
            )
        directory = set(self._directory_ids)
        if not directory.issuperset(view):
            raise RemoteProtocolError(
                "the survivor set names clients outside the key directory", peer_id=SERVER_ID
            )
        quorum = self.config.consistency_quorum(len(self._directory_ids))
        if len(view) < quorum:
            raise TooFewSurvivorsError(
                f"{len(view)} survivors cannot give the {quorum} consistency signatures needed"
            )
        members = set(view)
        surviving = [v for v in self._neighbors if v in members]
        if not set(self._members).issuperset(surviving):
            raise RemoteProtocolError(
                "the survivor set names neighbours this client did not mask with",
                peer_id=SERVER_ID,
            )
        if len(surviving) < self.config.threshold:
            raise TooFewSurvivorsError(
                f"only {len(surviving)} neighbours of client {self.client_id} survived; "
                f"threshold t={self.config.threshold}"
            )
        assert self._identity is not None
        self._survivor_view = tuple(view)
        signed = consistency_message(
            self._session_id, view, iteration=self._iteration, iterate=self._iterate_digest
        )
        self._state = ClientState.AWAITING_UNMASK_REQUEST
        if self.config.mac_approvals:
            me = self.client_id
            approvals = tuple(
                (w, approval_tag(self._approval_keys[w], signed, approver=me, recipient=w))
                for w in view
                if w != me
            )
            return [ConsistencySignature(self._session_id, me, b"", self._iteration, approvals)]
        signature = self._identity.sign(signed)
        return [ConsistencySignature(self._session_id, self.client_id, signature, self._iteration)]

    def _sum_key(self, v: int, r: int) -> bytes:
        """κ_uv^r, this sum's pair key with neighbour ``v`` (``keys.pair_sum_key``)."""
        return pair_sum_key(
            self._pair_secrets[v],
            session_id=self._session_id,
            first=self.client_id,
            second=v,
            iteration=r,
        )

    def _check_unmask_lists(self, message: UnmaskRequest) -> None:
        survivors, dropped = message.survivors, message.dropped
        if self.client_id in dropped:
            raise RemoteProtocolError("this client is listed as dropped", peer_id=SERVER_ID)
        if len(set(survivors)) != len(survivors) or len(set(dropped)) != len(dropped):
            raise RemoteProtocolError("repeated id in the unmask request", peer_id=SERVER_ID)
        both = set(survivors) & set(dropped)
        if both:
            # Answering both shares for one neighbour would let the server unmask its input.
            raise RemoteProtocolError(
                f"asked for both shares of clients {sorted(both)}", peer_id=SERVER_ID
            )
        unknown = (set(survivors) | set(dropped)) - set(self._members)
        if unknown:
            raise RemoteProtocolError(
                f"unmask request names unknown clients {sorted(unknown)}", peer_id=SERVER_ID
            )
        if len(survivors) < self.config.threshold:
            raise TooFewSurvivorsError(
                f"only {len(survivors)} neighbours of client {self.client_id} survived; "
                f"threshold t={self.config.threshold}"
            )
        if not self.config.malicious:
            return
        # Malicious mode: the lists must be exactly what the signed survivor set implies ...
        members = set(self._survivor_view)
        expected_survivors = tuple(v for v in self._members if v in members)
        expected_dropped = tuple(v for v in self._members if v not in members)
        if survivors != expected_survivors or dropped != expected_dropped:
            raise RemoteProtocolError(
                "the unmask request disagrees with the survivor set this client signed",
                peer_id=SERVER_ID,
            )
        # ... and a quorum of clients must have signed that same set and iterate (Bonawitz et
        # al. 2017, round 4 of the active protocol; quorum form: secagg/malicious_security.md).
        quorum = self.config.consistency_quorum(len(self._directory_ids))
        signed = consistency_message(
            self._session_id,
            self._survivor_view,
            iteration=self._iteration,
            iterate=self._iterate_digest,
        )
        store = self._trust_store
        assert store is not None
        if self.config.mac_approvals:
            valid = self._count_approvals(message, signed, members, quorum)
        else:
            valid = set()
            for signer, signature in message.signatures:
                if len(valid) >= quorum:
                    break
                if (
                    signer in members
                    and signer not in valid
                    and store.verify(signer, signed, signature)
                ):
                    valid.add(signer)
        if len(valid) < quorum:
            raise RemoteProtocolError(
                f"only {len(valid)} valid consistency signatures (or approvals) over this "
                f"client's survivor set; the quorum is {quorum}",
                peer_id=SERVER_ID,
            )

    def _count_approvals(
        self, message: UnmaskRequest, signed: bytes, members: set[int], quorum: int
    ) -> set[int]:
        """The members whose MAC approval of ``signed`` this client verifies (itself included:
        it approved the set), up to the quorum. A tag counts only if its sender's advertisement
        — hence the key the tag was checked with — is signed by the sender's identity."""
        me = self.client_id
        valid = {me}
        for approver, tag in message.signatures:
            if len(valid) >= quorum:
                break
            key = self._approval_keys.get(approver)
            if approver not in members or approver in valid or key is None:
                continue
            expected = approval_tag(key, signed, approver=approver, recipient=me)
            if hmac.compare_digest(tag, expected) and self._advertisement_verifies(approver):
                valid.add(approver)
        return valid

    def _advertisement_verifies(self, client: int) -> bool:
        """Whether ``client``'s directory entry is signed by its identity (checked once)."""
        if client in self._verified:
            return True
        assert self._directory is not None and self._trust_store is not None
        entry = self._directory.lookup([client])[client]
        signed = advertisement_message(
            self.config.digest, client, entry.encryption_key, entry.mask_key
        )
        if not self._trust_store.verify(client, signed, entry.signature):
            return False
        self._verified.add(client)
        return True

    def _on_unmask_request(self, message: Message) -> list[Message]:
        assert isinstance(message, UnmaskRequest)
        self._check_envelope(message, self._session_id)
        self._check_iteration(message)
        self._check_unmask_lists(message)
        survivors, dropped = message.survivors, message.dropped
        r = self._iteration
        window = slice((r - 1) * SHARE_BYTES, r * SHARE_BYTES)  # this sum's share of each
        seed_shares = self._held_seed_shares
        key_shares = self._held_key_shares
        response = UnmaskResponse(
            self._session_id,
            self.client_id,
            tuple((v, seed_shares[v][window]) for v in survivors if v in seed_shares),
            tuple((v, key_shares[v][window]) for v in dropped if v in key_shares),
            self._self_mask_seeds[r - 1],
            # κ_uv^r, not the mask key: the server checks it against this client's commitment
            # (a wrong one is named and recovered around, never summed) and derives the key.
            tuple((v, self._sum_key(v, r)) for v in dropped),
            r,
        )
        self._survivor_view = survivors if not self.config.malicious else self._survivor_view
        if r == self.config.iterations:
            self._forget_secrets()
            self._state = ClientState.COMPLETED
        else:
            self._self_mask_seeds[r - 1] = bytes(KEY_BYTES)
            self._state = ClientState.AWAITING_ITERATION
        return [response]


_Handler = Callable[[Client, Message], list[Message]]
# The one table of allowed (state, message type) pairs.
_TRANSITIONS: dict[tuple[ClientState, type], _Handler] = {
    (ClientState.AWAITING_KEY_DIRECTORY, KeyDirectory): Client._on_key_directory,
    (ClientState.AWAITING_SHARES, ForwardedShares): Client._on_forwarded_shares,
    (ClientState.AWAITING_ITERATION, IterationRequest): Client._on_iteration_request,
    (ClientState.AWAITING_CONSISTENCY_REQUEST, ConsistencyRequest): Client._on_consistency_request,
    (ClientState.AWAITING_UNMASK_REQUEST, UnmaskRequest): Client._on_unmask_request,
}
