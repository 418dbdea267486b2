"""Label skew with a homogeneity ratio s (the FFGB reference code's split), and pooling.

A fraction s of the training pool is dealt out IID; the remaining 1 − s is sorted by label and
cut into one contiguous chunk per client, so each client holds s IID data plus a chunk of one or
two classes (s = 0: pathological skew; s = 1: IID). Test clients receive an IID sample of a
held-out pool, so their errors measure the global test error.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

from protocols.training.data import ClientData, FederatedDataset
from protocols.training.seeds import stream
from secagg.validation import check_fraction, check_int

__all__ = ["homogeneity_split", "pool_examples"]


def pool_examples(dataset: FederatedDataset) -> tuple[NDArray[np.floating], NDArray[np.integer]]:
    """Every example of every client (training and test splits), stacked.

    Examples
    --------
    >>> from protocols.training.datasets import synthetic
    >>> X, y = pool_examples(synthetic(1, 1, num_clients=2, num_test_clients=1, seed=0))
    >>> X.shape[1], X.shape[0] == y.shape[0]
    (60, True)
    """
    clients = (*dataset.train_clients, *dataset.test_clients)
    X = np.concatenate([part for c in clients for part in (c.X_train, c.X_test)])
    y = np.concatenate([part for c in clients for part in (c.y_train, c.y_test)])
    return X, y


def homogeneity_split(
    dataset: FederatedDataset,
    homogeneity: float,
    *,
    num_clients: int,
    num_test_clients: int = 10,
    test_fraction: float = 0.2,
    seed: int = 0,
) -> FederatedDataset:
    """Re-deal ``dataset``'s examples: s IID, 1 − s label-sorted chunks; IID test clients.

    Parameters
    ----------
    dataset
        The source of examples (all of its clients' splits are pooled).
    homogeneity
        s ∈ [0, 1].
    num_clients, num_test_clients
        Training clients (no held-out split) and IID test clients.
    test_fraction
        Share of the pool held out for the test clients.
    seed
        Seed of the shuffles.

    Examples
    --------
    >>> from protocols.training.datasets import synthetic
    >>> source = synthetic(1, 1)
    >>> data = homogeneity_split(source, 0.1, num_clients=10, num_test_clients=2)
    >>> len(data.train_clients), len(data.test_clients), data.train_clients[0].num_test
    (10, 2, 0)
    >>> counts = data.label_counts()        # mostly one or two classes per client
    >>> bool((np.sort(counts, axis=1)[:, -2:].sum(axis=1) / counts.sum(axis=1) > 0.8).all())
    True
    """
    s = check_fraction("homogeneity", homogeneity, zero=True, one=True)
    n_train = check_int("num_clients", num_clients, minimum=1)
    n_test = check_int("num_test_clients", num_test_clients, minimum=0)
    fraction = check_fraction("test_fraction", test_fraction, zero=n_test == 0, one=False)
    rng = stream(seed, 31)
    X, y = pool_examples(dataset)
    order = rng.permutation(y.size)
    held = round(fraction * y.size) if n_test else 0
    test_index, train_index = order[:held], order[held:]
    iid_count = round(s * train_index.size)
    iid, skewed = train_index[:iid_count], train_index[iid_count:]
    skewed = skewed[np.argsort(y[skewed], kind="stable")]
    parts = zip(np.array_split(iid, n_train), np.array_split(skewed, n_train), strict=True)
    empty_X, empty_y = X[:0], y[:0]
    train_clients = []
    for k, (a, b) in enumerate(parts):
        index = np.concatenate([a, b])
        train_clients.append(ClientData(k, X[index], y[index], empty_X, empty_y))
    test_clients = [
        ClientData(n_train + k, empty_X, empty_y, X[index], y[index])
        for k, index in enumerate(np.array_split(test_index, n_test) if n_test else [])
    ]
    return FederatedDataset(
        name=f"{dataset.name}-homogeneity{s:g}",
        train_clients=tuple(train_clients),
        test_clients=tuple(test_clients),
        num_features=dataset.num_features,
        num_classes=dataset.num_classes,
        seed=seed,
        image_shape=dataset.image_shape,
        config={
            "source": dataset.name,
            "homogeneity": s,
            "num_clients": n_train,
            "num_test_clients": n_test,
            "test_fraction": fraction,
        },
    )
