"""The SecAgg / SecAgg+ server: a sans-I/O state machine (Bonawitz et al. 2017, Fig. 4, with the
active-adversary protocol's signature checks and consistency round in the malicious mode).

The server relays everything between clients. It moves through its collecting phases (four in
the semi-honest mode, five in the malicious one); a phase ends when every client expected in it
has answered (the reply that completes it returns the next phase's messages) or when the driver
calls :meth:`Server.close_phase` because its deadline passed. Clients that did not answer are
dropouts of that phase. Which message is accepted in which state is one table, ``_TRANSITIONS``.

Masked inputs are added into one accumulator as they arrive (memory O(d), not O(n·d)). At the end
the server removes every survivor's self mask (from the seed the survivor revealed, or its
reconstruction from shares) and every mask a survivor shares with a dropped client (from the
pairwise key the survivor revealed, or the dropped client's escrow of that sum opened with its
reconstructed recovery key) — it never obtains both secrets of one client in one sum.

A peer's invalid message raises :class:`~secagg.errors.RemoteProtocolError` naming the peer and
is recorded in :attr:`Server.faults`; the peer is excluded where that is still possible, but the
round goes on: one client must not be able to abort everyone's aggregation. Wrong shares are
corrected by Reed–Solomon decoding and their holders named. Local misuse and round-fatal
conditions (too few survivors) abort the server, after which every call raises.

Sessions (``config.iterations = R > 1``): after the setup phases the server runs sum 1; after
each completed sum r < R it waits in ``AWAITING_ITERATION`` until :meth:`Server.begin_iteration`
broadcasts the next iterate, over the clients that completed sum r (a client that dropped is
never readmitted). :attr:`Server.results` holds every sum.
"""

from __future__ import annotations

import dataclasses
import hashlib
import logging
import warnings
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from enum import Enum

import numpy as np

from secagg import shamir
from secagg.config import Phase, SecAggConfig
from secagg.errors import (
    InsecureSettingsWarning,
    LocalProtocolError,
    ProtocolError,
    RemoteProtocolError,
    TooFewSurvivorsError,
)
from secagg.graph import CommunicationGraph, build_graph
from secagg.identity import (
    APPROVAL_TAG_BYTES,
    TrustStore,
    advertisement_message,
    consistency_message,
    sum_binding,
)
from secagg.keys import KEY_BYTES, is_low_order, seal_pair_key
from secagg.masks import add_masks, pairwise_mask_key, self_mask_key
from secagg.messages import (
    MAX_DIMENSION,
    MAX_ID,
    SEED_BYTES,
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
from secagg.randomness import KeystreamRandom
from secagg.ring import RingArray
from secagg.transcript import (
    decode_share,
    pair_key_commitment,
    recovery_commitment,
    seed_commitment,
    session_id,
    share_plaintext_bytes,
)

__all__ = ["SecAggResult", "Server", "ServerState"]

logger = logging.getLogger(__name__)

_FINGERPRINT_POSITIONS = 32  # secret positions of each masked input compared for duplicates


class ServerState(Enum):
    """Where the server is in the protocol; each collecting state is one :class:`Phase`."""

    COLLECTING_KEYS = Phase.ADVERTISE_KEYS.value
    COLLECTING_SHARES = Phase.SHARE_KEYS.value
    COLLECTING_MASKED_INPUTS = Phase.MASKED_INPUT.value
    COLLECTING_CONSISTENCY_SIGNATURES = Phase.CONSISTENCY_CHECK.value
    COLLECTING_UNMASK_RESPONSES = Phase.UNMASK.value
    AWAITING_ITERATION = "awaiting_iteration"
    COMPLETED = "completed"
    ABORTED = "aborted"

    @property
    def phase(self) -> Phase | None:
        """The phase this state collects, or ``None`` for a terminal state."""
        try:
            return Phase(self.value)
        except ValueError:
            return None


# The message type each phase collects.
_COLLECTS: dict[Phase, type] = {
    Phase.ADVERTISE_KEYS: AdvertiseKeys,
    Phase.SHARE_KEYS: EncryptedShares,
    Phase.MASKED_INPUT: MaskedInput,
    Phase.CONSISTENCY_CHECK: ConsistencySignature,
    Phase.UNMASK: UnmaskResponse,
}


@dataclass(frozen=True, slots=True)
class SecAggResult:
    """The outcome of a completed round.

    Attributes
    ----------
    total
        Σ x_u mod M over ``survivors`` (ring dtype).
    survivors
        Ids whose inputs are in the total (they sent a masked input), ascending.
    dropped
        Every other expected id, ascending.
    phase_participants
        For each phase name, the ids that completed it (empty for a phase the round's threat
        model does not run).
    faults
        Every peer fault the server recorded, in order (each names the peer it blames).
    iteration
        Which sum of the session this is (1 for a single secure sum).
    """

    total: RingArray
    survivors: tuple[int, ...]
    dropped: tuple[int, ...]
    phase_participants: dict[str, tuple[int, ...]]
    faults: tuple[RemoteProtocolError, ...] = ()
    iteration: int = 1


def _warn_if_insecure(clients: int, threshold: int) -> None:
    """Warn (once per call site) about settings that run but protect almost nothing."""
    if clients == 2:
        warnings.warn(
            "a 2-client secure sum reveals each input to the other client (the sum minus its "
            "own input); use at least 3 clients",
            InsecureSettingsWarning,
            stacklevel=3,
        )
    if threshold == 1:
        warnings.warn(
            "Shamir threshold t = 1: any single client's shares reveal the secrets they "
            "protect; use t ≥ 2",
            InsecureSettingsWarning,
            stacklevel=3,
        )


class Server:
    """The SecAgg / SecAgg+ server.

    Parameters
    ----------
    config
        The round's public parameters.
    client_ids
        The ids of the clients invited to this round.
    min_inputs
        The fewest masked inputs the server will unmask: with fewer, it aborts before sending
        any unmask request (for distributed DP, whose noise is calibrated for a client count).
    trust_store
        Malicious mode: the clients' verification keys; advertisements that do not verify are
        refused (the clients check them too — an honest server only filters early).
    random_source
        Randomness for the duplicate-detection positions (default: the operating system).
    iterate
        What the server broadcasts for the first sum (bytes; a session's later sums get theirs
        from :meth:`begin_iteration`).

    Examples
    --------
    >>> from secagg.client import Client
    >>> cfg = SecAggConfig(dimension=3, threshold=2, round_nonce=bytes(16),
    ...                    threat_model="semi-honest")
    >>> clients = {u: Client(cfg, u, input_vector=[u, 0, 1]) for u in (1, 2, 3)}
    >>> server = Server(cfg, clients)
    >>> outbox = [m for c in clients.values() for m in c.start()]
    >>> while outbox:
    ...     replies = [r for m in outbox for r in server.receive(m, peer_id=m.peer)]
    ...     outbox = [r for m in replies for r in clients[m.peer].receive(m)]
    >>> server.state.name, server.result.total.tolist()
    ('COMPLETED', [6, 0, 3])
    """

    def __init__(
        self,
        config: SecAggConfig,
        client_ids: Iterable[int],
        *,
        min_inputs: int = 1,
        trust_store: TrustStore | None = None,
        random_source: KeystreamRandom | None = None,
        iterate: bytes = b"",
    ) -> None:
        if not isinstance(config, SecAggConfig):
            raise TypeError(f"config must be a SecAggConfig; got {type(config).__name__}")
        ids = [int(u) for u in client_ids]
        if len(set(ids)) != len(ids):
            raise ValueError("client ids must be distinct")
        if any(not 1 <= u <= MAX_ID for u in ids):
            raise ValueError(f"client ids must lie in [1, {MAX_ID}]")
        if len(ids) < config.min_clients:
            raise ValueError(
                f"{len(ids)} clients cannot meet threshold t={config.threshold}: each client "
                f"needs at least t neighbours, so at least t + 1 = {config.min_clients} clients"
            )
        if config.malicious:
            if not isinstance(trust_store, TrustStore):
                raise TypeError(
                    "the malicious mode needs trust_store= (the clients' verification keys); "
                    "for the semi-honest mode set SecAggConfig(threat_model='semi-honest')"
                )
            missing = [u for u in ids if u not in trust_store]
            if missing:
                raise ValueError(f"invited clients missing from the trust store: {missing[:5]}")
        self.config = config
        self.client_ids = frozenset(ids)
        self.min_inputs = self._checked_min_inputs(min_inputs, len(ids))
        _warn_if_insecure(len(ids), config.threshold)
        self._trust_store = trust_store if config.malicious else None
        self._ring = config.ring
        self._state = ServerState.COLLECTING_KEYS
        self._abort_reason: str | None = None
        self.faults: list[RemoteProtocolError] = []
        self._session_id = b""
        self._graph: CommunicationGraph | None = None
        self._keys: dict[int, ClientKeys] = {}
        self._public_keys: set[bytes] = set()
        self._share_messages: dict[int, EncryptedShares] = {}
        self._seed_commitments: dict[int, bytes] = {}
        self._recovery: dict[int, EncryptedShares] = {}
        self._shared: frozenset[int] = frozenset()
        self._accumulator: RingArray | None = None
        self._masked: set[int] = set()
        self._fingerprints: dict[int, bytes] = {}
        source = random_source if random_source is not None else KeystreamRandom()
        self._fingerprint_draws = source.uint64(_FINGERPRINT_POSITIONS)
        self._dimension = config.dimension  # of the sum in progress
        self._positions = (self._fingerprint_draws % np.uint64(self._dimension)).astype(np.intp)
        self._complaints: dict[int, frozenset[int]] = {}
        self._survivor_view: tuple[int, ...] = ()
        self._signatures: dict[int, bytes] = {}
        self._approvals: dict[int, dict[int, bytes]] = {}  # approver → recipient → MAC tag
        self._requests: dict[int, UnmaskRequest] = {}
        self._responded: set[int] = set()
        self._revealed_seeds: dict[int, bytes] = {}
        self._revealed_pairwise: dict[int, dict[int, bytes]] = {}
        self._seed_shares: dict[int, dict[int, np.ndarray]] = {}
        self._key_shares: dict[int, dict[int, np.ndarray]] = {}
        self._excluded: set[int] = set()
        self._phase_members: frozenset[int] = self.client_ids
        self._pending: set[int] = set(self.client_ids)
        self._neighbors: dict[int, tuple[int, ...]] = {}
        self._result: SecAggResult | None = None
        self.results: dict[int, SecAggResult] = {}
        self._iteration = 0
        self._iterate = bytes(iterate)
        self._iterate_digest = b""
        self._mask_binding = b""
        self._members: frozenset[int] = frozenset()
        self._next_members: frozenset[int] = frozenset()
        self.reconstructed_seed_owners: frozenset[int] = frozenset()
        self.reconstructed_key_owners: frozenset[int] = frozenset()

    # -- public API ---------------------------------------------------------------------------

    @property
    def state(self) -> ServerState:
        """The current state."""
        return self._state

    @property
    def abort_reason(self) -> str | None:
        """Why the round aborted, if it did."""
        return self._abort_reason

    @property
    def session_id(self) -> bytes | None:
        """The session id, once the key phase has closed."""
        return self._session_id or None

    @property
    def graph(self) -> CommunicationGraph | None:
        """The communication graph, once the key phase has closed."""
        return self._graph

    @property
    def phase(self) -> Phase | None:
        """The phase being collected, or ``None`` once the round is over."""
        return self._state.phase

    @property
    def result(self) -> SecAggResult:
        """The result of the latest completed sum (the only one of a single secure sum).

        Raises
        ------
        LocalProtocolError
            If no sum has completed.
        """
        if self._result is None:
            raise LocalProtocolError(f"no result in state {self._state.name}")
        return self._result

    @property
    def iteration(self) -> int:
        """The sum in progress or last completed (1-based; 0 during setup)."""
        return self._iteration

    @property
    def members(self) -> frozenset[int]:
        """The clients of the sum in progress; between sums and at the end, those that completed
        every sum so far (the next sum's candidates, before peeling)."""
        if self._state in (ServerState.AWAITING_ITERATION, ServerState.COMPLETED):
            return self._next_members
        return self._members

    @staticmethod
    def _checked_min_inputs(min_inputs: object, invited: int) -> int:
        if isinstance(min_inputs, bool) or not isinstance(min_inputs, int):
            raise TypeError(f"min_inputs must be an int; got {type(min_inputs).__name__}")
        if not 1 <= min_inputs <= invited:
            raise ValueError(f"min_inputs must lie in [1, {invited}]; got {min_inputs}")
        return min_inputs

    def begin_iteration(
        self, iterate: bytes = b"", *, min_inputs: int | None = None, dimension: int | None = None
    ) -> list[Message]:
        """Start the session's next sum with the broadcast ``iterate`` (a model, a centre).

        Its members are the clients that completed the previous sum (sent their masked input
        and answered its unmask request), peeled so each keeps t members among its neighbours.
        ``min_inputs`` (``None``: unchanged) is this and later sums' least number of masked
        inputs to unmask (a noisy release is withheld below the survivors it was planned for).
        ``dimension`` is this sum's vector length (``None``: the configured one); a length other
        than the configured one is bound into the sum like the iterate.

        Returns
        -------
        list of Message
            One :class:`~secagg.messages.IterationRequest` per member.

        Raises
        ------
        LocalProtocolError
            If no sum has just completed, or the session has used all its sums.
        TooFewSurvivorsError
            If too few members remain; the session aborts.
        """
        self._raise_if_aborted()
        if self._state is not ServerState.AWAITING_ITERATION:
            raise LocalProtocolError(f"begin_iteration() in state {self._state.name}")
        if not isinstance(iterate, bytes):
            raise TypeError(f"iterate must be bytes; got {type(iterate).__name__}")
        if min_inputs is not None:
            self.min_inputs = self._checked_min_inputs(min_inputs, len(self.client_ids))
        if dimension is None:
            dimension = self.config.dimension
        if isinstance(dimension, bool) or not isinstance(dimension, int):
            raise TypeError(f"dimension must be an int; got {type(dimension).__name__}")
        if not 1 <= dimension <= MAX_DIMENSION:
            raise ValueError(f"dimension must lie in [1, 2^40]; got {dimension}")
        return self._guarded(lambda: self._start_iteration(iterate, dimension))

    def end_session(self) -> None:
        """Finish a session before its last planned sum (nothing more will be summed)."""
        self._raise_if_aborted()
        if self._state is not ServerState.AWAITING_ITERATION:
            raise LocalProtocolError(f"end_session() in state {self._state.name}")
        self._open_phase(ServerState.COMPLETED, ())

    def held_share_counts(self) -> dict[int, tuple[int, int]]:
        """For each client, how many shares of its (self-mask seed, recovery key) the server holds.

        An honest run never holds t of both for one client; audits check exactly that.
        """
        owners = set(self._seed_shares) | set(self._key_shares)
        return {
            u: (len(self._seed_shares.get(u, {})), len(self._key_shares.get(u, {}))) for u in owners
        }

    def expected(self) -> frozenset[int]:
        """The clients whose message the current phase still waits for."""
        return frozenset(self._pending)

    def receive(self, message: Message, *, peer_id: int | None = None) -> list[Message]:
        """Process one client message; return the messages to send (possibly empty).

        Parameters
        ----------
        message
            The decoded message.
        peer_id
            Who the transport says sent it. A message claiming another sender is refused (a
            fault naming ``peer_id``); pass it whenever the transport authenticates peers.

        Raises
        ------
        RemoteProtocolError
            If the message is invalid; it is recorded in :attr:`faults` and ignored, and the
            server carries on.
        TooFewSurvivorsError
            If the phase this message completed leaves too few clients; the server aborts.
        LocalProtocolError
            If the server has aborted.
        """
        self._raise_if_aborted()
        sender = getattr(message, "peer", None)
        if peer_id is not None and sender != peer_id:
            raise self._fault(
                f"a {type(message).__name__} claiming to be from client {sender}", peer_id
            )
        iteration = getattr(message, "iteration", None)
        if iteration is not None and self._iteration and iteration != self._iteration:
            if iteration < self._iteration:
                self._late(message)
                return []
            raise self._fault(
                f"a {type(message).__name__} of sum {iteration} during sum {self._iteration}",
                sender,
            )
        handler = _TRANSITIONS.get((self._state, type(message)))
        if handler is None:
            raise self._fault(f"unexpected {type(message).__name__} at the server", sender)
        if handler(self, message):
            return self._guarded(self._advance)
        return []

    def receive_bytes(self, data: bytes, *, peer_id: int) -> list[tuple[int, bytes]]:
        """Decode wire bytes from ``peer_id``, process them, and encode the outgoing messages.

        Returns
        -------
        list of (int, bytes)
            (recipient id, wire bytes) for every message to send.

        Raises
        ------
        RemoteProtocolError
            If the bytes do not decode, claim another sender, or the message is invalid
            (recorded in :attr:`faults`; the server carries on).
        """
        self._raise_if_aborted()
        try:
            message = decode_message(data, peer_id=peer_id)
        except RemoteProtocolError as exc:
            self.faults.append(exc)
            raise
        return [(m.peer, encode_message(m)) for m in self.receive(message, peer_id=peer_id)]

    def close_phase(self) -> list[Message]:
        """End the current phase now (its deadline passed): the silent clients dropped out.

        Returns
        -------
        list of Message
            The next phase's messages (none once the round completes).

        Raises
        ------
        TooFewSurvivorsError
            If too few clients remain; the server aborts.
        LocalProtocolError
            If no phase is open.
        """
        self._raise_if_aborted()
        if self._state is ServerState.COMPLETED:
            raise LocalProtocolError("the round has already completed")
        if self._state is ServerState.AWAITING_ITERATION:
            raise LocalProtocolError("no phase is open: call begin_iteration() or end_session()")
        return self._guarded(self._advance)

    # -- internals ----------------------------------------------------------------------------

    def _raise_if_aborted(self) -> None:
        if self._state is ServerState.ABORTED:
            raise LocalProtocolError(f"the server aborted: {self._abort_reason}")

    def _fault(self, reason: str, peer: int | None) -> RemoteProtocolError:
        error = RemoteProtocolError(reason, peer_id=peer)
        self.faults.append(error)
        logger.warning("%s", error)
        return error

    def _guarded(self, step: Callable[[], list[Message]]) -> list[Message]:
        try:
            return step()
        except ProtocolError as exc:
            self._state = ServerState.ABORTED
            self._abort_reason = str(exc)
            self._accumulator = None
            self._seed_shares.clear()
            self._key_shares.clear()
            self._revealed_seeds.clear()
            self._revealed_pairwise.clear()
            logger.warning("round aborted: %s", exc)
            raise

    def _open_phase(self, state: ServerState, members: Iterable[int]) -> None:
        self._state = state
        self._phase_members = frozenset(members)
        self._pending = set(self._phase_members - self._excluded)

    def _exclude(self, client_id: int) -> None:
        self._excluded.add(client_id)
        self._pending.discard(client_id)

    def _answered(self, client_id: int) -> bool:
        self._pending.discard(client_id)
        return not self._pending

    def _late(self, message: Message) -> bool:
        logger.debug("late %s from %d ignored", type(message).__name__, message.peer)
        return False

    def _early(self, message: Message) -> bool:
        raise self._fault(
            f"{type(message).__name__} sent during phase {self._state.value}", message.peer
        )

    def _check_sender(self, message: Message, session: bytes) -> None:
        """Validate the envelope: session, membership of this phase, not excluded."""
        sender = message.peer
        if message.session_id != session:
            raise self._fault("message from another session or phase", sender)
        if sender not in self._phase_members:
            raise self._fault(f"client {sender} is not part of phase {self._state.value}", sender)
        if sender in self._excluded:
            raise self._fault("message from an excluded client", sender)

    def _on_advertise_keys(self, message: Message) -> bool:
        assert isinstance(message, AdvertiseKeys)
        self._check_sender(message, self.config.digest)
        sender = message.sender
        keys = ClientKeys(message.encryption_key, message.mask_key, message.signature)
        previous = self._keys.get(sender)
        if previous is not None:
            if previous != keys:
                raise self._fault("conflicting second key advertisement", sender)
            return False
        public = [message.encryption_key, message.mask_key]
        if any(is_low_order(key) for key in public):
            self._exclude(sender)
            raise self._fault("advertised a low-order public key", sender)
        if len(set(public)) != len(public) or not self._public_keys.isdisjoint(public):
            self._exclude(sender)
            raise self._fault("advertised a public key already in use", sender)
        if self._trust_store is not None:
            signed = advertisement_message(
                self.config.digest, sender, message.encryption_key, message.mask_key
            )
            if not self._trust_store.verify(sender, signed, message.signature):
                self._exclude(sender)
                raise self._fault("advertisement not signed by the sender's identity", sender)
        self._keys[sender] = keys
        self._public_keys.update(public)
        return self._answered(sender)

    def _on_encrypted_shares(self, message: Message) -> bool:
        assert isinstance(message, EncryptedShares)
        self._check_sender(message, self._session_id)
        sender = message.sender
        previous = self._share_messages.get(sender)
        if previous is not None:
            if previous != message:
                raise self._fault("conflicting second share message", sender)
            return False
        assert self._graph is not None
        recipients = tuple(v for v, _ in message.ciphertexts)
        if recipients != self._neighbors[sender]:
            self._exclude(sender)
            raise self._fault("shares must go to exactly the sender's neighbours, in order", sender)
        expected = share_plaintext_bytes(self.config.iterations) + 16  # plus the GCM tag
        if any(len(ct) != expected for _, ct in message.ciphertexts):
            self._exclude(sender)
            raise self._fault("share ciphertext of the wrong length", sender)
        if len(message.seed_commitment) != 32 * self.config.iterations:
            self._exclude(sender)
            raise self._fault("one seed commitment per sum of the session expected", sender)
        if tuple(v for v, _ in message.escrows) != recipients:
            self._exclude(sender)
            raise self._fault("one pair-key escrow per neighbour, in order, expected", sender)
        self._share_messages[sender] = message
        return self._answered(sender)

    def _fingerprint(self, message: MaskedInput) -> bytes:
        sample = np.ascontiguousarray(message.vector[self._positions])
        return hashlib.sha256(sample.tobytes()).digest()

    def _on_masked_input(self, message: Message) -> bool:
        assert isinstance(message, MaskedInput)
        self._check_sender(message, self._session_id)
        sender = message.sender
        if sender in self._masked:
            if message.vector.size == self._dimension and (
                self._fingerprint(message) == self._fingerprints[sender]
            ):
                logger.debug("duplicate masked input from %d ignored", sender)
                return False
            # The first one is already in the sum and stays there; the second is refused.
            raise self._fault("a second, different masked input (the first one counts)", sender)
        if message.modulus_bits != self.config.modulus_bits:
            self._exclude(sender)
            raise self._fault(f"masked input over 2^{message.modulus_bits}", sender)
        if message.vector.size != self._dimension:
            self._exclude(sender)
            raise self._fault(f"masked input of dimension {message.vector.size}", sender)
        neighbors = set(self._neighbors[sender])
        if not neighbors.issuperset(message.complaints):
            self._exclude(sender)
            raise self._fault("complaints about clients that are not its neighbours", sender)
        assert self._accumulator is not None
        np.add(self._accumulator, message.vector, out=self._accumulator)
        self._masked.add(sender)
        self._fingerprints[sender] = self._fingerprint(message)
        if self._iteration == 1:  # complaints concern the setup's ciphertexts
            self._complaints[sender] = frozenset(message.complaints)
        for blamed in message.complaints if self._iteration == 1 else ():
            self.faults.append(
                RemoteProtocolError(
                    f"its share ciphertext for client {sender} did not authenticate "
                    f"(reported by {sender})",
                    peer_id=blamed,
                )
            )
        return self._answered(sender)

    def _on_consistency_signature(self, message: Message) -> bool:
        assert isinstance(message, ConsistencySignature)
        self._check_sender(message, self._session_id)
        sender = message.sender
        if self.config.mac_approvals:
            return self._on_approvals(message)
        if sender in self._signatures:
            if self._signatures[sender] != message.signature:
                raise self._fault("conflicting second consistency signature", sender)
            return False
        if not message.signature or message.approvals:
            self._exclude(sender)
            raise self._fault("a single sum's consistency check takes a signature", sender)
        assert self._trust_store is not None
        signed = consistency_message(
            self._session_id,
            self._survivor_view,
            iteration=self._iteration,
            iterate=self._iterate_digest,
        )
        if not self._trust_store.verify(sender, signed, message.signature):
            self._exclude(sender)
            raise self._fault("consistency signature does not verify", sender)
        self._signatures[sender] = message.signature
        return self._answered(sender)

    def _on_approvals(self, message: ConsistencySignature) -> bool:
        """A session's approvals: one MAC tag per other survivor. The server holds none of the
        keys, so it checks only their shape; each recipient verifies its own."""
        sender = message.sender
        tags = dict(message.approvals)
        if sender in self._approvals:
            if self._approvals[sender] != tags:
                raise self._fault("conflicting second consistency approval", sender)
            return False
        recipients = [w for w, _ in message.approvals]
        if (
            message.signature
            or recipients != sorted(set(recipients))
            or not set(self._survivor_view).issuperset(recipients)
            or sender in tags
            or any(len(tag) != APPROVAL_TAG_BYTES for tag in tags.values())
        ):
            self._exclude(sender)
            raise self._fault(
                "a session's consistency approval is one 32-byte tag per other survivor", sender
            )
        self._approvals[sender] = tags
        self._signatures[sender] = b""  # an approver (its tags live in _approvals)
        return self._answered(sender)

    def _on_unmask_response(self, message: Message) -> bool:
        assert isinstance(message, UnmaskResponse)
        self._check_sender(message, self._session_id)
        sender = message.sender
        if sender in self._responded:
            logger.debug("duplicate unmask response from %d ignored", sender)
            return False
        request = self._requests[sender]
        lacking = self._complaints.get(sender, frozenset())
        expected_seeds = [v for v in request.survivors if v not in lacking]
        expected_keys = [v for v in request.dropped if v not in lacking]
        if (
            [v for v, _ in message.seed_shares] != expected_seeds
            or [v for v, _ in message.key_shares] != expected_keys
            or [v for v, _ in message.pairwise_keys] != list(request.dropped)
            or len(message.self_mask_seed) != SEED_BYTES
        ):
            self._exclude(sender)
            raise self._fault("unmask response does not match the request", sender)
        if any(len(key) != KEY_BYTES for _, key in message.pairwise_keys):
            self._exclude(sender)
            raise self._fault("revealed pair key of the wrong length", sender)
        decoded: list[tuple[dict[int, dict[int, np.ndarray]], int, np.ndarray]] = []
        for store, entries in (
            (self._seed_shares, message.seed_shares),
            (self._key_shares, message.key_shares),
        ):
            for owner, data in entries:
                values = decode_share(data)
                if values is None:
                    self._exclude(sender)
                    raise self._fault(f"malformed share of client {owner}", sender)
                decoded.append((store, owner, values))
        for store, owner, values in decoded:
            store.setdefault(owner, {})[sender] = values
        self._revealed_seeds[sender] = message.self_mask_seed
        for dropped, key in message.pairwise_keys:
            self._revealed_pairwise.setdefault(dropped, {})[sender] = key
        self._responded.add(sender)
        return self._answered(sender)

    def _advance(self) -> list[Message]:
        phase = self._state.phase
        if phase is Phase.ADVERTISE_KEYS:
            return self._close_keys()
        if phase is Phase.SHARE_KEYS:
            return self._close_shares()
        if phase is Phase.MASKED_INPUT:
            return self._close_masked_inputs()
        if phase is Phase.CONSISTENCY_CHECK:
            return self._close_consistency()
        self._finish()
        return []

    def _close_keys(self) -> list[Message]:
        t, need = self.config.threshold, self.config.min_clients
        if len(self._keys) < need:
            raise TooFewSurvivorsError(
                f"only {len(self._keys)} clients advertised keys; threshold t={t} needs at "
                f"least {need}"
            )
        signed = self.config.malicious
        if signed and self.config.consistency_quorum(len(self._keys)) > len(self._keys):
            raise TooFewSurvivorsError(
                f"{len(self._keys)} clients advertised keys; the malicious mode's consistency "
                f"quorum {self.config.consistency_quorum(len(self._keys))} cannot be met"
            )
        digest = self.config.digest
        directory = KeyDirectory.build(digest, min(self._keys), self._keys, signed=signed)
        self._session_id = session_id(self.config.digest, directory.entries)
        self._graph = build_graph(self._keys, self.config.neighbors, self._session_id)
        self._neighbors = self._graph.all_neighbors()
        self._open_phase(ServerState.COLLECTING_SHARES, self._keys)
        logger.info("keys: %d of %d clients advertised", len(self._keys), len(self.client_ids))
        return [
            KeyDirectory(self.config.digest, u, directory.entries, signed)
            for u in sorted(self._keys)
        ]

    def _close_shares(self) -> list[Message]:
        t, need = self.config.threshold, self.config.min_clients
        # Peel clients left with fewer than t sharing neighbours: their secrets could never be
        # recovered, so they must not enter the sum (iterate: removals cascade).
        shared = self._peel(set(self._share_messages))
        if len(shared) < need:
            raise TooFewSurvivorsError(
                f"only {len(shared)} clients shared keys with ≥ t={t} sharing neighbours; "
                f"need at least {need}"
            )
        self._shared = frozenset(shared)
        self._seed_commitments = {u: self._share_messages[u].seed_commitment for u in shared}
        # What recovers a drop: recovery-key commitments and pair-key escrows (not the shares).
        self._recovery = {
            u: dataclasses.replace(self._share_messages[u], ciphertexts=()) for u in shared
        }
        inbox: dict[int, list[tuple[int, bytes]]] = {u: [] for u in shared}
        for sender in sorted(shared):
            for recipient, ciphertext in self._share_messages[sender].ciphertexts:
                if recipient in inbox:
                    inbox[recipient].append((sender, ciphertext))
        self._share_messages.clear()
        logger.info("share_keys: %d clients continue", len(shared))
        self._iteration = 1
        self._members = self._shared
        messages: list[Message] = [
            ForwardedShares(self._session_id, u, tuple(inbox[u]), self._iterate)
            for u in sorted(shared)
        ]
        self._open_sum()
        return messages

    def _peel(self, members: set[int]) -> set[int]:
        """The largest subset in which every client keeps t neighbours (removals cascade):
        a client with fewer could never have its secrets recovered."""
        t = self.config.threshold
        changed = True
        while changed:
            weak = {u for u in members if len(members.intersection(self._neighbors[u])) < t}
            members -= weak
            changed = bool(weak)
        return members

    def _open_sum(self) -> None:
        """Reset the per-sum state and open the masked-input phase of the current sum."""
        self._accumulator = self._ring.zeros(self._dimension)
        self._positions = (self._fingerprint_draws % np.uint64(self._dimension)).astype(np.intp)
        # Hashed once per sum (the iterate may be a whole model).
        self._iterate_digest, self._mask_binding = sum_binding(
            self._iterate, dimension=self._dimension, configured=self.config.dimension
        )
        self._masked = set()
        self._fingerprints = {}
        self._survivor_view = ()
        self._signatures = {}
        self._approvals = {}
        self._requests = {}
        self._responded = set()
        self._revealed_seeds = {}
        self._revealed_pairwise = {}
        self._seed_shares = {}
        self._key_shares = {}
        self.reconstructed_seed_owners = frozenset()
        self.reconstructed_key_owners = frozenset()
        self._open_phase(ServerState.COLLECTING_MASKED_INPUTS, self._members)

    def _start_iteration(self, iterate: bytes, dimension: int) -> list[Message]:
        r = self._iteration + 1
        if r > self.config.iterations:
            raise LocalProtocolError(f"the session has run all its {self.config.iterations} sums")
        t, need = self.config.threshold, self.config.min_clients
        candidates = set(self._next_members) - self._excluded
        members = self._peel(set(candidates))
        if len(members) < need:
            left = candidates - members
            peeled = (
                f" ({len(left)} of the {len(candidates)} that completed sum {r - 1} keep "
                f"fewer than t={t} neighbours among them)"
                if left
                else ""
            )
            raise TooFewSurvivorsError(
                f"only {len(members)} clients remain in the session for sum {r}{peeled}; "
                f"threshold t={t} needs at least {need}"
            )
        if self.config.malicious:
            quorum = self.config.consistency_quorum(len(self._keys))
            if len(members) < quorum:
                raise TooFewSurvivorsError(
                    f"only {len(members)} clients remain for sum {r}; the consistency check "
                    f"needs {quorum}"
                )
        self._iteration = r
        self._iterate = iterate
        self._dimension = dimension
        self._members = frozenset(members)
        wire_dimension = 0 if dimension == self.config.dimension else dimension
        messages: list[Message] = [
            IterationRequest(
                self._session_id,
                u,
                r,
                tuple(v for v in self._neighbors[u] if v in members),
                iterate,
                wire_dimension,
            )
            for u in sorted(members)
        ]
        self._open_sum()
        logger.info("sum %d: %d members", r, len(members))
        return messages

    def _close_masked_inputs(self) -> list[Message]:
        t = self.config.threshold
        survivors = self._masked
        if not survivors:
            raise TooFewSurvivorsError("no client sent a masked input")
        if len(survivors) < self.min_inputs:
            # Checked before any unmask request leaves: nothing about the sum is released.
            raise TooFewSurvivorsError(
                f"only {len(survivors)} masked inputs arrived; the release needs at least "
                f"min_inputs={self.min_inputs} (e.g. the count its noise was calibrated for)",
                arrived=len(survivors),
                min_inputs=self.min_inputs,
            )
        for u in sorted(self._members):
            alive = len(survivors.intersection(self._neighbors[u]))
            needed = u in survivors or alive > 0
            if needed and alive < t:
                what = "self-mask seed" if u in survivors else "recovery key"
                raise TooFewSurvivorsError(
                    f"client {u} has {alive} surviving neighbours; its {what} needs t={t} shares"
                )
        logger.info(
            "masked_input: %d survivors, %d dropped",
            len(survivors),
            len(self._members - survivors),
        )
        if self.config.malicious:
            quorum = self.config.consistency_quorum(len(self._keys))
            if len(survivors) < quorum:
                raise TooFewSurvivorsError(
                    f"{len(survivors)} masked inputs arrived; the consistency check needs "
                    f"{quorum} signatures (⌊(n + c)/2⌋ + 1 of the {len(self._keys)} clients)"
                )
            self._survivor_view = tuple(sorted(survivors))
            self._open_phase(ServerState.COLLECTING_CONSISTENCY_SIGNATURES, survivors)
            return [
                ConsistencyRequest(self._session_id, u, self._survivor_view, self._iteration)
                for u in self._survivor_view
            ]
        return self._unmask_requests(survivors, lambda u: ())

    def _close_consistency(self) -> list[Message]:
        quorum = self.config.consistency_quorum(len(self._keys))
        if len(self._signatures) < quorum:
            raise TooFewSurvivorsError(
                f"only {len(self._signatures)} valid consistency signatures; the quorum is {quorum}"
            )
        if self.config.mac_approvals:
            # The server cannot tell a valid tag from a forged one: each recipient gets every
            # tag addressed to it and counts its own quorum.
            def certificate(u: int) -> tuple[tuple[int, bytes], ...]:
                return tuple(
                    (a, tags[u]) for a, tags in sorted(self._approvals.items()) if u in tags
                )

            return self._unmask_requests(set(self._signatures), certificate)
        # Exactly a quorum travels with each request: clients verify no more than they must.
        signatures = tuple(sorted(self._signatures.items())[:quorum])
        return self._unmask_requests(set(self._signatures), lambda u: signatures)

    def _unmask_requests(
        self,
        recipients: set[int],
        certificate: Callable[[int], tuple[tuple[int, bytes], ...]],
    ) -> list[Message]:
        survivors = self._masked
        dropped = self._members - survivors
        requests = {}
        for u in sorted(recipients):
            neighbors = self._neighbors[u]
            requests[u] = UnmaskRequest(
                self._session_id,
                u,
                tuple(v for v in neighbors if v in survivors),
                tuple(v for v in neighbors if v in dropped),
                certificate(u),
                self._iteration,
            )
        self._requests = requests
        self._open_phase(ServerState.COLLECTING_UNMASK_RESPONSES, requests)
        return list(requests.values())

    def _reconstruct(
        self,
        owner: int,
        shares: dict[int, np.ndarray],
        what: str,
        verify: Callable[[bytes], bool],
    ) -> bytes:
        """Interpolate a 32-byte secret and check it (commitment or public key).

        The first t shares normally verify. Otherwise the shares are decoded as a Reed–Solomon
        codeword (up to ⌊(m − t)/2⌋ wrong shares corrected; their holders are recorded as
        faults), then a few other t-subsets are tried; beyond that the round aborts with a clear
        error rather than produce a wrong sum.
        """
        t = self.config.threshold
        if len(shares) < t:
            raise TooFewSurvivorsError(
                f"{len(shares)} shares of client {owner}'s {what} arrived; t={t} are needed"
            )
        holders = sorted(shares)
        values = np.stack([shares[h] for h in holders])
        try:
            secret = shamir.join_secret(shamir.reconstruct(holders[:t], values[:t]), KEY_BYTES)
        except ValueError:
            secret = b""
        if secret and verify(secret):
            return secret
        if len(holders) > t:
            try:
                decoded, wrong = shamir.robust_reconstruct(holders, values, t)
                secret = shamir.join_secret(decoded, KEY_BYTES)
            except ValueError:
                secret, wrong = b"", ()
            if secret and verify(secret):
                for holder in wrong:
                    self._fault(f"sent a wrong share of client {owner}'s {what}", holder)
                return secret
        for subset in _candidate_subsets(holders, t):
            rows = np.stack([shares[h] for h in subset])
            try:
                secret = shamir.join_secret(shamir.reconstruct(subset, rows), KEY_BYTES)
            except ValueError:
                continue
            if verify(secret):
                logger.warning("client %d's %s recovered from holders %s", owner, what, subset)
                return secret
        raise RemoteProtocolError(
            f"no {t} of the {len(holders)} shares of client {owner}'s {what} reconstruct the "
            "committed value: shares are corrupt",
            peer_id=owner,
        )

    def _seed_check(self, owner: int) -> Callable[[bytes], bool]:
        r = self._iteration
        commitment = self._seed_commitments[owner][32 * (r - 1) : 32 * r]
        return lambda seed: seed_commitment(self._session_id, owner, seed, r) == commitment

    def _recovery_key_check(self, owner: int) -> Callable[[bytes], bool]:
        r = self._iteration
        commitment = self._recovery[owner].recovery_commitment_of(r)
        return lambda key: recovery_commitment(self._session_id, owner, key, r) == commitment

    def _verified_pair_keys(self, dropped: int, alive: list[int]) -> dict[int, bytes]:
        """The sum keys κ^r with ``dropped`` that its surviving neighbours revealed and that
        match the revealer's own commitment; a wrong one is a fault naming its revealer, and
        the server recovers that pair's key from the dropped client's escrow instead."""
        r = self._iteration
        revealed = self._revealed_pairwise.get(dropped, {})
        verified: dict[int, bytes] = {}
        for u in alive:
            kappa = revealed.get(u)
            if kappa is None:
                continue
            _, committed = self._recovery[u].escrow_of(r)[dropped]
            if pair_key_commitment(self._session_id, u, dropped, kappa, r) == committed:
                verified[u] = kappa
            else:
                self._fault(f"revealed a wrong pair key with client {dropped}", u)
        return verified

    def _escrowed_pair_key(self, dropped: int, recovery_key: bytes, survivor: int) -> bytes:
        """The sum key κ of (dropped, survivor), opened from the dropped client's escrow and
        checked against the survivor's own commitment: a wrong escrow aborts, never a wrong sum."""
        r = self._iteration
        escrow, _ = self._recovery[dropped].escrow_of(r)[survivor]
        kappa = seal_pair_key(
            escrow,
            recovery_key,
            session_id=self._session_id,
            owner=dropped,
            other=survivor,
            iteration=r,
        )
        _, committed = self._recovery[survivor].escrow_of(r)[dropped]
        if pair_key_commitment(self._session_id, dropped, survivor, kappa, r) != committed:
            raise self._fault(
                f"its escrowed pair key with client {survivor} does not match {survivor}'s "
                "commitment (one of the two dealt a wrong value)",
                dropped,
            )
        return kappa

    def _self_mask_seed(self, u: int) -> bytes:
        """u's self-mask seed: revealed by u (checked against its commitment), else rebuilt."""
        check = self._seed_check(u)
        revealed = self._revealed_seeds.get(u)
        if revealed is not None:
            if check(revealed):
                return revealed
            self._fault("revealed a self-mask seed that does not match its commitment", u)
        self.reconstructed_seed_owners |= {u}
        return self._reconstruct(u, self._seed_shares.get(u, {}), "self-mask seed", check)

    def _finish(self) -> None:
        assert self._accumulator is not None
        ring, name = self._ring, self.config.vector_name
        survivors = frozenset(self._masked)
        dropped = self._members - survivors
        r = self._iteration
        total = self._accumulator
        plus: list[bytes] = []
        minus: list[bytes] = []
        for u in sorted(survivors):
            seed = self._self_mask_seed(u)
            minus.append(
                self_mask_key(
                    seed, session_id=self._session_id, owner=u, vector_name=name, iteration=r
                )
            )
        recovered = set()
        bound = self._mask_binding
        for v in sorted(dropped):
            alive = [u for u in self._neighbors[v] if u in survivors]
            revealed = self._verified_pair_keys(v, alive)
            recovery: bytes | None = None
            if any(u not in revealed for u in alive):
                # A survivor that masked with v did not reveal their pairwise key: rebuild v's
                # recovery key of this sum from its shares and open v's escrows of this sum
                # (never together with v's self-mask seed of this sum; every sum has its own
                # recovery key and pair keys, so no other sum is exposed).
                recovery = self._reconstruct(
                    v, self._key_shares.get(v, {}), "recovery key", self._recovery_key_check(v)
                )
                recovered.add(v)
            for u in alive:
                kappa = revealed.get(u)
                if kappa is None:
                    assert recovery is not None
                    kappa = self._escrowed_pair_key(v, recovery, u)
                key = pairwise_mask_key(
                    kappa,
                    session_id=self._session_id,
                    first=u,
                    second=v,
                    vector_name=name,
                    iteration=r,
                    iterate=bound,
                )
                # u added +PRG(s_uv) if v > u, −PRG(s_uv) if v < u: remove exactly that.
                (minus if v > u else plus).append(key)
        # Only the masks that do not cancel are regenerated, all in one cache-friendly pass.
        add_masks(total, ring, add=plus, subtract=minus)
        self.reconstructed_key_owners = frozenset(recovered)
        ring.normalize(total)
        participants = {
            Phase.ADVERTISE_KEYS: self._keys,
            Phase.SHARE_KEYS: self._shared,
            Phase.MASKED_INPUT: survivors,
            Phase.CONSISTENCY_CHECK: self._signatures,
            Phase.UNMASK: self._responded,
        }
        self._result = SecAggResult(
            total=total,
            survivors=tuple(sorted(survivors)),
            dropped=tuple(sorted(self.client_ids - survivors)),
            phase_participants={p.value: tuple(sorted(participants[p])) for p in Phase},
            faults=tuple(self.faults),
            iteration=r,
        )
        self.results[r] = self._result
        # Who continues: those that completed this sum (masked input and unmask response).
        self._next_members = frozenset(survivors & self._responded)
        self._accumulator = None
        self._seed_shares.clear()
        self._key_shares.clear()
        self._revealed_seeds.clear()
        self._revealed_pairwise.clear()
        if r < self.config.iterations:
            self._open_phase(ServerState.AWAITING_ITERATION, ())
        else:
            self._open_phase(ServerState.COMPLETED, ())
        logger.info("unmask: %d responded; sum %d completed", len(self._responded), r)


def _candidate_subsets(holders: list[int], t: int, limit: int = 64) -> Iterator[list[int]]:
    """t-subsets of the share holders to try after decoding failed: sliding windows, then
    leaving out each one of the first t + 1."""
    seen: set[tuple[int, ...]] = {tuple(holders[:t])}
    candidates = [holders[start : start + t] for start in range(1, len(holders) - t + 1)]
    if len(holders) > t:
        candidates += [holders[:i] + holders[i + 1 : t + 1] for i in range(t + 1)]
    for subset in candidates:
        key = tuple(subset)
        if key not in seen and len(seen) < limit:
            seen.add(key)
            yield subset


_Handler = Callable[[Server, Message], bool]
_HANDLERS: dict[type, _Handler] = {
    AdvertiseKeys: Server._on_advertise_keys,
    EncryptedShares: Server._on_encrypted_shares,
    MaskedInput: Server._on_masked_input,
    ConsistencySignature: Server._on_consistency_signature,
    UnmaskResponse: Server._on_unmask_response,
}


def _transition_table() -> dict[tuple[ServerState, type], _Handler]:
    """The one table of (state, client message type) → handler: the phase's own message is
    handled, a message of an earlier phase is late (ignored), a later one is a fault."""
    order = list(Phase)
    table: dict[tuple[ServerState, type], _Handler] = {}
    for state in ServerState:
        for phase, message_type in _COLLECTS.items():
            if state.phase is None:
                table[(state, message_type)] = Server._late
            elif phase is state.phase:
                table[(state, message_type)] = _HANDLERS[message_type]
            elif order.index(phase) < order.index(state.phase):
                table[(state, message_type)] = Server._late
            else:
                table[(state, message_type)] = Server._early
    return table


_TRANSITIONS = _transition_table()
