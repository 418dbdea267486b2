"""Communication graphs: the complete graph (SecAgg) and a random Harary graph (SecAgg+).

SecAgg+ (Bell et al. 2020, §3) masks each client only with its k neighbours in a random
k-regular graph. Here the clients are placed on a ring in a uniformly random order and each is
joined to the k/2 clients on either side (the Harary graph H(n, k), k even). The order is derived
from the session id — a hash of every advertised key — so it is public, the same at every party,
and fixed only after all keys are committed. Sorting the clients by independent 64-bit keystream
words gives a uniform order up to ties of probability < n²/2^65, broken by id.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

import numpy as np

from secagg.randomness import KeystreamRandom

__all__ = ["CommunicationGraph", "build_graph"]

_GRAPH_LABEL = b"secagg-dp/v1/harary-order"


@dataclass(frozen=True, slots=True)
class CommunicationGraph:
    """An undirected graph over client ids, given by each client's neighbour tuple.

    Attributes
    ----------
    ids
        The clients, sorted.
    degree
        k for a Harary graph, or ``None`` for the complete graph.
    ring_order
        The clients in ring order (Harary graph) or sorted (complete graph).
    """

    ids: tuple[int, ...]
    degree: int | None
    ring_order: tuple[int, ...]
    _position: dict[int, int] = field(repr=False, compare=False)

    @property
    def is_complete(self) -> bool:
        """Whether every client neighbours every other."""
        return self.degree is None

    def neighbors(self, client_id: int) -> tuple[int, ...]:
        """The sorted neighbours of ``client_id`` (never the client itself).

        Raises
        ------
        KeyError
            If ``client_id`` is not in the graph.
        """
        position = self._position[client_id]
        if self.degree is None:
            return self.ids[:position] + self.ids[position + 1 :]
        n = len(self.ring_order)
        half = self.degree // 2
        found = {self.ring_order[(position + step) % n] for step in range(-half, half + 1)}
        found.discard(client_id)
        return tuple(sorted(found))

    def __contains__(self, client_id: object) -> bool:
        return client_id in self._position


def build_graph(ids: Iterable[int], degree: int | None, session_id: bytes) -> CommunicationGraph:
    """The communication graph of one session.

    Parameters
    ----------
    ids
        The clients that advertised keys (distinct).
    degree
        ``None`` for the complete graph; an even k ≥ 2 for the Harary graph. When k ≥ n − 1
        the Harary graph would be complete, and the complete graph is returned.
    session_id
        The session id; it seeds the ring order.

    Examples
    --------
    >>> g = build_graph([1, 2, 3, 4, 5, 6], 2, bytes(32))
    >>> all(len(g.neighbors(u)) == 2 for u in g.ids)
    True
    >>> all(u in g.neighbors(v) for v in g.ids for u in g.neighbors(v))  # symmetric
    True
    >>> build_graph([1, 2, 3], 4, bytes(32)).is_complete
    True
    """
    sorted_ids = tuple(sorted(int(u) for u in ids))
    if len(set(sorted_ids)) != len(sorted_ids):
        raise ValueError("client ids must be distinct")
    n = len(sorted_ids)
    if degree is not None:
        if isinstance(degree, bool) or not isinstance(degree, int):
            raise TypeError("degree must be an int or None")
        if degree < 2 or degree % 2:
            raise ValueError(f"the Harary degree k must be even and ≥ 2; got {degree}")
        if degree >= n - 1:
            degree = None
    if degree is None:
        order = sorted_ids
    else:
        keys = KeystreamRandom(session_id, label=_GRAPH_LABEL).uint64(n)
        permutation = np.lexsort((np.array(sorted_ids, dtype=np.int64), keys))
        order = tuple(sorted_ids[i] for i in permutation.tolist())
    position = {u: i for i, u in enumerate(sorted_ids if degree is None else order)}
    return CommunicationGraph(sorted_ids, degree, order, position)
