"""The one round loop of every trainer, and the run around it (private).

:func:`run_round` is a round of any trainer — sampling without replacement, each client's local
work, rejection of the non-finite, dropouts, then the algorithm's release — over the
:class:`RoundAlgorithm` protocol (FedAvg, Δ-FL, RFA, RFA-1, Fed+ and its baselines, FFGB).
Around it: the run loop with an evaluation curve, the model-DP round gate, the skip-on failures,
the trainers' input checks, and the run totals every result carries.
"""

from __future__ import annotations

import contextlib
import dataclasses
import importlib
import logging
import math
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

import numpy as np
from numpy.typing import NDArray

from dpquantile import BudgetExceededError
from protocols.aggregation.secure_average import EffectiveWeightError, ZeroWeightSumError
from protocols.training.data import ClientData, FederatedDataset
from protocols.training.seeds import stream
from protocols.training.trainer_config import RunConfig
from protocols.training.trainer_results import RoundRecord
from secagg import TooFewSurvivorsError

if TYPE_CHECKING:
    from protocols.training.privacy import ModelPrivacy

__all__ = [
    "ROUND_FAILURES",
    "Contributions",
    "ProgressCallback",
    "Release",
    "RoundAlgorithm",
    "blas_thread_limit",
    "check_trainer_inputs",
    "dropout_indices",
    "model_privacy_round",
    "override",
    "run_round",
    "run_rounds",
    "run_totals",
    "run_with_curve",
    "sample_clients",
]

logger = logging.getLogger(__name__)

# A round is skipped on these: nothing was released, the model is kept.
ROUND_FAILURES = (
    TooFewSurvivorsError,
    ZeroWeightSumError,
    EffectiveWeightError,
    BudgetExceededError,
)

ProgressCallback = Callable[[int, int], None]
"""``progress(rounds_done, rounds)``, called after every round."""

_Client = TypeVar("_Client")
_Config = TypeVar("_Config")
_Point = TypeVar("_Point")
_Details = TypeVar("_Details")


@contextlib.contextmanager
def blas_thread_limit(threads: int | None) -> Iterator[None]:
    """Limit BLAS to ``threads`` threads inside the block (``threadpoolctl`` if installed).

    Without ``threadpoolctl`` (not a dependency) this does nothing: set ``OPENBLAS_NUM_THREADS``
    before numpy is imported instead.

    Examples
    --------
    >>> with blas_thread_limit(1):
    ...     float(np.ones(3) @ np.ones(3))
    3.0
    """
    if threads is None:
        yield
        return
    try:
        threadpoolctl = importlib.import_module("threadpoolctl")  # optional, never required
    except ImportError:
        logger.debug("threadpoolctl is not installed: BLAS threads left unchanged")
        yield
        return
    with threadpoolctl.threadpool_limits(limits=threads, user_api="blas"):
        yield


def check_trainer_inputs(dataset: object, config: object, kind: type[RunConfig]) -> None:
    """Refuse a dataset that is not a :class:`FederatedDataset`, a config that is not a ``kind``,
    or more clients per round than the dataset has."""
    if not isinstance(dataset, FederatedDataset):
        raise TypeError(f"dataset must be a FederatedDataset; got {type(dataset).__name__}")
    if not isinstance(config, kind):
        raise TypeError(f"config must be a {kind.__name__}; got {type(config).__name__}")
    if config.clients_per_round > len(dataset.train_clients):
        raise ValueError(
            f"clients_per_round = {config.clients_per_round} exceeds the "
            f"{len(dataset.train_clients)} training clients of {dataset.name}"
        )


@contextlib.contextmanager
def model_privacy_round(
    privacy: ModelPrivacy | None, index: int, count: int, what: str
) -> Iterator[str | None]:
    """Open round ``index`` of a model-DP trainer with ``count`` contributions (``what``).

    Yields why the round must release nothing (fewer than 2, or fewer than the noise is planned
    for), or ``None``; on exit the round's spends go to the ledger.
    """
    if privacy is not None:
        privacy.begin_round()
    try:
        if count < 2:
            yield f"{count} {what}: a secure average needs 2"
        else:
            yield None if privacy is None else privacy.shortfall(count)
    finally:
        if privacy is not None:
            privacy.end_round(index)


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


@dataclass(frozen=True, slots=True)
class Contributions:
    """A round's finite contributions after local work, in sampling order.

    Attributes
    ----------
    index
        The round.
    clients, updates, losses
        The clients whose local work is finite, what each contributes (the algorithm's own
        type: an update vector, a local model, a function increment) and its training loss.
    sizes
        Their numbers of training examples (float64).
    dropped
        Positions in ``clients`` that drop out before sending their masked input.
    """

    index: int
    clients: tuple[ClientData, ...]
    updates: tuple[Any, ...]
    losses: NDArray[np.float64]
    sizes: NDArray[np.float64]
    dropped: NDArray[np.intp]

    @property
    def count(self) -> int:
        """How many clients contribute."""
        return len(self.clients)

    @property
    def dropouts(self) -> dict[str, list[int]] | None:
        """The secure sums' ``dropouts`` argument (``None``: nobody drops)."""
        return {"masked_input": [int(j) for j in self.dropped]} if self.dropped.size else None

    @property
    def train_loss(self) -> float:
        """The data-weighted mean training loss of the contributors (NaN without any)."""
        return float(self.sizes @ self.losses / self.sizes.sum()) if self.count else math.nan


@dataclass(frozen=True, slots=True)
class Release:
    """What a round's aggregation released, or why it released nothing (``reason``).

    ``survivors`` is recorded only when ``reason`` is ``None``; the secure sums are counted
    either way (a sum that ran and was then withheld still ran).
    """

    reason: str | None = None
    survivors: int = 0
    secure_averages: int = 0
    secure_sums: int = 0
    threshold: float | None = None
    tail_clients: int | None = None
    empty_tail: bool | None = None
    corrupted_weight: float = 0.0
    rho_spent: float | None = None


class RoundAlgorithm(Protocol):
    """What a trainer gives the one round loop, :func:`run_round`.

    FedAvg, Δ-FL, RFA and RFA-1 (:class:`~protocols.training.FederatedTrainer`), Fed+ and its
    baselines (:class:`~protocols.training.fedplus.FedPlusTrainer`) and FFGB
    (:class:`~protocols.training.ffgb.FFGBTrainer`) implement it.
    """

    @property
    def config(self) -> RunConfig:
        """The run's configuration."""
        ...

    @property
    def dataset(self) -> FederatedDataset:
        """The federated dataset."""
        ...

    def begin_round(self, index: int) -> None:
        """Fix what the round broadcasts (the model, a basis), before any client works."""
        ...

    def local_update(self, client: ClientData, index: int) -> tuple[Any, float, bool]:
        """One sampled client's local work: (its contribution, its training loss, finite)."""
        ...

    def release(self, contributions: Contributions) -> Release:
        """Aggregate the finite contributions and update the global state (or say why not)."""
        ...


def run_round(
    algorithm: RoundAlgorithm, index: int, *, sample: int, dropout: int, what: str
) -> RoundRecord:
    """Round ``index`` of any trainer: sample, local work, reject non-finite, dropouts, release.

    ``sample`` and ``dropout`` are the trainer's stream purposes (fixed forever, so seeds stay
    reproducible); ``what`` names a contribution in the log (``"client update(s)"``).
    """
    start = time.perf_counter()
    config = algorithm.config
    algorithm.begin_round(index)
    sampled = sample_clients(
        algorithm.dataset.train_clients,
        config.clients_per_round,
        seed=config.seed,
        purpose=sample,
        index=index,
    )
    kept: list[tuple[ClientData, Any, float]] = []
    for client in sampled:
        update, loss, finite = algorithm.local_update(client, index)
        if finite:
            kept.append((client, update, loss))
    rejected = len(sampled) - len(kept)
    if rejected:
        logger.info("round %d: rejected %d non-finite %s", index, rejected, what)
    contributions = Contributions(
        index=index,
        clients=tuple(client for client, _, _ in kept),
        updates=tuple(update for _, update, _ in kept),
        losses=np.array([loss for _, _, loss in kept], dtype=np.float64),
        sizes=np.array([client.num_train for client, _, _ in kept], dtype=np.float64),
        dropped=dropout_indices(
            len(kept), config.dropout, seed=config.seed, purpose=dropout, index=index
        ),
    )
    release = algorithm.release(contributions)
    reason = release.reason
    if reason is not None:
        logger.info("round %d skipped: %s", index, reason)
    return RoundRecord(
        index=index,
        sampled=len(sampled),
        rejected=rejected,
        dropped=int(contributions.dropped.size),
        survivors=release.survivors if reason is None else 0,
        skipped=reason is not None,
        skip_reason=reason,
        train_loss=contributions.train_loss,
        secure_averages=release.secure_averages,
        secure_sums=release.secure_sums,
        threshold=release.threshold,
        tail_clients=release.tail_clients,
        empty_tail=release.empty_tail,
        rho_spent=release.rho_spent,
        seconds=time.perf_counter() - start,
        corrupted_weight=release.corrupted_weight,
    )


def run_rounds(
    run_round: Callable[[int], RoundRecord],
    point: Callable[[int], _Point],
    *,
    rounds: int,
    eval_every: int,
    progress: ProgressCallback | None,
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


def run_with_curve(
    trainer: Any,
    evaluate: Callable[[], tuple[tuple[Any, ...], _Details]],
    progress: ProgressCallback | None,
) -> tuple[_Details, dict[str, Any]]:
    """Run Fed+'s or FFGB's ``trainer`` for ``trainer.config.rounds`` rounds under its BLAS limit.

    ``evaluate()`` gives (the curve's point after the round number, details) every
    ``eval_every`` rounds and after the last. Returns the last details and the result fields
    the two share: the curve, bytes on the wire, seeds, and :func:`run_totals` with the
    trainer's ``ModelPrivacy`` report.
    """
    config = trainer.config
    start = time.perf_counter()
    with blas_thread_limit(config.blas_threads):
        history, curve = run_rounds(
            trainer.run_round,
            lambda done: (done, *evaluate()[0]),
            rounds=config.rounds,
            eval_every=config.eval_every,
            progress=progress,
        )
        point, details = evaluate()
    curve.append((config.rounds, *point))
    privacy = (None, None, None) if trainer.privacy is None else trainer.privacy.report()
    return details, {
        "curve": tuple(curve),
        "upload_bytes": trainer.upload_bytes,
        "payload_bytes": trainer.payload_bytes,
        "seeds": {"seed": config.seed, "dataset_seed": trainer.dataset.seed},
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
