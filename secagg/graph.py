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
from numpy.typing import NDArray

from secagg.randomness import KeystreamRandom

__all__ = ["CommunicationGraph", "build_graph"]

_GRAPH_LABEL = b"secagg-dp/v1/harary-order"


@dataclass(frozen=True, slots=True, eq=False)
class CommunicationGraph:
    """An undirected graph over client ids: complete, or a Harary graph on a permuted ring.

    Attributes
    ----------
    degree
        k for a Harary graph, or ``None`` for the complete graph.

    Examples
    --------
    >>> graph = build_graph(range(1, 9), 4, bytes(32))
    >>> len(graph.neighbors(1)), 1 in graph, 9 in graph
    (4, True, False)
    >>> graph.all_neighbors()[1] == graph.neighbors(1)
    True
    """

    degree: int | None
    _sorted: NDArray[np.int64] = field(repr=False)
    _order: NDArray[np.int64] = field(repr=False)
    _position: NDArray[np.int64] = field(repr=False)

    @property
    def ids(self) -> tuple[int, ...]:
        """The clients, ascending."""
        return tuple(self._sorted.tolist())

    @property
    def ring_order(self) -> tuple[int, ...]:
        """The clients in ring order (Harary graph) or ascending (complete graph)."""
        return tuple(self._order.tolist())

    @property
    def is_complete(self) -> bool:
        """Whether every client neighbours every other."""
        return self.degree is None

    def _index(self, client_id: int) -> int:
        index = int(np.searchsorted(self._sorted, client_id))
        if index >= self._sorted.size or self._sorted[index] != client_id:
            raise KeyError(client_id)
        return index

    def _offsets(self) -> NDArray[np.int64]:
        assert self.degree is not None
        half = self.degree // 2
        return np.concatenate([np.arange(-half, 0), np.arange(1, half + 1)])

    def neighbors(self, client_id: int) -> tuple[int, ...]:
        """The sorted neighbours of ``client_id`` (never the client itself).

        Raises
        ------
        KeyError
            If ``client_id`` is not in the graph.
        """
        index = self._index(client_id)
        if self.degree is None:
            return tuple(np.delete(self._sorted, index).tolist())
        ring = (self._position[index] + self._offsets()) % self._order.size
        return tuple(np.sort(self._order[ring]).tolist())

    def all_neighbors(self) -> dict[int, tuple[int, ...]]:
        """Every client's sorted neighbours, computed in one vectorised step."""
        ids = self._sorted.tolist()
        if self.degree is None:
            return {u: tuple(ids[:i] + ids[i + 1 :]) for i, u in enumerate(ids)}
        ring = (self._position[:, None] + self._offsets()[None, :]) % self._order.size
        table = np.sort(self._order[ring], axis=1).tolist()
        return {u: tuple(row) for u, row in zip(ids, table, strict=True)}

    def __contains__(self, client_id: object) -> bool:
        if not isinstance(client_id, int | np.integer):
            return False
        try:
            self._index(int(client_id))
        except KeyError:
            return False
        return True


def build_graph(
    ids: Iterable[int] | NDArray[np.int64], degree: int | None, session_id: bytes
) -> CommunicationGraph:
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
    given = np.asarray(ids if isinstance(ids, np.ndarray) else list(ids), dtype=np.int64)
    if given.ndim != 1:
        raise ValueError("client ids must be a flat collection of integers")
    # A key directory's ids are already strictly increasing: then skip the O(n log n) unique.
    increasing = given.size > 1 and bool((np.diff(given) > 0).all())
    sorted_ids = given if increasing else np.unique(given)
    n = sorted_ids.size
    if n != given.size:
        raise ValueError("client ids must be distinct")
    if degree is not None:
        if isinstance(degree, bool) or not isinstance(degree, int):
            raise TypeError("degree must be an int or None")
        if degree < 2 or degree % 2:
            raise ValueError(f"the Harary degree k must be even and ≥ 2; got {degree}")
        if degree >= n - 1:
            degree = None
    if degree is None:
        return CommunicationGraph(None, sorted_ids, sorted_ids, np.arange(n))
    keys = KeystreamRandom(session_id, label=_GRAPH_LABEL).uint64(n)
    permutation = np.lexsort((sorted_ids, keys))  # ring slot → index into sorted_ids
    position = np.empty(n, dtype=np.int64)
    position[permutation] = np.arange(n)
    return CommunicationGraph(degree, sorted_ids, sorted_ids[permutation], position)
