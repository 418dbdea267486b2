"""Client.snapshot and Client.restore: every field survives; bad bytes raise ValueError."""

from __future__ import annotations

import contextlib
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from secagg import Client, SecAggConfig, Server
from secagg.messages import decode_message, encode_message


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


def _run_with_snapshots() -> list[int]:
    """A 4-client round, each client replaced by its restored snapshot after every call."""
    config = SecAggConfig(dimension=5, threshold=3)
    inputs = [np.arange(5, dtype=np.uint32) * (i + 1) for i in range(4)]
    clients = {i + 1: Client(config, i + 1, input_vector=inputs[i]) for i in range(4)}
    server = Server(config, list(clients))
    outbox = [m for c in clients.values() for m in c.start()]
    while outbox:
        replies = [r for m in outbox for r in server.receive(decode_message(encode_message(m)))]
        outbox = []
        for reply in replies:
            client = clients[reply.peer]
            outbox += client.receive(reply)
            restored = Client.restore(client.snapshot())
            assert _state(restored) == _state(client)
            clients[reply.peer] = restored
    return [int(v) for v in server.result.total]


def test_snapshot_round_trips_every_field_and_the_round_still_sums() -> None:
    total = _run_with_snapshots()
    assert total == [int(v) for v in np.arange(5) * (1 + 2 + 3 + 4)]


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=200))
def test_restore_of_arbitrary_bytes_raises_only_value_error(data: bytes) -> None:
    with contextlib.suppress(ValueError):
        Client.restore(data)


@settings(max_examples=200, deadline=None)
@given(st.data())
def test_restore_of_a_mutated_snapshot_raises_only_value_error(data: st.DataObject) -> None:
    client = Client(SecAggConfig(dimension=3, threshold=2), 7, input_vector=[1, 2, 3])
    client.start()
    blob = bytearray(client.snapshot())
    index = data.draw(st.integers(0, len(blob) - 1))
    blob[index] = data.draw(st.integers(0, 255))
    cut = data.draw(st.integers(0, len(blob)))
    with contextlib.suppress(ValueError):
        Client.restore(bytes(blob[:cut]))


def test_restore_rejects_fields_of_the_wrong_length() -> None:
    client = Client(SecAggConfig(dimension=3, threshold=2), 7, input_vector=[1, 2, 3])
    client.start()
    client._self_mask_seed = b"x"  # a 1-byte "seed" must not restore silently
    with pytest.raises(ValueError, match="bad field length"):
        Client.restore(client.snapshot())
    client._self_mask_seed = b""
    client._held_seed_shares = {3: b"short"}
    with pytest.raises(ValueError, match="bad map entry"):
        Client.restore(client.snapshot())
