"""Sessions: several secure sums over one key setup, and the attacks sessions open up.

Every attack hands the adversary's whole view (all sums of the session) to
:func:`audits.adversary.reconstruct_inputs`; where the attack must work in the semi-honest mode,
it is run there too, so the reconstruction is shown able to fail the test.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import secagg.client
import secagg.keys
import secagg.masks
import secagg.server
from audits.adversary import AdversarialRound, reconstruct_inputs
from secagg import (
    ClientState,
    ConsistencyRequest,
    ConsistencySignature,
    IterationRequest,
    LocalProtocolError,
    MaskedInput,
    RemoteProtocolError,
    Session,
    TooFewSurvivorsError,
    UnmaskRequest,
    UnmaskResponse,
    plain_outcome,
    secure_sum,
)

PHASES_LATER = ("masked_input", "consistency_check", "unmask")


def inputs_for(n: int, rounds: int, dimension: int = 3) -> dict[tuple[int, int], list[int]]:
    """A different input per client and sum."""
    return {
        (r, u): [(11 * u + 5 * r + 3 * j) % 89 - 40 for j in range(dimension)]
        for r in range(1, rounds + 1)
        for u in range(1, n + 1)
    }


def exposed(game: AdversarialRound) -> set[tuple[int, int]]:
    """The (sum, honest client) pairs whose true input the adversary's view reveals."""
    ring = game.config.ring
    out = set()
    for (_, r, u), value in reconstruct_inputs(game.view).items():
        if u in game.honest:
            truth = ring.centered(ring.reduce(game.input_of(r, u)))
            if np.array_equal(value, truth):
                out.add((r, u))
    return out


# -- correctness against the plain model ----------------------------------------------------------


@settings(max_examples=40, deadline=None)
@given(
    n=st.integers(3, 7),
    rounds=st.integers(1, 3),
    threat_model=st.sampled_from(["malicious", "semi-honest"]),
    data=st.data(),
)
def test_every_sum_is_the_total_of_its_survivors_or_fails_exactly_when_the_plain_rule_says(
    n: int, rounds: int, threat_model: str, data: st.DataObject
) -> None:
    # The plain model of a session: a client that did not complete a sum (sent its masked
    # input and answered the unmask request) is out of every later sum, i.e. it counts as
    # dropped before its masked input there; plain_outcome decides each sum on that.
    threshold = data.draw(st.integers(1, n - 1), label="t")
    session = Session(n, 2, iterations=rounds, threshold=threshold, threat_model=threat_model)
    gone: set[int] = set()
    phases = PHASES_LATER if threat_model == "malicious" else ("masked_input", "unmask")
    for r in range(1, rounds + 1):
        alive = [i for i in range(n) if i not in gone]
        drops = data.draw(
            st.dictionaries(st.sampled_from(alive), st.sampled_from(phases), max_size=2),
            label=f"dropouts of sum {r}",
        )
        dropouts: dict[str, list[int]] = {p: [] for p in phases}
        for i, phase in drops.items():
            dropouts[phase].append(i)
        cumulative = {**dropouts, "masked_input": sorted(gone | set(dropouts["masked_input"]))}
        ok, why = plain_outcome(n, cumulative, threshold=threshold, threat_model=threat_model)
        inputs = [[i + r, 10 * i - r] for i in range(n)]
        if not ok:
            with pytest.raises(TooFewSurvivorsError):
                session.sum(inputs, iterate=b"%d" % r, dropouts=dropouts)
            return
        result = session.sum(inputs, iterate=b"%d" % r, dropouts=dropouts)
        sent = set(alive) - set(dropouts["masked_input"])
        assert result.iteration == r
        assert set(result.survivors) == sent, why
        expected = np.sum([inputs[i] for i in sorted(sent)], axis=0) % 2**32
        assert result.total.tolist() == expected.tolist()
        completed = sent - set(dropouts.get("consistency_check", ())) - set(dropouts["unmask"])
        gone |= set(range(n)) - completed
        assert set(session.members) == set(range(n)) - gone
    assert session.remaining == 0


def test_a_session_of_one_sum_is_secure_sum() -> None:
    inputs = [[1, 2, 3], [4, 5, 6], [7, 8, 9], [1, 1, 1]]
    one = Session(4, 3, iterations=1, seed=5).sum(inputs, dropouts={"unmask": [2]})
    plain = secure_sum(inputs, seed=5, dropouts={"unmask": [2]})
    assert one.total.tolist() == plain.total.tolist() == [13, 16, 19]
    assert (one.survivors, one.dropped, one.iteration) == (plain.survivors, plain.dropped, 1)
    assert one.upload_bytes == plain.upload_bytes


def test_later_sums_cost_no_key_setup() -> None:
    # The first sum carries the whole setup; a further sum sends no key or share message.
    n, d = 6, 50
    session = Session(n, d, iterations=3, seed=1)
    first = session.sum(np.ones((n, d), dtype=np.int64))
    later = session.sum(np.ones((n, d), dtype=np.int64), iterate=b"model 2")

    def sent(result: object) -> set[str]:
        return {phase for phase, size in result.upload_bytes.items() if size}  # type: ignore[attr-defined]

    setup = {"advertise_keys", "share_keys"}
    assert sent(first) == setup | {"masked_input", "consistency_check", "unmask"}
    assert sent(later) == {"masked_input", "consistency_check", "unmask"}
    assert sum(later.upload_bytes.values()) < sum(first.upload_bytes.values())


@pytest.mark.parametrize("threat_model", ["malicious", "semi-honest"])
def test_a_further_sum_runs_no_key_agreement(
    threat_model: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # One mask key agreement per neighbour at setup; every later sum's pairwise keys are PRF
    # outputs of those pair secrets, even when a drop has to be recovered (escrows).
    agreements: list[int] = []
    original = secagg.keys.KeyPair.agree

    def counted(self: secagg.keys.KeyPair, peer: bytes, *, peer_id: int | None = None) -> bytes:
        agreements.append(1)
        return original(self, peer, peer_id=peer_id)

    monkeypatch.setattr(secagg.keys.KeyPair, "agree", counted)
    n, d = 8, 5
    session = Session(n, d, iterations=3, threshold=3, seed=4, threat_model=threat_model)
    session.sum(np.ones((n, d), dtype=np.int64))
    assert agreements  # the setup agrees keys
    agreements.clear()
    second = session.sum(
        np.ones((n, d), dtype=np.int64), iterate=b"two", dropouts={"masked_input": [1]}
    )
    third = session.sum(np.full((n, d), 2, dtype=np.int64), iterate=b"three")
    assert agreements == []
    assert second.total.tolist() == [n - 1] * d and third.total.tolist() == [2 * (n - 1)] * d


@pytest.mark.parametrize("threat_model", ["malicious", "semi-honest"])
def test_a_session_sums_vectors_of_different_lengths(threat_model: str) -> None:
    # A count, then a model, then a histogram: one key setup for all three.
    n = 7
    session = Session(n, 4, iterations=3, threshold=3, seed=2, threat_model=threat_model)
    rng = np.random.default_rng(0)
    first = rng.integers(-50, 50, size=(n, 4))
    second = rng.integers(-50, 50, size=(n, 1))
    third = rng.integers(-50, 50, size=(n, 9))
    one = session.sum(first)
    two = session.sum(second, iterate=b"count", dropouts={"masked_input": [5]})
    three = session.sum(third, iterate=b"histogram", dropouts={"unmask": [0]})
    assert one.centered().tolist() == first.sum(axis=0).tolist()
    assert two.centered().tolist() == np.delete(second, 5, axis=0).sum(axis=0).tolist()
    assert three.centered().tolist() == np.delete(third, 5, axis=0).sum(axis=0).tolist()
    with pytest.raises(ValueError, match="first sum sums vectors of dimension 4"):
        Session(n, 4, iterations=2, seed=2).sum(second)


def test_clients_shown_different_lengths_mask_for_different_sums(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The length of a sum is bound like its iterate: a server that asks one client for a
    # three-entry sum and the others for one gets no sum of a common prefix — the victim's
    # pairwise keys (hence masks) match no neighbour's. The keys are observed as the clients
    # derive them (the real derivation, recorded per ordered pair).
    derived: dict[tuple[int, int], bytes] = {}
    real = secagg.masks.pairwise_mask_key

    def recording(*args: object, **kwargs: object) -> bytes:
        key = real(*args, **kwargs)  # type: ignore[arg-type]
        derived[(int(kwargs["first"]), int(kwargs["second"]))] = key  # type: ignore[call-overload]
        return key

    n, victim = 6, 2
    inputs = {(r, u): [u, 2 * u, 3 * u] if r == 1 else [5 * u] for r in (1, 2) for u in range(1, 7)}
    inputs[(2, victim)] = [5 * victim, 0, 0]  # what the victim computes for a 3-entry request
    game = AdversarialRound(
        inputs,
        threshold=2,
        iterations=2,
        seed=3,
        threat_model="semi-honest",
    )
    game.run()
    requests = game.server.begin_iteration(b"count", dimension=1)
    shown = [
        m if m.peer != victim else dataclasses.replace(m, dimension=3)  # type: ignore[arg-type]
        for m in requests
    ]
    monkeypatch.setattr(secagg.client, "pairwise_mask_key", recording)
    masked = [r for m in shown for r in game.to_client(m)]
    assert len(masked) == n
    keys: dict[int, dict[int, bytes]] = {u: {} for u in range(1, n + 1)}
    for (u, v), key in derived.items():
        keys[u][v] = key
    assert all(len(keys[u]) == n - 1 for u in keys)  # complete graph: every pair derived
    for v, key in keys[victim].items():
        assert key != keys[v][victim]
    others = [u for u in range(1, n + 1) if u != victim]
    assert all(keys[u][v] == keys[v][u] for u in others for v in keys[u] if v != victim)
    assert exposed(game) == set()


def test_an_input_of_the_wrong_length_for_the_sum_is_refused_locally() -> None:
    session = Session(4, 2, iterations=2, seed=1, threat_model="semi-honest")
    session.sum([[1, 2]] * 4)
    client = session._clients[1]
    client.set_input([1, 2, 3])
    request = session._server.begin_iteration(b"", dimension=1)[0]  # type: ignore[union-attr]
    with pytest.raises(LocalProtocolError, match="3 entries; sum 2 sums vectors of dimension 1"):
        client.receive(request)


def test_bad_calls_are_refused_clearly() -> None:
    with pytest.raises(ValueError, match="iterations"):
        Session(4, 2, iterations=0)
    with pytest.raises(ValueError, match="iterations"):
        Session(4, 2, iterations=256)
    session = Session(4, 2, iterations=2, seed=0)
    session.sum([[1, 1]] * 4)
    with pytest.raises(ValueError, match="no phase 'share_keys'"):
        session.sum([[1, 1]] * 4, dropouts={"share_keys": [1]})
    session.sum([[1, 1]] * 4)
    with pytest.raises(LocalProtocolError, match="no sum left"):
        session.sum([[1, 1]] * 4)
    closed = Session(4, 2, iterations=3, seed=0)
    closed.sum([[1, 1]] * 4)
    closed.close()
    assert closed.remaining == 0
    with pytest.raises(LocalProtocolError, match="no sum left"):
        closed.sum([[1, 1]] * 4)


def test_too_few_members_left_for_the_next_sum_is_a_clean_error() -> None:
    session = Session(5, 1, iterations=3, threshold=2, threat_model="semi-honest", seed=0)
    # All five inputs count in sum 1, but only two clients answer its unmask request: sum 2
    # would have two candidates, each with only one other member among its neighbours (t = 2).
    assert session.sum([[1]] * 5, dropouts={"unmask": [0, 1, 2]}).total.tolist() == [5]
    assert session.members == (3, 4)
    with pytest.raises(TooFewSurvivorsError, match=r"only 0 clients remain .*2 of the 2 that"):
        session.sum([[1]] * 5)


# -- a client out of the session stays out --------------------------------------------------------


def test_a_client_that_dropped_is_not_readmitted_and_its_late_input_is_refused() -> None:
    game = AdversarialRound(inputs_for(6, 3), threshold=3, iterations=3, seed=2)
    game.run(silent={"masked_input": [4]})
    assert game.server.result.survivors == (1, 2, 3, 5, 6)
    requests = game.server.begin_iteration(b"round 2")
    assert {m.peer for m in requests} == {1, 2, 3, 5, 6}
    # Client 4 comes back with a well-formed masked input for sum 2: a fault, not a member.
    config = game.config
    late = MaskedInput(
        requests[0].session_id, 4, config.modulus_bits, config.ring.zeros(config.dimension), (), 2
    )
    with pytest.raises(RemoteProtocolError, match="not part of phase"):
        game.server.receive(late, peer_id=4)
    outgoing = game.step(requests)
    for _ in game.config.phases[3:]:
        outgoing = game.step(outgoing)
    assert game.server.result.survivors == (1, 2, 3, 5, 6)
    assert game.server.result.iteration == 2


def test_a_server_cannot_add_a_client_back_to_the_session() -> None:
    game = AdversarialRound(inputs_for(6, 2), threshold=2, iterations=2, seed=3)
    game.run(silent={"masked_input": [4]})
    requests = game.server.begin_iteration(b"next")
    # The server tells client 1 that client 4 (no masked input in sum 1; not in the survivor set
    # client 1 signed) is its neighbour again.
    forged = [
        dataclasses.replace(m, members=tuple(sorted({*m.members, 4})))
        if isinstance(m, IterationRequest) and m.recipient == 1
        else m
        for m in requests
    ]
    game.step(forged)
    assert "4" in game.aborted[1] and game.clients[1].state is ClientState.ABORTED


# -- replay across sums ---------------------------------------------------------------------------


def test_messages_of_one_sum_are_refused_in_another() -> None:
    game = AdversarialRound(inputs_for(5, 3), threshold=2, iterations=3, seed=4)
    game.run()
    first_inputs = [m for m in game.view.received if isinstance(m, MaskedInput)]
    first_unmask = [m for m in game.view.sent if isinstance(m, UnmaskRequest)]
    requests = game.server.begin_iteration(b"two")
    # The server's side: a sum-1 masked input replayed in sum 2 is a late message, ignored
    # (not added to sum 2).
    assert game.server.receive(first_inputs[0], peer_id=first_inputs[0].sender) == []
    assert not game.server._masked
    # The client's side: a replayed sum-1 unmask request (asking again for sum 1's secrets).
    victim = first_unmask[0].recipient
    game.to_client(next(m for m in requests if m.peer == victim))
    assert victim not in game.aborted
    game.to_client(first_unmask[0])
    assert "aborted" not in game.aborted.get(victim, "aborted")  # it did abort, with a reason
    assert victim in game.aborted
    # A replayed iteration request (sum 2 again, to get a second masked input of sum 2).
    other = next(u for u in game.honest if u != victim)
    again = next(m for m in requests if m.peer == other)
    assert game.to_client(again)
    assert game.to_client(again) == [] and other in game.aborted


# -- the iterate is bound into the sum ------------------------------------------------------------


def certificate(
    approvals: list[ConsistencySignature], recipient: int
) -> tuple[tuple[int, bytes], ...]:
    """What a server can put into ``recipient``'s unmask request from these approvals: the
    signatures (one sum), or the MAC tags addressed to ``recipient`` (a session)."""
    out = []
    for reply in sorted(approvals, key=lambda m: m.sender):
        if reply.signature:
            out.append((reply.sender, reply.signature))
        else:
            out.extend((reply.sender, tag) for w, tag in reply.approvals if w == recipient)
    return tuple(out)


def _split_iterates(game: AdversarialRound, group_b: set[int]) -> dict[str, set[int]]:
    """Run the next sum as an adversary: ``group_b`` is shown iterate B, everyone else A; each
    group gets the consistency signatures of its own group (all it could verify). Returns
    which clients answered their unmask request, by group."""
    requests = game.server.begin_iteration(b"iterate A")
    group_of = {m.peer: "b" if m.peer in group_b else "a" for m in requests}
    shown = [
        dataclasses.replace(m, iterate=b"iterate B") if group_of[m.peer] == "b" else m
        for m in requests
    ]
    neighbours = {m.peer: m.members for m in requests if isinstance(m, IterationRequest)}
    masked = [r for m in shown for r in game.to_client(m)]
    game.view.received.extend(masked)
    survivors = tuple(sorted(m.peer for m in masked))
    sid, r = requests[0].session_id, requests[0].iteration  # type: ignore[attr-defined]
    approvals: dict[str, list[ConsistencySignature]] = {"a": [], "b": []}
    for u in survivors:
        request = ConsistencyRequest(sid, u, survivors, r)
        for reply in game.to_client(request):
            assert isinstance(reply, ConsistencySignature)
            game.view.received.append(reply)
            approvals[group_of[u]].append(reply)
    answered: dict[str, set[int]] = {"a": set(), "b": set()}
    for u in survivors:
        mine = neighbours[u]
        request = UnmaskRequest(
            sid,
            u,
            tuple(v for v in mine if v in survivors),
            tuple(v for v in mine if v not in survivors),
            certificate(approvals[group_of[u]], u),
            r,
        )
        replies = game.to_client(request)
        game.view.received.extend(replies)
        if replies:
            answered[group_of[u]].add(u)
    return answered


@pytest.mark.parametrize("neighbors", [None, 4])
def test_two_iterates_with_no_quorum_each_unmask_nothing(neighbors: int | None) -> None:
    # n = 8, c = t - 1 = 1: the quorum is 5; a 4/4 split leaves neither iterate a quorum, so
    # no honest client reveals anything of sum 2.
    n = 8
    game = AdversarialRound(
        inputs_for(n, 2), threshold=2, neighbors=neighbors, iterations=2, seed=5
    )
    game.run()
    answered = _split_iterates(game, {5, 6, 7, 8})
    assert answered == {"a": set(), "b": set()}
    assert all("signatures" in game.aborted[u] for u in game.honest)
    assert exposed(game) == set()


def test_a_minority_shown_another_iterate_refuses_and_only_one_sum_is_released() -> None:
    # 6 see A, 2 see B: only A reaches the quorum 5, so at most one aggregate of sum 2 is
    # released — the server never gets sums over two iterates to subtract.
    n = 8
    game = AdversarialRound(inputs_for(n, 2), threshold=2, iterations=2, seed=6)
    game.run()
    answered = _split_iterates(game, {7, 8})
    assert answered == {"a": {1, 2, 3, 4, 5, 6}, "b": set()}
    assert {7, 8} <= set(game.aborted)
    assert exposed(game) == set()


def test_in_the_semi_honest_mode_the_iterate_is_not_bound() -> None:
    # Positive control: without signatures, the same split completes with no one noticing —
    # why the malicious mode is the default for sessions whose iterate matters.
    n = 8
    game = AdversarialRound(
        inputs_for(n, 2), threshold=2, iterations=2, seed=6, threat_model="semi-honest"
    )
    game.run()
    requests = game.server.begin_iteration(b"iterate A")
    outgoing = game.step(
        dataclasses.replace(m, iterate=b"iterate B") if m.peer > 4 else m for m in requests
    )
    game.step(outgoing)
    assert not game.aborted
    assert game.server.result.iteration == 2


# -- what a drop reveals --------------------------------------------------------------------------


@pytest.mark.parametrize("threat_model", ["semi-honest", "malicious"])
def test_a_drop_claimed_in_one_sum_exposes_at_most_that_sum(threat_model: str) -> None:
    # In sum 2 the server tells everyone the victim dropped, after its masked input arrived.
    # Semi-honest: its neighbours reveal their sum-2 pairwise keys with it, and the victim,
    # told it survived, reveals its sum-2 self-mask seed — sum 2's input is exposed, but with
    # per-sum pair keys sums 1 and 3 (whose seeds the server also holds) stay hidden.
    # Malicious: the victim signed the survivor set with itself in it; nothing is exposed.
    victim, n = 2, 6
    game = AdversarialRound(
        inputs_for(n, 3), threshold=2, iterations=3, seed=7, threat_model=threat_model
    )
    game.run()
    outgoing = game.step(game.server.begin_iteration(b"two"))  # masked inputs in
    if threat_model == "malicious":
        outgoing = game.step(outgoing)  # the consistency check
    lied = []
    for m in outgoing:
        assert isinstance(m, UnmaskRequest)
        told = m
        if m.recipient != victim and victim in m.survivors:
            told = dataclasses.replace(
                m,
                survivors=tuple(v for v in m.survivors if v != victim),
                dropped=tuple(sorted((*m.dropped, victim))),
            )
        lied.append(told)
    game.to_server(r for m in lied for r in game.to_client(m))
    if threat_model == "semi-honest":
        # Sum 1's self-mask seed of the victim is in the view too (it survived sum 1), yet
        # only sum 2 opens: sum 1's pairwise masks use other keys.
        assert exposed(game) == {(2, victim)}
    else:
        assert exposed(game) == set()


def test_recovery_key_shares_open_one_sum_of_one_client_and_nothing_else() -> None:
    # The escrow route alone: a semi-honest-mode server tells the victim's neighbours in sum 2
    # that it dropped (after its masked input arrived) and keeps only their shares of its sum-2
    # recovery key — not the pairwise keys they revealed. Opening the victim's sum-2 escrows
    # gives every sum-2 pair key of the victim; with the seed the victim revealed, sum 2's
    # input falls, and sums 1 and 3 (whose seeds the server holds too) do not.
    victim, n = 2, 6
    game = AdversarialRound(
        inputs_for(n, 3), threshold=2, iterations=3, seed=7, threat_model="semi-honest"
    )
    game.run()
    outgoing = game.step(game.server.begin_iteration(b"two"))
    lied = [
        dataclasses.replace(
            m,
            survivors=tuple(v for v in m.survivors if v != victim),
            dropped=tuple(sorted((*m.dropped, victim))),
        )
        if m.recipient != victim and victim in m.survivors
        else m
        for m in outgoing
    ]
    responses = [r for m in lied for r in game.to_client(m)]
    game.to_server(responses)
    game.view.received = [
        dataclasses.replace(m, pairwise_keys=())
        if isinstance(m, UnmaskResponse) and m.iteration == 2
        else m
        for m in game.view.received
    ]
    assert any(
        owner == victim
        for m in responses
        for owner, _ in m.key_shares  # type: ignore[attr-defined]
    )
    assert exposed(game) == {(2, victim)}


def test_an_honest_drop_exposes_nothing_in_any_sum() -> None:
    game = AdversarialRound(inputs_for(7, 3), threshold=3, iterations=3, seed=8, colluding=[7])
    game.run(silent={"unmask": [3]})
    game.run_next(b"two", silent={"masked_input": [2]})
    game.run_next(b"three", silent={"unmask": [5]})
    assert game.server.result.iteration == 3
    assert exposed(game) == set()


# -- a model shown to one client alone (model inconsistency) ---------------------------------------


@pytest.mark.parametrize("threat_model", ["semi-honest", "malicious"])
@pytest.mark.parametrize("bound", [True, False], ids=["iterate-in-masks", "mutant-unbound"])
def test_an_iterate_shown_to_one_client_alone_does_not_isolate_its_input(
    threat_model: str, bound: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The server shows the victim a crafted model B and everyone else A (Pasquini et al. 2022:
    # with A chosen so the others' updates are known, the aggregate minus them is the victim's
    # update). The consistency signatures cannot stop this — the quorum saw A — but the iterate
    # is in the pairwise-mask KDF: the victim's masks with its neighbours no longer cancel and
    # the aggregate is uniformly random. The mutant without that binding shows the attack is
    # real: there the aggregate minus the others is exactly the victim's input.
    if not bound:
        original = secagg.masks.pairwise_mask_key

        def unbound(shared: bytes, **kwargs: object) -> bytes:
            kwargs.pop("iterate", None)
            return original(shared, **kwargs)  # type: ignore[arg-type]

        monkeypatch.setattr(secagg.client, "pairwise_mask_key", unbound)
        monkeypatch.setattr(secagg.server, "pairwise_mask_key", unbound)
    victim, n = 3, 6
    game = AdversarialRound(
        inputs_for(n, 2, dimension=8), threshold=2, iterations=2, seed=9, threat_model=threat_model
    )
    game.run()
    requests = game.server.begin_iteration(b"model A")
    outgoing = game.step(
        dataclasses.replace(m, iterate=b"model B") if m.peer == victim else m for m in requests
    )
    while outgoing:
        outgoing = game.step(outgoing)
    result = game.server.result
    assert result.iteration == 2 and victim in result.survivors
    ring = game.config.ring
    others = ring.reduce(sum(game.input_of(2, u) for u in result.survivors if u != victim))
    isolated = ring.centered(ring.reduce(result.total.astype(np.int64) - others.astype(np.int64)))
    truth = ring.centered(ring.reduce(game.input_of(2, victim)))
    assert np.array_equal(isolated, truth) is not bound
    if bound:
        # Not even close: random ring elements, none of the 8 coordinates within ±1000.
        assert not np.any(np.abs(isolated - truth) < 1000)
        assert exposed(game) == set()
