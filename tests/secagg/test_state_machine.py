"""A Hypothesis state machine over the real client and server: any delivery order, duplicates,
replays, crashes at any point, premature deadlines and a hostile unmask request."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from hypothesis import HealthCheck, event, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)

from secagg import (
    Client,
    KeystreamRandom,
    LocalProtocolError,
    ProtocolError,
    RemoteProtocolError,
    SecAggConfig,
    Server,
    ServerState,
    TooFewSurvivorsError,
    UnmaskRequest,
    generate_identities,
)
from secagg.messages import Message

TERMINAL = (ServerState.COMPLETED, ServerState.ABORTED)


class SecureSumMachine(RuleBasedStateMachine):
    """In-flight messages sit in one pool; rules pick what happens next."""

    @initialize(
        n=st.integers(3, 7),
        harary=st.booleans(),
        bits=st.sampled_from([5, 32, 64]),
        t_fraction=st.floats(0.0, 1.0),
        seed=st.integers(0, 2**32),
        malicious=st.booleans(),
    )
    def setup(
        self, n: int, harary: bool, bits: int, t_fraction: float, seed: int, malicious: bool
    ) -> None:
        degree = 2 if harary and n >= 4 else None
        max_t = degree if degree is not None else n - 1
        threshold = 1 + int(t_fraction * (max_t - 1))
        self.config = SecAggConfig(
            dimension=3,
            threshold=threshold,
            modulus_bits=bits,
            neighbors=degree,
            round_nonce=b"state machine 16",
            threat_model="malicious" if malicious else "semi-honest",
        )
        keys, store = generate_identities(range(1, n + 1), seed)
        rng = np.random.default_rng(seed)
        self.inputs = {
            u: rng.integers(0, 2**bits, size=3, dtype=np.uint64) for u in range(1, n + 1)
        }
        root = KeystreamRandom(seed)
        self.clients = {
            u: Client(
                self.config,
                u,
                input_vector=self.inputs[u],
                random_source=root.spawn(b"%d" % u),
                identity=keys[u],
                trust_store=store,
            )
            for u in self.inputs
        }
        self.server = Server(self.config, self.inputs, trust_store=store)
        self.pool: list[Message] = [m for c in self.clients.values() for m in c.start()]
        self.history: list[Message] = []
        self.crashed: set[int] = set()

    def _to_server(self, message: Message) -> bool:
        return type(message).__name__ in {
            "AdvertiseKeys",
            "EncryptedShares",
            "MaskedInput",
            "ConsistencySignature",
            "UnmaskResponse",
        }

    def _deliver(self, message: Message) -> None:
        self.history.append(message)
        if self._to_server(message):
            if message.peer in self.crashed or self.server.state in TERMINAL:
                return
            try:
                self.pool.extend(self.server.receive(message, peer_id=message.peer))
            except RemoteProtocolError:
                assert self.server.state is not ServerState.ABORTED  # peer faults never abort
            except TooFewSurvivorsError:
                assert self.server.state is ServerState.ABORTED
            return
        client = self.clients[message.peer]
        if message.peer in self.crashed:
            return
        try:
            self.pool.extend(client.receive(message))
        except ProtocolError:
            self.crashed.add(message.peer)  # an aborted client is a dropout from here on

    @precondition(lambda self: self.pool)
    @rule(data=st.data(), count=st.integers(1, 8))
    def deliver(self, data: st.DataObject, count: int) -> None:
        for _ in range(min(count, len(self.pool))):
            index = data.draw(st.integers(0, len(self.pool) - 1))
            self._deliver(self.pool.pop(index))

    @precondition(lambda self: self.pool)
    @rule(data=st.data())
    def duplicate(self, data: st.DataObject) -> None:
        self.pool.append(data.draw(st.sampled_from(self.pool)))

    @precondition(lambda self: self.history)
    @rule(data=st.data())
    def replay(self, data: st.DataObject) -> None:
        self.pool.append(data.draw(st.sampled_from(self.history)))

    @precondition(lambda self: len(self.crashed) < len(self.clients) // 3)
    @rule(data=st.data())
    def crash(self, data: st.DataObject) -> None:
        self.crashed.add(data.draw(st.sampled_from(sorted(self.clients))))

    @precondition(lambda self: self.server.state not in TERMINAL)
    @rule(premature=st.integers(0, 3))
    def deadline(self, premature: int = 0) -> None:
        # Mostly when nothing is in flight to the server; sometimes while messages still are.
        if premature and any(self._to_server(m) for m in self.pool):
            return
        try:
            self.pool.extend(self.server.close_phase())
        except TooFewSurvivorsError:
            assert self.server.state is ServerState.ABORTED

    @precondition(lambda self: any(isinstance(m, UnmaskRequest) and m.survivors for m in self.pool))
    @rule(data=st.data())
    def hostile_unmask_request(self, data: st.DataObject) -> None:
        # A malicious server asks one client for both shares of a surviving neighbour.
        requests = [m for m in self.pool if isinstance(m, UnmaskRequest) and m.survivors]
        request = data.draw(st.sampled_from(requests))
        assert isinstance(request, UnmaskRequest)
        victim = request.survivors[0]
        hostile = dataclasses.replace(request, dropped=(*request.dropped, victim))
        client = self.clients[request.peer]
        before = client.state
        try:
            client.receive(hostile)
        except ProtocolError:
            pass
        else:
            raise AssertionError(f"client in {before} answered a request for both shares")
        self.crashed.add(request.peer)

    @invariant()
    def server_never_holds_both_secrets(self) -> None:
        t = self.config.threshold
        for seeds, keys in self.server.held_share_counts().values():
            assert not (seeds >= t and keys >= t)
        assert not self.server.reconstructed_seed_owners & self.server.reconstructed_key_owners

    @invariant()
    def completed_sum_is_exactly_the_survivors(self) -> None:
        if self.server.state is ServerState.COMPLETED:
            result = self.server.result
            modulus = 2**self.config.modulus_bits
            totals = [
                sum(int(self.inputs[u][j]) for u in result.survivors) % modulus for j in range(3)
            ]
            assert result.total.tolist() == totals
            assert set(result.survivors) | set(result.dropped) == set(self.clients)

    def teardown(self) -> None:
        # Let the network settle: deliver everything, then pass every deadline.
        for _ in range(10):
            while self.pool:
                self._deliver(self.pool.pop(0))
            if self.server.state in TERMINAL:
                break
            self.deadline()
        assert self.server.state in TERMINAL
        event(f"round {self.server.state.name.lower()}")
        self.completed_sum_is_exactly_the_survivors()
        if self.server.state is ServerState.ABORTED:
            assert self.server.abort_reason
            try:
                self.server.close_phase()
            except LocalProtocolError:
                pass
            else:
                raise AssertionError("an aborted server accepted a call")


TestSecureSumMachine = SecureSumMachine.TestCase
TestSecureSumMachine.settings = settings(
    max_examples=100,
    stateful_step_count=30,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)


@pytest.mark.slow
def test_state_machine_deep() -> None:
    """The same machine, fifteen times the examples (slow tier)."""
    run_state_machine_as_test(
        SecureSumMachine,
        settings=settings(
            max_examples=1500,
            stateful_step_count=50,
            deadline=None,
            suppress_health_check=list(HealthCheck),
        ),
    )
