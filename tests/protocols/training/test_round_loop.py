"""One round loop for every trainer: the loop's own bookkeeping, and that each trainer uses it."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import protocols.training._round_loop as loop
from protocols.training.data import ClientData, FederatedDataset
from protocols.training.datasets import synthetic
from protocols.training.fedplus import FedPlusConfig, FedPlusTrainer
from protocols.training.ffgb import FFGBConfig, FFGBTrainer
from protocols.training.trainer_config import TrainerConfig
from protocols.training.trainers import FederatedTrainer

DATA = synthetic(1, 1, num_clients=8, num_test_clients=0, seed=0)


@dataclass
class _Toy:
    """A round algorithm whose clients contribute their id; ``bad`` ids are non-finite."""

    config: FedPlusConfig
    dataset: FederatedDataset
    bad: frozenset[int]
    reason: str | None = None
    seen: list[loop.Contributions] = field(default_factory=list)
    begun: list[int] = field(default_factory=list)

    def begin_round(self, index: int) -> None:
        self.begun.append(index)

    def local_update(self, client: ClientData, index: int) -> tuple[Any, float, bool]:
        return client.client_id, float(client.client_id), client.client_id not in self.bad

    def release(self, contributions: loop.Contributions) -> loop.Release:
        self.seen.append(contributions)
        return loop.Release(self.reason, survivors=contributions.count, secure_averages=1)


@settings(max_examples=30, deadline=None)
@given(
    bad=st.frozensets(st.integers(0, 7)),
    dropout=st.sampled_from([0.0, 0.5]),
    reason=st.sampled_from([None, "withheld"]),
    index=st.integers(0, 50),
)
def test_the_loop_rejects_weighs_and_records(
    bad: frozenset[int], dropout: float, reason: str | None, index: int
) -> None:
    config = FedPlusConfig(clients_per_round=5, dropout=dropout, seed=3)
    toy = _Toy(config, DATA, bad, reason)
    record = loop.run_round(toy, index, sample=1, dropout=2, what="toy(s)")
    (seen,) = toy.seen
    sampled = loop.sample_clients(DATA.train_clients, 5, seed=3, purpose=1, index=index)
    kept = [c for c in sampled if c.client_id not in bad]
    assert toy.begun == [index] and seen.index == index
    assert [c.client_id for c in seen.clients] == [c.client_id for c in kept] == list(seen.updates)
    assert record.sampled == 5 and record.rejected == 5 - len(kept)
    sizes = np.array([c.num_train for c in kept], dtype=np.float64)
    losses = np.array([c.client_id for c in kept], dtype=np.float64)
    expected = float(sizes @ losses / sizes.sum()) if kept else math.nan
    assert record.train_loss == pytest.approx(expected, nan_ok=True)
    assert record.dropped == seen.dropped.size and set(seen.dropped) <= set(range(len(kept)))
    assert (seen.dropouts is None) == (seen.dropped.size == 0)
    # A withheld release records no survivors but counts the sums that ran.
    assert record.skipped == (reason is not None) and record.skip_reason == reason
    assert record.survivors == (0 if reason else len(kept)) and record.secure_averages == 1


@pytest.mark.parametrize(
    "trainer",
    [
        lambda: FederatedTrainer(DATA, TrainerConfig(rounds=1, clients_per_round=4, secure=False)),
        lambda: FedPlusTrainer(DATA, FedPlusConfig(rounds=1, clients_per_round=4, secure=False)),
        lambda: FFGBTrainer(DATA, FFGBConfig(rounds=1, clients_per_round=4, num_features=8)),
    ],
    ids=["FederatedTrainer", "FedPlusTrainer", "FFGBTrainer"],
)
def test_every_trainer_runs_its_rounds_through_the_one_loop(
    trainer: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[tuple[str, int]] = []
    original = loop.run_round

    def counted(algorithm: Any, index: int, **kwargs: Any) -> Any:
        calls.append((type(algorithm).__name__, index))
        return original(algorithm, index, **kwargs)

    monkeypatch.setattr(loop, "run_round", counted)
    for module in ("trainers", "fedplus"):  # they import the name; FFGB uses the module
        monkeypatch.setattr(f"protocols.training.{module}.run_round", counted)
    instance = trainer()
    record = instance.run_round(2)
    assert calls == [(type(instance).__name__, 2)]
    assert record.index == 2 and not record.skipped, record.skip_reason


@pytest.mark.parametrize(
    "trainer",
    [
        lambda: FedPlusTrainer(
            DATA, FedPlusConfig(algorithm="fedavg+", rounds=3, clients_per_round=4, epsilon=5.0)
        ),
        lambda: FFGBTrainer(
            DATA, FFGBConfig(rounds=3, clients_per_round=4, num_features=8, epsilon=5.0)
        ),
    ],
    ids=["FedPlusTrainer", "FFGBTrainer"],
)
def test_model_dp_round_records_carry_the_rho_spent(trainer: Any) -> None:
    # Fed+ and FFGB recorded rho_spent = None in every round, even under DP.
    instance = trainer()
    spent = [instance.run_round(index).rho_spent for index in range(3)]
    assert all(rho is not None for rho in spent)
    assert spent == sorted(spent) and spent[-1] > 0  # cumulative
    assert spent[-1] == pytest.approx(instance.privacy.rho_spent)
