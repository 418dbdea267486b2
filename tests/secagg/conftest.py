"""Shared fixtures for the secagg tests."""

from __future__ import annotations

import json
from collections.abc import Callable
from importlib import resources
from typing import Any

import numpy as np
import pytest

from secagg import Client, KeystreamRandom, SecAggConfig, Server, generate_identities

NONCE = b"secagg-dp tests!"  # 16 bytes: a fixed round nonce for hand-driven rounds


def make_round(
    inputs: dict[int, Any],
    *,
    threshold: int,
    neighbors: int | None = None,
    modulus_bits: int = 32,
    threat_model: str = "malicious",
    seed: int = 0,
    **config: Any,
) -> tuple[SecAggConfig, dict[int, Client], Server]:
    """Config, clients (with identities in the malicious mode) and server for a hand-driven
    round over ``inputs`` (client id → vector)."""
    dimension = len(next(iter(inputs.values())))
    cfg = SecAggConfig(
        dimension=dimension,
        threshold=threshold,
        neighbors=neighbors,
        modulus_bits=modulus_bits,
        round_nonce=NONCE,
        threat_model=threat_model,
        **config,
    )
    keys, store = generate_identities(inputs, seed) if cfg.malicious else ({}, None)
    root = KeystreamRandom(seed, label=b"tests")
    clients = {
        u: Client(
            cfg,
            u,
            input_vector=np.asarray(vector),
            random_source=root.spawn(b"%d" % u),
            identity=keys.get(u),
            trust_store=store,
        )
        for u, vector in inputs.items()
    }
    server = Server(cfg, inputs, trust_store=store, random_source=root.spawn(b"server"))
    return cfg, clients, server


@pytest.fixture(scope="session")
def known_answers() -> dict[str, Any]:
    """The committed known-answer vectors (package data: secagg/known_answers.json)."""
    with resources.files("secagg").joinpath("known_answers.json").open() as handle:
        data: dict[str, Any] = json.load(handle)
    return data


def expected_outcome(
    graph_neighbors: dict[int, set[int]],
    threshold: int,
    advertised: set[int],
    shared: set[int],
    masked: set[int],
    *later: set[int],
    colluding: int | None = None,
) -> tuple[bool, set[int]]:
    """Specification of a round's outcome, independent of the server's code.

    Given who completed each phase (before any peeling) — advertised, shared, masked, then
    (malicious mode: ``colluding`` is c) signed, then responded — return whether the round must
    complete and, if so, the set of clients whose inputs the total contains. The malicious
    mode's quorum is max(t, ⌊(n + c)/2⌋ + 1) over the n clients that advertised.
    """
    quorum = None
    if colluding is None:
        (responded,) = later
    else:
        signed, responded = later
        quorum = max(threshold, (len(advertised) + colluding) // 2 + 1)
        if len(advertised) < quorum:
            return False, set()
    t = threshold
    if len(advertised) < t + 1:
        return False, set()
    # Clients stay only if ≥ t of their neighbours stay (greatest such subset).
    alive = set(shared)
    while True:
        weak = {u for u in alive if len(graph_neighbors[u] & alive) < t}
        if not weak:
            break
        alive -= weak
    if len(alive) < t + 1:
        return False, set()
    survivors = masked & alive
    if not survivors:
        return False, set()
    for u in alive:
        alive_neighbors = graph_neighbors[u] & survivors
        if (u in survivors or alive_neighbors) and len(alive_neighbors) < t:
            return False, set()
    if quorum is not None:
        if len(survivors) < quorum or len(signed & survivors) < quorum:
            return False, set()
        # Only clients that signed get an unmask request.
        responded = responded & signed
    answered = responded & survivors
    for u in alive:
        if u in survivors:
            # A survivor's self-mask seed: revealed by itself, or rebuilt from t shares.
            if u not in answered and len(graph_neighbors[u] & answered) < t:
                return False, set()
        else:
            # A dropped client's masks: each surviving neighbour reveals its pairwise key; one
            # that did not answer needs the dropped client's recovery key from t shares.
            silent = (graph_neighbors[u] & survivors) - answered
            if silent and len(graph_neighbors[u] & answered) < t:
                return False, set()
    return True, survivors


@pytest.fixture(scope="session")
def outcome_spec() -> Callable[..., tuple[bool, set[int]]]:
    """The specification :func:`expected_outcome` (tests import it through this fixture)."""
    return expected_outcome


@pytest.fixture(scope="session")
def round_factory() -> Callable[..., tuple[SecAggConfig, dict[int, Client], Server]]:
    """:func:`make_round` (tests import it through this fixture)."""
    return make_round
