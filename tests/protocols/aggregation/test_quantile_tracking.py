"""Private quantile tracking (Andrew et al. 2021's geometric update) for Δ-FL's threshold."""

from __future__ import annotations

import math

import numpy as np
import pytest

from dpquantile import PrivacyBudget
from protocols.aggregation import (
    AverageSettings,
    DiscreteGaussianNoise,
    QuantileSettings,
    QuantileTracker,
    superquantile_aggregate,
)
from protocols.training import TrainerConfig
from protocols.training.datasets import synthetic
from protocols.training.trainers import train
from secagg import TooFewSurvivorsError

LOSSES = np.linspace(0.0, 4.0, 21)


def test_one_step_is_the_geometric_update_of_the_exact_count() -> None:
    tracker = QuantileTracker(theta=0.25, initial=1.0, rate=0.3)
    step = tracker.update(LOSSES, settings=AverageSettings(clip=1.0), secure=False)
    below = float(np.mean(LOSSES < 1.0))  # 5 of 21
    assert step.threshold == 1.0 and step.below == pytest.approx(below, abs=1e-8)
    assert step.next_threshold == pytest.approx(math.exp(-0.3 * (below - 0.75)))
    assert tracker.threshold == step.next_threshold > 1.0  # too few below: the threshold rises


@pytest.mark.parametrize("theta", [0.1, 0.5, 0.8])
def test_the_tracker_settles_at_the_target_quantile(theta: float) -> None:
    tracker = QuantileTracker(theta=theta, initial=0.5, rate=0.2)
    for _ in range(200):
        tracker.update(LOSSES, settings=AverageSettings(clip=1.0), secure=False)
    target = float(np.quantile(LOSSES, 1.0 - theta))
    assert tracker.threshold == pytest.approx(target, abs=0.25)  # one grid gap of LOSSES


def test_a_noisy_count_is_paid_and_withheld_below_plan() -> None:
    budget = PrivacyBudget(epsilon=5.0, delta=1e-5)
    tracker = QuantileTracker(theta=0.5, initial=2.0)
    noisy = AverageSettings(clip=1.0, noise=DiscreteGaussianNoise(rho=0.1, min_survivors=20))
    step = tracker.update(LOSSES, settings=noisy, secure=True, seed=1, budget=budget)
    assert len(budget.ledger) == 1 and step.result.event is not None
    assert step.result.event.rho <= 0.1
    before = tracker.threshold
    with pytest.raises(TooFewSurvivorsError):
        tracker.update(
            LOSSES,
            settings=noisy,
            secure=False,
            seed=2,
            budget=budget,
            dropouts={"masked_input": [0, 1]},
        )
    assert tracker.threshold == before


def test_a_public_threshold_replaces_the_quantile() -> None:
    rng = np.random.default_rng(0)
    vectors = rng.standard_normal((21, 3))
    result = superquantile_aggregate(
        vectors, np.ones(21), LOSSES, theta=0.5, threshold=3.0, secure=False
    )
    assert result.threshold == 3.0 and result.quantile is None
    assert result.tail == tuple(int(i) for i in np.flatnonzero(LOSSES >= 3.0))
    with pytest.raises(ValueError, match="not both"):
        superquantile_aggregate(
            vectors,
            np.ones(21),
            LOSSES,
            theta=0.5,
            threshold=3.0,
            quantile=QuantileSettings(rho=1.0, upper=4.0),
            secure=False,
        )


def test_deltafl_with_tracking_pays_one_count_per_round() -> None:
    data = synthetic(1, 1, num_clients=20, num_test_clients=0, seed=0)
    config = TrainerConfig(
        algorithm="deltafl",
        theta=0.5,
        rounds=5,
        clients_per_round=10,
        epsilon=5.0,
        dp="thresholds",
        threshold_method="tracking",
        seed=1,
    )
    result = train(data, config)
    assert result.privacy is not None
    ledger = result.privacy["ledger"]
    assert [entry["round"] for entry in ledger] == [0, 1, 2, 3, 4]
    assert result.epsilon_spent is not None and result.epsilon_spent <= 5.0
    thresholds = [r.threshold for r in result.history]
    assert thresholds[0] == pytest.approx(math.log(10))  # C₀ = ln C, public
    assert len(set(thresholds)) == 5  # one update per round
    assert all(r.secure_sums == r.secure_averages + 1 for r in result.history)
