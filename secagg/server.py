"""The SecAgg / SecAgg+ server: a sans-I/O state machine (Bonawitz et al. 2017, Fig. 4).

The server relays everything between clients. It moves through four collecting phases; a phase
ends when every client expected in it has answered (the reply that completes it returns the next
phase's messages) or when the driver calls :meth:`Server.close_phase` because its deadline passed.
Clients that did not answer are dropouts of that phase.

Masked inputs are added into one accumulator as they arrive (memory O(d), not O(n·d)). At the end
the server reconstructs the self-mask seed of every client whose input is in the sum and the mask
key of every client that dropped after sharing keys — never both for one client — and regenerates
only the masks it must remove.

A peer's invalid message raises :class:`~secagg.errors.RemoteProtocolError` naming the peer and
is recorded in :attr:`Server.faults`; the peer is excluded where that is still possible, but the
round goes on: one client must not be able to abort everyone's aggregation. Local misuse and
round-fatal conditions (too few survivors) abort the server, after which every call raises.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from enum import Enum

import numpy as np

from secagg import shamir
from secagg._session import (
    SHARE_CIPHERTEXT_BYTES,
    decode_share,
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
from secagg.graph import CommunicationGraph, build_graph
from secagg.keys import KEY_BYTES, KeyPair
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
from secagg.ring import RingArray

__all__ = ["SecAggResult", "Server", "ServerState"]

logger = logging.getLogger(__name__)

# A fixed scalar used only to test advertised keys: X25519 with a low-order point yields zero.
_KEY_CHECK = KeyPair.from_private_bytes(bytes(31) + b"\x01")


class ServerState(Enum):
    """Where the server is in the protocol; the four collecting states are the phases."""

    COLLECTING_KEYS = "advertise_keys"
    COLLECTING_SHARES = "share_keys"
    COLLECTING_MASKED_INPUTS = "masked_input"
    COLLECTING_UNMASK_RESPONSES = "unmask"
    COMPLETED = "completed"
    ABORTED = "aborted"


_PHASES = (
    ServerState.COLLECTING_KEYS,
    ServerState.COLLECTING_SHARES,
    ServerState.COLLECTING_MASKED_INPUTS,
    ServerState.COLLECTING_UNMASK_RESPONSES,
)
# The phase index at which the server accepts each client message type.
_PHASE_OF: dict[type, int] = {
    AdvertiseKeys: 0,
    EncryptedShares: 1,
    MaskedInput: 2,
    UnmaskResponse: 3,
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
        For each phase name, the ids that completed it.
    """

    total: RingArray
    survivors: tuple[int, ...]
    dropped: tuple[int, ...]
    phase_participants: dict[str, tuple[int, ...]]


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

    Examples
    --------
    >>> from secagg.client import Client
    >>> cfg = SecAggConfig(dimension=3, threshold=2)
    >>> clients = {u: Client(cfg, u, input_vector=[u, 0, 1]) for u in (1, 2, 3)}
    >>> server = Server(cfg, clients)
    >>> outbox = [m for c in clients.values() for m in c.start()]
    >>> while outbox:
    ...     replies = [r for m in outbox for r in server.receive(m)]
    ...     outbox = [r for m in replies for r in clients[m.peer].receive(m)]
    >>> server.state.name, server.result.total.tolist()
    ('COMPLETED', [6, 0, 3])
    """

    def __init__(
        self, config: SecAggConfig, client_ids: Iterable[int], *, min_inputs: int = 1
    ) -> None:
        if not isinstance(config, SecAggConfig):
            raise TypeError(f"config must be a SecAggConfig; got {type(config).__name__}")
        ids = [int(u) for u in client_ids]
        if len(set(ids)) != len(ids):
            raise ValueError("client ids must be distinct")
        if any(not 1 <= u <= 2**31 - 2 for u in ids):
            raise ValueError("client ids must lie in [1, 2^31 − 2]")
        if len(ids) < config.threshold + 1:
            raise ValueError(
                f"{len(ids)} clients cannot meet threshold t={config.threshold}: each client "
                "needs at least t neighbours, so at least t + 1 clients"
            )
        if isinstance(min_inputs, bool) or not isinstance(min_inputs, int):
            raise TypeError(f"min_inputs must be an int; got {type(min_inputs).__name__}")
        if not 1 <= min_inputs <= len(ids):
            raise ValueError(f"min_inputs must lie in [1, {len(ids)}]; got {min_inputs}")
        self.config = config
        self.client_ids = frozenset(ids)
        self.min_inputs = min_inputs
        self._ring = config.ring
        self._state = ServerState.COLLECTING_KEYS
        self._abort_reason: str | None = None
        self.faults: list[RemoteProtocolError] = []
        self._session_id = b""
        self._graph: CommunicationGraph | None = None
        self._keys: dict[int, ClientKeys] = {}
        self._share_messages: dict[int, EncryptedShares] = {}
        self._seed_commitments: dict[int, bytes] = {}
        self._shared: frozenset[int] = frozenset()
        self._accumulator: RingArray | None = None
        self._masked: set[int] = set()
        self._requests: dict[int, UnmaskRequest] = {}
        self._responded: set[int] = set()
        self._seed_shares: dict[int, dict[int, np.ndarray]] = {}
        self._key_shares: dict[int, dict[int, np.ndarray]] = {}
        self._excluded: set[int] = set()
        self._phase_members: frozenset[int] = self.client_ids
        self._pending: set[int] = set(self.client_ids)
        self._neighbors: dict[int, tuple[int, ...]] = {}
        self._result: SecAggResult | None = None
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
    def result(self) -> SecAggResult:
        """The result of a completed round.

        Raises
        ------
        LocalProtocolError
            If the round has not completed.
        """
        if self._result is None:
            raise LocalProtocolError(f"no result in state {self._state.name}")
        return self._result

    def held_share_counts(self) -> dict[int, tuple[int, int]]:
        """For each client, how many shares of its (self-mask seed, mask key) the server holds.

        An honest run never holds t of both for one client; audits check exactly that.
        """
        owners = set(self._seed_shares) | set(self._key_shares)
        return {
            u: (len(self._seed_shares.get(u, {})), len(self._key_shares.get(u, {}))) for u in owners
        }

    def expected(self) -> frozenset[int]:
        """The clients whose message the current phase still waits for."""
        return frozenset(self._pending)

    def receive(self, message: Message) -> list[Message]:
        """Process one client message; return the messages to send (possibly empty).

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
        phase = _PHASE_OF.get(type(message))
        if phase is None:
            raise self._fault(
                f"unexpected {type(message).__name__} at the server",
                getattr(message, "peer", None),
            )
        current = self._phase_index()
        if phase < current:
            logger.debug("late %s from %d ignored", type(message).__name__, message.peer)
            return []
        if phase > current:
            raise self._fault(
                f"{type(message).__name__} sent during phase {self._state.value}", message.peer
            )
        handler = _HANDLERS[phase]
        if handler(self, message):
            return self._guarded(self._advance)
        return []

    def receive_bytes(self, data: bytes, *, peer_id: int | None = None) -> list[tuple[int, bytes]]:
        """Decode wire bytes, process them, and encode the outgoing messages.

        Returns
        -------
        list of (int, bytes)
            (recipient id, wire bytes) for every message to send.

        Raises
        ------
        RemoteProtocolError
            If the bytes do not decode, or the message is invalid (recorded in
            :attr:`faults`; the server carries on).
        """
        self._raise_if_aborted()
        try:
            message = decode_message(data, peer_id=peer_id)
        except RemoteProtocolError as exc:
            self.faults.append(exc)
            raise
        return [(m.peer, encode_message(m)) for m in self.receive(message)]

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
        return self._guarded(self._advance)

    # -- internals ----------------------------------------------------------------------------

    def _phase_index(self) -> int:
        return _PHASES.index(self._state) if self._state in _PHASES else len(_PHASES)

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
        keys = ClientKeys(message.encryption_key, message.mask_key)
        previous = self._keys.get(message.sender)
        if previous is not None:
            if previous != keys:
                raise self._fault("conflicting second key advertisement", message.sender)
            return False
        for key in keys:
            try:
                _KEY_CHECK.agree(key)
            except RemoteProtocolError:
                self._exclude(message.sender)
                raise self._fault("advertised a low-order public key", message.sender) from None
        self._keys[message.sender] = keys
        return self._answered(message.sender)

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
        if any(len(ct) != SHARE_CIPHERTEXT_BYTES for _, ct in message.ciphertexts):
            self._exclude(sender)
            raise self._fault("share ciphertext of the wrong length", sender)
        self._share_messages[sender] = message
        return self._answered(sender)

    def _on_masked_input(self, message: Message) -> bool:
        assert isinstance(message, MaskedInput)
        self._check_sender(message, self._session_id)
        sender = message.sender
        if sender in self._masked:
            logger.debug("duplicate masked input from %d ignored", sender)
            return False
        if message.modulus_bits != self.config.modulus_bits:
            self._exclude(sender)
            raise self._fault(f"masked input over 2^{message.modulus_bits}", sender)
        if message.vector.size != self.config.dimension:
            self._exclude(sender)
            raise self._fault(f"masked input of dimension {message.vector.size}", sender)
        assert self._accumulator is not None
        np.add(self._accumulator, message.vector, out=self._accumulator)
        self._masked.add(sender)
        return self._answered(sender)

    def _on_unmask_response(self, message: Message) -> bool:
        assert isinstance(message, UnmaskResponse)
        self._check_sender(message, self._session_id)
        sender = message.sender
        if sender in self._responded:
            logger.debug("duplicate unmask response from %d ignored", sender)
            return False
        request = self._requests[sender]
        seed_owners = [v for v, _ in message.seed_shares]
        key_owners = [v for v, _ in message.key_shares]
        if seed_owners != list(request.survivors) or key_owners != list(request.dropped):
            self._exclude(sender)
            raise self._fault("unmask response does not match the request", sender)
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
        self._responded.add(sender)
        return self._answered(sender)

    def _advance(self) -> list[Message]:
        index = self._phase_index()
        if index == 0:
            return self._close_keys()
        if index == 1:
            return self._close_shares()
        if index == 2:
            return self._close_masked_inputs()
        self._finish()
        return []

    def _close_keys(self) -> list[Message]:
        t = self.config.threshold
        if len(self._keys) < t + 1:
            raise TooFewSurvivorsError(
                f"only {len(self._keys)} clients advertised keys; threshold t={t} needs at "
                f"least {t + 1}"
            )
        directory = KeyDirectory.build(self.config.digest, min(self._keys), self._keys)
        self._session_id = session_id(self.config.digest, directory.entries)
        self._graph = build_graph(self._keys, self.config.neighbors, self._session_id)
        self._neighbors = self._graph.all_neighbors()
        self._open_phase(ServerState.COLLECTING_SHARES, self._keys)
        logger.info("keys: %d of %d clients advertised", len(self._keys), len(self.client_ids))
        return [KeyDirectory(self.config.digest, u, directory.entries) for u in sorted(self._keys)]

    def _close_shares(self) -> list[Message]:
        t = self.config.threshold
        # Peel clients left with fewer than t sharing neighbours: their secrets could never be
        # recovered, so they must not enter the sum (iterate: removals cascade).
        shared = set(self._share_messages)
        changed = True
        while changed:
            weak = {u for u in shared if len(shared.intersection(self._neighbors[u])) < t}
            shared -= weak
            changed = bool(weak)
        if len(shared) < t + 1:
            raise TooFewSurvivorsError(
                f"only {len(shared)} clients shared keys with ≥ t={t} sharing neighbours; "
                f"need at least {t + 1}"
            )
        self._shared = frozenset(shared)
        self._seed_commitments = {u: self._share_messages[u].seed_commitment for u in shared}
        inbox: dict[int, list[tuple[int, bytes]]] = {u: [] for u in shared}
        for sender in sorted(shared):
            for recipient, ciphertext in self._share_messages[sender].ciphertexts:
                if recipient in inbox:
                    inbox[recipient].append((sender, ciphertext))
        self._accumulator = self._ring.zeros(self.config.dimension)
        self._open_phase(ServerState.COLLECTING_MASKED_INPUTS, shared)
        logger.info("share_keys: %d clients continue", len(shared))
        return [ForwardedShares(self._session_id, u, tuple(inbox[u])) for u in sorted(shared)]

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
        dropped = self._shared - survivors
        for u in sorted(self._shared):
            alive = len(survivors.intersection(self._neighbors[u]))
            needed = u in survivors or alive > 0
            if needed and alive < t:
                what = "self-mask seed" if u in survivors else "mask key"
                raise TooFewSurvivorsError(
                    f"client {u} has {alive} surviving neighbours; its {what} needs t={t} shares"
                )
        requests = {}
        for u in sorted(survivors):
            neighbors = self._neighbors[u]
            requests[u] = UnmaskRequest(
                self._session_id,
                u,
                tuple(v for v in neighbors if v in survivors),
                tuple(v for v in neighbors if v in dropped),
            )
        self._requests = requests
        self._share_messages.clear()
        self._open_phase(ServerState.COLLECTING_UNMASK_RESPONSES, requests)
        logger.info("masked_input: %d survivors, %d dropped", len(survivors), len(dropped))
        return list(requests.values())

    def _reconstruct(
        self,
        owner: int,
        shares: dict[int, np.ndarray],
        what: str,
        verify: Callable[[bytes], bool],
    ) -> bytes:
        """Interpolate a 32-byte secret and check it (commitment or public key).

        The first t shares normally verify. With spare shares, other t-subsets are tried, so a
        corrupted share is survived and reported; beyond that (Reed–Solomon decoding) the round
        aborts with a clear error rather than produce a wrong sum.
        """
        t = self.config.threshold
        if len(shares) < t:
            raise TooFewSurvivorsError(
                f"{len(shares)} shares of client {owner}'s {what} arrived; t={t} are needed"
            )
        holders = sorted(shares)
        for subset in _candidate_subsets(holders, t):
            values = np.stack([shares[h] for h in subset])
            try:
                secret = shamir.join_secret(shamir.reconstruct(subset, values), KEY_BYTES)
            except ValueError:
                continue
            if verify(secret):
                if subset != holders[:t]:
                    suspects = sorted(set(holders[:t]) - set(subset))
                    logger.warning(
                        "client %d's %s: shares from %s did not verify; recovered without them",
                        owner,
                        what,
                        suspects,
                    )
                return secret
        raise RemoteProtocolError(
            f"no {t} of the {len(holders)} shares of client {owner}'s {what} reconstruct the "
            "committed value: shares are corrupt",
            peer_id=None,
        )

    def _seed_check(self, owner: int) -> Callable[[bytes], bool]:
        commitment = self._seed_commitments[owner]
        return lambda seed: seed_commitment(self._session_id, owner, seed) == commitment

    def _mask_key_check(self, owner: int) -> Callable[[bytes], bool]:
        public = self._keys[owner].mask_key
        return lambda secret: KeyPair.from_private_bytes(secret).public == public

    def _finish(self) -> None:
        assert self._accumulator is not None
        ring, name = self._ring, self.config.vector_name
        survivors = frozenset(self._masked)
        dropped = self._shared - survivors
        total = self._accumulator
        self.reconstructed_seed_owners = survivors
        plus: list[bytes] = []
        minus: list[bytes] = []
        for u in sorted(survivors):
            seed = self._reconstruct(
                u, self._seed_shares.get(u, {}), "self-mask seed", self._seed_check(u)
            )
            minus.append(
                self_mask_key(seed, session_id=self._session_id, owner=u, vector_name=name)
            )
        recovered = set()
        for v in sorted(dropped):
            alive = [u for u in self._neighbors[v] if u in survivors]
            if not alive:
                continue
            secret = self._reconstruct(
                v, self._key_shares.get(v, {}), "mask key", self._mask_key_check(v)
            )
            pair = KeyPair.from_private_bytes(secret)
            recovered.add(v)
            for u in alive:
                shared = pair.agree(self._keys[u].mask_key, peer_id=u)
                key = pairwise_mask_key(
                    shared, session_id=self._session_id, first=u, second=v, vector_name=name
                )
                # u added +PRG(s_uv) if v > u, −PRG(s_uv) if v < u: remove exactly that.
                (minus if v > u else plus).append(key)
        # Only the masks that do not cancel are regenerated, all in one cache-friendly pass.
        add_masks(total, ring, add=plus, subtract=minus)
        self.reconstructed_key_owners = frozenset(recovered)
        ring.normalize(total)
        phases = {
            "advertise_keys": tuple(sorted(self._keys)),
            "share_keys": tuple(sorted(self._shared)),
            "masked_input": tuple(sorted(survivors)),
            "unmask": tuple(sorted(self._responded)),
        }
        self._result = SecAggResult(
            total=total,
            survivors=tuple(sorted(survivors)),
            dropped=tuple(sorted(self.client_ids - survivors)),
            phase_participants=phases,
        )
        self._accumulator = None
        self._seed_shares.clear()
        self._key_shares.clear()
        self._open_phase(ServerState.COMPLETED, ())
        logger.info("unmask: %d responded; round completed", len(self._responded))


def _candidate_subsets(holders: list[int], t: int, limit: int = 64) -> Iterator[list[int]]:
    """t-subsets of the share holders to try, most likely first: the first t, then sliding
    windows, then leaving out each one of the first t + 1."""
    seen: set[tuple[int, ...]] = set()
    candidates = [holders[start : start + t] for start in range(len(holders) - t + 1)]
    if len(holders) > t:
        candidates += [holders[:i] + holders[i + 1 : t + 1] for i in range(t + 1)]
    for subset in candidates:
        key = tuple(subset)
        if key not in seen and len(seen) < limit:
            seen.add(key)
            yield subset


_HANDLERS = (
    Server._on_advertise_keys,
    Server._on_encrypted_shares,
    Server._on_masked_input,
    Server._on_unmask_response,
)
