"""FFGB trainers and weak learners: exact oracle = functional gradient descent, the residual,
clipping, FFGB.L, the secure path and errors."""

from __future__ import annotations

import numpy as np
import pytest

from protocols.training.data import ClientData, FederatedDataset
from protocols.training.datasets import dataset_available, digits, synthetic
from protocols.training.ffgb import FFGBConfig, FFGBTrainer, train_ffgb
from protocols.training.homogeneity import homogeneity_split
from protocols.training.partition import IIDSplit
from protocols.training.weak_learners import (
    FourierRidgeLearner,
    InterpolatingLearner,
    MLPRegressorLearner,
    random_fourier_features,
)


def shared_inputs(classes: int, *, clients: int = 3, points: int = 6, seed: int = 0):
    """Semi-heterogeneous data (FFGB §3.1): every client has the same inputs, its own labels."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(points, 2))
    parties, labels = [], []
    for k in range(clients):
        y = rng.integers(0, classes, size=points) if classes else rng.normal(size=points) * 3
        labels.append(y)
        parties.append(ClientData(k, X, y, X, y))
    data = FederatedDataset("shared", tuple(parties), (), 2, max(classes, 1), seed)
    return data, X, labels


def exact_config(**changes: object) -> FFGBConfig:
    base = FFGBConfig(
        rounds=8,
        clients_per_round=3,
        weighting="uniform",
        secure=False,
        evaluation="heldout",
        eval_every=0,
    )
    return base.with_changes(**changes)


@pytest.mark.parametrize("mu", [0.0, 0.2])
def test_exact_oracle_one_step_is_functional_gradient_descent(mu: float) -> None:
    """γ = 1, K = 1: f ← (1 − ημ)f − η·meanᵢ(softmax(f) − onehot(yᵢ)) on the shared points."""
    data, X, labels = shared_inputs(3)
    eta = 0.7
    config = exact_config(local_steps=1, step_size=eta, mu=mu)
    trainer = FFGBTrainer(data, config, InterpolatingLearner())
    trainer.run()
    onehots = [np.eye(3)[y] for y in labels]
    f = np.zeros((6, 3))
    for _ in range(config.rounds):
        p = np.exp(f - f.max(axis=1, keepdims=True))
        p /= p.sum(axis=1, keepdims=True)
        f = (1 - eta * mu) * f - eta * np.mean([p - y for y in onehots], axis=0)
    np.testing.assert_allclose(trainer.model(X), f, atol=1e-12)


def test_exact_oracle_k_steps_is_local_fgd_then_average() -> None:
    """γ = 1, K > 1: each client runs K steps of FGD on its own risk; the server averages."""
    data, X, labels = shared_inputs(0)
    schedule = exact_config(local_steps=4, step_size=0.8, step_power=0.5, residual="none")
    trainer = FFGBTrainer(data, schedule, InterpolatingLearner())
    trainer.run()
    f = np.zeros(6)
    for t in range(schedule.rounds):
        finals = []
        for y in labels:
            g = f.copy()
            for k in range(schedule.local_steps):
                g = g - schedule.step(t, k) * (g - y)
            finals.append(g)
        f = np.mean(finals, axis=0)
    np.testing.assert_allclose(trainer.model(X)[:, 0], f, atol=1e-12)


def weak_gap(residual: str, local_steps: int, step_size: float, power: float) -> float:
    data, X, labels = shared_inputs(0, points=5)
    config = exact_config(
        rounds=100,
        local_steps=local_steps,
        step_size=step_size,
        step_power=power,
        residual=residual,
    )
    trainer = FFGBTrainer(data, config, InterpolatingLearner(keep=1))
    trainer.run()
    return float(np.abs(trainer.model(X)[:, 0] - np.mean(labels, axis=0)).max())


def test_residual_makes_a_weak_oracle_converge() -> None:
    """Top-1 oracle, heterogeneous labels: without error feedback FFGB stalls far from the optimum
    (meanᵢ top1(∇Rᵢ) ≠ 0 there); with the residual it converges."""
    without = weak_gap("none", 10, 5.0, 1.0)
    persistent = weak_gap("persistent", 10, 5.0, 1.0)
    assert without > 0.5
    assert persistent < 0.05
    assert persistent < without / 20


@pytest.mark.slow
def test_per_round_residual_helps_with_enough_local_steps() -> None:
    without = weak_gap("none", 20, 2.0, 0.5)
    per_round = weak_gap("round", 20, 2.0, 0.5)
    assert per_round < without / 5


def test_ffgb_c_keeps_functions_bounded() -> None:
    """Π_B on f^t and Π_G₁ on the query: |f^{t+1}| ≤ B + K·η·G₁ with an exact oracle."""
    data, X, _ = shared_inputs(3)
    config = exact_config(
        variant="ffgb-c",
        rounds=30,
        local_steps=3,
        step_size=1.0,
        function_clip=0.5,
        query_clip=0.1,
    )
    trainer = FFGBTrainer(data, config, InterpolatingLearner())
    trainer.run()
    bound = config.function_clip + config.local_steps * config.step_size * config.query_clip
    assert np.abs(trainer.model(X)).max() <= bound + 1e-12
    unclipped = FFGBTrainer(data, config.with_changes(variant="ffgb"), InterpolatingLearner())
    unclipped.run()
    assert np.abs(unclipped.model(X)).max() > bound


def test_ffgb_l_reaches_the_least_squares_optimum() -> None:
    data, X, labels = shared_inputs(0)
    config = exact_config(variant="ffgb-l", rounds=40, local_steps=3, step_size=0.5)
    trainer = FFGBTrainer(data, config, InterpolatingLearner())
    trainer.run()
    np.testing.assert_allclose(trainer.model(X)[:, 0], np.mean(labels, axis=0), atol=1e-6)


needs_digits = pytest.mark.skipif(
    not dataset_available("digits"),
    reason="scikit-learn's digits not installed (pip install -e '.[data]')",
)


def small_images() -> FederatedDataset:
    source = digits(
        num_clients=12,
        num_test_clients=0,
        samples_per_client=50,
        split=IIDSplit(),
        test_fraction=0.0,
        seed=0,
    )
    return homogeneity_split(source, 0.3, num_clients=8, num_test_clients=2, seed=1)


@needs_digits
def test_fourier_ffgb_learns_and_secure_matches_plain() -> None:
    data = small_images()
    config = FFGBConfig(rounds=4, clients_per_round=4, local_steps=3, num_features=64)
    secure = train_ffgb(config, data, seed=3)
    plain = train_ffgb(config, data, seed=3, secure=False)
    X = data.test_clients[0].X_test
    assert np.abs(secure.model(X) - plain.model(X)).max() < 1e-4
    assert secure.num_secure_averages == 4 and secure.upload_bytes > 0 == plain.upload_bytes
    assert secure.payload_bytes == plain.payload_bytes == 4 * 4 * (64 * 10 + 1) * 4
    assert secure.errors.mean < 0.5  # ten classes: chance is 0.9
    assert secure.evaluation == "test_clients"


@needs_digits
def test_mlp_learner_runs_in_the_clear_only() -> None:
    data = small_images()
    with pytest.raises(ValueError, match="not compatible with secure aggregation"):
        FFGBConfig(learner="mlp")
    with pytest.raises(ValueError, match="not compatible with secure aggregation"):
        FFGBTrainer(data, FFGBConfig(clients_per_round=4), MLPRegressorLearner())
    config = FFGBConfig(
        rounds=2, clients_per_round=3, local_steps=2, learner="mlp", mlp_steps=20, secure=False
    )
    result = train_ffgb(config, data)
    assert not result.secure_aggregation_compatible
    assert result.num_secure_averages == 0
    per_network = 64 * 32 + 32 + 32 * 10 + 10
    assert result.payload_bytes == 2 * 3 * 2 * per_network * 8


def test_non_finite_client_outputs_are_dropped_and_counted() -> None:
    data, _, _ = shared_inputs(0, clients=4)
    bad = data.train_clients[2]
    poisoned = ClientData(bad.client_id, bad.X_train, np.full(6, np.nan), bad.X_test, bad.y_test)
    clients = (*data.train_clients[:2], poisoned, data.train_clients[3])
    dirty = FederatedDataset("dirty", clients, (), 2, 1, 0)
    config = exact_config(rounds=3, clients_per_round=4, local_steps=2, step_size=0.5)
    trainer = FFGBTrainer(dirty, config, InterpolatingLearner())
    result = trainer.run()
    assert result.rejected_updates == 3
    assert all(r.rejected == 1 and r.survivors == 3 and not r.skipped for r in result.history)
    assert np.isfinite(trainer.model(bad.X_train)).all()


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"variant": "ffgb-x"}, "variant must be one of"),
        ({"local_steps": 0}, "local_steps must be an integer >= 1"),
        ({"step_size": 0.0}, "step_size must be positive"),
        ({"step_power": -1.0}, "step_power must be non-negative"),
        ({"mu": -0.1}, "mu must be non-negative"),
        ({"residual": "always"}, "residual must be"),
        ({"learner": "tree"}, "learner must be"),
        ({"ridge": 0.0}, "ridge must be positive"),
        ({"bandwidth": -1.0}, "bandwidth must be positive"),
        ({"function_clip": 0.0}, "function_clip must be positive"),
        ({"query_clip": float("nan")}, "query_clip must be positive \\(a finite number"),
        ({"clients_per_round": 1}, "clients_per_round must be an integer >= 2"),
        ({"dropout": 1.0}, "dropout must be a number"),
    ],
)
def test_bad_hyperparameters_raise_value_error(changes: dict[str, object], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        FFGBConfig(**changes)  # type: ignore[arg-type]


def test_learner_arguments_are_checked() -> None:
    with pytest.raises(ValueError, match="num_features must be an integer >= 1"):
        FourierRidgeLearner(num_features=0)
    with pytest.raises(ValueError, match="begin_round"):
        FourierRidgeLearner().fit([[0.0]], [[1.0]], rng=np.random.default_rng(0))
    with pytest.raises(ValueError, match="query must be finite"):
        InterpolatingLearner().fit([[0.0]], [[np.inf]], rng=np.random.default_rng(0))
    with pytest.raises(ValueError, match="same M"):
        InterpolatingLearner().fit([[0.0]], [[1.0], [2.0]], rng=np.random.default_rng(0))


def test_fourier_basis_is_a_function_of_the_seed() -> None:
    first = random_fourier_features(5, 3, 7, 2.0)
    again = random_fourier_features(5, 3, 7, 2.0)
    other = random_fourier_features(6, 3, 7, 2.0)
    assert np.array_equal(first[0], again[0]) and np.array_equal(first[1], again[1])
    assert not np.array_equal(first[0], other[0])
    assert first[1].min() >= 0.0 and first[1].max() < 2 * np.pi
    wide = random_fourier_features(1, 100, 100, 1.0)[0]
    assert abs(wide.mean()) < 0.05 and abs(wide.std() - 1.0) < 0.05


def test_runs_are_reproducible_from_the_seed() -> None:
    data = synthetic(1, 1, num_clients=5, num_test_clients=0, seed=0)
    config = FFGBConfig(rounds=2, clients_per_round=3, num_features=16, secure=False)
    X = data.train_clients[0].X_test
    first = train_ffgb(config, data, seed=4).model(X)
    again = train_ffgb(config, data, seed=4).model(X)
    other = train_ffgb(config, data, seed=5).model(X)
    assert np.array_equal(first, again) and not np.array_equal(first, other)
