"""Model DP for Fed+: the global models carry the clients' distributed discrete Gaussian noise."""

from __future__ import annotations

import numpy as np
import pytest

from protocols.aggregation import (
    AverageSettings,
    DiscreteGaussianNoise,
    fedplus_aggregate,
    secure_weighted_average,
)
from protocols.training.data import FederatedDataset
from protocols.training.datasets import synthetic_iid
from protocols.training.fedplus import FedPlusConfig, train_fedplus
from protocols.training.privacy import DEFAULT_DP_CLIP


@pytest.fixture(scope="module")
def data() -> FederatedDataset:
    return synthetic_iid(num_clients=40, num_test_clients=0, seed=3)


def _config(**changes: object) -> FedPlusConfig:
    base = FedPlusConfig(
        algorithm="fedavg+",
        rounds=3,
        clients_per_round=20,
        local_steps=2,
        lr=0.1,
        secure=False,
        epsilon=5.0,
    )
    return base.with_changes(**changes)


@pytest.mark.parametrize("algorithm", ["fedavg+", "fedprox"])
def test_the_mean_path_spends_one_planned_average_per_round(
    data: FederatedDataset, algorithm: str
) -> None:
    # weighting="data" is overridden under DP: a party's example count is a private weight.
    result = train_fedplus(_config(algorithm=algorithm, weighting="data"), data)
    assert result.privacy is not None and result.dp_covers == "model"
    ledger = result.privacy["ledger"]
    assert len(ledger) == 3 and {entry["relation"] for entry in ledger} == {"add_remove"}
    plan = result.privacy["plan"]
    assert plan["averages_per_round"] == 1 and plan["planned_survivors"] == 20
    assert all(entry["rho"] == pytest.approx(plan["average_rho_per_average"]) for entry in ledger)
    assert result.epsilon_spent is not None and 4.99 < result.epsilon_spent <= 5.0
    assert result.config.clip == DEFAULT_DP_CLIP and result.rounds_skipped == 0
    record = result.to_dict()
    assert record["model_dp"] and record["epsilon_spent"] == result.epsilon_spent


def test_without_epsilon_there_is_no_dp(data: FederatedDataset) -> None:
    result = train_fedplus(_config(epsilon=None), data)
    assert result.privacy is None and result.rho_spent is None and result.epsilon_spent is None
    assert result.dp_covers == "nothing (no DP)" and not result.to_dict()["model_dp"]


def test_the_noise_moves_the_model_and_only_the_noise_seed_moves_it(
    data: FederatedDataset,
) -> None:
    first = train_fedplus(_config(noise_seed=1), data)
    again = train_fedplus(_config(noise_seed=1), data)
    other = train_fedplus(_config(noise_seed=2), data)
    exact = train_fedplus(_config(epsilon=None, update_clip=DEFAULT_DP_CLIP), data)
    np.testing.assert_array_equal(first.global_parameters, again.global_parameters)
    assert not np.allclose(first.global_parameters, other.global_parameters)
    assert not np.allclose(first.global_parameters, exact.global_parameters)


def test_fedgeomed_plus_pays_every_weiszfeld_average_and_never_withholds(
    data: FederatedDataset,
) -> None:
    config = _config(
        algorithm="fedgeomed+", aggregation_method="weiszfeld", aggregation_iterations=2
    )
    assert config.averages_per_round == 3
    result = train_fedplus(config, data)
    assert result.privacy is not None and result.privacy["plan"]["averages_per_round"] == 3
    # The Weiszfeld weights' public floor keeps a noisy weight sum ≤ 0 from ending a round.
    assert result.rounds_skipped == 0
    assert result.epsilon_spent is not None and result.epsilon_spent <= 5.0


def test_dropouts_withhold_rounds_and_never_overspend(data: FederatedDataset) -> None:
    result = train_fedplus(_config(rounds=6, dropout=0.3), data)
    assert result.epsilon_spent is not None and result.epsilon_spent <= 5.0
    spent_rounds = {entry["round"] for entry in result.privacy["ledger"]}  # type: ignore[index]
    for record in result.history:
        if record.skipped and "planned" in str(record.skip_reason):
            assert record.index not in spent_rounds  # nothing released, nothing spent


def test_what_has_no_noisy_release_is_refused() -> None:
    with pytest.raises(ValueError, match="aggregation_method='moreau'"):
        FedPlusConfig(algorithm="fedcomed+", aggregation_method="weiszfeld", epsilon=5.0)
    with pytest.raises(ValueError, match="aggregation_method='weiszfeld'"):
        FedPlusConfig(algorithm="fedgeomed+", epsilon=5.0)
    noise = DiscreteGaussianNoise(rho=1.0)
    settings = AverageSettings(clip=1.0, noise=noise)
    for regularizer, method in (("l1", "weiszfeld"), ("l2", "moreau")):
        with pytest.raises(ValueError, match="no noisy release"):
            fedplus_aggregate(
                np.ones((4, 2)),
                regularizer=regularizer,  # type: ignore[arg-type]
                smoothing=0.1,
                method=method,  # type: ignore[arg-type]
                settings=settings,
                weight_cap=1.0,
            )


def test_fedcomed_plus_pays_every_pull_average(data: FederatedDataset) -> None:
    config = _config(algorithm="fedcomed+", aggregation_iterations=2)
    assert config.averages_per_round == 3 and config.clip == DEFAULT_DP_CLIP
    result = train_fedplus(config, data)
    assert result.privacy is not None and result.dp_covers == "model"
    ledger = result.privacy["ledger"]
    assert len(ledger) == 3 * 3 and result.rounds_skipped == 0
    assert result.epsilon_spent is not None and 4.99 < result.epsilon_spent <= 5.0
    assert np.isfinite(result.global_parameters).all()


def test_noisy_fedcomed_aggregate_tends_to_the_exact_one_and_resists_an_outlier() -> None:
    # Pulls clip(w − z, ±δ) are bounded by δ per coordinate: one far client moves each step by
    # at most δ/n per coordinate, while the mean moves by its whole offset / n.
    rng = np.random.default_rng(4)
    points = rng.normal(0.0, 0.05, size=(20, 3))
    points[0] = [0.9, -0.9, 0.0]  # inside the clip 2, far from the rest
    exact = fedplus_aggregate(
        points, regularizer="l1", smoothing=0.02, max_iterations=30, secure=False
    )
    mean = points.mean(axis=0)
    assert np.abs(exact.aggregate).max() < np.abs(mean).max() / 2
    settings = AverageSettings(
        bits=64,
        clip=2.0,
        noise=DiscreteGaussianNoise(rho=1e6),
        denominator="survivors",
    )
    noisy = fedplus_aggregate(
        points,
        regularizer="l1",
        smoothing=0.02,
        max_iterations=30,
        settings=settings,
        weight_cap=1.0,
        seed=5,
    )
    assert noisy.num_secure_sums == exact.num_secure_sums == 31
    np.testing.assert_allclose(noisy.aggregate, exact.aggregate, atol=5e-3)


def test_a_public_weight_floor_clamps_the_noisy_weight_sum() -> None:
    # Weights all at the cap 1 with floor 1: the weight sum is |S| exactly, whatever the noise.
    vectors = np.full((6, 3), 0.1)
    noise = DiscreteGaussianNoise(rho=1e-4, min_survivors=6)
    settings = AverageSettings(clip=1.0, noise=noise)
    result = secure_weighted_average(
        vectors, np.ones(6), settings=settings, weight_cap=1.0, weight_floor=1.0, seed=0
    )
    assert result.server_view().weight_sum == pytest.approx(6.0)
    with pytest.raises(ValueError, match="weight_floor"):
        secure_weighted_average(
            vectors, np.ones(6), settings=settings, weight_cap=1.0, weight_floor=-1.0
        )
