"""Model DP for FFGB: each round's shared-basis coefficient average carries the clients' noise."""

from __future__ import annotations

import numpy as np
import pytest

from protocols.training.data import FederatedDataset
from protocols.training.datasets import synthetic_iid
from protocols.training.ffgb import FFGB_DP_CLIP, FFGBConfig, train_ffgb


@pytest.fixture(scope="module")
def data() -> FederatedDataset:
    return synthetic_iid(num_clients=30, num_test_clients=5, seed=1)


def _config(**changes: object) -> FFGBConfig:
    base = FFGBConfig(
        rounds=3, clients_per_round=10, num_features=16, secure=False, epsilon=5.0, eval_every=0
    )
    return base.with_changes(**changes)


@pytest.mark.parametrize("variant", ["ffgb", "ffgb-c", "ffgb-l"])
def test_every_round_pays_its_planned_average(data: FederatedDataset, variant: str) -> None:
    result = train_ffgb(_config(variant=variant, weighting="data"), data)
    assert result.privacy is not None and result.dp_covers == "model"
    ledger = result.privacy["ledger"]
    assert len(ledger) == 3 and {entry["relation"] for entry in ledger} == {"add_remove"}
    assert result.epsilon_spent is not None and 4.99 < result.epsilon_spent <= 5.0
    assert result.config.clip == FFGB_DP_CLIP and result.rounds_skipped == 0
    record = result.to_dict()
    assert record["model_dp"] and record["privacy"]["plan"]["planned_survivors"] == 10


def test_the_noise_moves_the_model_and_the_secure_path_matches_the_plain_one(
    data: FederatedDataset,
) -> None:
    plain = train_ffgb(_config(noise_seed=4), data)
    secure = train_ffgb(_config(noise_seed=4, secure=True), data)
    other = train_ffgb(_config(noise_seed=5), data)
    exact = train_ffgb(_config(epsilon=None, coefficient_clip=FFGB_DP_CLIP), data)
    X = data.train_clients[0].X_test
    np.testing.assert_allclose(plain.model(X), secure.model(X), atol=1e-6)
    assert not np.allclose(plain.model(X), other.model(X))  # the noise draw moves the model
    assert not np.allclose(plain.model(X), exact.model(X))
    assert exact.privacy is None and exact.epsilon_spent is None
    assert exact.to_dict()["dp_covers"] == "nothing (no DP)"


def test_what_cannot_be_private_is_refused(data: FederatedDataset) -> None:
    with pytest.raises(ValueError, match="Fourier learner"):
        FFGBConfig(learner="mlp", secure=False, epsilon=5.0)
    short = train_ffgb(_config(dropout=0.5, rounds=4), data)
    assert short.epsilon_spent is not None and short.epsilon_spent <= 5.0
    planned = short.privacy["plan"]["planned_survivors"]  # type: ignore[index]
    assert 2 <= planned < 10  # the noise is planned for the survivors dropouts leave
    assert all(record.skipped or record.survivors >= planned for record in short.history)
