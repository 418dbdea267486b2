"""The SecAgg / SecAgg+ client: a sans-I/O state machine (Bonawitz et al. 2017, Fig. 4).

The client never opens a socket, sleeps or reads a clock: :meth:`Client.receive` takes a message
from the server and returns the messages to send back. Allowed (state, message type) pairs live
in one table; anything else — and any invalid content — moves the client to ``ABORTED`` and
raises. After that, every call raises.
"""

from __future__ import annotations

import logging
import struct
from collections.abc import Callable
from enum import Enum

import numpy as np
from numpy.typing import ArrayLike

from secagg import shamir
from secagg._session import (
    SERVER_ID,
    SHARE_BYTES,
    SHARE_PLAINTEXT_BYTES,
    encode_share,
    seed_commitment,
    session_id,
)
from secagg.config import SecAggConfig
from secagg.errors import (
    LocalProtocolError,
    ProtocolError,
    RemoteProtocolError,
    TooFewSurvivorsError,
)
from secagg.graph import build_graph
from secagg.keys import (
    KEY_BYTES,
    KeyPair,
    decrypt_shares,
    encrypt_shares,
    share_encryption_key,
)
from secagg.masks import add_masks, pairwise_mask_key, self_mask_key
from secagg.messages import (
    AdvertiseKeys,
    ClientKeys,
    EncryptedShares,
    ForwardedShares,
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

__all__ = ["Client", "ClientState"]

# Snapshot format (little-endian): version:u8 ‖ state:u8 ‖ client_id:u32 ‖ field*, each field a u32
# length and its bytes, in the order of Client.snapshot.
_SNAPSHOT_VERSION = 1
_SNAPSHOT_HEADER = struct.Struct("<BBI")
_U32 = struct.Struct("<I")
_SNAPSHOT_FIELDS = 12
_SESSION_BYTES = 32  # a SHA-256 session id; also the length of a share-encryption key


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


logger = logging.getLogger(__name__)


class ClientState(Enum):
    """Where a client is in the protocol."""

    INITIAL = "initial"
    AWAITING_KEY_DIRECTORY = "awaiting_key_directory"
    AWAITING_SHARES = "awaiting_shares"
    AWAITING_UNMASK_REQUEST = "awaiting_unmask_request"
    COMPLETED = "completed"
    ABORTED = "aborted"


class Client:
    """One SecAgg / SecAgg+ client.

    Parameters
    ----------
    config
        The round's public parameters (shared with the server and all clients).
    client_id
        This client's id, in [1, 2^31 − 2]; it is also its Shamir evaluation point.
    input_vector
        The integer vector to sum (length ``config.dimension``, values in [-M/2, M)); may
        instead be given later with :meth:`set_input`, before the masked-input phase.
    random_source
        Cryptographic randomness for keys, seeds and share polynomials; ``None`` draws a
        fresh :class:`~secagg.KeystreamRandom` seeded by the operating system.

    Examples
    --------
    >>> cfg = SecAggConfig(dimension=4, threshold=1)
    >>> client = Client(cfg, 1, input_vector=[1, 2, 3, 4])
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
    ) -> None:
        if not isinstance(config, SecAggConfig):
            raise TypeError(f"config must be a SecAggConfig; got {type(config).__name__}")
        if isinstance(client_id, bool) or not isinstance(client_id, int):
            raise TypeError(f"client_id must be an int; got {type(client_id).__name__}")
        if not 1 <= client_id <= 2**31 - 2:
            raise ValueError(f"client_id must lie in [1, 2^31 − 2]; got {client_id}")
        if random_source is not None and not isinstance(random_source, RandomSource):
            raise TypeError("random_source must provide fill() and random_bytes()")
        self.config = config
        self.client_id = client_id
        self._random = random_source if random_source is not None else KeystreamRandom()
        self._state = ClientState.INITIAL
        self._abort_reason: str | None = None
        self._input: RingArray | None = None
        if input_vector is not None:
            self.set_input(input_vector)
        # Secrets and per-session state, filled in as the phases go.
        self._encryption_keys: KeyPair | None = None
        self._mask_keys: KeyPair | None = None
        self._self_mask_seed = b""
        self._session_id = b""
        self._neighbors: tuple[int, ...] = ()
        self._neighbor_keys: dict[int, ClientKeys] = {}
        self._share_keys: dict[int, bytes] = {}
        self._held_seed_shares: dict[int, bytes] = {}
        self._held_key_shares: dict[int, bytes] = {}

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

    def set_input(self, input_vector: ArrayLike) -> None:
        """Set the vector to sum (integers in [-M/2, M), length ``config.dimension``).

        Raises
        ------
        LocalProtocolError
            If the masked input has already been sent.
        TypeError, ValueError
            On a non-integer vector, a wrong length or values out of range.
        """
        if self._state in (
            ClientState.AWAITING_UNMASK_REQUEST,
            ClientState.COMPLETED,
            ClientState.ABORTED,
        ):
            raise LocalProtocolError(f"cannot set the input in state {self._state.name}")
        vector = self.config.ring.reduce(input_vector)
        if vector.size != self.config.dimension:
            raise ValueError(
                f"input has {vector.size} entries; this round sums vectors of dimension "
                f"{self.config.dimension}"
            )
        self._input = vector

    def start(self) -> list[Message]:
        """Begin the round: generate both key pairs and advertise their public halves.

        Raises
        ------
        LocalProtocolError
            If the client has already started.
        """
        if self._state is not ClientState.INITIAL:
            self._raise_if_aborted()
            raise self._fail(LocalProtocolError(f"start() called in state {self._state.name}"))
        self._encryption_keys = KeyPair.generate(self._random)
        self._mask_keys = KeyPair.generate(self._random)
        self._state = ClientState.AWAITING_KEY_DIRECTORY
        return [
            AdvertiseKeys(
                self.config.digest,
                self.client_id,
                self._encryption_keys.public,
                self._mask_keys.public,
            )
        ]

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
        >>> client = Client(SecAggConfig(dimension=2, threshold=1), 1, input_vector=[0, 0])
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

    # -- internals ----------------------------------------------------------------------------

    def snapshot(self) -> bytes:
        """The client's whole state between two calls, as bytes.

        For transports whose client side is not one long-lived process (Flower re-runs its
        ClientApp for every message and keeps only the node's ``Context``). The random source is
        not saved: a client draws randomness only inside one call. The bytes hold the client's
        secret keys and self-mask seed: they must never leave the client's node.

        Returns
        -------
        bytes
            A versioned encoding that :meth:`restore` reads back.

        Examples
        --------
        >>> from secagg import SecAggConfig
        >>> client = Client(SecAggConfig(dimension=2, threshold=2), 1, input_vector=[1, 2])
        >>> _ = client.start()
        >>> Client.restore(client.snapshot()).state
        <ClientState.AWAITING_KEY_DIRECTORY: 'awaiting_key_directory'>
        """
        ring_input = b"" if self._input is None else self._input.astype("<u8").tobytes()
        fields = [
            self.config.to_bytes(),
            (self._abort_reason or "").encode(),
            b"" if self._encryption_keys is None else self._encryption_keys.private,
            b"" if self._mask_keys is None else self._mask_keys.private,
            self._self_mask_seed,
            self._session_id,
            b"".join(_U32.pack(v) for v in self._neighbors),
            _encode_map({v: keys[0] + keys[1] for v, keys in self._neighbor_keys.items()}),
            _encode_map(self._share_keys),
            _encode_map(self._held_seed_shares),
            _encode_map(self._held_key_shares),
            ring_input,
        ]
        states = tuple(ClientState)
        head = _SNAPSHOT_HEADER.pack(_SNAPSHOT_VERSION, states.index(self._state), self.client_id)
        return head + b"".join(_U32.pack(len(f)) + f for f in fields)

    @classmethod
    def restore(
        cls,
        data: bytes,
        *,
        random_factory: Callable[[SecAggConfig, int], RandomSource] | None = None,
    ) -> Client:
        """The client that :meth:`snapshot` saved, ready for its next call.

        Parameters
        ----------
        data
            Bytes from :meth:`snapshot`.
        random_factory
            ``random_factory(config, client_id)`` gives the restored client's random source;
            ``None``: fresh operating-system randomness.

        Raises
        ------
        ValueError
            If the bytes are not a well-formed snapshot of this version.

        Examples
        --------
        >>> from secagg import SecAggConfig
        >>> Client.restore(Client(SecAggConfig(dimension=2, threshold=2), 2).snapshot()).client_id
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
            if len(fields) != _SNAPSHOT_FIELDS or offset != len(data):
                raise ValueError("corrupt client snapshot: truncated")
            (config_bytes, reason, enc, mask, seed, session, neighbors, neighbor_keys, share_keys,
             seed_shares, key_shares, ring_input) = fields  # fmt: skip
            if (
                len(neighbors) % 4
                or len(ring_input) % 8
                or len(seed) not in (0, KEY_BYTES)
                or len(session) not in (0, _SESSION_BYTES)
            ):
                raise ValueError("corrupt client snapshot: bad field length")
            config = SecAggConfig.from_bytes(config_bytes)
            random_source = None if random_factory is None else random_factory(config, client_id)
            client = cls(config, client_id, random_source=random_source)
            client._state = states[state_index]
            client._abort_reason = reason.decode() or None
            client._encryption_keys = KeyPair.from_private_bytes(enc) if enc else None
            client._mask_keys = KeyPair.from_private_bytes(mask) if mask else None
            client._self_mask_seed = seed
            client._session_id = session
            client._neighbors = tuple(int(v) for v in np.frombuffer(neighbors, dtype="<u4"))
            keys_of = _decode_map(neighbor_keys, 2 * KEY_BYTES)
            client._neighbor_keys = {
                v: ClientKeys(keys[:KEY_BYTES], keys[KEY_BYTES:]) for v, keys in keys_of.items()
            }
            client._share_keys = _decode_map(share_keys, _SESSION_BYTES)
            client._held_seed_shares = _decode_map(seed_shares, SHARE_BYTES)
            client._held_key_shares = _decode_map(key_shares, SHARE_BYTES)
            if ring_input:
                client._input = config.ring.reduce(np.frombuffer(ring_input, dtype="<u8"))
        except struct.error:
            raise ValueError("corrupt client snapshot: truncated") from None
        except (UnicodeDecodeError, ProtocolError, TypeError) as error:
            raise ValueError(f"corrupt client snapshot: {error}") from None
        return client

    def _raise_if_aborted(self) -> None:
        if self._state is ClientState.ABORTED:
            raise LocalProtocolError(f"client {self.client_id} aborted: {self._abort_reason}")

    def _fail(self, exc: ProtocolError) -> ProtocolError:
        self._state = ClientState.ABORTED
        self._abort_reason = str(exc)
        # Forget every secret: nothing more will be sent.
        self._encryption_keys = self._mask_keys = None
        self._self_mask_seed = b""
        self._input = None
        self._held_seed_shares.clear()
        self._held_key_shares.clear()
        logger.info("client %d aborted: %s", self.client_id, exc)
        return exc

    def _check_envelope(self, message: Message, expected_session: bytes) -> None:
        if message.session_id != expected_session:
            raise RemoteProtocolError("message from another session or phase", peer_id=SERVER_ID)
        if message.peer != self.client_id:
            raise RemoteProtocolError(
                f"message addressed to client {message.peer}", peer_id=SERVER_ID
            )

    def _on_key_directory(self, message: Message) -> list[Message]:
        assert isinstance(message, KeyDirectory)
        self._check_envelope(message, self.config.digest)
        assert self._encryption_keys is not None and self._mask_keys is not None
        try:
            mine = message.lookup([self.client_id])[self.client_id]
        except KeyError:
            mine = None
        if mine != (self._encryption_keys.public, self._mask_keys.public):
            raise RemoteProtocolError(
                "the key directory does not list this client's keys", peer_id=SERVER_ID
            )
        self._session_id = session_id(self.config.digest, message.entries)
        graph = build_graph(message.ids_array(), self.config.neighbors, self._session_id)
        neighbors = graph.neighbors(self.client_id)
        threshold = self.config.threshold
        if len(neighbors) < threshold:
            raise TooFewSurvivorsError(
                f"client {self.client_id} has {len(neighbors)} neighbours; threshold "
                f"t={threshold} needs at least t"
            )
        directory = message.lookup(neighbors)
        self._neighbors = neighbors
        self._neighbor_keys = {v: directory[v] for v in neighbors}
        self._share_keys = {
            v: share_encryption_key(
                self._encryption_keys.agree(directory[v].encryption_key, peer_id=v),
                session_id=self._session_id,
            )
            for v in neighbors
        }
        self._self_mask_seed = self._random.random_bytes(KEY_BYTES)
        secrets = np.concatenate(
            [
                shamir.split_secret(self._self_mask_seed),
                shamir.split_secret(self._mask_keys.private),
            ]
        )
        shares = shamir.share(secrets, neighbors, threshold, self._random)
        ciphertexts = tuple(
            (
                v,
                encrypt_shares(
                    self._share_keys[v],
                    encode_share(shares[i]),
                    session_id=self._session_id,
                    sender=self.client_id,
                    recipient=v,
                ),
            )
            for i, v in enumerate(neighbors)
        )
        self._state = ClientState.AWAITING_SHARES
        commitment = seed_commitment(self._session_id, self.client_id, self._self_mask_seed)
        return [EncryptedShares(self._session_id, self.client_id, commitment, ciphertexts)]

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
        for v, ciphertext in message.ciphertexts:
            plaintext = decrypt_shares(
                self._share_keys[v],
                ciphertext,
                session_id=self._session_id,
                sender=v,
                recipient=self.client_id,
            )
            if len(plaintext) != SHARE_PLAINTEXT_BYTES:
                raise RemoteProtocolError("share plaintext has the wrong length", peer_id=v)
            self._held_seed_shares[v] = plaintext[:SHARE_BYTES]
            self._held_key_shares[v] = plaintext[SHARE_BYTES:]
        assert self._mask_keys is not None
        ring = self.config.ring
        masked = self._input.copy()
        self._input = None
        name = self.config.vector_name
        plus = [
            self_mask_key(
                self._self_mask_seed,
                session_id=self._session_id,
                owner=self.client_id,
                vector_name=name,
            )
        ]
        minus: list[bytes] = []
        for v in sorted(senders):
            shared = self._mask_keys.agree(self._neighbor_keys[v].mask_key, peer_id=v)
            key = pairwise_mask_key(
                shared,
                session_id=self._session_id,
                first=self.client_id,
                second=v,
                vector_name=name,
            )
            # y_u gets +PRG(s_uv) for v > u and −PRG(s_uv) for v < u (Bonawitz et al., §3).
            (minus if v < self.client_id else plus).append(key)
        add_masks(masked, ring, add=plus, subtract=minus)
        ring.normalize(masked)
        self._state = ClientState.AWAITING_UNMASK_REQUEST
        return [MaskedInput(self._session_id, self.client_id, self.config.modulus_bits, masked)]

    def _on_unmask_request(self, message: Message) -> list[Message]:
        assert isinstance(message, UnmaskRequest)
        self._check_envelope(message, self._session_id)
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
        unknown = (set(survivors) | set(dropped)) - set(self._held_seed_shares)
        if unknown:
            raise RemoteProtocolError(
                f"unmask request names unknown clients {sorted(unknown)}", peer_id=SERVER_ID
            )
        if len(survivors) < self.config.threshold:
            raise TooFewSurvivorsError(
                f"only {len(survivors)} neighbours of client {self.client_id} survived; "
                f"threshold t={self.config.threshold}"
            )
        response = UnmaskResponse(
            self._session_id,
            self.client_id,
            tuple((v, self._held_seed_shares[v]) for v in survivors),
            tuple((v, self._held_key_shares[v]) for v in dropped),
        )
        self._held_seed_shares.clear()
        self._held_key_shares.clear()
        self._encryption_keys = self._mask_keys = None
        self._self_mask_seed = b""
        self._state = ClientState.COMPLETED
        return [response]


_Handler = Callable[[Client, Message], list[Message]]
# The one table of allowed (state, message type) pairs.
_TRANSITIONS: dict[tuple[ClientState, type], _Handler] = {
    (ClientState.AWAITING_KEY_DIRECTORY, KeyDirectory): Client._on_key_directory,
    (ClientState.AWAITING_SHARES, ForwardedShares): Client._on_forwarded_shares,
    (ClientState.AWAITING_UNMASK_REQUEST, UnmaskRequest): Client._on_unmask_request,
}
