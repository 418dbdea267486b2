"""Containers for federated data: one client's splits, and a whole federated dataset.

A :class:`FederatedDataset` holds *training clients* (each with its own training split and its
own held-out test split, for personalised evaluation) and *test clients* that training never sees
(all their examples are in their test split). Both kinds expose ``X_test`` / ``y_test``, so an
evaluation loop is the same over either. The arrays are read-only views; loaders live in
:mod:`protocols.training.datasets`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import NDArray

from secagg.validation import check_int

__all__ = ["ClientData", "FederatedDataset"]


def _readonly(array: NDArray[Any]) -> NDArray[Any]:
    if not array.flags.writeable:
        return array
    view = array.view()
    view.flags.writeable = False
    return view


@dataclass(frozen=True, eq=False)
class ClientData:
    """One client's examples: a training split and a held-out test split (either may be empty).

    The arrays are stored as read-only views. ``transform`` names the per-client input transform
    applied when the dataset was built (``"identity"`` or ``"rot90"``, ``"rot180"``, ...).

    Examples
    --------
    >>> client = ClientData(0, np.zeros((3, 2)), np.array([0, 1, 1]),
    ...                     np.zeros((1, 2)), np.array([1]))
    >>> client.num_train, client.num_test, client.X_train.flags.writeable
    (3, 1, False)
    """

    client_id: int
    X_train: NDArray[np.floating[Any]]
    y_train: NDArray[Any]
    X_test: NDArray[np.floating[Any]]
    y_test: NDArray[Any]
    transform: str = "identity"

    def __post_init__(self) -> None:
        check_int("client_id", self.client_id, minimum=0)
        for part in ("train", "test"):
            X = getattr(self, f"X_{part}")
            y = getattr(self, f"y_{part}")
            if not isinstance(X, np.ndarray) or X.ndim != 2:
                raise ValueError(f"X_{part} must be a 2-D numpy array")
            if not isinstance(y, np.ndarray) or y.shape != (X.shape[0],):
                raise ValueError(
                    f"y_{part} must be a 1-D numpy array with one entry per row of X_{part}"
                )
            object.__setattr__(self, f"X_{part}", _readonly(X))
            object.__setattr__(self, f"y_{part}", _readonly(y))
        if self.X_train.shape[1] != self.X_test.shape[1]:
            raise ValueError("X_train and X_test must have the same number of columns")

    @property
    def num_train(self) -> int:
        """Number of training examples."""
        return int(self.y_train.shape[0])

    @property
    def num_test(self) -> int:
        """Number of held-out test examples."""
        return int(self.y_test.shape[0])


@dataclass(frozen=True, eq=False)
class FederatedDataset:
    """Training clients, unseen test clients, and how they were made.

    Attributes
    ----------
    name
        Dataset name (``"synthetic(1,1)"``, ``"fashion-mnist"``, ...).
    train_clients
        Clients that take part in training; ids ``0 … n−1``.
    test_clients
        Clients never seen in training; ids continue after the training clients'.
    num_features, num_classes
        Input dimension d and number of classes C.
    seed
        The integer every random choice was derived from.
    image_shape
        (height, width) for image datasets (features in [0, 1]), else ``None``.
    config
        The loader's arguments, for the record (JSON-serialisable).

    Examples
    --------
    >>> from protocols.training.datasets import synthetic
    >>> data = synthetic(0.5, 0.5, num_clients=4, num_test_clients=2, seed=3)
    >>> len(data.train_clients), len(data.test_clients), data.seed
    (4, 2, 3)
    >>> [c.client_id for c in data.test_clients]
    [4, 5]
    """

    name: str
    train_clients: tuple[ClientData, ...]
    test_clients: tuple[ClientData, ...]
    num_features: int
    num_classes: int
    seed: int
    image_shape: tuple[int, int] | None = None
    config: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        object.__setattr__(self, "train_clients", tuple(self.train_clients))
        object.__setattr__(self, "test_clients", tuple(self.test_clients))
        if not self.train_clients:
            raise ValueError("a federated dataset needs at least one training client")
        check_int("seed", self.seed, minimum=0)
        check_int("num_features", self.num_features, minimum=1)
        check_int("num_classes", self.num_classes, minimum=1)
        ids = [c.client_id for c in (*self.train_clients, *self.test_clients)]
        if len(set(ids)) != len(ids):
            raise ValueError("client ids must be distinct across training and test clients")
        for client in (*self.train_clients, *self.test_clients):
            if client.X_train.shape[1] != self.num_features:
                raise ValueError(
                    f"client {client.client_id} has {client.X_train.shape[1]} features, "
                    f"expected {self.num_features}"
                )
        if self.image_shape is not None and math.prod(self.image_shape) != self.num_features:
            raise ValueError("image_shape must multiply to num_features")

    def train_sizes(self) -> NDArray[np.int64]:
        """Number of training examples of each training client (the usual weights αᵢ).

        Examples
        --------
        >>> from protocols.training.datasets import synthetic
        >>> sizes = synthetic(0, 0, num_clients=3, num_test_clients=0, seed=1).train_sizes()
        >>> sizes.shape, bool(sizes.min() >= 45)  # n_k ≥ 50, of which ⌊0.9·n_k⌋ train
        ((3,), True)
        """
        return np.array([c.num_train for c in self.train_clients], dtype=np.int64)

    def label_counts(self, *, test_clients: bool = False) -> NDArray[np.int64]:
        """Per-client class counts, shape (clients, C), over all of each client's examples.

        Examples
        --------
        >>> from protocols.training.datasets import synthetic
        >>> data = synthetic(1, 1, num_clients=4, num_test_clients=1, seed=0)
        >>> counts = data.label_counts()
        >>> counts.shape, bool((counts.sum(axis=1) >= 50).all())
        ((4, 10), True)
        """
        clients = self.test_clients if test_clients else self.train_clients
        counts = np.zeros((len(clients), self.num_classes), dtype=np.int64)
        for row, client in enumerate(clients):
            labels = np.concatenate([client.y_train, client.y_test]).astype(np.int64)
            counts[row] = np.bincount(labels, minlength=self.num_classes)
        return counts

    def statistics(self) -> dict[str, float | int]:
        """Summary numbers for logs and result files.

        Sizes count all of a client's examples (training + held-out). ``mean_classes_per_client``
        counts classes with at least one example; ``mean_label_tv`` is the mean total-variation
        distance between a training client's label distribution and the pooled one (0 = no skew).

        Examples
        --------
        >>> from protocols.training.datasets import synthetic
        >>> stats = synthetic(1, 1, num_clients=5, num_test_clients=2, seed=0).statistics()
        >>> stats["train_clients"], stats["test_clients"], stats["train_samples_min"] >= 50
        (5, 2, True)
        """
        train_counts = self.label_counts()
        test_counts = self.label_counts(test_clients=True)
        sizes = train_counts.sum(axis=1)
        pooled = train_counts.sum(axis=0) / max(1, int(sizes.sum()))
        shares = train_counts / np.maximum(sizes, 1)[:, None]
        stats: dict[str, float | int] = {
            "train_clients": len(self.train_clients),
            "test_clients": len(self.test_clients),
            "train_samples_total": int(sizes.sum()),
            "train_samples_min": int(sizes.min()),
            "train_samples_median": float(np.median(sizes)),
            "train_samples_max": int(sizes.max()),
            "mean_classes_per_client": float((train_counts > 0).sum(axis=1).mean()),
            "mean_label_tv": float(0.5 * np.abs(shares - pooled).sum(axis=1).mean()),
        }
        if self.test_clients:
            test_sizes = test_counts.sum(axis=1)
            stats.update(
                test_samples_min=int(test_sizes.min()),
                test_samples_median=float(np.median(test_sizes)),
                test_samples_max=int(test_sizes.max()),
            )
        return stats

    def nbytes(self) -> int:
        """Bytes held by all client arrays.

        Examples
        --------
        >>> client = ClientData(0, np.zeros((4, 2)), np.zeros(4, dtype=np.int64),
        ...                     np.zeros((1, 2)), np.zeros(1, dtype=np.int64))
        >>> FederatedDataset("toy", (client,), (), num_features=2, num_classes=1, seed=0).nbytes()
        120
        """
        return sum(
            c.X_train.nbytes + c.y_train.nbytes + c.X_test.nbytes + c.y_test.nbytes
            for c in (*self.train_clients, *self.test_clients)
        )
