"""Attack audits: a malicious server and malicious clients against a secure-sum implementation.

Each attack plays the adversary of one known attack on secure aggregation, end to end, and is
decided by its effect, never by a proxy:

- a **server attack** succeeds when :func:`audits.adversary.reconstruct_inputs` recovers an
  honest client's true input from the server's whole view (every message it received and sent,
  the private keys of keys it substituted, its colluders' secrets) — or, for the model-
  inconsistency attack, when the released aggregate minus the other clients' inputs *is* the
  victim's input;
- a **client attack** succeeds when the round does not complete with the exact total of its
  survivors, or leaves an honest client out ("one bad client sinks the round").

The audit runs every attack in every threat model the target offers, on the complete graph and
on a SecAgg+ graph, and fails when an attack succeeds in a mode that claims to resist it (our
semi-honest mode claims nothing against a malicious server: there the server attacks are
expected to succeed and are reported as such — the positive control that the attacks are real).
Attacks follow Bonawitz et al. (CCS 2017, §6–7: substituted keys, inconsistent views), Pasquini
et al. (CCS 2022: model inconsistency) and Bell et al. (CCS 2020: SecAgg+ graphs).
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import itertools
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, Protocol, runtime_checkable

import numpy as np

from audits._quiet import quiet_library_warnings
from audits.adversary import AdversarialRound, honest_inputs_exposed, reconstruct_inputs
from audits.records import AuditResult, Tier, Verdict, check_tier, not_applicable

__all__ = [
    "ATTACKS",
    "AttackOutcome",
    "AttackSpec",
    "AttackSurface",
    "OurAttackSurface",
    "audit_attacks",
    "bad_client_round",
    "claim_dropped",
    "flip_ciphertexts",
    "inputs_for",
    "outcome_table",
    "run_until",
    "split_views",
    "substitute_directory",
    "unmask_rule_findings",
    "wrong_shamir_shares",
]

AttackKind = Literal["server", "client"]
GRAPHS: tuple[int | None, ...] = (None, 4)
"""The complete graph and a SecAgg+ graph of degree 4 (n = 7 or 8 clients)."""


@dataclass(frozen=True)
class AttackOutcome:
    """What one attack achieved.

    Attributes
    ----------
    attack, kind, threat_model, graph
        The attack, ``"server"`` or ``"client"``, the mode it ran against, and the graph
        (``"complete"`` or ``"k=4"``).
    exposed
        Honest clients whose true input the adversary recovered (server attacks).
    correct
        Whether the round completed with the exact total of its survivors and every honest
        client among them (client attacks; ``True`` for server attacks that do not touch it).
    stopped_by
        What refused the attack (an abort reason or a recorded fault), or ``""``.
    named
        Client attacks whose culprits the server can tell: whether every culprit is named in its
        ``faults`` (``None``: the attack has no culprit to name — a retransmission, or wrong
        shares that are never used).
    wrongly_named
        Client attacks: clients the server's ``faults`` name although they did nothing wrong
        (an honest client, the victim of a spoofed sender, or a retransmission's sender).

    Examples
    --------
    >>> AttackOutcome("x", "server", "malicious", "complete", (), True, "").succeeded
    False
    """

    attack: str
    kind: AttackKind
    threat_model: str
    graph: str
    exposed: tuple[int, ...]
    correct: bool
    stopped_by: str
    named: bool | None = None
    wrongly_named: tuple[int, ...] = ()

    @property
    def succeeded(self) -> bool:
        """An honest input was recovered, or the round was sunk or its total corrupted."""
        return bool(self.exposed) or not self.correct


# -- scenario helpers (also used by tests/secagg) -----------------------------------------------


def inputs_for(n: int, dimension: int = 4) -> dict[int, list[int]]:
    """Distinct small integer inputs for clients 1..n.

    Examples
    --------
    >>> inputs_for(2, 2)
    {1: [-33, -30], 2: [-26, -23]}
    """
    return {u: [(7 * u + 3 * j) % 97 - 40 for j in range(dimension)] for u in range(1, n + 1)}


def _session_inputs(n: int, sums: int, dimension: int = 3) -> dict[tuple[int, int], list[int]]:
    return {
        (r, u): [(11 * u + 5 * r + 3 * j) % 89 - 40 for j in range(dimension)]
        for r in range(1, sums + 1)
        for u in range(1, n + 1)
    }


def _session(
    sums: int, threat_model: str, neighbors: int | None, seed: int, dimension: int = 3
) -> AdversarialRound:
    """A 7-client session of ``sums`` sums (t = 2), a different input per client and sum."""
    return AdversarialRound(
        _session_inputs(7, sums, dimension),
        threshold=2,
        neighbors=neighbors,
        iterations=sums,
        seed=seed,
        threat_model=threat_model,
    )


def substitute_directory(game: AdversarialRound, directory: Any, victim: int) -> Any:
    """The victim's key directory with the server's own keys listed under every other id (the
    signatures left as they were); the private keys go into the adversary's view."""
    from secagg import KeyDirectory, KeystreamRandom  # noqa: PLC0415
    from secagg.keys import KeyPair  # noqa: PLC0415
    from secagg.messages import ClientKeys  # noqa: PLC0415

    source = KeystreamRandom(99, label=b"adversary")
    fake = {}
    for v, entry in directory.keys().items():
        if v == victim:
            fake[v] = entry
            continue
        c, s = KeyPair.generate(source), KeyPair.generate(source)
        game.view.substituted_keys += [c.private, s.private]
        fake[v] = ClientKeys(c.public, s.public, entry.signature)
    return KeyDirectory.build(directory.session_id, victim, fake, signed=directory.signed)


def run_until(
    game: AdversarialRound, kind: type, *, silent: Mapping[type, Iterable[int]] | None = None
) -> list[Any]:
    """Run the round honestly until the server's next messages are of type ``kind``
    (``silent``: server message type → clients that vanish instead of receiving it)."""
    quiet = silent or {}
    outgoing = game.to_server(game.start()) or game.close()
    while outgoing and not isinstance(outgoing[0], kind):
        outgoing = game.step(outgoing, silent=quiet.get(type(outgoing[0]), ()))
    return outgoing


def claim_dropped(request: Any, victim: int) -> Any:
    """An unmask request, now claiming the surviving ``victim`` dropped."""
    from secagg import UnmaskRequest  # noqa: PLC0415

    assert isinstance(request, UnmaskRequest)
    if victim not in request.survivors:
        return request
    return dataclasses.replace(
        request,
        survivors=tuple(v for v in request.survivors if v != victim),
        dropped=tuple(sorted((*request.dropped, victim))),
    )


def split_views(
    game: AdversarialRound,
    requests: list[Any],
    victim: int,
    group_b: set[int],
    *,
    forge: bool = False,
) -> None:
    """Show ``group_b`` a survivor set without the victim and everyone else the true one;
    colluders approve both; then certify each group with every approval of its view (in any
    sum of a session). Approvals are signatures (a single sum) or, in a session, the MAC tags
    addressed to each recipient; ``forge`` also pads every certificate with approvals nobody
    gave (random bytes in the members' names), which the clients must not count."""
    from secagg import (  # noqa: PLC0415
        ConsistencyRequest,
        ConsistencySignature,
        KeystreamRandom,
        UnmaskRequest,
    )
    from secagg.identity import EMPTY_ITERATE, approval_tag, consistency_message  # noqa: PLC0415

    assert all(isinstance(r, ConsistencyRequest) for r in requests)
    true_view = requests[0].survivors
    sid, r = requests[0].session_id, requests[0].iteration
    views = {"a": tuple(true_view), "b": tuple(v for v in true_view if v != victim)}
    # Per view, approver → its signature, or its MAC tags by recipient.
    approvals: dict[str, dict[int, bytes | dict[int, bytes]]] = {"a": {}, "b": {}}
    group_of = {}
    for request in requests:
        u = request.recipient
        label = "b" if u in group_b and u != victim else "a"  # the victim is in its own view
        group_of[u] = label
        client = game.clients[u]
        if u in game.colluding:
            for name, view in views.items():
                signed = consistency_message(
                    sid, view, iteration=r, iterate=client._iterate_digest or EMPTY_ITERATE
                )
                keys = client._approval_keys
                approvals[name][u] = (
                    {w: approval_tag(keys[w], signed, approver=u, recipient=w) for w in keys}
                    if game.config.mac_approvals
                    else game.identities[u].sign(signed)
                )
            continue
        shown = dataclasses.replace(request, survivors=views[label])
        for reply in game.to_client(shown):
            assert isinstance(reply, ConsistencySignature)
            game.view.received.append(reply)
            approvals[label][u] = reply.signature or dict(reply.approvals)
    width = 32 if game.config.mac_approvals else 64
    fabricated = KeystreamRandom(r, label=b"secagg-dp/audits/forged-approvals")
    for u, label in group_of.items():
        if u in game.colluding:
            continue
        members = set(views[label])
        mine = game.clients[u]._members  # the neighbours u masked with in this sum
        certificate = {
            a: given if isinstance(given, bytes) else given.get(u, b"")
            for a, given in approvals[label].items()
            if a != u
        }
        if forge:
            for v in views[label]:
                certificate.setdefault(v, fabricated.random_bytes(width))
        request = UnmaskRequest(
            sid,
            u,
            tuple(v for v in mine if v in members),
            tuple(v for v in mine if v not in members),
            tuple(sorted((a, tag) for a, tag in certificate.items() if tag)),
            r,
        )
        game.view.received.extend(game.to_client(request))


@contextlib.contextmanager
def wrong_shamir_shares() -> Iterator[None]:
    """While active, clients deal well-formed shares of nothing (random field elements)."""
    import secagg.shamir  # noqa: PLC0415

    original = secagg.shamir.share

    def share(sub_secrets: object, points: object, threshold: int, source: object) -> object:
        rows = original(sub_secrets, points, threshold, source)  # type: ignore[arg-type]
        rng = np.random.default_rng(5)
        return rng.integers(0, secagg.shamir.DEFAULT_PRIME, size=rows.shape, dtype=np.int64)

    secagg.shamir.share = share  # type: ignore[assignment]
    try:
        yield
    finally:
        secagg.shamir.share = original


def flip_ciphertexts(message: Any) -> Any:
    """Encrypted shares with the first byte of every ciphertext flipped (fail authentication)."""
    from secagg import EncryptedShares  # noqa: PLC0415

    assert isinstance(message, EncryptedShares)
    bad = tuple((v, bytes([c[0] ^ 1]) + c[1:]) for v, c in message.ciphertexts)
    return dataclasses.replace(message, ciphertexts=bad)


def malformed_escrows(message: Any, *, first: bool) -> Any:
    """Encrypted shares whose pair-key escrows no longer match the neighbours: the first one
    left out (``first``) or all of them in reverse order — either sorts above the true list."""
    from secagg import EncryptedShares  # noqa: PLC0415

    assert isinstance(message, EncryptedShares)
    escrows = message.escrows[1:] if first else message.escrows[::-1]
    return dataclasses.replace(message, escrows=tuple(escrows))


def bad_client_round(
    behaviour: str, bad: tuple[int, ...], neighbors: int | None, threat_model: str
) -> AdversarialRound:
    """Run a 9-client round (honest server, t = 3) in which the clients ``bad`` misbehave:
    ``"wrong shares"``, ``"unauthentic ciphertexts"`` (either ``… then silent``),
    ``"malformed escrows"`` or ``"malformed masked input"``."""
    game = AdversarialRound(
        inputs_for(9), threshold=3, neighbors=neighbors, threat_model=threat_model
    )
    outgoing = game.to_server(game.start())
    replies: list[Any] = []
    for message in outgoing:  # share keys
        u = message.peer
        dealing = behaviour.startswith("wrong") and u in bad
        with wrong_shamir_shares() if dealing else contextlib.nullcontext():
            out = game.to_client(message)
        if behaviour.startswith("unauthentic") and u in bad:
            out = [flip_ciphertexts(m) for m in out]
        if behaviour.startswith("malformed escrows") and u in bad:
            out = [malformed_escrows(m, first=u == bad[0]) for m in out]
        replies += out
    outgoing = game.to_server(replies) or game.close()
    silent_after_shares = behaviour.endswith("then silent")
    replies = []
    for message in outgoing:  # masked input
        u = message.peer
        if u in bad and silent_after_shares:
            continue
        out = game.to_client(message)
        if behaviour == "malformed masked input" and u in bad:
            out = [dataclasses.replace(m, vector=m.vector[:-1]) for m in out]  # type: ignore[union-attr,arg-type]
        replies += out
    outgoing = game.to_server(replies) or game.close()
    while outgoing:
        outgoing = game.step(outgoing)
    return game


# -- the attacks ---------------------------------------------------------------------------------


def _graph(neighbors: int | None) -> str:
    return "complete" if neighbors is None else f"secagg+ k={neighbors}"


def _aborts(game: AdversarialRound) -> str:
    return "; ".join(f"client {u}: {why}" for u, why in sorted(game.aborted.items()))[:300]


def _outcome(
    attack: str,
    kind: AttackKind,
    threat_model: str,
    neighbors: int | None,
    game: AdversarialRound,
    *,
    exposed: Sequence[int] = (),
    correct: bool = True,
    stopped_by: str | None = None,
) -> AttackOutcome:
    stopped = _aborts(game) if stopped_by is None else stopped_by
    if not stopped and kind == "client" and correct:
        stopped = "nothing to refuse: the round completed with the exact total of its survivors"
    return AttackOutcome(
        attack, kind, threat_model, _graph(neighbors), tuple(exposed), correct, stopped
    )


def _exposed(game: AdversarialRound) -> list[int]:
    return honest_inputs_exposed(game.view, game.inputs, game.honest)


def _substituted_keys(threat_model: str, neighbors: int | None, seed: int) -> AttackOutcome:
    from secagg import EncryptedShares, ForwardedShares, KeyDirectory  # noqa: PLC0415

    victim = 1
    game = AdversarialRound(
        inputs_for(7), threshold=2, neighbors=neighbors, threat_model=threat_model, seed=seed
    )
    directories = game.to_server(game.start())
    tampered = next(
        substitute_directory(game, d, victim)
        for d in directories
        if isinstance(d, KeyDirectory) and d.recipient == victim
    )
    for shares in game.to_client(tampered):
        assert isinstance(shares, EncryptedShares)
        game.view.received.append(shares)
        # Forged "forwarded shares" from every neighbour: the victim masks and sends its input.
        forged = ForwardedShares(
            shares.session_id,
            victim,
            tuple((v, bytes(160)) for v in game.clients[victim].neighbors),
        )
        game.view.received.extend(game.to_client(forged))
    return _outcome(
        "substituted-keys", "server", threat_model, neighbors, game, exposed=_exposed(game)
    )


def _inconsistent_unmask_views(
    threat_model: str, neighbors: int | None, seed: int
) -> AttackOutcome:
    from secagg import UnmaskRequest  # noqa: PLC0415

    victim = 1
    game = AdversarialRound(
        inputs_for(8), threshold=2, neighbors=neighbors, threat_model=threat_model, seed=seed
    )
    # The victim is told it survived (it reveals its seed), its neighbours that it dropped.
    for request in run_until(game, UnmaskRequest):
        told = request if request.recipient == victim else claim_dropped(request, victim)
        game.to_server(game.to_client(told))
    return _outcome(
        "inconsistent-unmask-views", "server", threat_model, neighbors, game, exposed=_exposed(game)
    )


def _every_split(
    name: str,
    neighbors: int | None,
    split: Callable[[set[int]], AdversarialRound | None],
) -> AttackOutcome:
    """Client 1 against every split of the others (2..7) between two survivor views."""
    exposed: set[int] = set()
    reasons: list[str] = []
    others = list(range(2, 8))
    for size in range(len(others) + 1):
        for group_b in itertools.combinations(others, size):
            game = split(set(group_b))
            if game is not None:
                exposed.update(_exposed(game))
                reasons.append(_aborts(game))
    stopped = next((r for r in reasons if r), "")
    return AttackOutcome(
        name, "server", "malicious", _graph(neighbors), tuple(sorted(exposed)), True, stopped
    )


def _split_survivor_views(
    threat_model: str, neighbors: int | None, seed: int
) -> AttackOutcome | None:
    from secagg import ConsistencyRequest  # noqa: PLC0415

    if threat_model != "malicious":
        return None  # no consistency round: the inconsistent-views attack is this one there

    def split(group_b: set[int]) -> AdversarialRound:
        game = AdversarialRound(inputs_for(7), threshold=2, neighbors=neighbors, seed=seed)
        split_views(game, run_until(game, ConsistencyRequest), 1, group_b)
        return game

    return _every_split("split-survivor-views", neighbors, split)


def _split_views_in_a_later_sum(
    threat_model: str, neighbors: int | None, seed: int
) -> AttackOutcome | None:
    """Every split of a session's second sum around client 1, its certificates padded with
    approvals nobody gave: a session approves survivor sets with MAC tags, not signatures."""
    from secagg import ConsistencyRequest  # noqa: PLC0415

    if threat_model != "malicious":
        return None  # no consistency round (see inconsistent-unmask-views)

    def split(group_b: set[int]) -> AdversarialRound | None:
        game = _session(2, threat_model, neighbors, seed)
        game.run()
        requests = game.step(game.server.begin_iteration(b"second sum"))
        if not requests or not isinstance(requests[0], ConsistencyRequest):
            return None
        split_views(game, requests, 1, group_b, forge=True)
        return game

    return _every_split("split-views-in-a-later-sum", neighbors, split)


def _drop_claimed_in_later_sum(
    threat_model: str, neighbors: int | None, seed: int
) -> AttackOutcome:
    from secagg import UnmaskRequest  # noqa: PLC0415

    victim = 2
    game = _session(3, threat_model, neighbors, seed)
    game.run()
    outgoing = game.step(game.server.begin_iteration(b"two"))
    while outgoing and not isinstance(outgoing[0], UnmaskRequest):
        outgoing = game.step(outgoing)
    lied = [m if m.peer == victim else claim_dropped(m, victim) for m in outgoing]
    game.to_server(r for m in lied for r in game.to_client(m))
    return _outcome(
        "drop-claimed-in-a-later-sum",
        "server",
        threat_model,
        neighbors,
        game,
        exposed=_exposed(game),
    )


def _replayed_iteration_request(
    threat_model: str, neighbors: int | None, seed: int
) -> AttackOutcome:
    from secagg import (  # noqa: PLC0415
        IterationRequest,
        MaskedInput,
        ProtocolError,
        UnmaskResponse,
    )
    from secagg.masks import add_masks, self_mask_key  # noqa: PLC0415

    victim = 3
    # Sum 2 carries a public quantity (every client sends the same count, as a sum of example
    # counts would), so the server knows the victim's sum-2 input; sums 1 and 3 are private.
    inputs = _session_inputs(7, 3)
    inputs.update({(2, u): [1, 1, 1] for u in range(1, 8)})
    game = AdversarialRound(
        inputs,
        threshold=2,
        neighbors=neighbors,
        iterations=3,
        seed=seed,
        threat_model=threat_model,
    )
    game.run()
    game.run_next(b"two")
    old = next(
        m for m in game.view.sent if isinstance(m, IterationRequest) and m.recipient == victim
    )
    before = next(
        m
        for m in game.view.received
        if isinstance(m, MaskedInput) and m.sender == victim and m.iteration == 2
    )
    # Sum 3 begins; the victim is sent sum 2's request again, byte for byte. A client that takes
    # it masks its sum-3 input under sum 2's masks: the difference of the two masked inputs is
    # the difference of its inputs.
    game.server.begin_iteration(b"three")
    client = game.clients[victim]
    client.set_input(game.input_of(3, victim))
    game.view.sent.append(old)
    try:
        replies = client.receive(old)
    except ProtocolError as error:
        game.aborted[victim] = str(error)
        replies = []
    game.view.received.extend(replies)
    again = next((m for m in replies if isinstance(m, MaskedInput)), None)
    isolated: list[int] = []
    revealed = [
        m.self_mask_seed
        for m in game.view.received
        if isinstance(m, UnmaskResponse) and m.sender == victim and m.iteration == 2
    ]
    if again is not None and revealed:
        # Same pairwise masks; the self mask is sum 2's seed (revealed in its unmask) or, if the
        # client spent it, the all-zero seed: undo whichever, then subtract the old masked input.
        ring = game.config.ring
        key = functools.partial(
            self_mask_key,
            session_id=before.session_id,
            owner=victim,
            vector_name=game.config.vector_name,
            iteration=2,
        )
        for used in {revealed[0], bytes(len(revealed[0]))}:
            unmasked = again.vector.copy()
            add_masks(unmasked, ring, add=[key(revealed[0])], subtract=[key(used)])
            ring.normalize(unmasked)
            difference = np.asarray(unmasked, dtype=np.int64) - np.asarray(
                before.vector, dtype=np.int64
            )
            guess = np.mod(difference + game.input_of(2, victim), ring.modulus)  # int64 holds it
            if np.array_equal(guess, np.mod(game.input_of(3, victim), ring.modulus)):
                isolated = [victim]
    return _outcome(
        "iteration-request-replayed",
        "server",
        threat_model,
        neighbors,
        game,
        exposed=sorted({*isolated, *_exposed(game)}),
    )


def _members_below_threshold(threat_model: str, neighbors: int | None, seed: int) -> AttackOutcome:
    """A session's second sum (6 clients, t = 3): an honest neighbour of the server's colluder
    is told that of its neighbours only the colluder (one client, fewer than t) remains. A
    client that masks for fewer than t members masks with that colluder's pairwise mask alone,
    which the colluder hands over: the rule is that a client takes part only with at least t
    surviving neighbours."""
    from secagg import IterationRequest  # noqa: PLC0415

    colluder = 2
    game = AdversarialRound(
        _session_inputs(6, 2),
        threshold=3,
        neighbors=neighbors,
        iterations=2,
        seed=seed,
        threat_model=threat_model,
        colluding=[colluder],
    )
    game.run()
    requests = game.server.begin_iteration(b"two")
    victim = min(  # the first honest client with the colluder among its neighbours
        m.peer
        for m in requests
        if isinstance(m, IterationRequest) and m.peer != colluder and colluder in m.members
    )
    trimmed = [
        dataclasses.replace(m, members=(colluder,))
        if isinstance(m, IterationRequest) and m.peer == victim
        else m
        for m in requests
    ]
    outgoing = game.step(trimmed)
    while outgoing:
        outgoing = game.step(outgoing)
    return _outcome(
        "members-below-threshold",
        "server",
        threat_model,
        neighbors,
        game,
        exposed=_exposed(game),
    )


def _iterate_to_one_client(threat_model: str, neighbors: int | None, seed: int) -> AttackOutcome:
    victim = 3
    game = _session(2, threat_model, neighbors, seed, dimension=8)
    game.run()
    # Model inconsistency: the victim is shown a crafted model B, everyone else A; with A chosen
    # so the others' updates are known, the aggregate minus them is the victim's update.
    requests = game.server.begin_iteration(b"model A")
    outgoing = game.step(
        dataclasses.replace(m, iterate=b"model B") if m.peer == victim else m  # type: ignore[arg-type]
        for m in requests
    )
    while outgoing:
        outgoing = game.step(outgoing)
    isolated: list[int] = []
    server = game.server
    if server.result is not None and victim in server.result.survivors:
        ring = game.config.ring
        others = sum(
            (game.input_of(2, u) for u in server.result.survivors if u != victim),
            start=np.zeros(8, dtype=np.int64),
        )
        guess = ring.centered(ring.reduce(server.result.total.astype(np.int64) - others))
        if np.array_equal(guess, ring.centered(ring.reduce(game.input_of(2, victim)))):
            isolated = [victim]
    return _outcome(
        "iterate-shown-to-one-client",
        "server",
        threat_model,
        neighbors,
        game,
        exposed=sorted({*isolated, *_exposed(game)}),
        stopped_by="the iterate is bound into the pairwise masks" if not isolated else "",
    )


def _correct(
    game: AdversarialRound, honest: Sequence[int], iteration: int = 1, *, last: bool = True
) -> bool:
    """Whether sum ``iteration`` ended with the exact total of its survivors, every one of
    ``honest`` among them (``last=False``: a session's earlier sum, the server awaiting the
    next)."""
    from secagg import ServerState  # noqa: PLC0415

    server = game.server
    ended = ServerState.COMPLETED if last else ServerState.AWAITING_ITERATION
    if server.state is not ended or server.result is None:
        return False
    result = server.result
    if not set(honest) <= set(result.survivors):
        return False
    ring = game.config.ring
    expected = ring.reduce(sum(game.input_of(iteration, u) for u in result.survivors))
    return bool(np.array_equal(np.asarray(result.total, dtype=np.int64), expected))


def _faults(game: AdversarialRound) -> str:
    return "; ".join(str(f) for f in game.server.faults)[:300]


def _client_outcome(
    attack: str,
    threat_model: str,
    neighbors: int | None,
    game: AdversarialRound,
    correct: bool,
    *,
    culprits: Sequence[int] = (),
    suspects: Sequence[int] | None = None,
) -> AttackOutcome:
    """A client attack's outcome: decided by the round's correctness; the server's faults say
    what refused it, whether they name every one of the ``culprits``, and whom they name outside
    the ``suspects`` (the clients that misbehaved; default: the culprits)."""
    outcome = _outcome(
        attack, "client", threat_model, neighbors, game, correct=correct, stopped_by=_faults(game)
    )
    blamed = {f.peer_id for f in game.server.faults if f.peer_id is not None}
    allowed = set(culprits if suspects is None else suspects)
    outcome = dataclasses.replace(outcome, wrongly_named=tuple(sorted(blamed - allowed)))
    if not culprits:
        return outcome
    return dataclasses.replace(outcome, named=set(culprits) <= blamed)


def _spoofed_sender(threat_model: str, neighbors: int | None, seed: int) -> AttackOutcome:
    from secagg import ProtocolError  # noqa: PLC0415

    game = AdversarialRound(
        inputs_for(7), threshold=2, neighbors=neighbors, threat_model=threat_model, seed=seed
    )
    server, attacker = game.server, 7
    adverts = game.start()
    with contextlib.suppress(ProtocolError):
        server.receive(adverts[0], peer_id=attacker)  # client 7 sends client 1's advertisement
    outgoing = game.to_server(adverts) or game.close()
    outgoing = game.step(outgoing)  # shares → masked-input requests
    replies = [r for m in outgoing for r in game.to_client(m)]
    first: Any = next(m for m in replies if m.peer == 1)
    forged = dataclasses.replace(first, vector=(first.vector + 1).astype(first.vector.dtype))
    with contextlib.suppress(ProtocolError):
        server.receive(forged, peer_id=attacker)  # client 7 submits a masked input as client 1
    outgoing = game.to_server(replies) or game.close()
    while outgoing:
        outgoing = game.step(outgoing)
    honest = [u for u in game.clients if u != attacker]
    return _client_outcome(
        "spoofed-sender",
        threat_model,
        neighbors,
        game,
        _correct(game, honest),
        culprits=(attacker,),
    )


def _duplicate_in_open_phase(threat_model: str, neighbors: int | None, seed: int) -> AttackOutcome:
    from secagg import ForwardedShares, ProtocolError  # noqa: PLC0415

    game = AdversarialRound(
        inputs_for(7), threshold=2, neighbors=neighbors, threat_model=threat_model, seed=seed
    )
    outgoing = run_until(game, ForwardedShares)
    replies = [r for m in outgoing for r in game.to_client(m)]
    first: Any = next(m for m in replies if m.peer == 2)
    game.server.receive(first, peer_id=2)
    other = dataclasses.replace(first, vector=(first.vector + 1).astype(first.vector.dtype))
    with contextlib.suppress(ProtocolError):
        game.server.receive(other, peer_id=2)  # a second, different input while the phase is open
    outgoing = game.to_server(m for m in replies if m.peer != 2) or game.close()
    while outgoing:
        outgoing = game.step(outgoing)
    return _client_outcome(
        "duplicate-in-open-phase",
        threat_model,
        neighbors,
        game,
        _correct(game, list(game.clients)),
        culprits=(2,),
    )


def _misbehaving(behaviour: str, name: str) -> Callable[[str, int | None, int], AttackOutcome]:
    def attack(threat_model: str, neighbors: int | None, seed: int) -> AttackOutcome:
        del seed  # the scenario is fixed (9 clients, t = 3, clients 4 and 7 misbehave)
        bad = (4, 7)
        # Two of 9 leave: on the sparse graph a degree of 6 keeps every neighbourhood at ≥ t = 3
        # (at degree 4 the round fails as it would with two honest dropouts: not an attack).
        neighbors = None if neighbors is None else neighbors + 2
        game = bad_client_round(behaviour, bad, neighbors, threat_model)
        honest = [u for u in game.clients if u not in bad]
        # Wrong shares of a dealer that then reveals its own seed are never used: nothing to name.
        culprits = () if behaviour.startswith("wrong") else bad
        return _client_outcome(
            name,
            threat_model,
            neighbors,
            game,
            _correct(game, honest),
            culprits=culprits,
            suspects=bad,
        )

    return attack


def _garbage(blob: bytes, rng: np.random.Generator) -> bytes:
    """Well-formed garbage of ``blob``'s length: little-endian field elements below 2^31 − 1."""
    words = rng.integers(0, 2**31 - 1, size=-(-len(blob) // 4), dtype=np.uint32)
    return words.astype("<u4").tobytes()[: len(blob)]


def _garbled_unmask_round(
    inputs: Mapping[int, Sequence[int]],
    threshold: int,
    neighbors: int | None,
    threat_model: str,
    seed: int,
    *,
    bad: Sequence[int],
    gone: int,
    held_only: bool = False,
) -> tuple[AdversarialRound, tuple[int, ...]]:
    """A round in which ``gone`` vanishes after its masked input (its seed must be rebuilt from
    shares) and the ``bad`` clients (none given: the lowest-numbered holders of ``gone``'s shares
    in the round's graph, as many as Berlekamp–Welch corrects among them, ⌊(m − t)/2⌋, at most
    two) answer the unmask request with well-formed garbage — every
    share of a neighbour's seed or key, their own self-mask seed and any pairwise key random
    (``held_only``: only the shares they hold; their own seed and keys honest). Returns the
    round and the bad clients."""
    from secagg import UnmaskRequest, UnmaskResponse  # noqa: PLC0415

    game = AdversarialRound(
        inputs, threshold=threshold, neighbors=neighbors, threat_model=threat_model, seed=seed
    )
    rng = np.random.default_rng(seed)
    outgoing = run_until(game, UnmaskRequest)
    answers = [r for m in outgoing if m.peer != gone for r in game.to_client(m)]
    if not bad:  # the lowest-numbered holders of gone's shares, as many as decoding corrects
        holders = sorted(
            r.sender
            for r in answers
            if isinstance(r, UnmaskResponse) and any(v == gone for v, _ in r.seed_shares)
        )
        bad = holders[: min(2, (len(holders) - threshold) // 2)]
        if not bad:  # no liar decoding could correct: the attack would test nothing
            raise ValueError(f"{len(holders)} holders, t = {threshold}: none correctable")
    replies: list[Any] = []
    for reply in answers:
        if not (isinstance(reply, UnmaskResponse) and reply.sender in bad):
            replies.append(reply)
            continue
        garbled = dataclasses.replace(
            reply,
            seed_shares=tuple((v, _garbage(b, rng)) for v, b in reply.seed_shares),
            key_shares=tuple((v, _garbage(b, rng)) for v, b in reply.key_shares),
        )
        if not held_only:
            garbled = dataclasses.replace(
                garbled,
                self_mask_seed=_garbage(reply.self_mask_seed, rng),
                pairwise_keys=tuple((v, _garbage(b, rng)) for v, b in reply.pairwise_keys),
            )
        replies.append(garbled)
    outgoing = game.to_server(replies) or game.close()
    while outgoing:
        outgoing = game.step(outgoing)
    return game, tuple(bad)


def _garbage_unmask_shares(threat_model: str, neighbors: int | None, seed: int) -> AttackOutcome:
    """Clients 4 and 7 answer the unmask request with well-formed garbage while client 5, which
    sent its masked input, is gone by then: its seed must be rebuilt from shares, some of them
    garbage (9 clients, t = 3: Berlekamp–Welch corrects them). Decided by the round's
    correctness."""
    bad = (4, 7)
    neighbors = None if neighbors is None else neighbors + 2  # as for the other bad clients
    game, _ = _garbled_unmask_round(
        inputs_for(9), 3, neighbors, threat_model, seed, bad=bad, gone=5
    )
    honest = [u for u in game.clients if u not in bad]
    return _client_outcome(
        "garbage-unmask-shares", threat_model, neighbors, game, _correct(game, honest), culprits=bad
    )


def _garbled_held_shares(threat_model: str, neighbors: int | None, seed: int) -> AttackOutcome:
    """The lowest-numbered holders of client 5's shares — those a decoder reading the first t
    would use — garble only the shares they hold, their own seed and keys honest, while client 5
    is gone after its masked input (9 clients, t = 3): as many liars as Berlekamp–Welch corrects
    among the m holders, ⌊(m − t)/2⌋ (two of the complete graph's eight, one of six in SecAgg+).
    README: wrong shares are corrected by decoding and their holders named (beyond that bound
    no decoder can tell liars from framed honest holders, and none is claimed). Decided by the
    round's correctness, with every liar named."""
    neighbors = None if neighbors is None else neighbors + 2  # as for the other bad clients
    game, bad = _garbled_unmask_round(
        inputs_for(9), 3, neighbors, threat_model, seed, bad=(), gone=5, held_only=True
    )
    honest = [u for u in game.clients if u not in bad]
    return _client_outcome(
        "garbled-held-shares", threat_model, neighbors, game, _correct(game, honest), culprits=bad
    )


def _lagrange_at_zero(xs: Sequence[int], x: int, prime: int = 2**31 - 1) -> int:
    """λ_x = Π_{j ≠ x} x_j/(x_j − x) mod p: the weight of share x in the value at 0 (Shamir)."""
    weight = 1
    for other in xs:
        if other != x:
            weight = weight * other * pow(other - x, -1, prime) % prime
    return weight


def _outcome_of_runs(
    attack: str,
    threat_model: str,
    neighbors: int | None,
    runs: Sequence[tuple[int, AdversarialRound, bool]],
) -> AttackOutcome:
    """One outcome for several runs of a client attack, each (culprit, round, correct): shown
    through the first run whose total is wrong, else the first whose culprit went unnamed, else
    the first; correct only if every run is."""
    named = [bad in {f.peer_id for f in g.server.faults} for bad, g, _ in runs]
    shown = next(
        (i for i, (_, _, correct) in enumerate(runs) if not correct),
        next((i for i, ok in enumerate(named) if not ok), 0),
    )
    bad, game, _ = runs[shown]
    return _client_outcome(
        attack,
        threat_model,
        neighbors,
        game,
        all(correct for _, _, correct in runs),
        culprits=(bad,),
    )


def _shifted(blob: bytes, shift: int, prime: int = 2**31 - 1) -> bytes:
    """A share blob (little-endian u32 sub-shares) with its first sub-share moved by ``shift``."""
    words = np.frombuffer(blob, dtype="<u4").astype(np.int64)
    words[0] = (words[0] + shift) % prime
    return words.astype("<u4").tobytes()


def _well_formed_wrong_share(
    threat_model: str, neighbors: int | None, seed: int
) -> AttackOutcome:
    """One holder — the lowest-numbered, one of the t a decoder reading the first t uses —
    shifts its share of a secret's first sub-secret by λ⁻¹ (λ its Lagrange weight at 0 among
    those t), so that they reconstruct a *well-formed* secret one unit off: no range check on
    the sub-secrets can tell, only the secret's commitment (9 clients, t = 3). Two secrets:
    client 5's self-mask seed (gone after its masked input), and client 6's recovery key (gone
    before its masked input; the same holder also reveals a wrong pair key with it, so the
    server must open 6's escrows with the rebuilt key). Decided by the round's correctness,
    with the liar named, in both variants."""
    from secagg import ForwardedShares, UnmaskRequest, UnmaskResponse  # noqa: PLC0415

    threshold = 3
    neighbors = None if neighbors is None else neighbors + 2  # as for the other bad clients
    runs = []
    for gone, field in ((5, "seed_shares"), (6, "key_shares")):
        game = AdversarialRound(
            inputs_for(9), threshold=threshold, neighbors=neighbors, threat_model=threat_model,
            seed=seed,
        )  # fmt: skip
        silent: Mapping[type, Iterable[int]] = (
            {ForwardedShares: (gone,)} if field == "key_shares" else {}
        )
        outgoing = run_until(game, UnmaskRequest, silent=silent)
        answers = [r for m in outgoing if m.peer != gone for r in game.to_client(m)]
        holders = sorted(
            r.sender
            for r in answers
            if isinstance(r, UnmaskResponse) and any(v == gone for v, _ in getattr(r, field))
        )
        bad = holders[0]
        shift = pow(_lagrange_at_zero(holders[:threshold], bad), -1, 2**31 - 1)
        rng = np.random.default_rng(seed)
        replies: list[Any] = []
        for reply in answers:
            if isinstance(reply, UnmaskResponse) and reply.sender == bad:
                shares = tuple(
                    (v, _shifted(blob, shift) if v == gone else blob)
                    for v, blob in getattr(reply, field)
                )
                keys = tuple(
                    (v, _garbage(b, rng) if v == gone else b) for v, b in reply.pairwise_keys
                )
                if field == "seed_shares":
                    reply = dataclasses.replace(reply, seed_shares=shares)  # noqa: PLW2901
                else:
                    reply = dataclasses.replace(reply, key_shares=shares)  # noqa: PLW2901
                reply = dataclasses.replace(reply, pairwise_keys=keys)  # noqa: PLW2901
            replies.append(reply)
        outgoing = game.to_server(replies) or game.close()
        while outgoing:
            outgoing = game.step(outgoing)
        # Client 5 sent its masked input (it must be summed); client 6 never did.
        honest = [u for u in game.clients if u not in (bad, 6)]
        runs.append((bad, game, _correct(game, honest)))
    return _outcome_of_runs("well-formed-wrong-share", threat_model, neighbors, runs)


def _wrong_pairwise_key(threat_model: str, neighbors: int | None, seed: int) -> AttackOutcome:
    """Client 6 vanishes before its masked input (9 clients, t = 3), so its surviving
    neighbours reveal their pairwise key with it; the lowest-numbered of them reveals a wrong
    one — well-formed garbage of the right length, or the right key with 16 bytes appended.
    README: misbehaving clients cannot sink a round and the culprit is named. Decided by the
    round's correctness, with the liar named, in both variants."""
    from secagg import ForwardedShares, UnmaskRequest, UnmaskResponse  # noqa: PLC0415

    neighbors = None if neighbors is None else neighbors + 2  # as for the other bad clients
    runs = []
    for variant in ("garbage", "over-long"):
        game = AdversarialRound(
            inputs_for(9), threshold=3, neighbors=neighbors, threat_model=threat_model, seed=seed
        )
        rng = np.random.default_rng(seed)
        outgoing = run_until(game, UnmaskRequest, silent={ForwardedShares: (6,)})
        answers = [r for m in outgoing for r in game.to_client(m)]
        revealing = sorted(
            r.sender
            for r in answers
            if isinstance(r, UnmaskResponse) and any(v == 6 for v, _ in r.pairwise_keys)
        )
        bad = revealing[0]
        replies = []
        for answer in answers:
            if isinstance(answer, UnmaskResponse) and answer.sender == bad:
                keys = tuple(
                    (v, _garbage(b, rng) if variant == "garbage" else b + bytes(16))
                    for v, b in answer.pairwise_keys
                )
                answer = dataclasses.replace(answer, pairwise_keys=keys)  # noqa: PLW2901
            replies.append(answer)
        outgoing = game.to_server(replies) or game.close()
        while outgoing:
            outgoing = game.step(outgoing)
        honest = [u for u in game.clients if u not in (bad, 6)]
        runs.append((bad, game, _correct(game, honest)))
    return _outcome_of_runs("wrong-pairwise-key", threat_model, neighbors, runs)


def _one_garbage_share_of_t_plus_one(
    threat_model: str, neighbors: int | None, seed: int
) -> AttackOutcome:
    """Five clients, t = 3: client 5 is gone after its masked input, so exactly t + 1 = 4
    holders answer for its seed — and one of them, in turn each of the four, answers with
    garbage. One wrong share among t + 1 cannot be corrected (⌊(4 − 3)/2⌋ = 0), only found: the
    server must try the t-subsets that leave out each holder in turn. Correct in every run, or
    the attack succeeds (the neighbours argument is moot: a degree-4 graph on 5 is complete)."""
    outcomes = []
    for bad in (1, 2, 3, 4):
        game, _ = _garbled_unmask_round(
            inputs_for(5), 3, neighbors, threat_model, seed, bad=(bad,), gone=5
        )
        honest = [u for u in game.clients if u != bad]
        outcomes.append((bad, game, _correct(game, honest)))
    failed = [bad for bad, _, correct in outcomes if not correct]
    unnamed = [bad for bad, g, _ in outcomes if bad not in {f.peer_id for f in g.server.faults}]
    shown = (failed or unnamed or [4])[0]  # the run the outcome reports: a failure first
    return _client_outcome(
        "one-garbage-share-of-t+1",
        threat_model,
        neighbors,
        outcomes[shown - 1][1],
        not failed,
        culprits=(shown,),
    )


def _replay_from_another_round(
    threat_model: str, neighbors: int | None, seed: int
) -> AttackOutcome:
    from secagg import ForwardedShares, MaskedInput, ProtocolError  # noqa: PLC0415

    old = AdversarialRound(
        inputs_for(7), threshold=2, neighbors=neighbors, threat_model=threat_model, seed=seed + 1
    )
    old.run()
    recorded = next(m for m in old.view.received if isinstance(m, MaskedInput) and m.sender == 2)
    game = AdversarialRound(
        inputs_for(7), threshold=2, neighbors=neighbors, threat_model=threat_model, seed=seed
    )
    outgoing = run_until(game, ForwardedShares)
    with contextlib.suppress(ProtocolError):
        game.server.receive(recorded, peer_id=2)  # client 2's input of another round, first
    outgoing = game.step(outgoing)
    while outgoing:
        outgoing = game.step(outgoing)
    return _client_outcome(
        "replay-from-another-round",
        threat_model,
        neighbors,
        game,
        _correct(game, list(game.clients)),
        culprits=(2,),
    )


def _replay_from_an_earlier_sum(
    threat_model: str, neighbors: int | None, seed: int
) -> AttackOutcome:
    from secagg import MaskedInput, ProtocolError  # noqa: PLC0415

    game = _session(2, threat_model, neighbors, seed)
    game.run()
    recorded = next(m for m in game.view.received if isinstance(m, MaskedInput) and m.sender == 2)
    requests = game.server.begin_iteration(b"two")
    with contextlib.suppress(ProtocolError):
        game.server.receive(recorded, peer_id=2)  # sum 1's input offered to sum 2
    outgoing = game.step(requests)
    while outgoing:
        outgoing = game.step(outgoing)
    return _client_outcome(
        "replay-from-an-earlier-sum",
        threat_model,
        neighbors,
        game,
        _correct(game, list(game.clients), iteration=2),
    )


def _equivocation(message: Any, fill: int) -> Any:
    """A client's consistency answer, changed: its signature, or its first approval tag, with
    every byte ``fill`` (0x00 sorts below any genuine one, 0xff above)."""
    if message.approvals:
        (recipient, tag), *rest = message.approvals
        return dataclasses.replace(
            message, approvals=((recipient, bytes([fill]) * len(tag)), *rest)
        )
    return dataclasses.replace(message, signature=bytes([fill]) * len(message.signature))


def _equivocating_consistency(
    threat_model: str, neighbors: int | None, seed: int
) -> AttackOutcome | None:
    """Malicious mode only (the semi-honest mode has no consistency check): client 3 answers the
    consistency check, then answers again differently — another signature in a single sum,
    another approval tag in a session's first sum; the second answer sorts below the first in
    one run and above it in another. Each time the server must keep the first answer, name
    client 3, and complete the sum (and the session's next) exactly."""
    from secagg import ConsistencyRequest, ConsistencySignature, ProtocolError  # noqa: PLC0415

    if threat_model != "malicious":
        return None
    outcomes: list[AttackOutcome] = []
    for sums, fill in itertools.product((1, 2), (0x00, 0xFF)):
        game = _session(sums, threat_model, neighbors, seed)
        requests = run_until(game, ConsistencyRequest)
        replies = [r for m in requests for r in game.to_client(m)]
        first = next(r for r in replies if isinstance(r, ConsistencySignature) and r.sender == 3)
        game.server.receive(first, peer_id=3)
        with contextlib.suppress(ProtocolError):
            game.server.receive(_equivocation(first, fill), peer_id=3)
        outgoing = game.to_server(r for r in replies if r is not first) or game.close()
        while outgoing:
            outgoing = game.step(outgoing)
        correct = _correct(game, list(game.clients), last=sums == 1)
        if sums == 2:  # the session goes on: its second sum must be exact as well
            outgoing = game.step(game.server.begin_iteration(b"two"))
            while outgoing:
                outgoing = game.step(outgoing)
            correct = correct and _correct(game, list(game.clients), iteration=2)
        outcomes.append(
            _client_outcome(
                "equivocating-consistency",
                threat_model,
                neighbors,
                game,
                correct,
                culprits=(3,),
            )
        )
    return next((o for o in outcomes if o.succeeded or o.named is False), outcomes[-1])


def _malformed_approvals(
    threat_model: str, neighbors: int | None, seed: int
) -> AttackOutcome | None:
    """Malicious mode only: in a session's first sum, client 3 answers the consistency check
    with malformed approvals — one recipient listed a second time with another tag, or its
    recipients in reverse order. The server holds no MAC key, so their shape is all it can
    check: it must refuse the answer, name client 3, and complete both sums exactly (client 3
    left out). A server that keeps the last of two tags for one recipient lets a client place
    a tag it never stands by."""
    from secagg import ConsistencyRequest, ConsistencySignature, ProtocolError  # noqa: PLC0415

    if threat_model != "malicious":
        return None
    outcomes: list[AttackOutcome] = []
    for variant in ("listed twice", "reversed"):
        game = _session(2, threat_model, neighbors, seed)
        requests = run_until(game, ConsistencyRequest)
        replies = [r for m in requests for r in game.to_client(m)]
        answer = next(r for r in replies if isinstance(r, ConsistencySignature) and r.sender == 3)
        approvals = answer.approvals
        if variant == "listed twice":
            approvals = (*approvals, (approvals[0][0], bytes(len(approvals[0][1]))))
        else:
            approvals = approvals[::-1]
        with contextlib.suppress(ProtocolError):
            game.server.receive(dataclasses.replace(answer, approvals=approvals), peer_id=3)
        outgoing = game.to_server(r for r in replies if r is not answer) or game.close()
        while outgoing:
            outgoing = game.step(outgoing)
        honest = [u for u in game.clients if u != 3]
        correct = _correct(game, honest, last=False)
        outgoing = game.step(game.server.begin_iteration(b"two"))
        while outgoing:
            outgoing = game.step(outgoing)
        correct = correct and _correct(game, honest, iteration=2)
        outcomes.append(
            _client_outcome(
                "malformed-approvals", threat_model, neighbors, game, correct, culprits=(3,)
            )
        )
    return next((o for o in outcomes if o.succeeded or o.named is False), outcomes[-1])


def _off_rule_requests(request: Any, victim: int) -> list[tuple[str, Any]]:
    """Unmask requests to ``victim`` off the lists it approved, each list changed alone: its
    survivors reversed, one survivor other than the victim left out (dropped list exact), one
    dropped neighbour left out (survivor list exact), one dropped neighbour listed twice, one
    survivor listed twice, a client of no round named as a survivor. The third and fourth need
    a dropped neighbour: without one they are the exact request itself (never sent —
    :func:`unmask_rule_findings` makes one drop)."""
    survivors, dropped = request.survivors, request.dropped
    others = [v for v in survivors if v != victim]
    last = dropped[-1:] or (None,)
    return [
        ("survivors reversed", dataclasses.replace(request, survivors=survivors[::-1])),
        (
            f"survivor {others[-1]} left out of both lists, dropped list exact",
            dataclasses.replace(request, survivors=tuple(v for v in survivors if v != others[-1])),
        ),
        (
            f"dropped neighbour {last[0]} left out of both lists, survivor list exact",
            dataclasses.replace(request, dropped=dropped[:-1]),
        ),
        (
            f"dropped neighbour {last[0]} listed twice",
            dataclasses.replace(request, dropped=dropped + dropped[-1:]),
        ),
        (
            f"survivor {others[-1]} listed twice",
            dataclasses.replace(request, survivors=(*survivors, others[-1])),
        ),
        (
            f"client {_STRANGER}, not a neighbour, listed as a survivor",
            dataclasses.replace(request, survivors=(*survivors, _STRANGER)),
        ),
    ]


#: A client id in no audited round (rounds have 8 clients at most).
_STRANGER = 99

#: Which deviations of :func:`_off_rule_requests` each mode must refuse: the malicious mode all
#: (its lists must be exactly the approved set's), both modes a repeated id or a client that is
#: not a neighbour (a malformed request: ``Client`` refuses it before any mode-specific rule).
RULE_DEVIATIONS: dict[str, tuple[int, ...]] = {
    "malicious": (0, 1, 2, 3, 4, 5),
    "semi-honest": (3, 4, 5),
}


def unmask_rule_findings(
    neighbors: int | None, seed: int, threat_model: str = "malicious"
) -> tuple[int, list[str]]:
    """A client answers an unmask request only if its lists are well formed (no repeated id, no
    client outside its neighbourhood; both modes) and, in malicious mode, exactly what its
    approved survivor set implies (``secagg/malicious_security.md`` §1, step 4).

    In a fresh round per deviation (:data:`RULE_DEVIATIONS`), one honest client with more than
    t listed survivors (t stays met) is sent the request with one list changed and the other
    exact — its survivor list reversed, or one other survivor left out, or (client 8 gone
    before its masked input) one dropped neighbour left out or listed twice, or one survivor
    listed twice, or a client of no round listed as a survivor — and must refuse (abort, no
    answer); the others are sent the exact request and must answer.

    Parameters
    ----------
    neighbors
        SecAgg+ degree, or ``None`` for the complete graph.
    seed
        Seed of the parties' randomness.
    threat_model
        ``"malicious"`` (every deviation) or ``"semi-honest"`` (the malformed requests).

    Returns
    -------
    tuple[int, list[str]]
        Deviations tried, and one finding per deviation answered or exact request refused,
        each starting with the mode and graph.

    Examples
    --------
    >>> unmask_rule_findings(None, 0)
    (6, [])
    >>> unmask_rule_findings(4, 0, "semi-honest")
    (3, [])
    """
    from secagg import ForwardedShares, UnmaskRequest  # noqa: PLC0415

    where = f"{threat_model} ({_graph(neighbors)})"
    tried, findings = 0, list[str]()
    for index in RULE_DEVIATIONS[threat_model]:
        game = AdversarialRound(
            inputs_for(8), threshold=2, neighbors=neighbors, seed=seed, threat_model=threat_model
        )
        gone = [8] if index in (2, 3) else []
        requests = run_until(game, UnmaskRequest, silent={ForwardedShares: gone})
        roomy = [
            r
            for r in requests
            if len([v for v in r.survivors if v != r.recipient]) > 2 and set(gone) <= set(r.dropped)
        ]
        if not roomy:
            raise RuntimeError("no client lists more than t survivors: the rule is not tested")
        victim = roomy[0].recipient
        for request in requests:
            if request.recipient != victim:
                if not game.to_client(request):
                    findings.append(
                        f"{where}: client {request.recipient} refused the exact "
                        f"unmask request ({game.aborted.get(request.recipient, 'no reason')})"
                    )
                continue
            what, deviated = _off_rule_requests(request, victim)[index]
            tried += 1
            if game.to_client(deviated):
                findings.append(
                    f"{where}: client {victim} answered an unmask request it must refuse "
                    f"({what})"
                )
    return tried, findings


@dataclass(frozen=True)
class AttackSpec:
    """One attack: name, kind, what it tries, and its runner ``(threat_model, neighbors, seed)``
    (``None`` from the runner: the attack does not apply to that mode)."""

    name: str
    kind: AttackKind
    description: str
    run: Callable[[str, int | None, int], AttackOutcome | None]


ATTACKS: tuple[AttackSpec, ...] = (
    AttackSpec(
        "substituted-keys",
        "server",
        "the server lists its own keys under the victim's neighbours",
        _substituted_keys,
    ),
    AttackSpec(
        "inconsistent-unmask-views",
        "server",
        "the victim is told it survived, its neighbours that it dropped",
        _inconsistent_unmask_views,
    ),
    AttackSpec(
        "split-survivor-views",
        "server",
        "two survivor sets shown to two groups in the consistency round (every split)",
        _split_survivor_views,
    ),
    AttackSpec(
        "split-views-in-a-later-sum",
        "server",
        "every split of a session's second sum (MAC approvals), padded with forged approvals",
        _split_views_in_a_later_sum,
    ),
    AttackSpec(
        "drop-claimed-in-a-later-sum",
        "server",
        "in a session's second sum, the victim is claimed dropped to its neighbours",
        _drop_claimed_in_later_sum,
    ),
    AttackSpec(
        "iteration-request-replayed",
        "server",
        "the victim is sent an earlier sum's request again (its next input, that sum's masks)",
        _replayed_iteration_request,
    ),
    AttackSpec(
        "members-below-threshold",
        "server",
        "in a session's second sum, the victim is told only the server's colluder remains",
        _members_below_threshold,
    ),
    AttackSpec(
        "iterate-shown-to-one-client",
        "server",
        "model inconsistency: the victim alone is sent another iterate",
        _iterate_to_one_client,
    ),
    AttackSpec(
        "spoofed-sender",
        "client",
        "a client sends messages under another client's id",
        _spoofed_sender,
    ),
    AttackSpec(
        "duplicate-in-open-phase",
        "client",
        "a second, different masked input while the phase is open",
        _duplicate_in_open_phase,
    ),
    AttackSpec(
        "wrong-shares-then-silent",
        "client",
        "two clients deal shares of nothing, then go silent",
        _misbehaving("wrong shares then silent", "wrong-shares-then-silent"),
    ),
    AttackSpec(
        "unauthentic-ciphertexts",
        "client",
        "two clients send share ciphertexts that fail authentication",
        _misbehaving("unauthentic ciphertexts", "unauthentic-ciphertexts"),
    ),
    AttackSpec(
        "garbage-unmask-shares",
        "client",
        "two clients answer the unmask request with well-formed garbage shares and seeds",
        _garbage_unmask_shares,
    ),
    AttackSpec(
        "garbled-held-shares",
        "client",
        "a dropped client's first holders garble only its shares (as many as decoding corrects)",
        _garbled_held_shares,
    ),
    AttackSpec(
        "one-garbage-share-of-t+1",
        "client",
        "one of exactly t + 1 holders answers with garbage (each holder in turn)",
        _one_garbage_share_of_t_plus_one,
    ),
    AttackSpec(
        "well-formed-wrong-share",
        "client",
        "a first holder shifts its share so the first t rebuild a well-formed, wrong seed "
        "(or recovery key)",
        _well_formed_wrong_share,
    ),
    AttackSpec(
        "wrong-pairwise-key",
        "client",
        "a survivor reveals a wrong pairwise key with a dropped neighbour (garbage; over-long)",
        _wrong_pairwise_key,
    ),
    AttackSpec(
        "malformed-escrows",
        "client",
        "two clients send pair-key escrows that do not match their neighbours (one left out; "
        "all reversed)",
        _misbehaving("malformed escrows", "malformed-escrows"),
    ),
    AttackSpec(
        "malformed-masked-input",
        "client",
        "two clients send masked inputs of the wrong length",
        _misbehaving("malformed masked input", "malformed-masked-input"),
    ),
    AttackSpec(
        "replay-from-another-round",
        "client",
        "a masked input recorded in another round, offered first",
        _replay_from_another_round,
    ),
    AttackSpec(
        "replay-from-an-earlier-sum",
        "client",
        "a session's sum-1 masked input offered to sum 2",
        _replay_from_an_earlier_sum,
    ),
    AttackSpec(
        "equivocating-consistency",
        "client",
        "a client answers the consistency check twice, differently (malicious mode)",
        _equivocating_consistency,
    ),
    AttackSpec(
        "malformed-approvals",
        "client",
        "a session's approvals with a recipient listed twice, or reversed (malicious mode)",
        _malformed_approvals,
    ),
)


@runtime_checkable
class AttackSurface(Protocol):
    """A target's secure sum as the attack audits drive it."""

    @property
    def threat_models(self) -> tuple[str, ...]:
        """The modes the attacks run against."""
        ...

    def resists(self, threat_model: str, kind: AttackKind) -> bool:
        """Whether ``threat_model`` claims to resist attacks of ``kind``."""
        ...

    def attacks(self) -> Sequence[AttackSpec]:
        """The attacks this target can be driven through."""
        ...

    def control(self, seed: int) -> bool:
        """Positive control: the reconstruction recovers a colluding client's input."""
        ...


class OurAttackSurface:
    """secagg-dp's Client and Server under every attack of :data:`ATTACKS`.

    The semi-honest mode claims to resist misbehaving clients only; the malicious mode (the
    default) a malicious server with up to t − 1 colluders as well.

    Examples
    --------
    >>> surface = OurAttackSurface()
    >>> surface.resists("semi-honest", "server"), surface.resists("malicious", "server")
    (False, True)
    >>> surface.control(0)
    True
    """

    threat_models: tuple[str, ...] = ("semi-honest", "malicious")
    #: The server names a misbehaving client in ``faults`` (README, "Misbehaving clients").
    names_culprits = True

    def resists(self, threat_model: str, kind: AttackKind) -> bool:
        """Malicious: both kinds; semi-honest: client attacks only."""
        return threat_model == "malicious" or kind == "client"

    def attacks(self) -> Sequence[AttackSpec]:
        """Every attack of :data:`ATTACKS`."""
        return ATTACKS

    def rule_findings(self, seed: int) -> tuple[int, list[str]]:
        """The unmask rules of both modes on both graphs (:func:`unmask_rule_findings`)."""
        tried, findings = 0, list[str]()
        for threat_model, neighbors in itertools.product(self.threat_models, GRAPHS):
            n, found = unmask_rule_findings(neighbors, seed, threat_model)
            tried, findings = tried + n, findings + found
        return tried, findings

    def control(self, seed: int) -> bool:
        """A colluding client's input comes out of an honest round; the others' do not."""
        game = AdversarialRound(inputs_for(6), threshold=3, colluding=[2], seed=seed)
        game.run()
        recovered = reconstruct_inputs(game.view)
        values = [v.tolist() for (_, _, u), v in recovered.items() if u == 2]
        others = {u for _, _, u in recovered} - {2}
        return values == [game.inputs[2].tolist()] and not others


def audit_attacks(target: Any, *, tier: Tier = "fast", seed: int = 0) -> AuditResult:
    """Audit 10: every attack against every mode of the target's secure sum.

    Parameters
    ----------
    target
        An :class:`~audits.targets.AuditTarget` with an ``attack_surface()`` (``None``: n/a).
    tier
        Both tiers run the same attacks (each is deterministic; the deep tier adds seeds).
    seed
        Seed of the parties' randomness.

    Returns
    -------
    AuditResult
        FAIL if an attack succeeds in a mode that claims to resist it, or the positive control
        fails; the table of every outcome in ``details["outcomes"]``.

    Examples
    --------
    >>> from audits.ours import OurTarget
    >>> result = audit_attacks(OurTarget())
    >>> result.verdict.value, result.value
    ('pass', 0)
    """
    start = time.perf_counter()
    tier = check_tier(tier)
    surface = getattr(target, "attack_surface", lambda: None)()
    if surface is None:
        return not_applicable(10, "attacks", target.name, "no adversarial driver for this target")
    seeds = [seed] if tier == "fast" else [seed, seed + 1, seed + 2]
    outcomes: list[AttackOutcome] = []
    with quiet_library_warnings():  # the faults the attacks provoke are logged as warnings
        for s, threat_model, neighbors, spec in itertools.product(
            seeds, surface.threat_models, GRAPHS, surface.attacks()
        ):
            outcome = spec.run(threat_model, neighbors, s)
            if outcome is not None:
                outcomes.append(outcome)
        control = all(surface.control(s) for s in seeds)
        # Rules a mode documents beyond "no attack succeeds" (ours: clients refuse an unmask
        # request with a repeated id; malicious-mode ones answer only the lists their approved
        # set implies).
        rules: Callable[[int], tuple[int, list[str]]] | None
        rules = getattr(surface, "rule_findings", None)
        rules_tried, rule_findings = 0, list[str]()
        for s in seeds:
            if rules is not None:
                tried, found = rules(s)
                rules_tried, rule_findings = rules_tried + tried, rule_findings + found
    breaches = [o for o in outcomes if o.succeeded and surface.resists(o.threat_model, o.kind)]
    expected = [o for o in outcomes if o.succeeded and not surface.resists(o.threat_model, o.kind)]
    # A surface that says its server names misbehaving clients is held to it.
    names = bool(getattr(surface, "names_culprits", False))
    unnamed = [o for o in outcomes if names and not o.succeeded and o.named is False]
    # ... and to naming only them: a retransmission's sender or a spoofed victim is not a culprit.
    wrongly = [o for o in outcomes if names and o.wrongly_named]
    findings = [
        f"{o.threat_model} ({o.graph}): {o.attack} "
        + (f"exposed client(s) {list(o.exposed)}" if o.exposed else "sank or corrupted the round")
        for o in breaches
    ]
    findings += [
        f"{o.threat_model} ({o.graph}): {o.attack} refused, but its culprit is not named in the "
        f"server's faults ({o.stopped_by or 'none recorded'})"
        for o in unnamed
    ]
    findings += [
        f"{o.threat_model} ({o.graph}): {o.attack}: the server's faults name client(s) "
        f"{list(o.wrongly_named)}, who did nothing wrong ({o.stopped_by or 'none recorded'})"
        for o in wrongly
    ]
    findings += rule_findings  # each names its mode and graph
    if not control:
        findings.insert(0, "the positive control failed: the reconstruction cannot see a colluder")
    findings += [
        f"expected in {o.threat_model} ({o.graph}): {o.attack} exposed {list(o.exposed)}"
        for o in expected
    ]
    failed = breaches or unnamed or wrongly or rule_findings
    verdict = Verdict.PASS if control and not failed else Verdict.FAIL
    return AuditResult(
        audit=10,
        name="attacks",
        target=target.name,
        statistic="attacks that succeeded where the mode claims to resist them (and client "
        "attacks whose culprit went unnamed or that named a client who did nothing wrong, where "
        "the server claims to name culprits; and documented unmask rules broken)",
        value=len(breaches) + len(unnamed) + len(wrongly) + len(rule_findings),
        threshold="0 (and the positive control recovers a colluder's input)",
        samples=len(outcomes),
        verdict=verdict,
        error_rate=0.0,
        findings=tuple(findings),
        details={
            "outcomes": [
                {
                    **dataclasses.asdict(o),
                    "succeeded": o.succeeded,
                    "claimed_resistant": surface.resists(o.threat_model, o.kind),
                }
                for o in outcomes
            ],
            "control": control,
            "unmask_rule_deviations_tried": rules_tried,
            "inputs": {"seed": seed, "tier": tier},
        },
        seconds=time.perf_counter() - start,
        power="any attack of its list that succeeds (deterministic)",
    )


def outcome_table(outcomes: Sequence[Mapping[str, Any]]) -> str:
    """A Markdown table attack × (mode, graph) of audit 10's outcomes.

    Examples
    --------
    >>> row = {"attack": "spoofed-sender", "threat_model": "malicious", "graph": "complete",
    ...        "succeeded": False, "claimed_resistant": True}
    >>> print(outcome_table([row]))
    | attack | malicious complete |
    |---|---|
    | spoofed-sender | refused |
    """

    def graph(o: Mapping[str, Any]) -> str:
        return str(o["graph"]).split(" ")[0]  # "complete" or "secagg+" (its degree varies)

    columns = sorted(
        {(o["threat_model"], graph(o)) for o in outcomes},
        key=lambda c: (c[0] != "semi-honest", c),
    )
    attacks = list(dict.fromkeys(o["attack"] for o in outcomes))
    cells: dict[tuple[str, str, str], list[Mapping[str, Any]]] = {}
    for o in outcomes:  # several seeds in the deep tier: a cell succeeds if any run does
        cells.setdefault((o["attack"], o["threat_model"], graph(o)), []).append(o)
    lines = [
        "| attack | " + " | ".join(f"{m} {g}" for m, g in columns) + " |",
        "|---|" + "---|" * len(columns),
    ]
    for attack in attacks:
        marks = []
        for m, g in columns:
            runs = cells.get((attack, m, g), [])
            won = [o for o in runs if o["succeeded"]]
            if not runs:
                marks.append("n/a")
            elif not won and any(o.get("named") is False for o in runs):
                marks.append("refused, culprit **not named**")
            elif not won and any(o.get("wrongly_named") for o in runs):
                marks.append("refused, **names a client who did nothing wrong**")
            elif not won:
                marks.append("refused")
            elif any(o["claimed_resistant"] for o in won):
                marks.append("**SUCCEEDS**")
            else:
                marks.append("succeeds (not claimed)")
        lines.append(f"| {attack} | " + " | ".join(marks) + " |")
    return "\n".join(lines)
