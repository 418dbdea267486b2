"""Client splits: Dirichlet label skew, shards, IID; test-client choice; per-client transforms."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from numpy.typing import NDArray

from protocols.training import (
    DirichletSplit,
    IIDSplit,
    ShardSplit,
    Split,
    choose_test_clients,
    partition_indices,
    rotate_images,
    train_test_indices,
)

LABELS = np.repeat(np.arange(10), 300)  # 3000 balanced examples


def _classes_per_client(parts: list[NDArray[np.intp]], labels: NDArray[np.int64]) -> list[int]:
    return [len(np.unique(labels[p])) for p in parts]


def _mean_tv(parts: list[NDArray[np.intp]], labels: NDArray[np.int64]) -> float:
    pooled = np.bincount(labels, minlength=10) / labels.size
    shares = [np.bincount(labels[p], minlength=10) / len(p) for p in parts]
    return float(np.mean([0.5 * np.abs(s - pooled).sum() for s in shares]))


@pytest.mark.parametrize(
    "split", [DirichletSplit(0.1), DirichletSplit(5.0), ShardSplit(2), IIDSplit()]
)
def test_parts_are_disjoint_sized_and_deterministic(split: Split) -> None:
    parts = partition_indices(LABELS, 25, 100, split, rng=np.random.default_rng(0))
    again = partition_indices(LABELS, 25, 100, split, rng=np.random.default_rng(0))
    assert len(parts) == 25
    assert all(np.array_equal(a, b) for a, b in zip(parts, again, strict=True))
    joined = np.concatenate(parts)
    assert len(np.unique(joined)) == joined.size  # disjoint
    assert joined.min() >= 0 and joined.max() < LABELS.size
    sizes = [len(p) for p in parts]
    if isinstance(split, ShardSplit):
        assert sum(sizes) == 2500 and max(sizes) - min(sizes) <= 1
    else:
        assert sizes == [100] * 25


def test_dirichlet_concentration_controls_the_skew() -> None:
    rng = np.random.default_rng(1)
    skewed = partition_indices(LABELS, 20, 100, DirichletSplit(0.05), rng=rng)
    mild = partition_indices(LABELS, 20, 100, DirichletSplit(100.0), rng=rng)
    # Dir(0.05) puts nearly all of a client's mass on one or two classes; Dir(100) is near IID.
    assert np.mean(_classes_per_client(skewed, LABELS)) < 3.5
    assert min(_classes_per_client(mild, LABELS)) == 10
    assert _mean_tv(skewed, LABELS) > 0.7
    assert _mean_tv(mild, LABELS) < 0.15


def test_dirichlet_exhausting_the_pool_still_gives_exact_sizes() -> None:
    parts = partition_indices(LABELS, 30, 100, DirichletSplit(0.1), rng=np.random.default_rng(2))
    assert sorted(np.concatenate(parts).tolist()) == list(range(LABELS.size))


def test_dirichlet_follows_the_pool_class_frequencies() -> None:
    # Class 0 is nine times as common as class 1: under near-IID concentration clients see that.
    labels = np.concatenate([np.zeros(900, dtype=np.int64), np.ones(100, dtype=np.int64)])
    parts = partition_indices(labels, 10, 50, DirichletSplit(1000.0), rng=np.random.default_rng(3))
    share = np.mean([np.mean(labels[p] == 0) for p in parts])
    assert share == pytest.approx(0.9, abs=0.03)


def test_shards_give_at_most_s_classes() -> None:
    for s in (1, 2, 3):
        parts = partition_indices(LABELS, 30, 60, ShardSplit(s), rng=np.random.default_rng(s))
        classes = _classes_per_client(parts, LABELS)
        # A shard of 20 label-sorted examples may straddle two classes at a class boundary.
        assert max(classes) <= 2 * s
        assert np.mean(classes) <= s + 0.5


def test_iid_is_close_to_the_pool() -> None:
    parts = partition_indices(LABELS, 10, 300, IIDSplit(), rng=np.random.default_rng(4))
    assert _mean_tv(parts, LABELS) < 0.12


def test_partition_rejects_bad_arguments() -> None:
    rng = np.random.default_rng(0)
    with pytest.raises(ValueError, match="exceeds"):
        partition_indices(LABELS, 31, 100, IIDSplit(), rng=rng)
    with pytest.raises(ValueError, match="integer class labels"):
        partition_indices(LABELS.astype(float), 2, 10, IIDSplit(), rng=rng)
    with pytest.raises(ValueError, match="shards"):
        partition_indices(LABELS, 10, 2, ShardSplit(3), rng=rng)
    with pytest.raises(TypeError, match="split"):
        partition_indices(LABELS, 2, 10, "iid", rng=rng)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="concentration"):
        DirichletSplit(float("nan"))
    with pytest.raises(TypeError, match="shards_per_client"):
        ShardSplit(True)


@settings(max_examples=40, deadline=None)
@given(
    counts=st.lists(st.integers(0, 40), min_size=2, max_size=6),
    clients=st.integers(1, 8),
    concentration=st.floats(0.01, 50.0),
    seed=st.integers(0, 2**32 - 1),
)
def test_dirichlet_property(
    counts: list[int], clients: int, concentration: float, seed: int
) -> None:
    labels = np.repeat(np.arange(len(counts)), counts)
    if labels.size < clients:
        return
    per_client = int(np.random.default_rng(seed).integers(1, labels.size // clients + 1))
    parts = partition_indices(
        labels, clients, per_client, DirichletSplit(concentration), rng=np.random.default_rng(seed)
    )
    joined = np.concatenate(parts)
    assert [len(p) for p in parts] == [per_client] * clients
    assert len(np.unique(joined)) == joined.size


def test_choose_test_clients_is_a_random_disjoint_split() -> None:
    train, test = choose_test_clients(10, 3, rng=np.random.default_rng(0))
    assert len(test) == 3 and len(train) == 7
    assert sorted([*train.tolist(), *test.tolist()]) == list(range(10))
    picks = {tuple(choose_test_clients(10, 3, rng=np.random.default_rng(s))[1]) for s in range(20)}
    assert len(picks) > 10  # not always the same positions
    with pytest.raises(ValueError, match="num_test_clients"):
        choose_test_clients(3, 4, rng=np.random.default_rng(0))


@pytest.mark.parametrize(
    ("n", "fraction", "train"), [(10, 0.1, 9), (64, 0.1, 57), (7, 0.0, 7), (5, 0.5, 2)]
)
def test_train_test_indices_follow_the_fedprox_rule(n: int, fraction: float, train: int) -> None:
    tr, te = train_test_indices(n, fraction, rng=np.random.default_rng(0))
    assert len(tr) == train and len(te) == n - train
    assert sorted([*tr.tolist(), *te.tolist()]) == list(range(n))
    with pytest.raises(ValueError, match="test_fraction"):
        train_test_indices(n, 1.0, rng=np.random.default_rng(0))


def test_rotate_images_matches_rot90_and_composes() -> None:
    rng = np.random.default_rng(0)
    images = rng.integers(0, 255, size=(5, 36)).astype(np.float32)
    for turns in range(4):
        rotated = rotate_images(images, (6, 6), turns)
        expected = np.rot90(images.reshape(5, 6, 6), k=turns, axes=(1, 2)).reshape(5, 36)
        np.testing.assert_array_equal(rotated, expected)
        np.testing.assert_array_equal(rotate_images(rotated, (6, 6), 4 - turns), images)
    with pytest.raises(ValueError, match="shape"):
        rotate_images(images, (5, 5), 1)
    with pytest.raises(ValueError, match="square"):
        rotate_images(images, (4, 9), 1)
