"""Client inputs computed on demand, read exactly once per secure sum.

A caller with n clients of dimension d need not hold an (n, d) array: a :class:`LazyInputs`
builds client i's vector when the runner asks for it — when client i masks it — so memory stays
O(d) and each client's vector (its quantisation, its noise) is computed exactly once per sum.
The runner does not pre-read a lazy source to validate it; each vector is checked as it is
read, and a bad one raises with the client's index.
"""

from __future__ import annotations

import abc
from collections.abc import Iterator, Sequence
from typing import overload

import numpy as np
from numpy.typing import NDArray

__all__ = ["LazyInputs"]


class LazyInputs(Sequence[NDArray[np.integer]], abc.ABC):
    """n integer vectors of one dimension, each built by :meth:`row` when it is read.

    Subclasses set ``num_clients`` and ``dimension`` and implement :meth:`row`; indexing,
    slicing and iteration come from here. :func:`secagg.secure_sum` and
    :meth:`secagg.Session.sum` read each member's row once, when that client masks it.

    Examples
    --------
    >>> class Ramp(LazyInputs):
    ...     def row(self, index):
    ...         return np.full(self.dimension, index, dtype=np.int64)
    >>> inputs = Ramp(num_clients=3, dimension=2)
    >>> len(inputs), inputs[-1].tolist(), [v.tolist() for v in inputs[:2]]
    (3, [2, 2], [[0, 0], [1, 1]])
    """

    def __init__(self, num_clients: int, dimension: int) -> None:
        if isinstance(num_clients, bool) or not isinstance(num_clients, int) or num_clients < 0:
            raise ValueError(f"num_clients must be a non-negative integer; got {num_clients!r}")
        if isinstance(dimension, bool) or not isinstance(dimension, int) or dimension < 1:
            raise ValueError(f"dimension must be a positive integer; got {dimension!r}")
        self.num_clients = num_clients
        self.dimension = dimension

    @abc.abstractmethod
    def row(self, index: int) -> NDArray[np.integer]:
        """Client ``index``'s vector (0 ≤ index < n), of length :attr:`dimension`."""

    def __len__(self) -> int:
        return self.num_clients

    @overload
    def __getitem__(self, index: int) -> NDArray[np.integer]: ...
    @overload
    def __getitem__(self, index: slice) -> list[NDArray[np.integer]]: ...
    def __getitem__(self, index: int | slice) -> NDArray[np.integer] | list[NDArray[np.integer]]:
        if isinstance(index, slice):
            return [self.row(i) for i in range(*index.indices(self.num_clients))]
        return self.row(range(self.num_clients)[index])

    def __iter__(self) -> Iterator[NDArray[np.integer]]:
        return (self.row(i) for i in range(self.num_clients))
