"""Client.snapshot and Client.restore: every field survives; bad bytes raise ValueError."""

from __future__ import annotations

import contextlib
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from secagg import Client, SecAggConfig, Server, generate_identities
from secagg.messages import decode_message, encode_message

SEMI_HONEST = {"round_nonce": bytes(16), "threat_model": "semi-honest"}


def _state(client: Client) -> dict[str, Any]:
    """Every attribute except the random source, with arrays made comparable."""
    out: dict[str, Any] = {}
    for name, value in vars(client).items():
        if name == "_random":
            continue
        if isinstance(value, np.ndarray):
            out[name] = value.tolist()
        else:
            out[name] = value.private if hasattr(value, "private") else value
    return out


def _run_with_snapshots(threat_model: str, iterations: int = 1) -> list[list[int]]:
    """A 4-client round (or session of ``iterations`` sums), each client replaced by its
    restored snapshot after every call; the totals of every sum."""
    config = SecAggConfig(
        dimension=5,
        threshold=3,
        round_nonce=bytes(16),
        threat_model=threat_model,
        iterations=iterations,
    )
    keys, store = generate_identities(range(1, 5), seed=0)
    parties = {"trust_store": store} if config.malicious else {}
    inputs = [np.arange(5, dtype=np.uint32) * (i + 1) for i in range(4)]
    clients = {
        u: Client(
            config,
            u,
            input_vector=inputs[u - 1],
            identity=keys[u] if config.malicious else None,
            trust_store=parties.get("trust_store"),
        )
        for u in range(1, 5)
    }
    server = Server(config, list(clients), trust_store=parties.get("trust_store"))
    outbox = [m for c in clients.values() for m in c.start()]
    totals = []
    for r in range(1, iterations + 1):
        if r > 1:  # the next sum: every client's input doubles, then the server's request
            for u, client in clients.items():
                client.set_input(inputs[u - 1] * 2 ** (r - 1))
            outbox = server.begin_iteration(b"sum %d" % r)
            outbox = [m for reply in outbox for m in clients[reply.peer].receive(reply)]
        while outbox:
            replies = [
                reply
                for m in outbox
                for reply in server.receive(decode_message(encode_message(m)), peer_id=m.peer)
            ]
            outbox = []
            for reply in replies:
                client = clients[reply.peer]
                outbox += client.receive(reply)
                identity = keys[reply.peer] if config.malicious else None
                restored = Client.restore(
                    client.snapshot(), identity=identity, trust_store=parties.get("trust_store")
                )
                assert _state(restored) == _state(client)
                clients[reply.peer] = restored
        totals.append([int(v) for v in server.result.total])
    return totals


@pytest.mark.parametrize("iterations", [1, 3])
@pytest.mark.parametrize("threat_model", ["semi-honest", "malicious"])
def test_snapshot_round_trips_every_field_and_the_round_still_sums(
    threat_model: str, iterations: int
) -> None:
    # A session of 3 sums carries the pair secrets and, in the malicious mode, the directory,
    # the approval keys and the checked approvers through every snapshot.
    totals = _run_with_snapshots(threat_model, iterations)
    base = np.arange(5) * (1 + 2 + 3 + 4)
    assert totals == [[int(v) * 2**r for v in base] for r in range(iterations)]


def test_a_restored_client_resends_identical_bytes() -> None:
    # No key or nonce reuse: the per-round secrets live in the snapshot, so handling the same
    # directory twice (a retry after a restore) re-sends the identical ciphertexts.
    config = SecAggConfig(dimension=3, threshold=2, **SEMI_HONEST)  # type: ignore[arg-type]
    clients = {u: Client(config, u, input_vector=[u, 0, 0]) for u in (1, 2, 3)}
    server = Server(config, list(clients))
    directories = [r for c in clients.values() for m in c.start() for r in server.receive(m)]
    saved = clients[1].snapshot()
    first = clients[1].receive(directories[0])
    again = Client.restore(saved).receive(directories[0])
    assert encode_message(first[0]) == encode_message(again[0])


def test_restoring_a_malicious_snapshot_needs_the_identity() -> None:
    keys, store = generate_identities([1, 2], seed=0)
    config = SecAggConfig(dimension=2, threshold=1, round_nonce=bytes(16))
    client = Client(config, 1, identity=keys[1], trust_store=store)
    client.start()
    with pytest.raises(TypeError, match="malicious mode needs identity"):
        Client.restore(client.snapshot())
    assert Client.restore(client.snapshot(), identity=keys[1], trust_store=store).client_id == 1


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=200))
def test_restore_of_arbitrary_bytes_raises_only_value_error(data: bytes) -> None:
    with contextlib.suppress(ValueError):
        Client.restore(data)


@settings(max_examples=200, deadline=None)
@given(st.data())
def test_restore_of_a_mutated_snapshot_raises_only_value_error(data: st.DataObject) -> None:
    config = SecAggConfig(dimension=3, threshold=2, **SEMI_HONEST)  # type: ignore[arg-type]
    client = Client(config, 7, input_vector=[1, 2, 3])
    client.start()
    blob = bytearray(client.snapshot())
    index = data.draw(st.integers(0, len(blob) - 1))
    blob[index] = data.draw(st.integers(0, 255))
    cut = data.draw(st.integers(0, len(blob)))
    with contextlib.suppress(ValueError):
        Client.restore(bytes(blob[:cut]))


def test_restore_rejects_fields_of_the_wrong_length() -> None:
    config = SecAggConfig(dimension=3, threshold=2, **SEMI_HONEST)  # type: ignore[arg-type]
    client = Client(config, 7, input_vector=[1, 2, 3])
    client.start()
    client._self_mask_seeds = [b"x"]  # a 1-byte "seed" must not restore silently
    with pytest.raises(ValueError, match="bad field length"):
        Client.restore(client.snapshot())
    client._self_mask_seeds = []
    client._held_seed_shares = {3: b"short"}
    with pytest.raises(ValueError, match="bad map entry"):
        Client.restore(client.snapshot())
