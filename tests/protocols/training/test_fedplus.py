"""Fed+ trainers: σ → ∞ limit, personalisation, FedProx, secure path, errors."""

from __future__ import annotations

import numpy as np
import pytest

from protocols.training.data import ClientData, FederatedDataset
from protocols.training.datasets import synthetic
from protocols.training.fedplus import (
    FedPlusConfig,
    FedPlusTrainer,
    train_fedplus,
)
from protocols.training.models import MultinomialLogisticRegression


def regression_parties(shift: float = 0.5, spread: float = 2.0) -> FederatedDataset:
    """Three parties, y = x·wₖ + bₖ with different wₖ: a FedAvg optimum far from each local one."""
    rng = np.random.default_rng(0)
    clients = []
    for k in range(3):
        X = rng.normal(size=(20, 2))
        w = np.array([1.0, -1.0]) + spread * rng.normal(size=2)
        y = X @ w + shift * k + 0.1 * rng.normal(size=20)
        clients.append(ClientData(k, X, y, X, y))
    return FederatedDataset("tiny-regression", tuple(clients), (), 2, 1, 0)


def fedavg_solution(data: FederatedDataset) -> np.ndarray:
    """argmin Σₖ fₖ (equal sizes: pooled least squares), the FedAvg objective's minimiser."""
    X = np.vstack([c.X_train for c in data.train_clients])
    y = np.concatenate([c.y_train for c in data.train_clients])
    design = np.hstack([X, np.ones((X.shape[0], 1))])
    solution: np.ndarray = np.linalg.lstsq(design, y, rcond=None)[0]
    return solution


def fedavg_gap(sigma: float, rounds: int) -> tuple[float, float]:
    """(‖w̃ − w*_FedAvg‖, max‖wₖ − w̃‖) after a full-participation FedAvg+ run."""
    data = regression_parties()
    config = FedPlusConfig(
        algorithm="fedavg+",
        rounds=rounds,
        clients_per_round=3,
        local_steps=20,
        batch_size=20,
        lr=0.3,
        sigma=sigma,
        smoothing=10.0,
        secure=False,
    )
    trainer = FedPlusTrainer(data, config)
    trainer.run()
    centre = trainer.global_parameters
    spread = max(float(np.linalg.norm(w - centre)) for w in trainer.personal.values())
    return float(np.linalg.norm(centre - fedavg_solution(data))), spread


def test_sigma_growing_approaches_fedavg() -> None:
    """Fed+ fixed points: wₖ − w̃ = O(1/σ) and w̃ → argmin Σfₖ (fedplus_notes.md §4)."""
    gap_1, spread_1 = fedavg_gap(1.0, 100)
    gap_10, spread_10 = fedavg_gap(10.0, 150)
    assert gap_10 < gap_1 / 4
    assert spread_10 < spread_1 / 4
    assert gap_10 < 0.1


@pytest.mark.slow
def test_sigma_to_infinity_reduces_to_fedavg() -> None:
    gap, spread = fedavg_gap(100.0, 1000)
    assert gap < 0.02
    assert spread < 0.05


def test_personal_models_beat_the_global_model_on_their_own_data() -> None:
    data = regression_parties(shift=3.0, spread=3.0)
    config = FedPlusConfig(
        algorithm="fedgeomed+",
        rounds=60,
        clients_per_round=3,
        local_steps=20,
        batch_size=20,
        lr=0.1,
        sigma=0.1,
        smoothing=0.1,
        secure=False,
    )
    result = train_fedplus(config, data)
    assert result.errors.mean < result.global_errors.mean / 10


def test_fedprox_is_fedavg_plus_with_no_offset_and_global_start() -> None:
    """FedAvg+ with λ = 1 and δ → ∞ (θ → 0) is FedProx with μ = σ."""
    data = synthetic(1, 1, num_clients=6, num_test_clients=0, seed=0)
    base = FedPlusConfig(rounds=3, clients_per_round=3, lr=0.05, sigma=2.0, secure=False)
    fedprox = train_fedplus(base.with_changes(algorithm="fedprox", mixing=0.0), data)
    limit = train_fedplus(base.with_changes(algorithm="fedavg+", mixing=1.0, smoothing=1e12), data)
    np.testing.assert_allclose(fedprox.global_parameters, limit.global_parameters, atol=1e-9)


@pytest.mark.parametrize(
    "algorithm", ["fedavg+", "fedgeomed+", "fedcomed+", "fedprox", "fedavg", "rfa"]
)
def test_secure_matches_plain(algorithm: str) -> None:
    data = synthetic(0.5, 0.5, num_clients=5, num_test_clients=0, seed=1)
    config = FedPlusConfig(
        algorithm=algorithm,  # type: ignore[arg-type]
        rounds=2,
        clients_per_round=4,
        local_steps=5,
        lr=0.05,
        sigma=1.0,
        aggregation_iterations=3,
    )
    secure = train_fedplus(config, data, seed=4)
    plain = train_fedplus(config, data, seed=4, secure=False)
    assert secure.num_secure_sums == plain.num_secure_sums >= 2
    assert secure.upload_bytes > 0 == plain.upload_bytes
    assert secure.payload_bytes == plain.payload_bytes > 0
    np.testing.assert_allclose(secure.global_parameters, plain.global_parameters, atol=1e-5)


def test_non_finite_client_outputs_are_dropped_and_counted() -> None:
    data = synthetic(1, 1, num_clients=5, num_test_clients=0, seed=2)
    bad = data.train_clients[1]
    poisoned = ClientData(
        bad.client_id, np.full_like(bad.X_train, 1e300), bad.y_train, bad.X_test, bad.y_test
    )
    clients = (data.train_clients[0], poisoned, *data.train_clients[2:])
    dirty = FederatedDataset("dirty", clients, (), data.num_features, data.num_classes, data.seed)
    config = FedPlusConfig(rounds=4, clients_per_round=5, lr=0.05, sigma=1.0, secure=False)
    trainer = FedPlusTrainer(dirty, config)
    result = trainer.run()
    assert result.rejected_updates == 4
    assert all(r.rejected == 1 and r.survivors == 4 for r in result.history)
    assert bad.client_id not in trainer.personal
    assert np.isfinite(result.global_parameters).all()
    assert result.rounds_skipped == 0


def test_dropouts_shrink_the_sums_and_rounds_continue() -> None:
    data = synthetic(1, 1, num_clients=8, num_test_clients=0, seed=3)
    config = FedPlusConfig(
        algorithm="fedcomed+",
        rounds=4,
        clients_per_round=8,
        dropout=0.3,
        lr=0.05,
        sigma=1.0,
        aggregation_iterations=2,
    )
    result = train_fedplus(config, data)
    assert sum(r.dropped for r in result.history) > 0
    ran = [r for r in result.history if not r.skipped]
    assert ran and all(r.survivors == r.sampled - r.dropped < r.sampled for r in ran)
    # A round is skipped only when too few clients stay for the threshold (t = 4 needs 5).
    for r in result.history:
        if r.skipped:
            assert r.skip_reason is not None and r.skip_reason.startswith("TooFewSurvivorsError")
            assert r.sampled - r.dropped < 5 and r.survivors == 0


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"algorithm": "fedmed"}, "algorithm must be one of"),
        ({"sigma": 0.0}, "sigma must be positive"),
        ({"sigma": float("inf")}, "sigma must be positive \\(a finite number"),
        ({"lr": -0.1}, "lr must be positive"),
        ({"smoothing": 0.0}, "smoothing must be positive"),
        ({"mixing": 1.5}, r"mixing must be a number in \[0, 1\]"),
        ({"local_steps": 0}, "local_steps must be an integer >= 1"),
        ({"clients_per_round": 1}, "clients_per_round must be an integer >= 2"),
        ({"aggregation_method": "newton"}, "aggregation_method"),
        ({"weighting": "loss"}, "weighting must be"),
        ({"model": "cnn"}, "model must be one of"),
        ({"dropout": 1.0}, "dropout must be a number"),
        ({"bits": 4}, "bits must be an integer >= 8"),
    ],
)
def test_bad_hyperparameters_raise_value_error(changes: dict[str, object], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        FedPlusConfig(**changes)  # type: ignore[arg-type]


def test_more_clients_per_round_than_parties_raises() -> None:
    data = synthetic(1, 1, num_clients=3, num_test_clients=0, seed=0)
    with pytest.raises(ValueError, match="exceeds the 3 training clients"):
        train_fedplus(FedPlusConfig(clients_per_round=4), data)


def test_runs_are_reproducible_from_the_seed() -> None:
    data = synthetic(1, 1, num_clients=6, num_test_clients=0, seed=0)
    config = FedPlusConfig(rounds=2, clients_per_round=3, lr=0.05, sigma=1.0, secure=False)
    first = train_fedplus(config, data, seed=7)
    again = train_fedplus(config, data, seed=7)
    other = train_fedplus(config, data, seed=8)
    assert np.array_equal(first.global_parameters, again.global_parameters)
    assert not np.array_equal(first.global_parameters, other.global_parameters)
    assert first.seeds == {"seed": 7, "dataset_seed": 0}


def test_baselines_deploy_the_global_model_and_fedavg_ignores_sigma() -> None:
    data = synthetic(1, 1, num_clients=6, num_test_clients=0, seed=5)
    base = FedPlusConfig(rounds=3, clients_per_round=3, lr=0.05, secure=False)
    model = MultinomialLogisticRegression(data.num_features, data.num_classes)
    for algorithm in ("fedprox", "fedavg", "rfa"):
        result = train_fedplus(base.with_changes(algorithm=algorithm), data)
        # Recomputed here from the released global model, independently of the trainer.
        model.set_parameters(result.global_parameters)
        expected = [model.error_rate(c.X_test, c.y_test) for c in data.train_clients]
        np.testing.assert_allclose(result.client_errors, expected)
    personal = train_fedplus(base.with_changes(algorithm="fedgeomed+", sigma=0.1), data)
    assert not np.array_equal(personal.client_errors, personal.global_client_errors)
    one = train_fedplus(base.with_changes(algorithm="fedavg", sigma=1.0), data)
    other = train_fedplus(base.with_changes(algorithm="fedavg", sigma=50.0), data)
    assert np.array_equal(one.global_parameters, other.global_parameters)
    prox = train_fedplus(base.with_changes(algorithm="fedprox", sigma=50.0), data)
    assert not np.array_equal(one.global_parameters, prox.global_parameters)
