"""End-to-end protocol behaviour: dropouts at every phase, aborts, and hostile messages."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from itertools import product

import numpy as np
import pytest

from secagg import (
    PHASES,
    Client,
    ClientState,
    EncryptedShares,
    LocalProtocolError,
    MaskedInput,
    Phase,
    RemoteProtocolError,
    SecAggConfig,
    Server,
    ServerState,
    ThreatModel,
    TooFewSurvivorsError,
    UnmaskRequest,
    UnmaskResponse,
    encode_message,
    generate_identities,
    plain_outcome,
    secure_sum,
)
from secagg.messages import Message


def plaintext_sum(inputs: np.ndarray, indices: tuple[int, ...], bits: int) -> list[int]:
    return [int(v) % 2**bits for v in inputs[list(indices)].astype(object).sum(axis=0)]


@pytest.mark.parametrize(("bits", "neighbors"), [(1, None), (13, 4), (32, None), (33, 6), (64, 6)])
def test_sum_without_dropouts(bits: int, neighbors: int | None) -> None:
    rng = np.random.default_rng(bits)
    inputs = rng.integers(0, 2**bits, size=(9, 17), dtype=np.uint64)
    result = secure_sum(inputs, modulus_bits=bits, neighbors=neighbors, seed=bits)
    assert result.survivors == tuple(range(9)) and result.dropped == ()
    assert result.total.tolist() == plaintext_sum(inputs, result.survivors, bits)


def test_signed_inputs_and_centred_total() -> None:
    inputs = np.array([[-5, 3], [2, -7], [-1, -1]])
    result = secure_sum(inputs, modulus_bits=8, seed=3)
    assert result.centered().tolist() == [-4, -5]


@pytest.mark.parametrize("phase", PHASES)
def test_single_dropout_at_each_phase(phase: str) -> None:
    inputs = np.arange(8 * 5).reshape(8, 5)
    result = secure_sum(inputs, neighbors=4, threshold=2, dropouts={phase: [3]}, seed=11)
    late = phase in ("consistency_check", "unmask")  # the masked input was already sent
    expected_survivors = tuple(range(8)) if late else (0, 1, 2, 4, 5, 6, 7)
    assert result.survivors == expected_survivors
    assert result.total.tolist() == plaintext_sum(inputs, expected_survivors, 32)


def test_dropouts_in_every_phase_at_once() -> None:
    rng = np.random.default_rng(0)
    inputs = rng.integers(-1000, 1000, size=(40, 33))
    dropouts = {
        "advertise_keys": [0, 1],
        "share_keys": [2, 3],
        "masked_input": [4, 5],
        "unmask": [6],
    }
    result = secure_sum(inputs, neighbors=12, threshold=5, dropouts=dropouts, seed=5)
    survivors = tuple(i for i in range(40) if i not in range(6))
    assert result.survivors == survivors
    assert result.dropped == (0, 1, 2, 3, 4, 5)
    assert result.centered().tolist() == inputs[list(survivors)].sum(axis=0).tolist()


@pytest.mark.parametrize(
    ("n", "t", "threat_model"),
    [
        (4, 2, "semi-honest"),
        (4, 2, "malicious"),
        pytest.param(5, 2, "semi-honest", marks=pytest.mark.slow),
        pytest.param(5, 3, "semi-honest", marks=pytest.mark.slow),
        pytest.param(5, 2, "malicious", marks=pytest.mark.slow),
    ],
)
def test_every_small_dropout_pattern_matches_the_specification(
    n: int, t: int, threat_model: str, outcome_spec: Callable[..., tuple[bool, set[int]]]
) -> None:
    # All assignments of n clients to {stay, drop at one of the phases}, complete graph: the
    # round completes exactly when the specification says so, with exactly the right sum.
    inputs = np.arange(1, n + 1)[:, None] * np.array([1, 10])
    neighbors = {u: set(range(1, n + 1)) - {u} for u in range(1, n + 1)}
    phases = [p.value for p in Phase.of(ThreatModel(threat_model))]
    colluding = t - 1 if threat_model == "malicious" else None  # the default c
    for pattern in product(range(len(phases) + 1), repeat=n):
        dropouts = {
            phases[p - 1]: [i for i in range(n) if pattern[i] == p]
            for p in range(1, len(phases) + 1)
        }
        phase_done = [
            {i + 1 for i in range(n) if pattern[i] == 0 or pattern[i] > k}
            for k in range(1, len(phases) + 1)
        ]
        completes, survivors = outcome_spec(neighbors, t, *phase_done, colluding=colluding)
        # The library's plain-path rule agrees with the specification on every pattern.
        assert plain_outcome(n, dropouts, threshold=t, threat_model=threat_model)[0] == completes
        run = {"threshold": t, "dropouts": dropouts, "seed": 1, "threat_model": threat_model}
        if completes:
            result = secure_sum(inputs, **run)  # type: ignore[arg-type]
            assert set(result.survivors) == {u - 1 for u in survivors}
            assert result.total.tolist() == plaintext_sum(inputs, result.survivors, 32)
        else:
            with pytest.raises(TooFewSurvivorsError):
                secure_sum(inputs, **run)  # type: ignore[arg-type]


def test_too_few_clients_abort_cleanly_with_reason() -> None:
    with pytest.raises(TooFewSurvivorsError, match="only 2 clients advertised keys"):
        secure_sum(np.ones((5, 3), dtype=int), threshold=2, dropouts={"advertise_keys": [0, 1, 2]})
    with pytest.raises(TooFewSurvivorsError, match="surviving neighbours"):
        secure_sum(np.ones((5, 3), dtype=int), threshold=3, dropouts={"masked_input": [0, 1]})


def test_seeded_runs_are_reproducible() -> None:
    inputs = np.arange(20).reshape(5, 4)
    a = secure_sum(inputs, seed=7, dropouts={"share_keys": [2]})
    b = secure_sum(inputs, seed=7, dropouts={"share_keys": [2]})
    assert a.total.tolist() == b.total.tolist() and a.upload_bytes == b.upload_bytes


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"inputs": [[1, 2]]}, ValueError, "at least 2 clients"),
        ({"inputs": [[1, 2], [3]]}, ValueError, "length 2"),
        ({"inputs": [[1.5], [2.0]]}, TypeError, "Quantizer"),
        ({"inputs": [[2**40], [1]]}, ValueError, "accepts integers"),
        ({"inputs": [[1], [2]], "modulus_bits": 0}, ValueError, "modulus_bits"),
        ({"inputs": [[1], [2], [3]], "neighbors": 3}, ValueError, "even"),
        ({"inputs": [[1], [2], [3]], "dropouts": {"later": [0]}}, ValueError, "unknown phase"),
        ({"inputs": [[1], [2], [3]], "dropouts": {"unmask": [5]}}, ValueError, "outside"),
        (
            {"inputs": [[1], [2], [3]], "dropouts": {"unmask": [1], "share_keys": [1]}},
            ValueError,
            "drops twice",
        ),
        ({"inputs": [[1], [2], [3]], "threshold": 3}, ValueError, "at least t \\+ 1"),
        ({"inputs": [[1], [2]], "seed": 1.5}, TypeError, "seed"),
    ],
)
def test_bad_arguments(kwargs: dict[str, object], error: type[Exception], match: str) -> None:
    with pytest.raises(error, match=match):
        secure_sum(**kwargs)  # type: ignore[arg-type]


# -- direct state-machine tests ------------------------------------------------------------------


class Round:
    """A small round driven by hand, so tests can tamper with messages."""

    def __init__(
        self,
        factory: Callable[..., tuple[SecAggConfig, dict[int, Client], Server]],
        n: int = 5,
        threshold: int = 2,
        neighbors: int | None = None,
        threat_model: str = "semi-honest",
        seed: int = 0,
    ) -> None:
        self.inputs = {u: [u, 2 * u, 3 * u, 4 * u] for u in range(1, n + 1)}
        self.config, self.clients, self.server = factory(
            self.inputs,
            threshold=threshold,
            neighbors=neighbors,
            threat_model=threat_model,
            seed=seed,
        )

    def to_server(self, messages: list[Message]) -> list[Message]:
        return [r for m in messages for r in self.server.receive(m, peer_id=m.peer)]

    def to_clients(self, messages: list[Message]) -> list[Message]:
        return [r for m in messages for r in self.clients[m.peer].receive(m)]

    def until_unmask_requests(self) -> list[Message]:
        directory = self.to_server([m for c in self.clients.values() for m in c.start()])
        forwarded = self.to_server(self.to_clients(directory))
        replies = self.to_server(self.to_clients(forwarded))
        if self.config.malicious:  # the consistency round
            replies = self.to_server(self.to_clients(replies))
        return replies


RoundFactory = Callable[..., tuple[SecAggConfig, dict[int, Client], Server]]


def test_client_refuses_to_reveal_both_shares_of_one_neighbour(round_factory: RoundFactory) -> None:
    game = Round(round_factory)
    requests = game.until_unmask_requests()
    request = next(m for m in requests if m.peer == 1)
    assert isinstance(request, UnmaskRequest)
    victim = request.survivors[0]
    hostile = dataclasses.replace(request, dropped=(victim,))
    with pytest.raises(RemoteProtocolError, match=f"both shares of clients \\[{victim}\\]"):
        game.clients[1].receive(hostile)
    assert game.clients[1].state is ClientState.ABORTED
    with pytest.raises(LocalProtocolError, match="aborted"):
        game.clients[1].receive(request)


@pytest.mark.parametrize(
    ("tamper", "match"),
    [
        (lambda r: dataclasses.replace(r, dropped=(r.recipient,)), "listed as dropped"),
        (lambda r: dataclasses.replace(r, survivors=(*r.survivors, 99)), "unknown clients"),
        (lambda r: dataclasses.replace(r, survivors=r.survivors + r.survivors[:1]), "repeated"),
        (lambda r: dataclasses.replace(r, survivors=r.survivors[:1]), "threshold"),
        (lambda r: dataclasses.replace(r, session_id=bytes(32)), "another session"),
        (lambda r: dataclasses.replace(r, recipient=r.recipient % 5 + 1), "addressed to"),
    ],
)
def test_client_aborts_on_hostile_unmask_requests(
    tamper: object, match: str, round_factory: RoundFactory
) -> None:
    game = Round(round_factory)
    request = next(m for m in game.until_unmask_requests() if m.peer == 2)
    assert callable(tamper)
    with pytest.raises((RemoteProtocolError, TooFewSurvivorsError), match=match):
        game.clients[2].receive(tamper(request))
    assert game.clients[2].state is ClientState.ABORTED


def test_messages_from_the_wrong_phase_abort_the_client(round_factory: RoundFactory) -> None:
    game = Round(round_factory)
    directory = game.to_server([m for c in game.clients.values() for m in c.start()])
    forwarded = game.to_server(game.to_clients(directory))
    with pytest.raises(RemoteProtocolError, match="unexpected KeyDirectory"):
        game.clients[directory[0].peer].receive(directory[0])  # replayed
    client = game.clients[forwarded[1].peer]
    replayed_into_next_phase = dataclasses.replace(directory[1], session_id=client.session_id)
    with pytest.raises(RemoteProtocolError):
        client.receive(replayed_into_next_phase)


def test_directory_without_the_client_s_own_keys_aborts(round_factory: RoundFactory) -> None:
    game = Round(round_factory)
    directory = game.to_server([m for c in game.clients.values() for m in c.start()])
    other = Round(round_factory, seed=1)
    foreign = other.to_server([m for c in other.clients.values() for m in c.start()])
    with pytest.raises(RemoteProtocolError, match="does not list this client's keys"):
        game.clients[1].receive(foreign[0])
    assert game.clients[2].receive(directory[1])  # the genuine one still works elsewhere


def test_server_records_faults_and_carries_on(round_factory: RoundFactory) -> None:
    game = Round(round_factory)
    adverts = [m for c in game.clients.values() for m in c.start()]
    game.to_server(adverts[:2])
    with pytest.raises(RemoteProtocolError, match="conflicting"):
        game.server.receive(dataclasses.replace(adverts[0], mask_key=adverts[1].mask_key))
    with pytest.raises(RemoteProtocolError, match="not part of phase"):
        game.server.receive(dataclasses.replace(adverts[0], sender=77))
    with pytest.raises(RemoteProtocolError, match="low-order"):
        game.server.receive(dataclasses.replace(adverts[2], mask_key=bytes(32)))
    with pytest.raises(RemoteProtocolError, match="another session"):
        game.server.receive(dataclasses.replace(adverts[3], session_id=bytes(32)))
    assert game.server.receive(adverts[0]) == []  # exact duplicate: ignored
    directory = game.to_server(adverts[3:])
    assert game.server.state is ServerState.COLLECTING_SHARES
    assert len(game.server.faults) == 4
    assert {m.peer for m in directory} == {1, 2, 4, 5}  # client 3 excluded
    with pytest.raises(RemoteProtocolError, match="sent during phase"):
        game.server.receive(
            MaskedInput(game.server.session_id or b"", 1, 32, np.zeros(4, np.uint32))
        )
    shares = game.to_clients(directory)
    assert game.server.receive(adverts[4]) == []  # late: ignored
    forwarded = game.to_server(shares)
    masked = game.to_clients(forwarded)
    requests = game.to_server(masked)
    responses = game.to_clients(requests)
    bad = responses[0]
    assert isinstance(bad, UnmaskResponse)
    with pytest.raises(RemoteProtocolError, match="does not match the request"):
        game.server.receive(dataclasses.replace(bad, seed_shares=bad.seed_shares[1:]))
    game.to_server(responses[1:])  # the excluded client counts as answered: the phase closes
    assert game.server.state is ServerState.COMPLETED
    expected = [sum(game.inputs[u][j] for u in (1, 2, 4, 5)) for j in range(4)]
    assert game.server.result.total.tolist() == expected


def test_server_never_reconstructs_both_secrets_of_a_client(round_factory: RoundFactory) -> None:
    game = Round(round_factory, n=8, threshold=3, neighbors=4)
    directory = game.to_server([m for c in game.clients.values() for m in c.start()])
    forwarded = game.to_server(game.to_clients(directory))
    masked = game.to_clients(forwarded)
    masked = [m for m in masked if m.peer != 4]  # client 4 drops before masking
    requests = game.to_server(masked)
    requests.extend(game.server.close_phase())
    assert game.server.graph is not None
    silent = game.server.graph.neighbors(4)[0]  # and its neighbour vanishes before unmasking
    game.to_server(game.to_clients([r for r in requests if r.peer != silent]))
    game.server.close_phase()
    server = game.server
    assert server.state is ServerState.COMPLETED
    # The silent survivor's seed and the dropped client's recovery key come from shares; the other
    # survivors revealed their own seeds and their pairwise keys with client 4.
    assert server.reconstructed_seed_owners == {silent}
    assert server.reconstructed_key_owners == {4}
    assert server.result.survivors == (1, 2, 3, 5, 6, 7, 8)
    assert server.result.total.tolist() == [
        sum(game.inputs[u][j] for u in server.result.survivors) for j in range(4)
    ]


@pytest.mark.parametrize("liar", ["dropped", "survivor"])
def test_a_wrong_pair_key_escrow_aborts_the_sum_naming_its_dealer_never_a_wrong_total(
    round_factory: RoundFactory, liar: str
) -> None:
    # Client 4 drops before masking and its neighbour goes silent before unmasking, so their
    # pairwise mask comes out of 4's escrow — checked against the survivor's commitment. A
    # tampered escrow (4 lied) or a tampered commitment (the survivor lied) cannot be told
    # apart by the server: the sum aborts naming the dropped dealer instead of a wrong total.
    game = Round(round_factory, n=8, threshold=3, neighbors=4)
    directory = game.to_server([m for c in game.clients.values() for m in c.start()])
    shares = game.to_clients(directory)
    assert game.server.graph is not None
    silent = game.server.graph.neighbors(4)[0]
    dealer = 4 if liar == "dropped" else silent
    other = silent if liar == "dropped" else 4

    def tamper(message: Message) -> Message:
        assert isinstance(message, EncryptedShares)
        if message.sender != dealer:
            return message
        escrows = tuple(
            (v, blob if v != other else bytes(b ^ 0xFF for b in blob[:64]) + blob[64:])
            for v, blob in message.escrows
        )
        return dataclasses.replace(message, escrows=escrows)

    forwarded = game.to_server([tamper(m) for m in shares])
    masked = [m for m in game.to_clients(forwarded) if m.peer != 4]
    requests = game.to_server(masked) + game.server.close_phase()
    game.to_server(game.to_clients([r for r in requests if r.peer != silent]))
    with pytest.raises(RemoteProtocolError, match=f"pair key with client {silent}") as error:
        game.server.close_phase()
    assert error.value.peer_id == 4
    assert game.server.state is ServerState.ABORTED


def test_aborted_server_refuses_further_calls(round_factory: RoundFactory) -> None:
    game = Round(round_factory, n=4, threshold=3)
    game.to_server([m for c in list(game.clients.values())[:3] for m in c.start()])
    with pytest.raises(TooFewSurvivorsError, match="only 3 clients advertised keys"):
        game.server.close_phase()
    assert game.server.state is ServerState.ABORTED
    with pytest.raises(LocalProtocolError, match="aborted"):
        game.server.close_phase()
    with pytest.raises(LocalProtocolError, match="no result"):
        _ = game.server.result


def test_client_api_misuse() -> None:
    malicious = SecAggConfig(dimension=3, threshold=1, round_nonce=bytes(16))
    with pytest.raises(TypeError, match="malicious mode needs identity"):
        Client(malicious, 1)
    keys, store = generate_identities([1, 2], seed=0)
    with pytest.raises(ValueError, match="does not list this identity"):
        Client(malicious, 1, identity=keys[2], trust_store=store)
    with pytest.raises(TypeError, match="malicious mode needs trust_store"):
        Server(malicious, [1, 2])
    with pytest.raises(ValueError, match="missing from the trust store"):
        Server(malicious, [1, 2, 3], trust_store=store)
    with pytest.raises(ValueError, match="at least 16 bytes"):
        SecAggConfig(dimension=3, threshold=1, round_nonce=b"short")
    config = SecAggConfig(
        dimension=3, threshold=1, round_nonce=bytes(16), threat_model="semi-honest"
    )
    with pytest.raises(ValueError, match="dimension 3"):
        Client(config, 1, input_vector=[1, 2])
    with pytest.raises(ValueError, match="client_id"):
        Client(config, 0)
    with pytest.raises(TypeError, match="SecAggConfig"):
        Client(object(), 1)  # type: ignore[arg-type]
    client = Client(config, 1)
    client.start()
    with pytest.raises(LocalProtocolError, match="start"):
        client.start()
    with pytest.raises(LocalProtocolError, match="aborted"):
        client.start()


def test_client_without_input_fails_locally_at_masking() -> None:
    config = SecAggConfig(
        dimension=2, threshold=1, round_nonce=bytes(16), threat_model="semi-honest"
    )
    clients = {1: Client(config, 1), 2: Client(config, 2, input_vector=[1, 1])}
    server = Server(config, clients)
    directory = [r for c in clients.values() for m in c.start() for r in server.receive(m)]
    shares = [r for m in directory for r in clients[m.peer].receive(m)]
    forwarded = [r for m in shares for r in server.receive(m)]
    with pytest.raises(LocalProtocolError, match="set_input"):
        clients[forwarded[0].peer].receive(forwarded[0])


def _corrupt(share: bytes) -> bytes:
    return bytes([share[0] ^ 1]) + share[1:]


@pytest.mark.parametrize("threat_model", ["semi-honest", "malicious"])
def test_a_lying_share_holder_is_corrected_and_named(
    threat_model: str, round_factory: RoundFactory
) -> None:
    # The owner vanishes before unmasking, so its seed must be rebuilt from the others' shares;
    # one holder lies about its share and Reed–Solomon decoding corrects and names it.
    game = Round(round_factory, n=6, threshold=2, threat_model=threat_model)
    requests = game.until_unmask_requests()
    owner = 6
    responses = game.to_clients([r for r in requests if r.peer != owner])
    liar = responses[0]
    assert isinstance(liar, UnmaskResponse)
    shares = dict(liar.seed_shares)
    shares[owner] = _corrupt(shares[owner])
    lying = dataclasses.replace(liar, seed_shares=tuple(shares.items()))
    game.to_server([lying, *responses[1:]])
    game.server.close_phase()
    assert game.server.state is ServerState.COMPLETED
    blamed = [f.peer_id for f in game.server.result.faults if "wrong share" in str(f)]
    assert blamed == [liar.sender]
    assert game.server.result.total.tolist() == [
        sum(v[j] for v in game.inputs.values()) for j in range(4)
    ]


def test_corrupt_shares_without_spares_abort_instead_of_a_wrong_sum(
    round_factory: RoundFactory,
) -> None:
    game = Round(round_factory, n=4, threshold=2)
    requests = game.until_unmask_requests()
    owner = 4
    responses = game.to_clients([r for r in requests if r.peer not in (owner, 3)])
    liar = responses[0]
    assert isinstance(liar, UnmaskResponse)
    shares = dict(liar.seed_shares)
    shares[owner] = _corrupt(shares[owner])
    lying = dataclasses.replace(liar, seed_shares=tuple(shares.items()))
    game.to_server([lying, *responses[1:]])
    with pytest.raises(RemoteProtocolError, match=f"client {owner}'s self-mask seed .* corrupt"):
        game.server.close_phase()
    assert game.server.state is ServerState.ABORTED


@pytest.mark.parametrize("threat_model", ["semi-honest", "malicious"])
def test_bytes_only_transport(threat_model: str, round_factory: RoundFactory) -> None:
    # A transport that moves nothing but bytes: receive_bytes on both sides, routing by the
    # recipient the server returns and naming the sender it received from.
    inputs = {u: np.arange(6) * u for u in range(1, 6)}
    _, clients, server = round_factory(inputs, threshold=2, neighbors=2, threat_model=threat_model)
    to_server = [(u, encode_message(m)) for u, c in clients.items() for m in c.start()]
    while to_server:
        to_clients = [out for u, data in to_server for out in server.receive_bytes(data, peer_id=u)]
        to_server = [(u, r) for u, data in to_clients for r in clients[u].receive_bytes(data)]
    assert server.state is ServerState.COMPLETED
    assert server.result.total.tolist() == (np.arange(6) * 15).tolist()
    with pytest.raises(RemoteProtocolError):
        server.receive_bytes(b"\x01\x05junk", peer_id=1)


def test_min_inputs_aborts_before_any_unmask_request() -> None:
    inputs = [[i, 1] for i in range(6)]
    # 4 masked inputs arrive; the server needs 5: it aborts with nothing unmasked.
    run = {"dropouts": {"masked_input": [0, 1]}, "seed": 1, "threat_model": "semi-honest"}
    with pytest.raises(TooFewSurvivorsError, match="min_inputs=5") as refused:
        secure_sum(inputs, min_inputs=5, **run)  # type: ignore[arg-type]
    assert (refused.value.arrived, refused.value.min_inputs) == (4, 5)
    result = secure_sum(inputs, min_inputs=4, **run)  # type: ignore[arg-type]
    assert result.total.tolist() == [2 + 3 + 4 + 5, 4]
    with pytest.raises(ValueError, match="min_inputs"):
        secure_sum(inputs, min_inputs=7)


def test_min_inputs_abort_sends_no_unmask_request() -> None:
    config = SecAggConfig(
        dimension=2, threshold=2, round_nonce=bytes(16), threat_model="semi-honest"
    )
    clients = {u: Client(config, u, input_vector=[u, 1]) for u in (1, 2, 3, 4)}
    server = Server(config, list(clients), min_inputs=4)
    sent: list[Message] = []

    def deliver(outbox: list[Message], skip: int | None = None) -> list[Message]:
        replies = [r for m in outbox for r in server.receive(m)]
        sent.extend(replies)
        return [m for r in replies if r.peer != skip for m in clients[r.peer].receive(r)]

    to_server = [m for c in clients.values() for m in c.start()]
    to_server = deliver(to_server)  # key directories → encrypted shares
    to_server = deliver(to_server, skip=4)  # forwarded shares; client 4 vanishes
    assert len(to_server) == 3 and all(isinstance(m, MaskedInput) for m in to_server)
    for message in to_server:
        assert server.receive(message) == []  # still waiting for client 4
    with pytest.raises(TooFewSurvivorsError, match="min_inputs=4"):
        server.close_phase()  # the deadline passes with 3 of the 4 needed
    assert not any(isinstance(m, UnmaskRequest) for m in sent)
    assert server.state is ServerState.ABORTED
