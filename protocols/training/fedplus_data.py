"""Datasets of the Fed+ experiments: the personalised synthetic regression and "robust" variants
whose outlier parties see a transformed input distribution (Fed+ §5).
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np

from protocols.training.corruption import negate_images
from protocols.training.data import ClientData, FederatedDataset
from protocols.training.seeds import stream
from secagg.validation import check_fraction, check_int, check_positive

__all__ = ["outlier_parties", "personalized_regression"]


def personalized_regression(
    num_parties: int = 10,
    dim: int = 1000,
    samples_per_party: int = 100,
    *,
    test_fraction: float = 0.5,
    laplace_scale: float = 0.5,
    seed: int = 0,
) -> FederatedDataset:
    """Fed+'s personalised synthetic regression: y = wₖᵀx + v for party k (Fed+ §5).

    v ~ N(0, 2); x ~ N(μₖ, Σ) with μₖ ~ N(0, 0.5) (one scalar per party) and
    Σⱼⱼ = (((j − 1) mod 50) + 1)^−1.1 (the paper's mod(j, 50)^−1.1, shifted so that no variance is
    0^−1.1 = ∞); wₖ = w̄ + Laplace(0, 0.5) for k < N with w̄ ~ N(0, 5·I), and the last party's
    w_N built the same way around its own w̄' ~ N(0, 50·I): the outlier. Variances, not standard
    deviations, as the paper writes N(·, ·). Each party splits 50/50 into train and test.

    Examples
    --------
    >>> data = personalized_regression(num_parties=3, dim=20, samples_per_party=10, seed=1)
    >>> len(data.train_clients), data.train_clients[0].num_train, data.num_features
    (3, 5, 20)
    >>> data.train_clients[0].y_train.dtype
    dtype('float64')
    """
    n = check_int("num_parties", num_parties, minimum=2)
    d = check_int("dim", dim, minimum=1)
    m = check_int("samples_per_party", samples_per_party, minimum=2)
    fraction = check_fraction("test_fraction", test_fraction, zero=False, one=False)
    scale = check_positive("laplace_scale", laplace_scale)
    rng = stream(seed, 41)
    std = (((np.arange(1, d + 1) - 1) % 50) + 1.0) ** (-1.1 / 2)
    shared = rng.normal(0.0, math.sqrt(5.0), size=d)
    outlier = rng.normal(0.0, math.sqrt(50.0), size=d)
    clients = []
    for k in range(n):
        centre = outlier if k == n - 1 else shared
        w = centre + rng.laplace(0.0, scale, size=d)
        mu = rng.normal(0.0, math.sqrt(0.5))
        X = mu + std * rng.standard_normal((m, d))
        y = X @ w + rng.normal(0.0, math.sqrt(2.0), size=m)
        cut = m - max(1, round(fraction * m))
        clients.append(ClientData(k, X[:cut], y[:cut], X[cut:], y[cut:]))
    return FederatedDataset(
        name="personalized-regression",
        train_clients=tuple(clients),
        test_clients=(),
        num_features=d,
        num_classes=1,
        seed=seed,
        config={"num_parties": n, "dim": d, "samples_per_party": m, "test_fraction": fraction},
    )


def outlier_parties(
    dataset: FederatedDataset, fraction: float, *, seed: int = 0
) -> tuple[FederatedDataset, tuple[int, ...]]:
    """Transform ⌈fraction·N⌉ random parties' inputs, training *and* test splits (Fed+ §5).

    Images (features in [0, 1]) are negated, x → 1 − x (Fed+'s MNIST-robust); other features
    change sign, x → −x. Unlike data poisoning, the party's own test split is transformed too:
    it is a party with a different input distribution, evaluated on its own data.

    Examples
    --------
    >>> from protocols.training.datasets import synthetic
    >>> data = synthetic(1, 1, num_clients=10, num_test_clients=0, seed=0)
    >>> robust, ids = outlier_parties(data, 0.1, seed=3)
    >>> k = ids[0]
    >>> len(ids), bool((robust.train_clients[k].X_test == -data.train_clients[k].X_test).all())
    (1, True)
    """
    share = check_fraction("fraction", fraction, zero=True, one=True)
    parties = len(dataset.train_clients)
    count = math.ceil(share * parties - 1e-9)
    rng = stream(seed, 42)
    chosen = tuple(sorted(int(i) for i in rng.choice(parties, size=count, replace=False)))
    image = dataset.image_shape is not None

    def transform(X: np.ndarray) -> np.ndarray:
        return np.asarray(negate_images(X) if image else -X)

    clients = tuple(
        dataclasses.replace(c, X_train=transform(c.X_train), X_test=transform(c.X_test))
        if i in chosen
        else c
        for i, c in enumerate(dataset.train_clients)
    )
    config = {**dataset.config, "outlier_parties": list(chosen)}
    return dataclasses.replace(dataset, train_clients=clients, config=config), chosen
