"""DP for the model: the trainers' noisy secure averages and the run's one budget."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dpquantile import ZCDPAccountant, rho_for_epsilon
from protocols.aggregation._rotation import padded_dimension
from protocols.aggregation.secure_average import AverageResult, secure_weighted_average
from protocols.training import TrainerConfig
from protocols.training import trainers as trainers_module
from protocols.training.data import FederatedDataset
from protocols.training.datasets import synthetic, synthetic_iid
from protocols.training.privacy import DEFAULT_DP_CLIP, RunPrivacyPlan
from protocols.training.trainers import FederatedTrainer, train
from secagg import HeadroomError


@pytest.fixture(scope="module")
def data() -> FederatedDataset:
    return synthetic(1, 1, num_clients=24, num_test_clients=0, seed=0)


def dp(**changes: object) -> TrainerConfig:
    base = TrainerConfig(rounds=4, clients_per_round=12, seed=1, epsilon=5.0)
    return base.with_changes(**changes)


def test_plan_splits_the_whole_budget_over_every_release() -> None:
    plan = RunPrivacyPlan.split(
        "both", epsilon=5.0, delta=1e-5, rounds=10, averages_per_round=2, survivors=10
    )
    total = rho_for_epsilon(5.0, 1e-5)
    assert plan.threshold_rho is not None and plan.average_rho is not None
    assert 10 * plan.threshold_rho == pytest.approx(0.5 * total, rel=1e-5)
    assert 20 * plan.average_rho == pytest.approx(0.5 * total, rel=1e-5)
    assert ZCDPAccountant().compose(plan.schedule()).epsilon(1e-5) <= 5.0
    with pytest.raises(ValueError, match="share"):
        RunPrivacyPlan.split(
            "both",
            epsilon=5.0,
            delta=1e-5,
            rounds=1,
            averages_per_round=1,
            survivors=2,
            threshold_share=0.0,
        )


def test_fedavg_with_model_dp_spends_one_planned_share_per_round(data: FederatedDataset) -> None:
    config = dp()
    assert config.dp_scope == "model" and config.clip == DEFAULT_DP_CLIP
    result = train(data, config)
    assert result.dp_covers == "model" and result.rounds_skipped == 0
    assert result.privacy is not None
    plan, ledger = result.privacy["plan"], result.privacy["ledger"]
    assert plan["neighbouring"] == "add_remove" and plan["averages_per_round"] == 1
    assert [entry["round"] for entry in ledger] == [0, 1, 2, 3]
    for entry in ledger:
        assert entry["event"] == "DistributedDiscreteGaussian"
        assert entry["relation"] == "add_remove" and entry["num_clients"] == 12
        assert entry["rho"] <= plan["average_rho_per_average"] * (1 + 1e-12)
    assert result.epsilon_spent is not None and result.epsilon_spent <= 5.0
    assert result.epsilon_spent == pytest.approx(5.0, rel=1e-3)  # every planned release ran
    record = json.loads(json.dumps(result.to_dict()))
    assert record["model_dp"] is True and record["update_clip_public"] is True
    assert len(record["privacy"]["ledger"]) == 4


def test_deltafl_dp_on_both_composes_on_replace_one(data: FederatedDataset) -> None:
    config = dp(algorithm="deltafl", theta=0.5)
    assert config.dp_scope == "both"
    result = train(data, config)
    assert result.privacy is not None and result.dp_covers == "model + thresholds"
    ledger = result.privacy["ledger"]
    assert {entry["relation"] for entry in ledger} == {"replace_one"}
    wire = padded_dimension(data.num_features * 10 + 10 + 1)  # flattened rows (KLS21)
    quantiles = [e for e in ledger if e["dimension"] != wire]
    averages = [e for e in ledger if e["dimension"] == wire]
    # Under model DP the tail divides by θ·|survivors|: exactly one noisy average per round,
    # released even when the tail is empty (the server cannot tell), planned as one.
    assert len(quantiles) == 4 and len(averages) == 4
    assert result.privacy["plan"]["averages_per_round"] == 1
    assert not any(record.skipped for record in result.history)
    assert result.epsilon_spent is not None and result.epsilon_spent <= 5.0
    settings = FederatedTrainer(data, config)._settings(32, None)
    assert settings.denominator == "released"  # no plan, no noise: the exact tail weight
    trainer = FederatedTrainer(data, config)
    noisy = trainer._settings(32, trainer.privacy)
    assert (noisy.denominator, noisy.denominator_share) == ("survivors", 0.5)


@pytest.mark.parametrize("algorithm", ["rfa", "rfa1"])
def test_rfa_with_model_dp_pays_every_weiszfeld_average(
    data: FederatedDataset, algorithm: str
) -> None:
    config = dp(algorithm=algorithm, rfa_max_iterations=2, rounds=3)
    result = train(data, config)
    assert result.privacy is not None
    ledger = result.privacy["ledger"]
    per_round = 3 if algorithm == "rfa" else 1
    assert result.privacy["plan"]["averages_per_round"] == per_round
    # Every released average is paid, the ones whose noisy weight sum then proved non-positive
    # (the round skipped) too; never more than planned.
    assert result.num_secure_averages <= len(ledger) <= 3 * per_round
    assert result.epsilon_spent is not None and result.epsilon_spent <= 5.0
    assert config.rfa_nu == pytest.approx(0.25 * DEFAULT_DP_CLIP)


def test_dropouts_withhold_releases_and_never_overspend(data: FederatedDataset) -> None:
    config = dp(algorithm="deltafl", theta=0.5, dropout=0.3, rounds=6)
    result = train(data, config)
    assert result.epsilon_spent is not None and result.epsilon_spent <= 5.0
    assert result.rho_spent is not None
    assert result.rho_spent <= rho_for_epsilon(5.0, 1e-5)
    skipped = [r for r in result.history if r.skipped]
    assert all(r.skip_reason for r in skipped)


def test_a_schedule_the_ring_cannot_hold_is_refused_before_round_one(
    data: FederatedDataset,
) -> None:
    with pytest.raises(HeadroomError, match="bits=12"):
        FederatedTrainer(data, dp(bits=12, epsilon=0.01))


def test_the_released_model_average_carries_the_planned_noise(
    data: FederatedDataset, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The server's view of a model-DP round is the noisy average: compare it with the exact
    # average of the same clipped updates. With d = 611 coordinates the sample SD of the
    # difference is within ±25 % of the noise's SD except with probability < 1e-12 (χ² tail).
    seen: list[tuple[np.ndarray, np.ndarray, AverageResult]] = []
    real = secure_weighted_average

    def spy(vectors: np.ndarray, weights: np.ndarray, **kwargs: object) -> AverageResult:
        result = real(vectors, weights, **kwargs)  # type: ignore[arg-type]
        seen.append((np.array(vectors), np.array(weights), result))
        return result

    monkeypatch.setattr(trainers_module, "secure_weighted_average", spy)
    trainer = FederatedTrainer(data, dp(epsilon=20.0, rounds=1))
    record = trainer.run_round(0)
    assert not record.skipped
    vectors, weights, noisy = seen[-1]
    assert np.all(weights == 1.0)  # every client counts once under model DP
    exact = real(vectors, weights, clip=DEFAULT_DP_CLIP, secure=False)
    assert noisy.event is not None and noisy.quantization_step is not None
    # Σ of 12 clients' N_Z(0, σ²) per grid coordinate, rotated back (orthonormal), in model
    # units, over the public number of survivors (FedAvg's fixed denominator under model DP).
    survivors = len(noisy.survivors)
    expected_sd = math.sqrt(survivors) * noisy.event.sigma * noisy.quantization_step / survivors
    difference = noisy.average - exact.average
    assert np.std(difference) == pytest.approx(expected_sd, rel=0.25)


def test_no_dp_is_reported_as_no_dp(data: FederatedDataset) -> None:
    result = train(data, TrainerConfig(rounds=1, clients_per_round=4, secure=False))
    assert result.rho_spent is None and result.epsilon_spent is None
    assert result.privacy is None and result.dp_covers == "nothing (no DP)"
    assert result.history[0].rho_spent is None
    assert not result.config.clip_is_public


def test_the_central_gaussian_baseline_spends_the_same_plan(data: FederatedDataset) -> None:
    config = dp(secure=False, dp_noise="central", rounds=3)
    central = train(data, config)
    distributed = train(data, config.with_changes(dp_noise="distributed"))
    assert central.privacy is not None and distributed.privacy is not None
    assert [e["event"] for e in central.privacy["ledger"]] == ["ZCDP"] * 3
    share = central.privacy["plan"]["average_rho_per_average"]
    assert all(e["rho"] == pytest.approx(share) for e in central.privacy["ledger"])
    assert central.epsilon_spent == pytest.approx(distributed.epsilon_spent, rel=1e-6)
    assert central.num_secure_sums == 0  # a trusted server: no secure sum at all
    for wrong in ({"secure": True}, {"algorithm": "deltafl"}, {"epsilon": None, "dp": None}):
        with pytest.raises(ValueError, match="central"):
            config.with_changes(**wrong)


@settings(max_examples=12, deadline=None)
@given(
    algorithm=st.sampled_from(["fedavg", "deltafl", "rfa", "rfa1"]),
    dropout=st.sampled_from([0.0, 0.2, 0.5]),
    rounds=st.integers(1, 3),
    epsilon=st.sampled_from([0.5, 5.0, 40.0]),
    scope=st.sampled_from(["model", "thresholds", "both"]),
    seed=st.integers(0, 2**16),
)
def test_whatever_drops_a_run_never_spends_more_than_planned(
    algorithm: str, dropout: float, rounds: int, epsilon: float, scope: str, seed: int
) -> None:
    if scope != "model" and algorithm != "deltafl":
        scope = "model"
    if scope == "model" and algorithm == "deltafl":
        scope = "both"  # Δ-FL's model is DP only with a private threshold
    data = synthetic(1, 1, num_clients=12, num_test_clients=0, seed=seed % 7)
    config = TrainerConfig(
        algorithm=algorithm,  # type: ignore[arg-type]
        rounds=rounds,
        clients_per_round=8,
        epsilon=epsilon,
        dp=scope,  # type: ignore[arg-type]
        dropout=dropout,
        rfa_max_iterations=1,
        secure=False,
        seed=seed,
    )
    result = train(data, config)
    assert result.privacy is not None and result.epsilon_spent is not None
    plan = result.privacy["plan"]
    assert result.epsilon_spent <= epsilon and result.rho_spent is not None
    assert result.rho_spent <= plan["rho"] * (1 + 1e-9)
    per_round = plan["averages_per_round"] + (1 if plan["threshold_rho_per_round"] else 0)
    for index in range(rounds):
        assert sum(1 for e in result.privacy["ledger"] if e["round"] == index) <= per_round


def test_the_distributed_noise_is_within_5_percent_of_the_central_gaussians() -> None:
    # README: "the DDG's total noise is 1.003× the central one" at the KLS21 headline's shape
    # (100 clients, d = 7 850, 16 bits). Central: σ = c/√(2ρ); distributed: √n·σ_grid·step.
    from protocols.aggregation import AverageSettings, DiscreteGaussianNoise  # noqa: PLC0415

    rho, n, d = 0.0275, 100, 7850
    settings = AverageSettings(
        bits=16,
        clip=1.0,
        noise=DiscreteGaussianNoise(rho=rho),
        rotate=True,
        rounding_beta=math.exp(-0.5),
        denominator="survivors",
    )
    result = secure_weighted_average(
        np.zeros((n, d)), np.ones(n), settings=settings, weight_cap=1.0, seed=1, secure=False
    )
    assert result.event is not None and result.quantization_step is not None
    distributed = math.sqrt(n) * result.event.sigma * result.quantization_step
    ratio = distributed * math.sqrt(2.0 * rho)
    assert 1.0 < ratio < 1.005  # 1.034 while the fixed denominator still sent a weight coordinate


def test_the_adaptive_clip_pays_its_counts_and_follows_the_median_norm() -> None:
    data = synthetic_iid(num_clients=100, num_test_clients=0, seed=2)
    config = TrainerConfig(
        rounds=8,
        clients_per_round=40,
        lr=0.5,
        secure=False,
        epsilon=5.0,
        adaptive_clip=True,
        update_clip=0.05,  # far below the median norm (≈ 0.8 here): the clip must grow
        clip_rate=0.5,
    )
    result = train(data, config)
    assert result.privacy is not None and result.epsilon_spent is not None
    plan = result.privacy["plan"]
    assert plan["clip_rho_per_round"] == pytest.approx(0.1 * plan["rho"] / 8)
    assert plan["average_rho_per_average"] == pytest.approx(0.9 * plan["rho"] / 8)
    ledger = result.privacy["ledger"]
    counts = [e for e in ledger if e["rho"] == pytest.approx(plan["clip_rho_per_round"])]
    assert len(counts) == 8 and len(ledger) == 16 and result.epsilon_spent <= 5.0
    clips = result.privacy["adaptive_clip"]
    assert len(clips) == 9 and clips[0] == 0.05
    assert clips[-1] > 4 * clips[0]  # every count says "all norms above C": C grows
    with pytest.raises(ValueError, match="adaptive_clip needs model DP"):
        TrainerConfig(adaptive_clip=True)
    with pytest.raises(ValueError, match="adaptive_clip needs model DP"):
        TrainerConfig(algorithm="deltafl", epsilon=5.0, dp="thresholds", adaptive_clip=True)


@pytest.mark.parametrize("method", ["histogram", "tracking"])
def test_fewer_threshold_releases_each_get_more_of_the_budget(
    data: FederatedDataset, method: str
) -> None:
    config = dp(
        algorithm="deltafl",
        dp="thresholds",
        rounds=7,
        threshold_method=method,
        threshold_every=3,
        secure=False,
    )
    result = train(data, config)
    assert result.privacy is not None and result.epsilon_spent is not None
    plan = result.privacy["plan"]
    assert plan["threshold_releases"] == 3  # rounds 0, 3 and 6
    assert plan["threshold_rho_per_round"] == pytest.approx(plan["rho"] / 3)
    released = sorted({entry["round"] for entry in result.privacy["ledger"]})
    assert released == [0, 3, 6] and result.epsilon_spent <= 5.0
    thresholds = [record.threshold for record in result.history]
    if method == "histogram":  # the rounds between reuse the released threshold
        assert thresholds[0] == thresholds[1] == thresholds[2]
        assert thresholds[3] == thresholds[4] == thresholds[5]
    with pytest.raises(ValueError, match="threshold_every"):
        dp(algorithm="deltafl", dp="thresholds", threshold_every=0)


def test_the_threshold_reader_reaches_the_dp_quantile(data: FederatedDataset) -> None:
    config = dp(
        algorithm="deltafl",
        dp="thresholds",
        threshold_method="histogram",
        threshold_reader="isotonic",
        secure=False,
    )
    trainer = FederatedTrainer(data, config)
    settings = trainer._quantile_settings()
    assert settings is not None and settings.reader == "isotonic"
    assert train(data, config).epsilon_spent <= 5.0  # type: ignore[operator]
    with pytest.raises(ValueError, match="threshold_reader must be one of"):
        dp(threshold_reader="last")
