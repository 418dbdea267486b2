"""Corruption models of RFA (Pillutla, Kakade, Harchaoui, §3.2 and §5), fraction counted in data.

Which clients are corrupted (:func:`select_corrupted_clients`): the training clients are shuffled
with the given seed and the shortest prefix whose training examples reach the requested fraction ρ
of all training examples is corrupted — the rule of the RFA reference code (``while corrupted <
ρ·N: take the next client``). So the corrupted share is ≥ ρ, and below ρ once the last client taken
is removed: exact to the granularity of one client. ρ = 0 corrupts nobody.

Kinds:

* ``"image_negation"`` — data poisoning x → 1 − x on the training split (labels kept; RFA's EMNIST
  corruption). Needs an image dataset (features in [0, 1]).
* ``"label_flip"`` — data poisoning y → C − 1 − y on the training split (inputs kept). For even C
  every label changes; for odd C the middle class (C − 1)/2 is its own image.
* ``"gaussian"`` — at aggregation, a corrupted client sends its honest update plus
  ζ ~ N(0, σ²I), σ² the variance across the components of that client's own honest update (the
  RFA paper's definition, §5 "Gaussian corruption").
* ``"gaussian_replace"`` — as above but the update is *replaced* by ζ (the wording of our
  REFERENCES §3; the paper adds ζ, so ``"gaussian"`` follows the paper).
* ``"omniscient"`` — at aggregation, every corrupted client sends the vector that makes the
  weighted arithmetic mean equal the negative of the honest weighted mean (derivation in
  ``corruption.md`` beside this module).

Data poisoning is applied once to the data (:func:`corrupt_dataset`); update corruption is applied
by the trainer to each round's updates (:func:`corrupt_updates`). Held-out test splits and test
clients are never corrupted.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal, get_args

import numpy as np
from numpy.typing import ArrayLike, NDArray

from protocols.training.data import ClientData, FederatedDataset
from secagg.validation import check_fraction, check_int

__all__ = [
    "CORRUPTION_KINDS",
    "Corruption",
    "CorruptionKind",
    "CorruptionPlan",
    "corrupt_client",
    "corrupt_dataset",
    "corrupt_updates",
    "corrupted_prefix",
    "flip_labels",
    "negate_images",
    "omniscient_vector",
    "select_corrupted_clients",
]

logger = logging.getLogger(__name__)

CorruptionKind = Literal[
    "image_negation", "label_flip", "gaussian", "gaussian_replace", "omniscient"
]
CORRUPTION_KINDS: tuple[str, ...] = get_args(CorruptionKind)
"""Every valid :attr:`Corruption.kind`."""

_DATA_KINDS = frozenset({"image_negation", "label_flip"})


@dataclass(frozen=True, slots=True)
class Corruption:
    """A corruption model: its kind and the fraction ρ of training *data points* it affects.

    Examples
    --------
    >>> Corruption("omniscient", 0.25).poisons_updates
    True
    >>> Corruption("label_flip", 0.1).poisons_data
    True
    >>> Corruption("omniscient", 1.5)
    Traceback (most recent call last):
    ...
    ValueError: fraction must be a number in [0, 1]; got 1.5
    """

    kind: CorruptionKind
    fraction: float

    def __post_init__(self) -> None:
        if self.kind not in CORRUPTION_KINDS:
            valid = ", ".join(repr(k) for k in CORRUPTION_KINDS)
            raise ValueError(f"kind must be one of {valid}; got {self.kind!r}")
        fraction = check_fraction("fraction", self.fraction, zero=True, one=True)
        object.__setattr__(self, "fraction", fraction)

    @property
    def poisons_data(self) -> bool:
        """Whether the corruption changes the clients' training data (applied once)."""
        return self.kind in _DATA_KINDS

    @property
    def poisons_updates(self) -> bool:
        """Whether the corruption changes the updates at aggregation time (every round)."""
        return self.kind not in _DATA_KINDS


@dataclass(frozen=True, slots=True)
class CorruptionPlan:
    """Which training clients are corrupted, chosen by data fraction from a recorded seed.

    Attributes
    ----------
    corruption
        The corruption model.
    seed
        Seed of the client shuffle.
    client_ids
        Ids of the corrupted training clients.
    data_fraction
        Share of all training examples held by them (≥ ``corruption.fraction``).

    Examples
    --------
    >>> plan = CorruptionPlan(Corruption("omniscient", 0.3), 0, frozenset({2}), 0.4)
    >>> plan.mask([1, 2, 3])
    array([False,  True, False])
    """

    corruption: Corruption
    seed: int
    client_ids: frozenset[int]
    data_fraction: float

    def is_corrupted(self, client_id: int) -> bool:
        """Whether ``client_id`` is corrupted."""
        return client_id in self.client_ids

    def mask(self, client_ids: Iterable[int]) -> NDArray[np.bool_]:
        """Boolean mask over ``client_ids`` (e.g. one round's sampled clients)."""
        return np.array([c in self.client_ids for c in client_ids], dtype=bool)


def corrupted_prefix(
    sizes: ArrayLike, fraction: float, *, rng: np.random.Generator
) -> NDArray[np.intp]:
    """Positions of the clients to corrupt: the shuffled prefix just reaching ``fraction`` of data.

    Parameters
    ----------
    sizes
        Number of training examples of each client (≥ 0).
    fraction
        Target share ρ ∈ [0, 1] of all examples.
    rng
        Draws the shuffle.

    Returns
    -------
    numpy.ndarray
        Positions into ``sizes``, in shuffled order: the shortest prefix of the shuffle whose
        examples sum to ≥ ρ·N.

    Examples
    --------
    >>> sizes = np.array([10, 20, 30, 40])
    >>> chosen = corrupted_prefix(sizes, 0.25, rng=np.random.default_rng(0))
    >>> bool(sizes[chosen].sum() >= 25), bool(sizes[chosen[:-1]].sum() < 25)
    (True, True)
    """
    counts = np.asarray(sizes)
    if counts.ndim != 1 or (counts.size and not np.issubdtype(counts.dtype, np.integer)):
        raise ValueError("sizes must be a 1-D array of integer example counts")
    if counts.size and counts.min() < 0:
        raise ValueError("sizes must be >= 0")
    fraction = check_fraction("fraction", fraction, zero=True, one=True)
    order = rng.permutation(counts.size).astype(np.intp)
    target = fraction * float(counts.sum())
    if target <= 0:
        return order[:0]
    cumulative = np.cumsum(counts[order])
    length = int(np.searchsorted(cumulative, target, side="left")) + 1
    return order[: min(length, counts.size)]


def select_corrupted_clients(
    dataset: FederatedDataset, corruption: Corruption, *, seed: int = 0
) -> CorruptionPlan:
    """Pick the corrupted training clients by data fraction (see the module docstring).

    Examples
    --------
    >>> from protocols.training.datasets import synthetic
    >>> data = synthetic(1, 1, num_clients=10, num_test_clients=0, seed=0)
    >>> plan = select_corrupted_clients(data, Corruption("omniscient", 0.25), seed=1)
    >>> share = data.train_sizes()[sorted(plan.client_ids)].sum() / data.train_sizes().sum()
    >>> bool(plan.data_fraction == share >= 0.25), plan.seed
    (True, 1)
    """
    seed = check_int("seed", seed, minimum=0)
    sizes = dataset.train_sizes()
    positions = corrupted_prefix(sizes, corruption.fraction, rng=np.random.default_rng(seed))
    ids = frozenset(dataset.train_clients[int(p)].client_id for p in positions)
    share = float(sizes[positions].sum() / sizes.sum()) if sizes.sum() else 0.0
    logger.info(
        "corrupting %d of %d training clients (%.4f of the data, target %.4f) with %s",
        len(ids),
        len(sizes),
        share,
        corruption.fraction,
        corruption.kind,
    )
    return CorruptionPlan(corruption, int(seed), ids, share)


# -- data poisoning -----------------------------------------------------------------------------


def negate_images(X: NDArray[np.floating]) -> NDArray[np.floating]:
    """Image negation x → 1 − x (pixels in [0, 1]); a new array of the same dtype.

    Examples
    --------
    >>> negate_images(np.array([[0.0, 0.25, 1.0]], dtype=np.float32))
    array([[1.  , 0.75, 0.  ]], dtype=float32)
    """
    result: NDArray[np.floating] = (1 - X).astype(X.dtype, copy=False)
    return result


def flip_labels(y: NDArray[np.integer], num_classes: int) -> NDArray[np.integer]:
    """Label flip y → C − 1 − y; a new array.

    Examples
    --------
    >>> flip_labels(np.array([0, 1, 9]), 10)
    array([9, 8, 0])
    """
    if y.size and (y.min() < 0 or y.max() >= num_classes):
        raise ValueError(f"labels must lie in [0, {num_classes - 1}]")
    result: NDArray[np.integer] = (num_classes - 1 - y).astype(y.dtype, copy=False)
    return result


def corrupt_client(client: ClientData, kind: CorruptionKind, num_classes: int) -> ClientData:
    """Apply a data-poisoning ``kind`` to a client's training split (its test split is kept).

    Examples
    --------
    >>> client = ClientData(0, np.zeros((2, 1)), np.array([0, 3]), np.zeros((1, 1)), np.array([3]))
    >>> corrupt_client(client, "label_flip", 4).y_train, client.y_train
    (array([3, 0]), array([0, 3]))
    """
    if kind == "image_negation":
        return dataclasses.replace(client, X_train=negate_images(client.X_train))
    if kind == "label_flip":
        return dataclasses.replace(client, y_train=flip_labels(client.y_train, num_classes))
    raise ValueError(f"{kind!r} is not a data-poisoning kind; use 'image_negation' or 'label_flip'")


def corrupt_dataset(dataset: FederatedDataset, plan: CorruptionPlan) -> FederatedDataset:
    """The dataset with the plan's clients' training data poisoned (unchanged for update kinds).

    Examples
    --------
    >>> from protocols.training.datasets import synthetic
    >>> data = synthetic(1, 1, num_clients=4, num_test_clients=0, seed=0)
    >>> plan = select_corrupted_clients(data, Corruption("label_flip", 0.5), seed=0)
    >>> poisoned = corrupt_dataset(data, plan)
    >>> changed = [b.client_id for a, b in zip(data.train_clients, poisoned.train_clients)
    ...            if (a.y_train != b.y_train).any()]
    >>> changed == sorted(plan.client_ids), poisoned.test_clients == data.test_clients
    (True, True)
    """
    corruption = plan.corruption
    if not corruption.poisons_data or not plan.client_ids:
        return dataset
    if corruption.kind == "image_negation" and dataset.image_shape is None:
        raise ValueError(
            f"image negation needs an image dataset with features in [0, 1]; {dataset.name} "
            "has none (use label_flip or an update corruption)"
        )
    clients = tuple(
        corrupt_client(c, corruption.kind, dataset.num_classes)
        if c.client_id in plan.client_ids
        else c
        for c in dataset.train_clients
    )
    config = {
        **dataset.config,
        "corruption": {
            "kind": corruption.kind,
            "fraction": corruption.fraction,
            "seed": plan.seed,
            "data_fraction": plan.data_fraction,
            "client_ids": sorted(plan.client_ids),
        },
    }
    return dataclasses.replace(dataset, train_clients=clients, config=config)


# -- update corruption --------------------------------------------------------------------------


def _check_round(
    updates: ArrayLike, weights: ArrayLike, corrupted: ArrayLike
) -> tuple[NDArray[np.float64], NDArray[np.float64], NDArray[np.bool_]]:
    vectors = np.array(updates, dtype=np.float64)  # a copy: the caller's updates stay honest
    if vectors.ndim != 2:
        raise ValueError(f"updates must be a 2-D array (clients × parameters); got {vectors.shape}")
    if not np.all(np.isfinite(vectors)):
        raise ValueError("updates must be finite (drop non-finite updates before corrupting)")
    m = vectors.shape[0]
    alphas = np.asarray(weights, dtype=np.float64)
    if alphas.shape != (m,) or not np.all(np.isfinite(alphas)) or np.any(alphas < 0):
        raise ValueError(f"weights must be {m} finite numbers >= 0")
    mask = np.asarray(corrupted)
    if mask.shape != (m,) or mask.dtype != np.bool_:
        raise ValueError(f"corrupted must be a boolean mask of length {m}")
    return vectors, alphas, mask


def omniscient_vector(
    updates: ArrayLike, weights: ArrayLike, corrupted: ArrayLike
) -> NDArray[np.float64]:
    """The vector c every corrupted client sends so the weighted mean becomes −(honest mean).

    With S = Σᵢ αᵢuᵢ over all clients' honest vectors, S_C and A_C the same sum and the weight
    total over the corrupted clients: c = −(2S − S_C)/A_C (see ``corruption.md``).

    Examples
    --------
    >>> u = np.array([[1.0, 2.0], [3.0, 0.0], [5.0, 4.0]]); w = np.array([1.0, 2.0, 1.0])
    >>> c = omniscient_vector(u, w, np.array([False, False, True]))
    >>> c
    array([-19.,  -8.])
    >>> bool(np.allclose((w[:2] @ u[:2] + w[2] * c) / w.sum(), -(w @ u) / w.sum()))
    True
    """
    vectors, alphas, mask = _check_round(updates, weights, corrupted)
    corrupt_weight = float(alphas[mask].sum())
    if corrupt_weight <= 0:
        raise ValueError("the corrupted clients' weights sum to 0: they cannot move the mean")
    total = alphas @ vectors
    corrupt_sum = alphas[mask] @ vectors[mask]
    result: NDArray[np.float64] = -(2.0 * total - corrupt_sum) / corrupt_weight
    return result


def corrupt_updates(
    updates: ArrayLike,
    weights: ArrayLike,
    corrupted: ArrayLike,
    corruption: Corruption,
    *,
    rng: np.random.Generator | None = None,
) -> NDArray[np.float64]:
    """What the server receives this round: the honest updates with the corrupted rows replaced.

    Parameters
    ----------
    updates
        Honest vectors of the round's clients, shape (m, d) (updates or models: the identities
        hold for whatever the trainer averages).
    weights
        Aggregation weights αᵢ ≥ 0, shape (m,).
    corrupted
        Boolean mask, shape (m,): which of the round's clients are corrupted.
    corruption
        The model; data-poisoning kinds return the updates unchanged (their effect is in the data).
    rng
        Needed for the Gaussian kinds.

    Returns
    -------
    numpy.ndarray
        A new float64 array (m, d). For ``"omniscient"`` with no corrupted weight in the round
        the updates are returned unchanged.

    Examples
    --------
    >>> u = np.array([[1.0, -1.0], [2.0, 0.0], [0.5, 0.5]]); w = np.array([3.0, 1.0, 1.0])
    >>> sent = corrupt_updates(u, w, np.array([True, False, False]), Corruption("omniscient", 0.5))
    >>> bool(np.allclose(w @ sent, -(w @ u)))
    True
    >>> noisy = corrupt_updates(u, w, np.array([False, True, False]), Corruption("gaussian", 0.2),
    ...                         rng=np.random.default_rng(0))
    >>> bool(np.array_equal(noisy[[0, 2]], u[[0, 2]])), bool(np.array_equal(noisy[1], u[1]))
    (True, False)
    """
    vectors, alphas, mask = _check_round(updates, weights, corrupted)
    if corruption.poisons_data or not mask.any():
        return vectors
    if corruption.kind == "omniscient":
        if alphas[mask].sum() <= 0:
            logger.debug("omniscient corruption skipped: corrupted clients carry no weight")
            return vectors
        vectors[mask] = omniscient_vector(vectors, alphas, mask)
        return vectors
    if not isinstance(rng, np.random.Generator):
        raise TypeError("Gaussian corruption needs rng=np.random.Generator")
    sigma = np.sqrt(np.var(vectors[mask], axis=1, keepdims=True))
    noise = rng.standard_normal((int(mask.sum()), vectors.shape[1])) * sigma
    if corruption.kind == "gaussian":
        vectors[mask] += noise
    else:
        vectors[mask] = noise
    return vectors
