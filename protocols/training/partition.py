"""Splitting a pooled labelled data set across clients: Dirichlet label skew, shards, IID.

Each function works on label arrays and returns index arrays, one per client, pairwise disjoint,
drawn from an explicit ``np.random.Generator``; the loaders in :mod:`protocols.training.datasets`
turn them into clients. Training and test clients are drawn by the same process in one call (so
they are disjoint and identically distributed); :func:`choose_test_clients` then picks which
positions are test clients at random, so sampling order cannot make them systematically different.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TypeVar

import numpy as np
from numpy.typing import ArrayLike, NDArray

from secagg.validation import check_fraction, check_int, check_positive

__all__ = [
    "DirichletSplit",
    "IIDSplit",
    "ShardSplit",
    "Split",
    "choose_test_clients",
    "partition_indices",
    "rotate_images",
    "train_test_indices",
]

IndexArray = NDArray[np.intp]
_Scalar = TypeVar("_Scalar", bound=np.generic)


@dataclass(frozen=True, slots=True)
class DirichletSplit:
    """Label skew: client k's class proportions q_k ~ Dir(α·C·p), p the pooled class frequencies.

    With balanced classes this is Dir(α, …, α): α per class (Hsu et al. 2019 write Dir(α'p) with
    α' = α·C). Small α (0.1) gives clients dominated by one or two classes; large α (100) is
    nearly IID. Each client receives exactly ``samples_per_client`` examples, drawn without
    replacement; when a class runs out, its share is redrawn over the classes that remain.

    Examples
    --------
    >>> DirichletSplit(concentration=0.3)
    DirichletSplit(concentration=0.3)
    >>> DirichletSplit(concentration=0)
    Traceback (most recent call last):
    ...
    ValueError: concentration must be positive (a finite number > 0); got 0
    """

    concentration: float

    def __post_init__(self) -> None:
        check_positive("concentration", self.concentration)


@dataclass(frozen=True, slots=True)
class ShardSplit:
    """Pathological label skew (McMahan et al. 2017): label-sorted shards, s per client.

    The examples used are sorted by label and cut into (number of clients × s) shards of as equal
    sizes as possible (they differ by at most one example); each client gets s random shards, so
    it sees at most s classes (usually s, fewer when two shards fall in one class).

    Examples
    --------
    >>> ShardSplit(shards_per_client=2)
    ShardSplit(shards_per_client=2)
    >>> ShardSplit(shards_per_client=0)
    Traceback (most recent call last):
    ...
    ValueError: shards_per_client must be an integer >= 1; got 0
    """

    shards_per_client: int = 2

    def __post_init__(self) -> None:
        check_int("shards_per_client", self.shards_per_client, minimum=1)


@dataclass(frozen=True, slots=True)
class IIDSplit:
    """No skew: each client gets a uniformly random subset of the pool.

    Examples
    --------
    >>> IIDSplit()
    IIDSplit()
    """


Split = DirichletSplit | ShardSplit | IIDSplit


def partition_indices(
    labels: ArrayLike,
    num_clients: int,
    samples_per_client: int,
    split: Split,
    *,
    rng: np.random.Generator,
) -> list[IndexArray]:
    """Draw ``num_clients`` disjoint index sets of (about) ``samples_per_client`` each.

    Parameters
    ----------
    labels
        1-D integer class labels of the pool, in ``[0, C)``.
    num_clients
        Number of clients (training and test clients together).
    samples_per_client
        Examples per client; ``num_clients × samples_per_client`` must not exceed the pool.
    split
        :class:`DirichletSplit`, :class:`ShardSplit` or :class:`IIDSplit`.
    rng
        The only source of randomness.

    Returns
    -------
    list of numpy.ndarray
        One sorted index array per client.

    Examples
    --------
    >>> labels = np.repeat(np.arange(4), 25)
    >>> parts = partition_indices(labels, 4, 25, ShardSplit(1), rng=np.random.default_rng(0))
    >>> [len(np.unique(labels[p])) for p in parts]
    [1, 1, 1, 1]
    >>> parts = partition_indices(labels, 4, 20, DirichletSplit(0.5), rng=np.random.default_rng(0))
    >>> [len(p) for p in parts], len(np.unique(np.concatenate(parts)))
    ([20, 20, 20, 20], 80)
    """
    label_array = np.asarray(labels)
    if label_array.ndim != 1 or not np.issubdtype(label_array.dtype, np.integer):
        raise ValueError("labels must be a 1-D array of integer class labels")
    if label_array.size and label_array.min() < 0:
        raise ValueError("labels must be >= 0")
    num_clients = check_int("num_clients", num_clients, minimum=1)
    samples_per_client = check_int("samples_per_client", samples_per_client, minimum=1)
    needed = num_clients * samples_per_client
    if needed > label_array.size:
        raise ValueError(
            f"{num_clients} clients × {samples_per_client} samples = {needed} exceeds the "
            f"{label_array.size} examples available"
        )
    if isinstance(split, DirichletSplit):
        parts = _dirichlet(label_array, num_clients, samples_per_client, split.concentration, rng)
    elif isinstance(split, ShardSplit):
        parts = _shards(label_array, num_clients, needed, split.shards_per_client, rng)
    elif isinstance(split, IIDSplit):
        chosen = rng.permutation(label_array.size)[:needed]
        parts = list(chosen.reshape(num_clients, samples_per_client))
    else:
        raise TypeError(f"split must be a DirichletSplit, ShardSplit or IIDSplit; got {split!r}")
    return [np.sort(part).astype(np.intp, copy=False) for part in parts]


def _dirichlet(
    labels: NDArray[np.integer],
    num_clients: int,
    samples_per_client: int,
    concentration: float,
    rng: np.random.Generator,
) -> list[IndexArray]:
    num_classes = int(labels.max()) + 1
    counts = np.bincount(labels, minlength=num_classes)
    # Per class, a shuffled queue of its example indices; clients take from the front.
    by_class = np.argsort(labels, kind="stable")
    starts = np.concatenate(([0], np.cumsum(counts)[:-1]))
    queues = [rng.permutation(by_class[s : s + c]) for s, c in zip(starts, counts, strict=True)]
    taken = np.zeros(num_classes, dtype=np.int64)
    alpha = concentration * num_classes * counts / counts.sum()
    present = counts > 0
    parts: list[IndexArray] = []
    for _ in range(num_clients):
        proportions = np.zeros(num_classes)
        proportions[present] = rng.dirichlet(alpha[present])
        want = np.zeros(num_classes, dtype=np.int64)
        missing = samples_per_client
        while missing:
            remaining = counts - taken - want
            weights = np.where(remaining > 0, proportions, 0.0)
            if weights.sum() <= 0:  # the client's classes ran out: spread over what is left
                weights = (remaining > 0).astype(np.float64)
            draw = rng.multinomial(missing, weights / weights.sum())
            draw = np.minimum(draw, remaining)
            want += draw
            missing -= int(draw.sum())
        parts.append(
            np.concatenate(
                [queues[c][taken[c] : taken[c] + want[c]] for c in range(num_classes) if want[c]]
            )
        )
        taken += want
    return parts


def _shards(
    labels: NDArray[np.integer],
    num_clients: int,
    needed: int,
    shards_per_client: int,
    rng: np.random.Generator,
) -> list[IndexArray]:
    num_shards = num_clients * shards_per_client
    if num_shards > needed:
        raise ValueError(
            f"{num_shards} shards need at least {num_shards} examples; got {needed} "
            "(raise samples_per_client or lower shards_per_client)"
        )
    chosen = rng.permutation(labels.size)[:needed]
    # Stable sort of a random subset: shards are label-sorted, random within a label.
    ordered = chosen[np.argsort(labels[chosen], kind="stable")]
    shards = np.array_split(ordered, num_shards)
    owners = rng.permutation(num_shards).reshape(num_clients, shards_per_client)
    return [np.concatenate([shards[s] for s in row]) for row in owners]


def choose_test_clients(
    num_clients: int, num_test_clients: int, *, rng: np.random.Generator
) -> tuple[IndexArray, IndexArray]:
    """Split client positions ``0 … n−1`` at random into training and test positions.

    Returns
    -------
    (train_positions, test_positions)
        Both sorted; ``num_test_clients`` test positions.

    Examples
    --------
    >>> train, test = choose_test_clients(5, 2, rng=np.random.default_rng(0))
    >>> len(train), len(test), sorted(np.concatenate([train, test]).tolist())
    (3, 2, [0, 1, 2, 3, 4])
    """
    num_clients = check_int("num_clients", num_clients, minimum=0)
    if check_int("num_test_clients", num_test_clients, minimum=0) > num_clients:
        raise ValueError(
            f"num_test_clients must lie in [0, {num_clients}]; got {num_test_clients!r}"
        )
    order = rng.permutation(num_clients)
    test = np.sort(order[:num_test_clients]).astype(np.intp)
    train = np.sort(order[num_test_clients:]).astype(np.intp)
    return train, test


def train_test_indices(
    n: int, test_fraction: float, *, rng: np.random.Generator
) -> tuple[IndexArray, IndexArray]:
    """Shuffle ``0 … n−1`` and keep ⌊(1 − f)·n⌋ for training, the rest for testing.

    This is the FedProx/LEAF per-user rule (``train_len = int(0.9 * n)`` for f = 0.1).

    Examples
    --------
    >>> train, test = train_test_indices(10, 0.1, rng=np.random.default_rng(0))
    >>> len(train), len(test)
    (9, 1)
    """
    n = check_int("n", n, minimum=0)
    test_fraction = check_fraction("test_fraction", test_fraction, zero=True, one=False)
    num_train = math.floor((1.0 - test_fraction) * n + 1e-9)
    order = rng.permutation(n).astype(np.intp)
    return order[:num_train], order[num_train:]


def rotate_images(
    images: NDArray[_Scalar], image_shape: tuple[int, int], quarter_turns: int
) -> NDArray[_Scalar]:
    """Rotate flattened square images by ``quarter_turns`` × 90° counter-clockwise.

    A cheap per-client covariate shift (the "rotated MNIST" federated benchmark): clients that
    share a rotation form a cluster.

    Examples
    --------
    >>> image = np.array([[1, 2, 3, 4]])  # the 2 × 2 image [[1, 2], [3, 4]], flattened
    >>> rotate_images(image, (2, 2), 1)
    array([[2, 4, 1, 3]])
    """
    height, width = image_shape
    if images.ndim != 2 or images.shape[1] != height * width:
        raise ValueError(f"images must have shape (n, {height * width}); got {images.shape}")
    turns = int(quarter_turns) % 4
    if turns == 0:
        return images
    if height != width and turns % 2:
        raise ValueError("only square images can be turned by an odd number of quarter turns")
    squares = images.reshape(-1, height, width)
    return np.ascontiguousarray(np.rot90(squares, k=turns, axes=(1, 2))).reshape(images.shape)
