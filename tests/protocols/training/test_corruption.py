"""RFA's corruption models: choice by data fraction, data poisoning, Gaussian and omniscient."""

from __future__ import annotations

import gzip
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from protocols.training import (
    CORRUPTION_KINDS,
    ClientData,
    Corruption,
    CorruptionPlan,
    FederatedDataset,
    corrupt_client,
    corrupt_dataset,
    corrupt_updates,
    corrupted_prefix,
    fashion_mnist,
    flip_labels,
    negate_images,
    omniscient_vector,
    select_corrupted_clients,
    synthetic,
)

# -- the corruption model -----------------------------------------------------------------------


def test_kinds_and_validation() -> None:
    assert CORRUPTION_KINDS == (
        "image_negation",
        "label_flip",
        "gaussian",
        "gaussian_replace",
        "omniscient",
    )
    assert [Corruption(k, 0.1).poisons_data for k in CORRUPTION_KINDS] == [
        True,
        True,
        False,
        False,
        False,
    ]
    assert all(
        Corruption(k, 0.1).poisons_updates != Corruption(k, 0.1).poisons_data
        for k in CORRUPTION_KINDS
    )
    with pytest.raises(ValueError, match="kind must be one of 'image_negation'"):
        Corruption("sign_flip", 0.1)  # type: ignore[arg-type]
    for bad in (-0.1, 1.01, float("nan")):
        with pytest.raises(ValueError, match=r"fraction must be a number in \[0, 1\]"):
            Corruption("omniscient", bad)
    with pytest.raises(TypeError, match="fraction"):
        Corruption("omniscient", "0.1")  # type: ignore[arg-type]
    assert Corruption("omniscient", 1).fraction == 1.0


# -- which clients: the prefix rule -------------------------------------------------------------


@settings(max_examples=200, deadline=None)
@given(
    sizes=hnp.arrays(np.int64, st.integers(1, 40), elements=st.integers(0, 1000)),
    fraction=st.floats(0.0, 1.0),
    seed=st.integers(0, 2**32 - 1),
)
def test_prefix_reaches_the_fraction_to_within_one_client(
    sizes: np.ndarray, fraction: float, seed: int
) -> None:
    chosen = corrupted_prefix(sizes, fraction, rng=np.random.default_rng(seed))
    target = fraction * sizes.sum()
    assert len(np.unique(chosen)) == len(chosen)
    if target <= 0:
        assert chosen.size == 0
        return
    assert sizes[chosen].sum() >= target  # at least the requested share ...
    assert sizes[chosen[:-1]].sum() < target  # ... and removing the last client drops below it


def test_prefix_is_a_prefix_of_the_seeded_shuffle() -> None:
    sizes = np.array([5, 10, 15, 20, 25, 30])
    order = np.random.default_rng(9).permutation(6)
    chosen = corrupted_prefix(sizes, 0.3, rng=np.random.default_rng(9))
    np.testing.assert_array_equal(chosen, order[: len(chosen)])


def test_prefix_rule_matches_a_plain_loop() -> None:
    # The RFA reference loop: take clients while the corrupted count is below ρ·N.
    rng = np.random.default_rng(0)
    for _ in range(200):
        sizes = rng.integers(1, 500, size=int(rng.integers(1, 30)))
        fraction = float(rng.uniform(0, 1))
        order = np.random.default_rng(1).permutation(sizes.size)
        taken: list[int] = []
        count = 0
        while count < fraction * sizes.sum():
            taken.append(int(order[len(taken)]))
            count += int(sizes[taken[-1]])
        got = corrupted_prefix(sizes, fraction, rng=np.random.default_rng(1))
        assert got.tolist() == taken


def test_select_corrupted_clients_on_a_dataset() -> None:
    data = synthetic(1, 1, num_clients=30, num_test_clients=5, max_samples_per_client=500, seed=0)
    sizes = data.train_sizes()
    for fraction in (0.0, 0.1, 0.25, 0.45):
        plan = select_corrupted_clients(data, Corruption("omniscient", fraction), seed=3)
        ids = sorted(plan.client_ids)
        share = sizes[ids].sum() / sizes.sum()
        assert plan.data_fraction == pytest.approx(share)
        assert share >= fraction
        assert share - sizes[ids].max(initial=0) / sizes.sum() < fraction or not ids
        assert all(i < 30 for i in ids)  # test clients are never corrupted
        assert plan.seed == 3
    again = select_corrupted_clients(data, Corruption("omniscient", 0.25), seed=3)
    other = select_corrupted_clients(data, Corruption("omniscient", 0.25), seed=4)
    assert again == select_corrupted_clients(data, Corruption("omniscient", 0.25), seed=3)
    assert other.client_ids != again.client_ids
    with pytest.raises(ValueError, match="seed"):
        select_corrupted_clients(data, Corruption("omniscient", 0.25), seed=-1)


# -- data poisoning -----------------------------------------------------------------------------


def test_flip_map_and_negation() -> None:
    labels = np.arange(10)
    np.testing.assert_array_equal(flip_labels(labels, 10), labels[::-1])
    assert np.all(flip_labels(labels, 10) != labels)  # even C: every label changes
    np.testing.assert_array_equal(flip_labels(np.arange(3), 3), [2, 1, 0])  # odd C: middle stays
    np.testing.assert_array_equal(flip_labels(flip_labels(labels, 10), 10), labels)
    with pytest.raises(ValueError, match=r"\[0, 9\]"):
        flip_labels(np.array([10]), 10)
    X = np.array([[0.0, 0.2, 1.0]], dtype=np.float32)
    out = negate_images(X)
    assert out.dtype == np.float32
    np.testing.assert_allclose(out, [[1.0, 0.8, 0.0]])


def test_corrupt_client_touches_only_the_training_split() -> None:
    client = ClientData(
        4, np.full((3, 2), 0.25), np.array([0, 1, 2]), np.full((2, 2), 0.25), np.array([1, 1])
    )
    negated = corrupt_client(client, "image_negation", 3)
    np.testing.assert_allclose(negated.X_train, 0.75)
    assert negated.X_test is client.X_test and negated.y_train is client.y_train
    flipped = corrupt_client(client, "label_flip", 3)
    np.testing.assert_array_equal(flipped.y_train, [2, 1, 0])
    assert flipped.y_test is client.y_test and flipped.client_id == 4
    with pytest.raises(ValueError, match="not a data-poisoning kind"):
        corrupt_client(client, "omniscient", 3)


def test_label_flip_poisons_exactly_the_planned_data() -> None:
    data = synthetic(1, 1, num_clients=20, num_test_clients=3, seed=1)
    plan = select_corrupted_clients(data, Corruption("label_flip", 0.3), seed=0)
    poisoned = corrupt_dataset(data, plan)
    changed = sum(
        int(np.sum(a.y_train != b.y_train))
        for a, b in zip(data.train_clients, poisoned.train_clients, strict=True)
    )
    # 10 classes: the flip changes every label, so the changed share is the plan's data fraction.
    assert changed / data.train_sizes().sum() == pytest.approx(plan.data_fraction)
    assert plan.data_fraction >= 0.3
    for a, b in zip(data.train_clients, poisoned.train_clients, strict=True):
        np.testing.assert_array_equal(a.y_test, b.y_test)
        np.testing.assert_array_equal(a.X_train, b.X_train)
    assert poisoned.test_clients is data.test_clients
    assert poisoned.config["corruption"]["client_ids"] == sorted(plan.client_ids)
    assert "corruption" not in data.config  # the original is untouched


def test_update_kinds_and_empty_plans_leave_the_data_alone() -> None:
    data = synthetic(1, 1, num_clients=5, num_test_clients=0, seed=1)
    for kind in ("gaussian", "omniscient"):
        plan = select_corrupted_clients(data, Corruption(kind, 0.5), seed=0)
        assert corrupt_dataset(data, plan) is data
    nobody = select_corrupted_clients(data, Corruption("label_flip", 0.0), seed=0)
    assert nobody.client_ids == frozenset() and corrupt_dataset(data, nobody) is data


def test_image_negation_needs_an_image_dataset() -> None:
    data = synthetic(1, 1, num_clients=5, num_test_clients=0, seed=1)
    plan = select_corrupted_clients(data, Corruption("image_negation", 0.5), seed=0)
    with pytest.raises(ValueError, match="image negation needs an image dataset"):
        corrupt_dataset(data, plan)


def test_image_negation_on_an_image_dataset(tmp_path: Path) -> None:
    rng = np.random.default_rng(0)
    images = rng.integers(0, 256, size=(600, 28, 28), dtype=np.uint8)
    labels = np.repeat(np.arange(10, dtype=np.uint8), 60)
    for prefix, part in (("train", slice(0, 500)), ("t10k", slice(500, 600))):
        for kind, array in (("images-idx3", images[part]), ("labels-idx1", labels[part])):
            header = bytes([0, 0, 8, array.ndim]) + b"".join(
                d.to_bytes(4, "big") for d in array.shape
            )
            with gzip.open(tmp_path / f"{prefix}-{kind}-ubyte.gz", "wb") as handle:
                handle.write(header + array.tobytes())
    data = fashion_mnist(
        num_clients=10, num_test_clients=2, samples_per_client=50, seed=0, data_dir=tmp_path
    )
    plan = select_corrupted_clients(data, Corruption("image_negation", 0.2), seed=0)
    poisoned = corrupt_dataset(data, plan)
    assert len(plan.client_ids) == 2  # equal sizes: ⌈0.2 × 10⌉ clients
    for a, b in zip(data.train_clients, poisoned.train_clients, strict=True):
        if a.client_id in plan.client_ids:
            np.testing.assert_allclose(b.X_train, 1 - a.X_train, atol=1e-7)
        else:
            assert b is a
        np.testing.assert_array_equal(a.y_train, b.y_train)


# -- update corruption --------------------------------------------------------------------------


@settings(max_examples=150, deadline=None)
@given(
    m=st.integers(1, 12),
    d=st.integers(1, 30),
    seed=st.integers(0, 2**32 - 1),
)
def test_omniscient_makes_the_weighted_mean_the_negative_honest_mean(
    m: int, d: int, seed: int
) -> None:
    rng = np.random.default_rng(seed)
    honest = rng.normal(size=(m, d)) * rng.uniform(0.1, 10)
    weights = rng.integers(1, 1000, size=m).astype(np.float64)
    corrupted = rng.random(m) < rng.uniform(0.05, 0.6)
    if not corrupted.any():
        corrupted[int(rng.integers(m))] = True
    sent = corrupt_updates(honest, weights, corrupted, Corruption("omniscient", 0.25))
    honest_mean = weights @ honest / weights.sum()
    scale = np.abs(honest).max() * weights.sum() / weights[corrupted].sum()
    np.testing.assert_allclose(weights @ sent / weights.sum(), -honest_mean, atol=1e-10 * scale)
    np.testing.assert_array_equal(sent[~corrupted], honest[~corrupted])
    assert np.all(sent[corrupted] == sent[corrupted][0])  # all corrupted clients send one vector


def test_omniscient_matches_the_rfa_reference_formula() -> None:
    # Reference code: corrupted_avg − 2 · (N / N_C) · avg, with data counts as weights.
    rng = np.random.default_rng(3)
    honest = rng.normal(size=(6, 4))
    counts = np.array([10.0, 50.0, 5.0, 30.0, 20.0, 8.0])
    corrupted = np.array([True, False, False, True, False, False])
    avg = counts @ honest / counts.sum()
    corrupted_avg = counts[corrupted] @ honest[corrupted] / counts[corrupted].sum()
    reference = corrupted_avg - 2 * counts.sum() / counts[corrupted].sum() * avg
    np.testing.assert_allclose(omniscient_vector(honest, counts, corrupted), reference)


def test_omniscient_edge_cases() -> None:
    honest = np.array([[1.0, 2.0], [3.0, -1.0]])
    weights = np.array([1.0, 3.0])
    everyone = corrupt_updates(honest, weights, np.array([True, True]), Corruption("omniscient", 1))
    np.testing.assert_allclose(weights @ everyone, -(weights @ honest))
    nobody = np.array([False, False])
    np.testing.assert_array_equal(
        corrupt_updates(honest, weights, nobody, Corruption("omniscient", 0.5)), honest
    )
    weightless = corrupt_updates(
        honest, np.array([0.0, 3.0]), np.array([True, False]), Corruption("omniscient", 0.5)
    )
    np.testing.assert_array_equal(weightless, honest)  # zero weight cannot move the mean
    with pytest.raises(ValueError, match="sum to 0"):
        omniscient_vector(honest, np.array([0.0, 3.0]), np.array([True, False]))


@pytest.mark.parametrize("kind", ["gaussian", "gaussian_replace"])
def test_gaussian_noise_has_the_variance_of_the_clients_own_update(kind: str) -> None:
    rng = np.random.default_rng(0)
    d = 20_000
    honest = np.stack([rng.normal(1.0, 0.5, d), rng.normal(-2.0, 3.0, d), rng.normal(0.0, 1.0, d)])
    corrupted = np.array([True, True, False])
    sent = corrupt_updates(
        honest,
        np.ones(3),
        corrupted,
        Corruption(kind, 0.5),  # type: ignore[arg-type]
        rng=np.random.default_rng(1),
    )
    np.testing.assert_array_equal(sent[2], honest[2])
    noise = sent[:2] - honest[:2] if kind == "gaussian" else sent[:2]
    expected_var = honest[:2].var(axis=1)  # each client's own σ², not a shared one
    # Sample variance of 20 000 normals: relative sd √(2/d) = 1 %; 6 % is a 6σ band.
    np.testing.assert_allclose(noise.var(axis=1), expected_var, rtol=0.06)
    assert np.all(np.abs(noise.mean(axis=1)) < 6 * np.sqrt(expected_var / d))


def test_gaussian_is_reproducible_and_needs_an_rng() -> None:
    honest = np.random.default_rng(0).normal(size=(4, 50))
    mask = np.array([True, False, True, False])
    corruption = Corruption("gaussian", 0.5)
    a = corrupt_updates(honest, np.ones(4), mask, corruption, rng=np.random.default_rng(7))
    b = corrupt_updates(honest, np.ones(4), mask, corruption, rng=np.random.default_rng(7))
    np.testing.assert_array_equal(a, b)
    with pytest.raises(TypeError, match="rng"):
        corrupt_updates(honest, np.ones(4), mask, corruption)


def test_corrupt_updates_never_mutates_and_validates() -> None:
    honest = np.arange(6.0).reshape(3, 2)
    copy = honest.copy()
    mask = np.array([True, False, False])
    for kind in CORRUPTION_KINDS:
        out = corrupt_updates(
            honest,
            np.ones(3),
            mask,
            Corruption(kind, 0.3),  # type: ignore[arg-type]
            rng=np.random.default_rng(0),
        )
        assert out is not honest and out.dtype == np.float64
    np.testing.assert_array_equal(honest, copy)
    for kind in ("label_flip", "image_negation"):  # data kinds act on data, not updates
        np.testing.assert_array_equal(
            corrupt_updates(honest, np.ones(3), mask, Corruption(kind, 0.3)),  # type: ignore[arg-type]
            honest,
        )
    with pytest.raises(ValueError, match="2-D"):
        corrupt_updates(np.ones(3), np.ones(3), mask, Corruption("omniscient", 0.3))
    with pytest.raises(ValueError, match="weights"):
        corrupt_updates(honest, -np.ones(3), mask, Corruption("omniscient", 0.3))
    with pytest.raises(ValueError, match="boolean mask"):
        corrupt_updates(honest, np.ones(3), np.array([1, 0, 0]), Corruption("omniscient", 0.3))
    bad = honest.copy()
    bad[1, 1] = np.inf
    with pytest.raises(ValueError, match="finite"):
        corrupt_updates(bad, np.ones(3), mask, Corruption("omniscient", 0.3))


def test_plan_mask_follows_the_ids() -> None:
    plan = CorruptionPlan(Corruption("gaussian", 0.2), 0, frozenset({3, 5}), 0.25)
    np.testing.assert_array_equal(plan.mask([5, 1, 3, 7]), [True, False, True, False])
    assert plan.is_corrupted(3) and not plan.is_corrupted(4)


def test_dataset_type_is_preserved() -> None:
    data = synthetic(0, 0, num_clients=4, num_test_clients=1, seed=2)
    plan = select_corrupted_clients(data, Corruption("label_flip", 0.5), seed=1)
    assert isinstance(corrupt_dataset(data, plan), FederatedDataset)
