"""Shared fixtures for the secagg tests."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

DATA = Path(__file__).parent / "data"


@pytest.fixture(scope="session")
def known_answers() -> dict[str, Any]:
    """The committed known-answer vectors (tests/secagg/data/known_answers.json)."""
    with open(DATA / "known_answers.json") as handle:
        data: dict[str, Any] = json.load(handle)
    return data


def expected_outcome(
    graph_neighbors: dict[int, set[int]],
    threshold: int,
    advertised: set[int],
    shared: set[int],
    masked: set[int],
    responded: set[int],
) -> tuple[bool, set[int]]:
    """Specification of a round's outcome, independent of the server's code.

    Given who completed each phase (before any peeling), return whether the round must
    complete and, if so, the set of clients whose inputs the total contains.
    """
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
    answered = responded & survivors
    for u in alive:
        needed = u in survivors or bool(graph_neighbors[u] & survivors)
        if needed and len(graph_neighbors[u] & answered) < t:
            return False, set()
    return True, survivors


@pytest.fixture(scope="session")
def outcome_spec() -> Callable[..., tuple[bool, set[int]]]:
    """The specification :func:`expected_outcome` (tests import it through this fixture)."""
    return expected_outcome
