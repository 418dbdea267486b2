"""A Hypothesis state machine in which the server is the adversary (malicious mode).

The server may substitute directory entries, show different clients different survivor sets,
forge unmask requests from whatever approvals it collected (signatures in a single sum, MAC tags
in a session — including tags addressed to another client; colluders approve anything), ask for
both shares, replay messages of an earlier round or an earlier sum, duplicate and reorder. The
round is a session of one to three sums: between sums the server may show members different
iterates and readmit clients that dropped, and it may ask for one sum's shares in another's
request. After every step the invariant attempts the attack
for real: :func:`audits.adversary.honest_inputs_exposed` strips every mask it can from
everything the server holds, in every sum, and must recover no honest input.
"""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import HealthCheck, Phase, event, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)

from audits.adversary import AdversarialRound, honest_inputs_exposed
from secagg import (
    ConsistencyRequest,
    ConsistencySignature,
    EncryptedShares,
    ForwardedShares,
    IterationRequest,
    KeyDirectory,
    KeystreamRandom,
    MaskedInput,
    ProtocolError,
    ServerState,
    UnmaskRequest,
)
from secagg.identity import (
    advertisement_message,
    approval_tag,
    consistency_message,
    iterate_digest,
)
from secagg.keys import KeyPair
from secagg.messages import ClientKeys, Message

TO_SERVER = ("AdvertiseKeys", "EncryptedShares", "MaskedInput", "ConsistencySignature",
             "UnmaskResponse")  # fmt: skip


class MaliciousServerMachine(RuleBasedStateMachine):
    """Messages to clients wait in ``pool``; the adversary decides what reaches whom."""

    threat_model = "malicious"

    @initialize(
        n=st.integers(4, 7),
        harary=st.booleans(),
        colluders=st.integers(0, 1),
        seed=st.integers(0, 2**16),
        iterations=st.integers(1, 3),
    )
    def setup(self, n: int, harary: bool, colluders: int, seed: int, iterations: int) -> None:
        inputs = {
            (r, u): [(11 * u + 7 * r + j) % 50 for j in range(3)]
            for r in range(1, iterations + 1)
            for u in range(1, n + 1)
        }
        colluding = tuple(range(n, n - colluders, -1))
        self.game = AdversarialRound(
            inputs,
            threshold=2,
            neighbors=2 if harary and n >= 5 else None,
            colluding=colluding,
            max_colluding=colluders,
            seed=seed,
            threat_model=self.threat_model,
            iterations=iterations,
        )
        # An earlier round with the same clients, whose messages the adversary may replay.
        earlier = AdversarialRound(
            {u: inputs[(1, u)] for u in range(1, n + 1)},
            threshold=2,
            seed=seed + 1,
            threat_model=self.threat_model,
        )
        earlier.run()
        self.replayable = earlier.view.sent
        self.pool: list[Message] = self.game.to_server(self.game.start()) or self.game.close()
        # (session, sum, survivor set, iterate digest) → who approved it: their signatures (one
        # sum) or MAC tags, one per recipient (a session).
        self.signatures: dict[
            tuple[bytes, int, tuple[int, ...], bytes], dict[int, ConsistencySignature]
        ] = {}
        self.source = KeystreamRandom(seed, label=b"adversary keys")
        # The colluders' approval keys (a session's MAC keys), kept as they appear.
        self.colluder_keys: dict[int, dict[int, bytes]] = {u: {} for u in self.game.colluding}

    # -- delivery ---------------------------------------------------------------------------

    def _deliver(self, message: Message) -> None:
        replies = self.game.to_client(message)
        for u, keys in self.colluder_keys.items():
            keys.update(self.game.clients[u]._approval_keys)
        for reply in replies:
            if isinstance(reply, ConsistencySignature):
                request = message
                assert isinstance(request, ConsistencyRequest)
                shown = self._iterate_shown(request.session_id, request.iteration, reply.sender)
                key = (request.session_id, request.iteration, request.survivors, shown)
                self.signatures.setdefault(key, {})[reply.sender] = reply
        self.pool.extend(self.game.to_server(replies))

    @precondition(lambda self: self.pool)
    @rule(data=st.data(), count=st.integers(1, 8))
    def deliver(self, data: st.DataObject, count: int) -> None:
        # Mostly in any order; now and then a duplicate or a message of an earlier round.
        for _ in range(min(count, len(self.pool))):
            choice = data.draw(st.integers(0, 19))
            if choice == 0:
                self._deliver(data.draw(st.sampled_from(self.replayable)))
            elif choice == 1:
                self.pool.append(data.draw(st.sampled_from(self.pool)))
            else:
                self._deliver(self.pool.pop(data.draw(st.integers(0, len(self.pool) - 1))))

    @rule()
    def deadline(self) -> None:
        self.pool.extend(self.game.close())

    @precondition(lambda self: self.pool)
    @rule()
    def a_phase_delivered_honestly(self) -> None:
        # Everything pending, in order, then the deadline: lets sessions reach later sums.
        while self.pool:
            self._deliver(self.pool.pop(0))
        self.deadline()

    # -- tampering --------------------------------------------------------------------------

    @precondition(lambda self: any(isinstance(m, KeyDirectory) for m in self.pool))
    @rule(data=st.data())
    def substitute_directory_entries(self, data: st.DataObject) -> None:
        pending = [m for m in self.pool if isinstance(m, KeyDirectory)]
        directory = data.draw(st.sampled_from(pending))
        assert isinstance(directory, KeyDirectory)
        self.pool.remove(directory)
        entries = directory.keys()
        others = sorted(set(entries) - {directory.recipient})
        replaced = data.draw(st.sets(st.sampled_from(others), min_size=1))
        fake = dict(entries)
        for v in replaced:
            c, s = KeyPair.generate(self.source), KeyPair.generate(self.source)
            self.game.view.substituted_keys += [c.private, s.private]
            signature = entries[v].signature
            if v in self.game.colluding:  # a colluder signs whatever the server wants
                signed = advertisement_message(self.game.config.digest, v, c.public, s.public)
                signature = self.game.identities[v].sign(signed)
            fake[v] = ClientKeys(c.public, s.public, signature)
        self._deliver(
            KeyDirectory.build(directory.session_id, directory.recipient, fake, signed=True)
        )

    @precondition(lambda self: any(isinstance(m, ConsistencyRequest) for m in self.pool))
    @rule(data=st.data())
    def show_a_different_survivor_set(self, data: st.DataObject) -> None:
        requests = [m for m in self.pool if isinstance(m, ConsistencyRequest)]
        request = data.draw(st.sampled_from(requests))
        assert isinstance(request, ConsistencyRequest)
        self.pool.remove(request)
        others = [v for v in request.survivors if v != request.recipient]
        removed = data.draw(st.sets(st.sampled_from(others), max_size=2)) if others else set()
        view = tuple(v for v in request.survivors if v not in removed)
        self._deliver(dataclasses.replace(request, survivors=view))

    def _senders(self, sid: bytes, recipient: int, iteration: int = 1) -> tuple[int, ...]:
        """The neighbours the recipient masked with in that sum, as the server told it."""
        for m in self.game.view.sent:
            if m.session_id != sid or m.peer != recipient:
                continue
            if isinstance(m, ForwardedShares) and iteration == 1:
                return tuple(v for v, _ in m.ciphertexts)
            if isinstance(m, IterationRequest) and m.iteration == iteration:
                return m.members
        return ()

    def _iterate_shown(self, sid: bytes, iteration: int, recipient: int) -> bytes:
        """The digest of the first iterate the server sent the recipient for that sum."""
        for m in self.game.view.sent:
            if m.session_id != sid or m.peer != recipient:
                continue
            if isinstance(m, ForwardedShares) and iteration == 1:
                return iterate_digest(m.iterate)
            if isinstance(m, IterationRequest) and m.iteration == iteration:
                return iterate_digest(m.iterate)
        return iterate_digest(b"")

    # -- sessions ---------------------------------------------------------------------------

    @precondition(lambda self: self.game.server.state is ServerState.AWAITING_ITERATION)
    @rule(data=st.data())
    def begin_the_next_sum(self, data: st.DataObject) -> None:
        # The next sum's requests, possibly tampered with: some members shown another iterate,
        # some told that a client out of the session is their neighbour again.
        try:
            requests = self.game.server.begin_iteration(b"iterate A")
        except ProtocolError:
            return
        everyone = sorted(self.game.clients)
        for request in requests:
            assert isinstance(request, IterationRequest)
            action = data.draw(st.sampled_from(["honest", "honest", "iterate", "readmit"]))
            shown = request
            if action == "iterate":
                shown = dataclasses.replace(request, iterate=b"iterate B")
            elif action == "readmit":
                others = [v for v in everyone if v != request.recipient]
                extra = data.draw(st.sampled_from(others))
                members = tuple(sorted({*request.members, extra}))
                shown = dataclasses.replace(request, members=members)
            self.pool.append(shown)

    @precondition(lambda self: self.game.server.iteration >= 2)
    @rule(data=st.data())
    def replay_a_message_of_an_earlier_sum(self, data: st.DataObject) -> None:
        current = self.game.server.iteration
        earlier = [
            m
            for m in self.game.view.sent
            if getattr(m, "iteration", 1) < current and not isinstance(m, KeyDirectory)
        ]
        if earlier:
            self._deliver(data.draw(st.sampled_from(earlier)))

    @precondition(lambda self: any(isinstance(m, EncryptedShares) for m in self.game.view.received))
    @rule(data=st.data())
    def forge_forwarded_shares(self, data: st.DataObject) -> None:
        # Shares "from" every neighbour, in whatever session the client is in (for example the
        # one a substituted directory put it in): garbage ciphertexts, which clients survive.
        sent = [m for m in self.game.view.received if isinstance(m, EncryptedShares)]
        shares = data.draw(st.sampled_from(sent))
        assert isinstance(shares, EncryptedShares)
        neighbors = tuple(v for v, _ in shares.ciphertexts)
        self._deliver(
            ForwardedShares(
                shares.session_id, shares.sender, tuple((v, bytes(160)) for v in neighbors)
            )
        )

    @precondition(lambda self: any(isinstance(m, MaskedInput) for m in self.game.view.received))
    @rule(data=st.data())
    def forge_an_unmask_request(self, data: st.DataObject) -> None:
        masked = [m for m in self.game.view.received if isinstance(m, MaskedInput)]
        chosen_input = data.draw(st.sampled_from(masked))
        sid, recipient, r = chosen_input.session_id, chosen_input.sender, chosen_input.iteration
        senders = self._senders(sid, recipient, r)
        views = sorted(key for key in self.signatures if key[:2] == (sid, r))
        signatures: dict[int, bytes] = {}
        if views and data.draw(st.booleans()):
            # From a survivor set some clients approved (colluders approve it too) — the tags
            # addressed to the recipient, or now and then ones addressed to someone else ...
            key = data.draw(st.sampled_from(views))
            view, shown = key[2], key[3]
            addressee = recipient
            if data.draw(st.integers(0, 3)) == 0:
                addressee = data.draw(st.sampled_from(view))
            for u, reply in self.signatures[key].items():
                tags = dict(reply.approvals)
                if reply.signature or addressee in tags:
                    signatures[u] = reply.signature or tags[addressee]
            signed = consistency_message(sid, view, iteration=r, iterate=shown)
            for u in self.game.colluding:
                approval_keys = self.colluder_keys[u]
                if not self.game.config.mac_approvals:
                    signatures[u] = self.game.identities[u].sign(signed)
                elif recipient in approval_keys:
                    signatures[u] = approval_tag(
                        approval_keys[recipient], signed, approver=u, recipient=recipient
                    )
            if data.draw(st.integers(0, 3)) == 0:  # ... padded with approvals nobody gave
                width = 32 if self.game.config.mac_approvals else 64
                for u in view:
                    if u not in signatures:
                        signatures[u] = self.source.random_bytes(width)
            members = set(data.draw(st.sampled_from([view, view[1:], view[:-1]])))
        else:  # ... or any split of the recipient's neighbours
            members = set(data.draw(st.sets(st.sampled_from(senders)))) if senders else set()
        survivors = tuple(v for v in senders if v in members)
        dropped = tuple(v for v in senders if v not in members)
        if data.draw(st.booleans()) and survivors:  # and ask for both shares of one
            dropped = (*dropped, survivors[0])
        picked = data.draw(st.sets(st.sampled_from(sorted(signatures)))) if signatures else set()
        # Now and then the request names another sum of the session: shares of one sum with
        # one view, of another sum with the opposite view (both shares across sums).
        asked = r
        if self.game.config.iterations > 1 and data.draw(st.integers(0, 3)) == 0:
            asked = data.draw(st.integers(1, self.game.config.iterations))
        request = UnmaskRequest(
            sid,
            recipient,
            survivors,
            dropped,
            tuple(sorted((v, signatures[v]) for v in picked)),
            asked,
        )
        self._deliver(request)

    # -- the invariant: an actual reconstruction attempt ------------------------------------

    @invariant()
    def no_honest_input_can_be_reconstructed(self) -> None:
        exposed = honest_inputs_exposed(self.game.view, self.game.inputs, self.game.honest)
        assert exposed == [], f"the server recovered the inputs of {exposed}"

    def teardown(self) -> None:
        for _ in range(6):
            while self.pool:
                self._deliver(self.pool.pop(0))
            self.deadline()
        server = self.game.server
        event(f"server {server.state.name.lower()}")
        event(f"sums begun: {server.iteration} of {self.game.config.iterations}")
        answered = any(type(m).__name__ == "UnmaskResponse" for m in self.game.view.received)
        event(f"{'some' if answered else 'no'} client answered an unmask request")
        self.no_honest_input_can_be_reconstructed()


TestMaliciousServer = MaliciousServerMachine.TestCase
TestMaliciousServer.settings = settings(
    max_examples=40,
    stateful_step_count=25,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)


@pytest.mark.slow
def test_malicious_server_machine_deep() -> None:
    """The same machine, many more examples (slow tier)."""
    run_state_machine_as_test(
        MaliciousServerMachine,
        settings=settings(
            max_examples=600,
            stateful_step_count=40,
            deadline=None,
            suppress_health_check=list(HealthCheck),
        ),
    )


class SemiHonestServerMachine(MaliciousServerMachine):
    """The same adversary against the semi-honest mode, which does not defend against it."""

    threat_model = "semi-honest"


@pytest.mark.slow
def test_the_same_adversary_breaks_the_semi_honest_mode() -> None:
    # The invariant is a real attack: without signatures and the consistency check, the
    # machine finds a reconstruction (so it can fail the malicious-mode test too).
    with pytest.raises(AssertionError, match="the server recovered the inputs"):
        run_state_machine_as_test(
            SemiHonestServerMachine,
            settings=settings(
                max_examples=200,
                stateful_step_count=25,
                deadline=None,
                database=None,
                phases=[Phase.generate],  # the first attack found is enough: no shrinking
                suppress_health_check=list(HealthCheck),
                # A search that must succeed: derandomised, so CI runs the very search that
                # was seen to find the attack (a random one missed it within 200 examples once).
                derandomize=True,
            ),
        )
