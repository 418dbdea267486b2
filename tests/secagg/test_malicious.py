"""The malicious-server mode against the attacks it exists for, each attempted end to end.

The scenarios are audit 10's (:mod:`audits.attacks`); here each is checked in detail.

Every security test here hands the adversary's whole view to
:func:`audits.adversary.reconstruct_inputs`, which tries every route to strip an honest client's
masks. Each attack is also run in the semi-honest mode, where it must succeed: that shows the
attack is real and the reconstruction can fail the test.
"""

from __future__ import annotations

import contextlib
import dataclasses
import itertools

import pytest

from audits.adversary import AdversarialRound, honest_inputs_exposed, reconstruct_inputs
from audits.attacks import (
    bad_client_round,
    claim_dropped,
    inputs_for,
    run_until,
    split_views,
    substitute_directory,
    wrong_shamir_shares,
)
from secagg import (
    Client,
    ClientState,
    ConsistencyRequest,
    EncryptedShares,
    ForwardedShares,
    KeyDirectory,
    MaskedInput,
    RemoteProtocolError,
    ServerState,
    UnmaskRequest,
    secure_sum,
)
from secagg.messages import Message

GRAPHS = [pytest.param(None, id="complete"), pytest.param(4, id="secagg+")]


def total_of(game: AdversarialRound, members: tuple[int, ...]) -> list[int]:
    ring = game.config.ring
    return ring.reduce(sum(game.inputs[u] for u in members)).tolist()


# -- positive control ----------------------------------------------------------------------------


def test_the_reconstruction_recovers_what_the_adversary_can_know() -> None:
    # A colluding client's secrets are the adversary's: its input must come out. An honest
    # round with nobody dropping gives the server nothing about the honest ones.
    game = AdversarialRound(inputs_for(6), threshold=3, colluding=[2])
    game.run()
    assert game.server.state is ServerState.COMPLETED
    recovered = reconstruct_inputs(game.view)
    assert {u for _, _, u in recovered} == {2}
    [value] = recovered.values()
    assert value.tolist() == game.inputs[2].tolist()


# -- 1. substituted keys -------------------------------------------------------------------------


@pytest.mark.parametrize("neighbors", GRAPHS)
@pytest.mark.parametrize("threat_model", ["semi-honest", "malicious"])
def test_substituted_keys(threat_model: str, neighbors: int | None) -> None:
    victim = 1
    game = AdversarialRound(
        inputs_for(7), threshold=2, neighbors=neighbors, threat_model=threat_model
    )
    directories = game.to_server(game.start())
    tampered = next(
        substitute_directory(game, d, victim)
        for d in directories
        if isinstance(d, KeyDirectory) and d.recipient == victim
    )
    replies = game.to_client(tampered)
    if threat_model == "malicious":
        # The victim checks its neighbours' signed advertisements before encrypting anything.
        assert replies == [] and "not signed by its identity" in game.aborted[victim]
        assert honest_inputs_exposed(game.view, game.inputs, game.honest) == []
        return
    (shares,) = replies
    assert isinstance(shares, EncryptedShares)
    game.view.received.append(shares)
    # The server answers with forged "forwarded shares" from every neighbour of the victim;
    # the victim (robust to bad ciphertexts) masks and sends its input.
    neighbors_of_victim = game.clients[victim].neighbors
    forged = ForwardedShares(
        shares.session_id, victim, tuple((v, bytes(160)) for v in neighbors_of_victim)
    )
    (masked,) = game.to_client(forged)
    assert isinstance(masked, MaskedInput)
    game.view.received.append(masked)
    # Semi-honest: the server decrypts the victim's shares under its own keys and unmasks it.
    assert honest_inputs_exposed(game.view, game.inputs, game.honest) == [victim]


# -- 2. inconsistent views at unmask -------------------------------------------------------------


@pytest.mark.parametrize("neighbors", GRAPHS)
def test_inconsistent_unmask_views_unmask_the_victim_in_the_semi_honest_mode(
    neighbors: int | None,
) -> None:
    # The server tells the victim it survived (it reveals its own seed) and every neighbour
    # that it dropped (they reveal their pairwise keys with it): the victim's input is exposed.
    # This is why the semi-honest mode is only for servers that follow the protocol.
    victim = 1
    game = AdversarialRound(
        inputs_for(8), threshold=2, neighbors=neighbors, threat_model="semi-honest"
    )
    requests = run_until(game, UnmaskRequest)
    lied = [claim_dropped(request, victim) for request in requests]
    game.to_server(r for m in lied for r in game.to_client(m))
    assert honest_inputs_exposed(game.view, game.inputs, game.honest) == [victim]


@pytest.mark.parametrize("neighbors", GRAPHS)
def test_inconsistent_unmask_views_are_refused_in_the_malicious_mode(
    neighbors: int | None,
) -> None:
    victim = 1
    game = AdversarialRound(inputs_for(8), threshold=2, neighbors=neighbors)
    for request in run_until(game, UnmaskRequest):
        game.to_server(game.to_client(claim_dropped(request, victim)))
    liars = [u for u in game.honest if u != victim and victim in game.clients[u].neighbors]
    assert all("disagrees with the survivor set" in game.aborted[u] for u in liars)
    assert honest_inputs_exposed(game.view, game.inputs, game.honest) == []


# -- 3. different survivor sets in the consistency round -----------------------------------------


@pytest.mark.parametrize("neighbors", [None, 4])
@pytest.mark.parametrize("colluders", [(), (6,)])
def test_no_split_of_the_survivor_set_unmasks_anyone(
    neighbors: int | None, colluders: tuple[int, ...]
) -> None:
    # Every way of splitting the other clients between two views: at most one view gathers the
    # quorum ⌊(n + c)/2⌋ + 1 (colluders sign both), so no honest client reveals both kinds of
    # secret for anyone.
    n, victim = 7, 1
    others = [u for u in range(2, n + 1) if u not in colluders]
    exposed = []
    for size in range(len(others) + 1):
        for group_b in itertools.combinations(others, size):
            game = AdversarialRound(
                inputs_for(n),
                threshold=2,
                neighbors=neighbors,
                colluding=colluders,
                max_colluding=len(colluders),
            )
            split_views(game, run_until(game, ConsistencyRequest), victim, set(group_b))
            exposed += honest_inputs_exposed(game.view, game.inputs, game.honest)
    assert exposed == []


def _split_a_later_sum(
    group_b: tuple[int, ...],
    *,
    colluders: tuple[int, ...] = (),
    max_colluding: int | None = None,
    neighbors: int | None = None,
    forge: bool = False,
) -> AdversarialRound:
    """Sum 1 of a two-sum session runs honestly; in sum 2 (approved with MAC tags, not
    signatures) the server splits the survivor set around client 1."""
    game = AdversarialRound(
        {(r, u): [7 * u + r, u - r] for r in (1, 2) for u in range(1, 8)},
        threshold=2,
        neighbors=neighbors,
        colluding=colluders,
        max_colluding=len(colluders) if max_colluding is None else max_colluding,
        iterations=2,
    )
    game.run()
    requests = game.step(game.server.begin_iteration(b"second centre"))
    assert game.config.mac_approvals and all(isinstance(m, ConsistencyRequest) for m in requests)
    split_views(game, requests, 1, set(group_b), forge=forge)
    return game


@pytest.mark.parametrize("neighbors", [None, 4])
@pytest.mark.parametrize("colluders", [(), (6,)])
def test_no_split_of_a_later_sums_survivor_set_unmasks_anyone(
    neighbors: int | None, colluders: tuple[int, ...]
) -> None:
    # The session form of the test above: the quorum is counted in MAC tags, each recipient
    # verifying the tags addressed to it; certificates padded with tags nobody gave change
    # nothing.
    others = [u for u in range(2, 8) if u not in colluders]
    exposed: list[int] = []
    for size in range(len(others) + 1):
        for group_b in itertools.combinations(others, size):
            game = _split_a_later_sum(group_b, colluders=colluders, neighbors=neighbors,
                                      forge=size % 2 == 0)
            exposed += honest_inputs_exposed(game.view, game.inputs, game.honest)
    assert exposed == []


def test_unverified_approval_tags_would_let_a_split_through(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The control: a client that counted approval tags without checking them answers a
    # certificate of forged tags, and the split unmasks the victim's second input.
    def accept_any(
        self: Client, message: UnmaskRequest, signed: bytes, members: set[int], quorum: int
    ) -> set[int]:
        return {a for a, _ in message.signatures if a in members} | {self.client_id}

    monkeypatch.setattr(Client, "_count_approvals", accept_any)
    game = _split_a_later_sum((2, 3, 4), forge=True)
    assert honest_inputs_exposed(game.view, game.inputs, game.honest) == [1]


def test_more_colluders_than_configured_break_a_later_sum_too() -> None:
    # Two colluders approve both views (their tags are valid: they hold their approval keys)
    # while the quorum was sized for none: the victim's second input leaks.
    leaks = []
    for group_b in itertools.combinations([2, 3, 4, 5], 2):
        game = _split_a_later_sum(group_b, colluders=(6, 7), max_colluding=0)
        leaks += honest_inputs_exposed(game.view, game.inputs, game.honest)
    assert 1 in leaks


def test_the_quorum_is_what_protects_more_colluders_than_configured_break_it() -> None:
    # Configured for no colluders, but two collude: they sign both views, each view reaches
    # the quorum ⌊7/2⌋ + 1 = 4, and the victim's input leaks. (The test can fail.)
    n, victim, colluders = 7, 1, (6, 7)
    leaks = []
    for group_b in itertools.combinations([2, 3, 4, 5], 2):
        game = AdversarialRound(inputs_for(n), threshold=2, colluding=colluders, max_colluding=0)
        split_views(game, run_until(game, ConsistencyRequest), victim, set(group_b))
        leaks += honest_inputs_exposed(game.view, game.inputs, game.honest)
    assert victim in leaks


# -- 4. senders are bound to the transport -------------------------------------------------------


@pytest.mark.parametrize("threat_model", ["semi-honest", "malicious"])
def test_spoofed_senders_are_refused_and_blamed_on_the_transport_peer(threat_model: str) -> None:
    game = AdversarialRound(inputs_for(5), threshold=2, threat_model=threat_model)
    adverts = game.start()
    server = game.server
    with pytest.raises(RemoteProtocolError, match="claiming to be from client 2") as error:
        server.receive(adverts[1], peer_id=3)  # client 3 sends client 2's advertisement
    assert error.value.peer_id == 3
    outgoing: list[Message] = []
    for message in adverts:
        outgoing += server.receive(message, peer_id=message.peer)
    outgoing = game.step(outgoing)  # shares
    replies = [r for m in outgoing for r in game.to_client(m)]
    masked = {m.peer: m for m in replies}
    with pytest.raises(RemoteProtocolError, match="claiming to be from client 1"):
        server.receive(masked[1], peer_id=4)  # client 4 submits client 1's masked input
    fake = dataclasses.replace(masked[1], vector=masked[4].vector)
    with pytest.raises(RemoteProtocolError, match="claiming"):
        server.receive(fake, peer_id=2)
    outgoing = game.to_server(replies)
    while outgoing:
        outgoing = game.step(outgoing)
    assert server.state is ServerState.COMPLETED
    assert server.result.total.tolist() == total_of(game, (1, 2, 3, 4, 5))
    assert [f.peer_id for f in server.faults] == [3, 4, 2]


def test_a_second_different_masked_input_is_a_fault_naming_the_sender() -> None:
    game = AdversarialRound(inputs_for(5), threshold=2, threat_model="semi-honest")
    outgoing = run_until(game, ForwardedShares)
    replies = [r for m in outgoing for r in game.to_client(m)]
    first = next(m for m in replies if m.peer == 2)
    assert isinstance(first, MaskedInput)
    game.server.receive(first, peer_id=2)
    assert game.server.receive(first, peer_id=2) == []  # an exact repeat is ignored
    other = dataclasses.replace(first, vector=(first.vector + 1).astype(first.vector.dtype))
    with pytest.raises(RemoteProtocolError, match="second, different masked input") as error:
        game.server.receive(other, peer_id=2)
    assert error.value.peer_id == 2
    outgoing = game.to_server(m for m in replies if m.peer != 2)
    while outgoing:
        outgoing = game.step(outgoing)
    assert game.server.result.total.tolist() == total_of(game, (1, 2, 3, 4, 5))  # first counts


# -- 5. one bad client cannot sink the round -----------------------------------------------------


BEHAVIOURS = [
    ("unauthentic ciphertexts", True),  # (behaviour, its input stays in the sum)
    ("unauthentic ciphertexts then silent", False),
    ("wrong shares", True),
    ("wrong shares then silent", False),
    ("malformed masked input", False),
]


@pytest.mark.parametrize("threat_model", ["semi-honest", "malicious"])
@pytest.mark.parametrize("neighbors", [None, 6])
@pytest.mark.parametrize(("behaviour", "counted"), BEHAVIOURS)
@pytest.mark.parametrize("bad", [(4,), (4, 7)], ids=["one", "two"])
def test_misbehaving_clients_do_not_sink_the_round(
    behaviour: str, counted: bool, bad: tuple[int, ...], neighbors: int | None, threat_model: str
) -> None:
    game = bad_client_round(behaviour, bad, neighbors, threat_model)
    server = game.server
    assert server.state is ServerState.COMPLETED, server.abort_reason
    honest = tuple(u for u in game.clients if u not in bad)
    expected = tuple(sorted(honest + (bad if counted else ())))
    assert server.result.survivors == expected
    assert server.result.total.tolist() == total_of(game, expected)
    assert all(game.clients[u].state is ClientState.COMPLETED for u in honest)
    blamed = {f.peer_id for f in server.result.faults}
    if behaviour.startswith("wrong shares"):
        # Never used (the dealer revealed its own seed, or its neighbours their pairwise keys
        # with it), so never detected: and never needed.
        assert blamed == set()
    else:
        assert blamed == set(bad)


def test_a_dealer_of_wrong_shares_who_withholds_its_seed_is_named() -> None:
    # The documented residual: a client deals wrong shares of its seed, submits its masked
    # input, then stays silent at unmask. Its input is already in the sum and its seed cannot be
    # rebuilt: the round aborts naming it (it never returns a wrong sum).
    game = AdversarialRound(inputs_for(6), threshold=3, threat_model="semi-honest")
    outgoing = game.to_server(game.start())
    replies: list[Message] = []
    for message in outgoing:
        with wrong_shamir_shares() if message.peer == 4 else contextlib.nullcontext():
            replies += game.to_client(message)
    outgoing = game.step(game.to_server(replies) or game.close())
    with pytest.raises(RemoteProtocolError, match="client 4's self-mask seed") as error:
        for message in outgoing:
            if message.peer != 4:
                game.server.receive(game.to_client(message)[0], peer_id=message.peer)
        game.server.close_phase()
    assert error.value.peer_id == 4


def test_secure_sum_defaults_to_the_malicious_mode() -> None:
    result = secure_sum([[1, 2], [3, 4], [5, 6]], seed=0)
    assert result.threat_model == "malicious" and result.max_colluding == 1
    assert result.upload_bytes["consistency_check"] > 0
    plain = secure_sum([[1, 2], [3, 4], [5, 6]], seed=0, threat_model="semi-honest")
    assert plain.upload_bytes["consistency_check"] == 0
    assert plain.total.tolist() == result.total.tolist() == [9, 12]


@pytest.mark.parametrize("neighbors", GRAPHS)
@pytest.mark.parametrize("threat_model", ["semi-honest", "malicious"])
@pytest.mark.parametrize("liars", [1, 2])
def test_a_wrong_revealed_pair_key_is_named_and_recovered_around(
    neighbors: int | None, threat_model: str, liars: int
) -> None:
    # Client 6 never sends its masked input; its surviving neighbours reveal κ^r with it so the
    # server can cancel their masks. Liars reveal another 32-byte key: each is named, its pair
    # key is opened from 6's escrow instead, and the total is exact.
    game = AdversarialRound(
        inputs_for(9), threshold=3, neighbors=neighbors, threat_model=threat_model, seed=3
    )
    outgoing = run_until(game, UnmaskRequest, silent={ForwardedShares: (6,)})
    answers = [r for m in outgoing for r in game.to_client(m)]
    revealing = sorted(r.sender for r in answers if any(v == 6 for v, _ in r.pairwise_keys))
    bad = tuple(revealing[:liars])
    wrong = bytes(range(32))
    replies = [
        dataclasses.replace(r, pairwise_keys=tuple((v, wrong) for v, _ in r.pairwise_keys))
        if r.sender in bad
        else r
        for r in answers
    ]
    outgoing = game.to_server(replies) or game.close()
    while outgoing:
        outgoing = game.step(outgoing)
    server = game.server
    assert server.state is ServerState.COMPLETED, server.abort_reason
    assert 6 not in server.result.survivors and set(bad) <= set(server.result.survivors)
    assert server.result.total.tolist() == total_of(game, server.result.survivors)
    assert {f.peer_id for f in server.result.faults} == set(bad)
    assert server.reconstructed_key_owners == {6}
