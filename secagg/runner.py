"""``secure_sum``: the real client and server state machines, run in memory.

Every message goes through its wire encoding (``encode_message`` → bytes → ``decode_message``),
exactly as over a network, so the runner also measures bytes on the wire. Clients receive their
input only when the masked-input phase reaches them and forget it after masking, and the server
sums masked inputs as they arrive, so memory stays O(n·k + d) beyond the caller's own inputs.
"""

from __future__ import annotations

import logging
import time
import warnings
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
from numpy.typing import ArrayLike, NDArray

from secagg.client import Client, ClientState
from secagg.config import PHASES, Phase, SecAggConfig, ThreatModel
from secagg.driver import Delivery, PeerFault, RoundDriver
from secagg.errors import InsecureSettingsWarning, LocalProtocolError, ProtocolError
from secagg.identity import IdentityKey, TrustStore, generate_identities
from secagg.inputs import LazyInputs
from secagg.messages import decode_message, encode_message
from secagg.randomness import KeystreamRandom
from secagg.ring import Ring, RingArray
from secagg.server import Server, ServerState
from secagg.validation import check_int

__all__ = [
    "PHASES",
    "SecureSumResult",
    "Session",
    "default_threshold",
    "parse_dropouts",
    "plain_outcome",
    "secure_sum",
    "summed_clients",
]

logger = logging.getLogger(__name__)

ProgressCallback = Callable[[str, int, int], None]


@dataclass(frozen=True, slots=True)
class SecureSumResult:
    """The outcome of :func:`secure_sum`.

    Attributes
    ----------
    total
        Σ inputs[i] mod M over ``survivors``, as ring elements (uint32 or uint64).
    survivors
        Indices of the clients whose inputs are in ``total``, ascending.
    dropped
        Indices of all other clients, ascending.
    modulus_bits, threshold, neighbors
        The round's parameters (``neighbors=None``: complete graph).
    threat_model, max_colluding
        The threat model the round ran under and its collusion bound c.
    faults
        What the server blamed on which client (index = client id − 1), one line each.
    signatures, signature_verifications
        Ed25519 signatures the clients made and verifications all parties ran (malicious mode;
        0 in the semi-honest mode).
    iteration
        Which sum of its :class:`Session` this is (1 for :func:`secure_sum`).
    seed
        The seed the round ran with (``None``: fresh randomness, not reproducible).
    client_seconds, server_seconds, transport_seconds
        Wall time per phase: all clients' computation, the server's, and encoding/decoding.
    upload_bytes, download_bytes
        Bytes per phase sent by clients to the server and by the server to clients.

    Examples
    --------
    >>> result = secure_sum([[1, 2], [3, 4], [5, 6]], modulus_bits=8, seed=2)
    >>> result.total.tolist(), result.upload_bytes["masked_input"]  # 3 × (53 + 2 bytes)
    ([9, 12], 165)
    """

    total: RingArray
    survivors: tuple[int, ...]
    dropped: tuple[int, ...]
    modulus_bits: int
    threshold: int
    neighbors: int | None
    seed: int | None
    threat_model: str = ThreatModel.MALICIOUS.value
    max_colluding: int = 0
    faults: tuple[str, ...] = ()
    signatures: int = 0
    signature_verifications: int = 0
    iteration: int = 1
    client_seconds: dict[str, float] = field(default_factory=dict)
    server_seconds: dict[str, float] = field(default_factory=dict)
    transport_seconds: dict[str, float] = field(default_factory=dict)
    upload_bytes: dict[str, int] = field(default_factory=dict)
    download_bytes: dict[str, int] = field(default_factory=dict)

    def centered(self) -> NDArray[np.int64]:
        """The total as centred representatives in [-M/2, M/2).

        Examples
        --------
        >>> secure_sum([[-3], [1]], seed=0).centered().tolist()
        [-2]
        """
        return Ring(self.modulus_bits).centered(self.total)


def summed_clients(dropouts: Mapping[str, Iterable[int]] | None, num_clients: int) -> list[int]:
    """The clients whose inputs reach the total if the round completes.

    Everyone except those dropping before ``masked_input`` or earlier; a client dropping before
    ``consistency_check`` or ``unmask`` has already sent its masked input, so its input counts.
    Plain (non-cryptographic) simulations of a secure sum use this to include exactly the same
    clients.

    Examples
    --------
    >>> summed_clients({"share_keys": [2], "unmask": [0]}, 4)
    [0, 1, 3]
    """
    late = {Phase.CONSISTENCY_CHECK.value, Phase.UNMASK.value}
    gone = {i for i, phase in parse_dropouts(dropouts, num_clients).items() if phase not in late}
    return [i for i in range(num_clients) if i not in gone]


def default_threshold(num_clients: int, neighbors: int | None) -> int:
    """The threshold used when none is given: a majority of each client's neighbours.

    ``⌊k/2⌋ + 1`` with k = n − 1 on the complete graph, or the Harary degree (shares go to the
    k neighbours, not to the client itself; cf. Bonawitz et al. 2017, who take t > n/2).

    Examples
    --------
    >>> default_threshold(100, None), default_threshold(100, 14), default_threshold(2, None)
    (50, 8, 1)
    """
    degree = num_clients - 1 if neighbors is None else min(neighbors, num_clients - 1)
    return max(1, min(degree // 2 + 1, degree))


def plain_outcome(
    num_clients: int,
    dropouts: Mapping[str, Iterable[int]] | None,
    *,
    threshold: int | None = None,
    neighbors: int | None = None,
    threat_model: str = "malicious",
    max_colluding: int | None = None,
) -> tuple[bool, str]:
    """Whether a round with these dropouts completes, decided without running it.

    Plain (non-cryptographic) simulations of a secure sum use it to fail exactly when the
    protocol would. The rule is the complete graph's (SecAgg+ additionally needs every
    neighbourhood to keep t, which depends on the random graph; there the rule is an
    approximation): at least t + 1 clients advertise and share keys; the self-mask seed of
    every survivor comes from itself or t responding neighbours, and a dropped client's masks
    from its surviving neighbours' revealed keys or t responders' shares; in the malicious mode
    the masked-input and consistency phases also keep the quorum ⌊(n + c)/2⌋ + 1 of the n
    advertisers (:meth:`secagg.SecAggConfig.consistency_quorum`).

    Returns
    -------
    (bool, str)
        Whether the round completes, and if not, why.

    Examples
    --------
    >>> plain_outcome(6, {"masked_input": [0, 1]}, threshold=3)
    (False, '4 survivors; the consistency quorum of 6 advertisers is 5')
    >>> plain_outcome(6, {"masked_input": [0, 1]}, threshold=3, threat_model="semi-honest")
    (True, '')
    """
    phase_of = parse_dropouts(dropouts, num_clients)
    order = list(PHASES)

    def staying(phase: str) -> set[int]:
        """Clients that send their message of ``phase``."""
        limit = order.index(phase)
        return {
            i for i in range(num_clients) if i not in phase_of or order.index(phase_of[i]) > limit
        }

    t = default_threshold(num_clients, neighbors) if threshold is None else threshold
    malicious = threat_model == ThreatModel.MALICIOUS.value
    advertised = staying(Phase.ADVERTISE_KEYS.value)
    if len(advertised) < t + 1:
        return False, f"{len(advertised)} advertised keys; t={t} needs {t + 1}"
    colluding = t - 1 if max_colluding is None else max_colluding
    quorum = max(t, (len(advertised) + colluding) // 2 + 1)
    if malicious and quorum > len(advertised):
        return False, f"the consistency quorum {quorum} exceeds the {len(advertised)} advertisers"
    shared = advertised & staying(Phase.SHARE_KEYS.value)
    if len(shared) < t + 1:
        return False, f"{len(shared)} shared keys; t={t} needs {t + 1}"
    survivors = shared & staying(Phase.MASKED_INPUT.value)
    if not survivors:
        return False, "no masked input"
    if len(survivors) - 1 < t:
        return False, f"{len(survivors)} survivors: fewer than t={t} surviving neighbours"
    responders = survivors
    if malicious:
        signers = survivors & staying(Phase.CONSISTENCY_CHECK.value)
        if len(survivors) < quorum or len(signers) < quorum:
            count = min(len(survivors), len(signers))
            return False, (
                f"{count} survivors; the consistency quorum of {len(advertised)} advertisers is "
                f"{quorum}"
            )
        responders = signers
    responders = responders & staying(Phase.UNMASK.value)
    for u in survivors:
        if u not in responders and len(responders - {u}) < t:
            return False, f"a survivor's seed needs t={t} responders; {len(responders)} responded"
    if (shared - survivors) and (survivors - responders) and len(responders) < t:
        return False, f"a dropped client's recovery key needs t={t} responders"
    return True, ""


def parse_dropouts(
    dropouts: Mapping[str, Iterable[int]] | None, num_clients: int
) -> dict[int, str]:
    """Validate a dropout specification; return client index → the phase it drops before.

    Raises
    ------
    TypeError, ValueError
        On unknown phases, non-integer or out-of-range indices, or a client dropping twice.

    Examples
    --------
    >>> parse_dropouts({"share_keys": [2], "unmask": [0]}, 4)
    {2: 'share_keys', 0: 'unmask'}
    """
    if dropouts is None:
        return {}
    if not isinstance(dropouts, Mapping):
        raise TypeError("dropouts must map a phase name to client indices")
    phase_of: dict[int, str] = {}
    for phase, indices in dropouts.items():
        if phase not in PHASES:
            raise ValueError(f"unknown phase {phase!r}; phases are {', '.join(PHASES)}")
        for index in indices:
            if isinstance(index, bool) or not isinstance(index, int | np.integer):
                raise TypeError(f"client indices must be ints; got {index!r}")
            if not 0 <= index < num_clients:
                raise ValueError(f"client index {index} outside [0, {num_clients})")
            if int(index) in phase_of:
                raise ValueError(
                    f"client {index} drops twice ({phase_of[int(index)]!r} and {phase!r})"
                )
            phase_of[int(index)] = phase
    return phase_of


class _InMemoryTransport:
    """The clients in this process: each request is decoded, handled and answered in turn, so
    the driver feeds each reply to the server before the next client computes (O(d) memory)."""

    def __init__(
        self,
        clients: dict[int, Client],
        gone: Callable[[int, str], bool],
        inputs: Sequence[ArrayLike] | NDArray[np.integer],
        progress: ProgressCallback | None,
    ) -> None:
        self.clients, self.gone, self.inputs, self.progress = clients, gone, inputs, progress
        self.client_seconds = dict.fromkeys(PHASES, 0.0)
        self.wire_seconds = dict.fromkeys(PHASES, 0.0)

    def exchange(
        self, phase: Phase, outgoing: Sequence[tuple[int, bytes]], timeout: float | None
    ) -> Iterator[Delivery | PeerFault]:
        name = phase.value
        for done, (u, data) in enumerate(outgoing, 1):
            client = self.clients[u]
            if not self.gone(u, name) and client.state is not ClientState.ABORTED:
                yield from self._answer(client, phase, data)
            if self.progress is not None:
                self.progress(name, done, len(outgoing))

    def _answer(self, client: Client, phase: Phase, data: bytes) -> Iterator[Delivery]:
        name = phase.value
        start = time.perf_counter()
        request = None if not data else decode_message(data)
        self.wire_seconds[name] += time.perf_counter() - start
        start = time.perf_counter()
        try:
            if request is None:
                replies = client.start()
            else:
                if phase is Phase.MASKED_INPUT:
                    _give_input(client, self.inputs, client.client_id - 1)
                replies = client.receive(request)
        except ProtocolError as exc:
            logger.warning("client %d aborted in %s: %s", client.client_id, name, exc)
            replies = []
        finally:
            self.client_seconds[name] += time.perf_counter() - start
        for reply in replies:
            start = time.perf_counter()
            wire = encode_message(reply)
            self.wire_seconds[name] += time.perf_counter() - start
            yield Delivery(client.client_id, wire)


def _check_inputs(
    inputs: Sequence[ArrayLike] | NDArray[np.integer],
    n: int,
    config: SecAggConfig,
    members: Sequence[int],
    *,
    first: bool,
) -> int:
    """Validate every member's input before any cryptography runs; return the sum's dimension
    (the configured one for a session's first sum; a later sum may have its own). Inputs are
    only indexed, never copied into a list; a :class:`LazyInputs` is not read here (only its
    length and dimension are checked): each of its rows is built once, when its client masks
    it."""
    if isinstance(inputs, np.ndarray) and inputs.ndim != 2:
        raise ValueError(f"an input array must be 2-D (clients × dimension); got {inputs.shape}")
    if len(inputs) != n:
        raise ValueError(f"expected one input per client ({n}); got {len(inputs)}")
    if isinstance(inputs, LazyInputs):
        dimension = inputs.dimension
    elif isinstance(inputs, np.ndarray):
        dimension = int(inputs.shape[1])
    else:
        dimension = int(np.size(inputs[members[0]])) if members else config.dimension
    if dimension < 1 or (first and dimension != config.dimension):
        raise ValueError(
            f"the inputs have dimension {dimension}; this session's first sum sums vectors of "
            f"dimension {config.dimension}"
            if first
            else f"the inputs have dimension {dimension}; a sum needs at least one entry"
        )
    if isinstance(inputs, LazyInputs):
        return dimension
    for i in members:
        vector = config.ring.check(inputs[i])
        if vector.size != dimension:
            raise ValueError(
                f"input {i} has shape {vector.shape}; every input of this sum must be 1-D of "
                f"length {dimension}"
            )
    return dimension


def _give_input(
    client: Client, inputs: Sequence[ArrayLike] | NDArray[np.integer], index: int
) -> None:
    """Hand client ``index`` its input — the only read of that input in this sum."""
    try:
        client.set_input(inputs[index])
    except (TypeError, ValueError) as error:
        if not isinstance(inputs, LazyInputs):
            raise  # validated up front: not reached
        raise type(error)(f"input {index}: {error}") from error


class Session:
    """Several secure sums of the same clients over one key setup, run in memory.

    The real :class:`~secagg.Client` and :class:`~secagg.Server` with ``config.iterations =
    R``: keys are advertised, checked and shared once; each further :meth:`sum` is two message
    rounds (masked input; unmask — plus the consistency check in the malicious mode) and costs
    no key agreement at all, no Shamir sharing and no share encryption. Every sum has its own
    self-mask seeds, pairwise keys (PRF outputs of one pair secret per neighbour) and recovery
    keys, so a client that drops in one sum is recovered for that sum alone and excluded from
    the later ones (a returning client is refused).
    ``iterate`` — what the server broadcasts for a sum (a model, a Weiszfeld centre) — is
    delivered to every member and bound into the sum: into the pairwise-mask key derivation
    (members shown different iterates have masks that do not cancel, so the sum is uniformly
    random and a model shown to one client alone isolates nothing) and, in the malicious mode,
    into the consistency approvals (at most one iterate per sum gathers the quorum; a session
    approves with pairwise MAC tags, a single sum with signatures).
    Client ``i`` has id ``i + 1``. Derivation and security argument:
    ``secagg/malicious_security.md`` §5.

    Parameters
    ----------
    num_clients, dimension
        n and d.
    iterations
        R, the most sums the session may run (1 to 255).
    modulus_bits, threshold, neighbors, threat_model, max_colluding, min_inputs, seed
        As for :func:`secure_sum`.

    Examples
    --------
    >>> session = Session(4, 2, iterations=3, seed=0)
    >>> session.sum([[1, 2], [3, 4], [5, 6], [7, 8]]).total.tolist()
    [16, 20]
    >>> second = session.sum([[1, 0], [1, 0], [1, 0], [1, 0]], iterate=b"step 2",
    ...                      dropouts={"masked_input": [3]})
    >>> second.total.tolist(), second.survivors, session.members
    ([3, 0], (0, 1, 2), (0, 1, 2))
    >>> session.remaining
    1
    """

    def __init__(
        self,
        num_clients: int,
        dimension: int,
        *,
        iterations: int,
        modulus_bits: int = 32,
        threshold: int | None = None,
        neighbors: int | None = None,
        threat_model: str = "malicious",
        max_colluding: int | None = None,
        min_inputs: int = 1,
        seed: int | None = None,
        progress: ProgressCallback | None = None,
    ) -> None:
        if isinstance(num_clients, bool) or not isinstance(num_clients, int):
            raise TypeError(f"num_clients must be an int; got {type(num_clients).__name__}")
        if num_clients < 2:
            raise ValueError(f"a secure sum needs at least 2 clients; got {num_clients}")
        if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int)):
            raise TypeError(f"seed must be an int or None; got {type(seed).__name__}")
        if threshold is None:
            threshold = default_threshold(num_clients, neighbors)
        self._root = KeystreamRandom(seed, label=b"secagg-dp/v2/secure-sum")
        self.config = SecAggConfig(
            dimension=dimension,
            threshold=threshold,
            modulus_bits=modulus_bits,
            neighbors=neighbors,
            round_nonce=self._root.random_bytes(16),
            threat_model=threat_model,
            max_colluding=max_colluding,
            iterations=iterations,
        )
        self.num_clients = num_clients
        self.seed = seed
        self.min_inputs = min_inputs
        self._progress = progress
        ids = list(range(1, num_clients + 1))
        self._identities: dict[int, IdentityKey] = {}
        self._trust_store: TrustStore | None = None
        if self.config.malicious:
            self._identities, self._trust_store = generate_identities(
                ids, self._root.random_bytes(32)
            )
        self._clients = {
            u: Client(
                self.config,
                u,
                random_source=self._root.spawn(b"client/%d" % u),
                identity=self._identities.get(u),
                trust_store=self._trust_store,
            )
            for u in ids
        }
        # Validated now; the server is built at the first sum (it carries the first iterate).
        with warnings.catch_warnings():  # the real server (first sum) warns, once
            warnings.simplefilter("ignore", InsecureSettingsWarning)
            Server(self.config, ids, min_inputs=min_inputs, trust_store=self._trust_store)
        self._server: Server | None = None
        self._closed = False

    @property
    def members(self) -> tuple[int, ...]:
        """Indices of the clients still in the session (all of them before the first sum)."""
        if self._server is None:
            return tuple(range(self.num_clients))
        return tuple(sorted(u - 1 for u in self._server.members))

    @property
    def remaining(self) -> int:
        """How many more sums the session can run."""
        done = 0 if self._server is None else self._server.iteration
        return 0 if self._closed else self.config.iterations - done

    def close(self) -> None:
        """End the session (no more sums). Idempotent."""
        if self._server is not None and self._server.state is ServerState.AWAITING_ITERATION:
            self._server.end_session()
        self._closed = True

    def sum(
        self,
        inputs: Sequence[ArrayLike] | NDArray[np.integer],
        *,
        iterate: bytes = b"",
        dropouts: Mapping[str, Iterable[int]] | None = None,
        min_inputs: int | None = None,
    ) -> SecureSumResult:
        """Run the session's next secure sum over its members.

        Parameters
        ----------
        inputs
            One integer vector per client (indexed by client; non-members' are not read). The
            first sum's have the session's ``dimension``; a later sum's may have any one
            length (bound into that sum).
        iterate
            What the server broadcasts for this sum (bytes; bound into it in the malicious
            mode).
        dropouts
            Phase → client indices that vanish before sending that phase's message. The key
            phases (``advertise_keys``, ``share_keys``) exist only in the first sum.
        min_inputs
            This and later sums' least number of masked inputs the server unmasks (``None``:
            unchanged; the session's own at first). Fewer abort the session before anything
            about the sum is released.

        Returns
        -------
        SecureSumResult
            The total over this sum's survivors, with ``iteration`` set.

        Raises
        ------
        TooFewSurvivorsError
            If too few clients remain; the session aborts.
        LocalProtocolError
            If the session is closed or has run all its sums.
        """
        if self._closed or self.remaining == 0:
            raise LocalProtocolError("the session has no sum left (closed or all R run)")
        if min_inputs is not None:
            value = check_int("min_inputs", min_inputs, minimum=1)
            if value > self.num_clients:
                raise ValueError(f"min_inputs must lie in [1, {self.num_clients}]; got {value}")
            self.min_inputs = value
        first = self._server is None
        drop_phase = parse_dropouts(dropouts, self.num_clients)
        phases = [p.value for p in self.config.phases]
        if not first:
            phases = phases[phases.index(Phase.MASKED_INPUT.value) :]
        unknown = {p for p in drop_phase.values() if p not in phases}
        if unknown:
            raise ValueError(
                f"this sum has no phase {sorted(unknown)[0]!r}; its phases are {', '.join(phases)}"
            )
        members = self.members
        masking = PHASES.index(Phase.MASKED_INPUT.value)
        senders = [i for i in members if PHASES.index(drop_phase.get(i, "unmask")) > masking]
        dimension = _check_inputs(inputs, self.num_clients, self.config, senders, first=first)
        ids = list(range(1, self.num_clients + 1))

        def gone(u: int, phase: str) -> bool:
            dropped_at = drop_phase.get(u - 1)
            return dropped_at is not None and PHASES.index(dropped_at) <= PHASES.index(phase)

        transport = _InMemoryTransport(self._clients, gone, inputs, self._progress)
        driver = RoundDriver(transport)
        verifications = 0 if self._trust_store is None else self._trust_store.verifications
        if first:

            def make_server(advertised: list[int]) -> Server:
                self._server = Server(
                    self.config,
                    ids,  # every invited client: the ones that did not advertise dropped out
                    min_inputs=self.min_inputs,
                    trust_store=self._trust_store,
                    random_source=self._root.spawn(b"server"),
                    iterate=iterate,
                )
                return self._server

            driver.setup(
                [(u, b"") for u in ids],
                make_server,
                self.config.phases,
                expected={u: u for u in ids},
            )
        else:
            server = self._server
            assert server is not None
            driver.client_of = {u: u for u in ids}
            start = time.perf_counter()
            outbox = server.begin_iteration(
                iterate, min_inputs=self.min_inputs, dimension=dimension
            )
            driver.server_seconds[phases[0]] += time.perf_counter() - start
            driver.run(server, outbox, [Phase(p) for p in phases])
        server = self._server
        assert server is not None
        client_seconds = transport.client_seconds
        transport_seconds = {p: driver.wire_seconds[p] + transport.wire_seconds[p] for p in PHASES}
        result = server.result
        used = 0 if self._trust_store is None else self._trust_store.verifications - verifications
        return SecureSumResult(
            total=result.total,
            survivors=tuple(u - 1 for u in result.survivors),
            dropped=tuple(u - 1 for u in result.dropped),
            modulus_bits=self.config.modulus_bits,
            threshold=self.config.threshold,
            neighbors=self.config.neighbors,
            seed=self.seed,
            threat_model=ThreatModel(self.config.threat_model).value,
            max_colluding=int(self.config.max_colluding or 0),
            faults=tuple(str(fault) for fault in result.faults),
            signatures=driver.signatures,
            signature_verifications=used,
            iteration=result.iteration,
            client_seconds=client_seconds,
            server_seconds=driver.server_seconds,
            transport_seconds=transport_seconds,
            upload_bytes=driver.upload,
            download_bytes=driver.download,
        )


def secure_sum(
    inputs: Sequence[ArrayLike] | NDArray[np.integer],
    *,
    modulus_bits: int = 32,
    threshold: int | None = None,
    neighbors: int | None = None,
    dropouts: Mapping[str, Iterable[int]] | None = None,
    seed: int | None = None,
    progress: ProgressCallback | None = None,
    min_inputs: int = 1,
    threat_model: str = "malicious",
    max_colluding: int | None = None,
) -> SecureSumResult:
    """Securely sum integer vectors of n clients modulo 2^modulus_bits, in memory.

    Runs the real :class:`~secagg.Client` and :class:`~secagg.Server` state machines, every
    message through its binary encoding and delivered with its sender's id (the server refuses
    a message claiming another sender). Client ``i`` has id ``i + 1``. In the malicious mode
    (the default) every client gets an Ed25519 identity generated for this run and all parties
    share the trust store that lists them. (A :class:`Session` of one sum.)

    Parameters
    ----------
    inputs
        n integer vectors of one length d (or an (n, d) integer array), values in [-M/2, M);
        or a :class:`~secagg.LazyInputs`, whose rows are built once each, when read.
    modulus_bits
        b, with M = 2^b (1 ≤ b ≤ 64).
    threshold
        Shamir threshold t; default :func:`default_threshold`.
    neighbors
        ``None``: complete graph (SecAgg). An even int k: SecAgg+ on a random Harary graph of
        degree k (complete if k ≥ n − 1).
    dropouts
        Phase name → client indices that vanish before sending that phase's message (and never
        come back). Phases: ``"advertise_keys"``, ``"share_keys"``, ``"masked_input"``,
        ``"consistency_check"`` (malicious mode only), ``"unmask"``. A client dropping at
        ``"consistency_check"`` or ``"unmask"`` has its input in the total.
    seed
        Seed for every party's cryptographic randomness (reproducible runs); ``None`` draws fresh
        randomness from the operating system.
    progress
        Optional callback ``(phase, done, total)`` called as clients are processed.
    min_inputs
        The server unmasks only if at least this many masked inputs arrived (see
        :class:`~secagg.Server`); otherwise the round aborts with nothing released.
    threat_model
        ``"malicious"`` (default: signed keys and the consistency check) or
        ``"semi-honest"`` (one message round and every signature fewer).
    max_colluding
        c, the clients that may collude with a malicious server (default t − 1).

    Returns
    -------
    SecureSumResult
        The total over the survivors, the survivor and dropout indices, timings and bytes.

    Raises
    ------
    TooFewSurvivorsError
        If too few clients survive a phase for the threshold: the round aborts cleanly.
    TypeError, ValueError
        On malformed inputs or parameters.

    Examples
    --------
    >>> result = secure_sum([[1, 2], [3, 4], [5, 6], [7, 8]], dropouts={"masked_input": [3]},
    ...                     seed=1)
    >>> result.total.tolist(), result.survivors, result.dropped
    ([9, 12], (0, 1, 2), (3,))
    """
    if isinstance(inputs, np.ndarray) and inputs.ndim != 2:
        raise ValueError(f"an input array must be 2-D (clients × dimension); got {inputs.shape}")
    n = len(inputs)
    if n < 2:
        raise ValueError(f"a secure sum needs at least 2 clients; got {n}")
    first_shape = (inputs.dimension,) if isinstance(inputs, LazyInputs) else np.shape(inputs[0])
    if len(first_shape) != 1 or first_shape[0] == 0:
        raise ValueError(f"input 0 has shape {first_shape}; inputs must be non-empty 1-D vectors")
    session = Session(
        n,
        int(first_shape[0]),
        iterations=1,
        modulus_bits=modulus_bits,
        threshold=threshold,
        neighbors=neighbors,
        threat_model=threat_model,
        max_colluding=max_colluding,
        min_inputs=min_inputs,
        seed=seed,
        progress=progress,
    )
    return session.sum(inputs, dropouts=dropouts)
