"""The round bookkeeping shared by the trainers (private).

Sampling without replacement, dropouts, the :class:`RoundRecord` of a round that releases no
quantile, the run loop with an evaluation curve (every trainer's), and the run totals every
result carries.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import numpy as np
from numpy.typing import NDArray

from protocols.training.data import FederatedDataset
from protocols.training.seeds import stream
from protocols.training.trainer_results import RoundRecord

__all__ = [
    "dropout_indices",
    "finish_round",
    "model_trainer_totals",
    "override",
    "run_rounds",
    "run_totals",
    "sample_clients",
]

logger = logging.getLogger(__name__)

_Client = TypeVar("_Client")
_Config = TypeVar("_Config")
_Point = TypeVar("_Point")


def sample_clients(
    clients: Sequence[_Client], size: int, *, seed: int, purpose: int, index: int
) -> list[_Client]:
    """``size`` clients uniformly without replacement, in id order, from (seed, purpose, index)."""
    chosen = stream(seed, purpose, index).choice(len(clients), size=size, replace=False)
    return [clients[int(i)] for i in np.sort(chosen)]


def dropout_indices(
    count: int, rate: float, *, seed: int, purpose: int, index: int
) -> NDArray[np.intp]:
    """Positions (of ``count`` participants) that drop out before sending their masked input."""
    return np.flatnonzero(stream(seed, purpose, index).random(count) < rate)


def finish_round(
    index: int,
    *,
    sampled: int,
    rejected: int,
    dropped: int,
    survivors: int,
    reason: str | None,
    train_loss: float,
    secure_sums: int,
    start: float,
) -> RoundRecord:
    """The round's record (no quantile, no privacy spend); logs a skipped round."""
    if reason is not None:
        logger.info("round %d skipped: %s", index, reason)
    return RoundRecord(
        index=index,
        sampled=sampled,
        rejected=rejected,
        dropped=dropped,
        survivors=survivors if reason is None else 0,
        skipped=reason is not None,
        skip_reason=reason,
        train_loss=train_loss,
        secure_averages=secure_sums,
        secure_sums=secure_sums,
        threshold=None,
        tail_clients=None,
        empty_tail=None,
        rho_spent=None,  # no DP
        seconds=time.perf_counter() - start,
    )


def run_rounds(
    run_round: Callable[[int], RoundRecord],
    point: Callable[[int], _Point],
    *,
    rounds: int,
    eval_every: int,
    progress: Callable[[int, int], None] | None,
) -> tuple[list[RoundRecord], list[_Point]]:
    """Run ``rounds`` rounds; ``point(done)`` every ``eval_every`` rounds before the last."""
    history: list[RoundRecord] = []
    curve: list[_Point] = []
    for index in range(rounds):
        history.append(run_round(index))
        done = index + 1
        if eval_every and done % eval_every == 0 and done < rounds:
            curve.append(point(done))
        if progress is not None:
            progress(done, rounds)
    return history, curve


def run_totals(
    history: Sequence[RoundRecord],
    *,
    dataset: FederatedDataset,
    start: float,
    privacy: tuple[float | None, float | None, dict[str, object] | None],
) -> dict[str, Any]:
    """The fields every trainer's result has: the dataset, the history and its totals, the
    wall time since ``start``, and the privacy report ``(ρ, ε, details)`` (all None: no DP)."""
    rho, epsilon, details = privacy
    return {
        "dataset": dataset.name,
        "dataset_seed": dataset.seed,
        "history": tuple(history),
        "num_secure_averages": sum(r.secure_averages for r in history),
        "rounds_skipped": sum(r.skipped for r in history),
        "rejected_updates": sum(r.rejected for r in history),
        "wall_time": time.perf_counter() - start,
        "rho_spent": rho,
        "epsilon_spent": epsilon,
        "privacy": details,
    }


def model_trainer_totals(
    trainer: Any, history: Sequence[RoundRecord], start: float
) -> dict[str, Any]:
    """Fed+'s and FFGB's shared result fields: bytes on the wire, seeds, and :func:`run_totals`
    with the ``ModelPrivacy`` report (``trainer``: a ``FedPlusTrainer`` or ``FFGBTrainer``)."""
    privacy = (None, None, None) if trainer.privacy is None else trainer.privacy.report()
    return {
        "upload_bytes": trainer.upload_bytes,
        "payload_bytes": trainer.payload_bytes,
        "seeds": {"seed": trainer.config.seed, "dataset_seed": trainer.dataset.seed},
        **run_totals(history, dataset=trainer.dataset, start=start, privacy=privacy),
    }


def override(config: _Config, *, seed: int | None, secure: bool | None) -> _Config:
    """``config`` with ``seed`` / ``secure`` replaced when given (a validated copy)."""
    changes: dict[str, object] = {}
    if seed is not None:
        changes["seed"] = seed
    if secure is not None:
        changes["secure"] = secure
    return dataclasses.replace(config, **changes) if changes else config  # type: ignore[type-var]
