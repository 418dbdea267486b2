"""Results of the reference trainers: per-round records, per-client error summaries, the run.

:class:`TrainingResult` is what :func:`protocols.training.trainers.train` returns; ``to_dict``
gives the JSON record the command line and the benchmarks write. :class:`RunResult` is the base
of every trainer's result (this one, Fed+'s and FFGB's): what they report alike is written once.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import NDArray

from protocols.training.trainer_config import TrainerConfig

__all__ = ["CurveResult", "ErrorSummary", "RoundRecord", "RunResult", "TrainingResult"]


@dataclass(frozen=True, slots=True)
class ErrorSummary:
    """Mean and 10th/50th/90th percentiles of per-client test errors (fractions in [0, 1]).

    Examples
    --------
    >>> summary = ErrorSummary.from_errors([0.1, 0.2, 0.3, 0.4, 0.5])
    >>> round(summary.mean, 3), round(summary.p90, 3), summary.num_clients
    (0.3, 0.46, 5)
    """

    mean: float
    p10: float
    p50: float
    p90: float
    num_clients: int

    @classmethod
    def from_errors(cls, errors: Any) -> ErrorSummary:
        """Summarise the finite entries of ``errors`` (linear-interpolation percentiles).

        Examples
        --------
        >>> ErrorSummary.from_errors([0.0, float("nan"), 1.0]).mean
        0.5
        """
        values = np.asarray(errors, dtype=np.float64)
        values = values[np.isfinite(values)]
        if values.size == 0:
            raise ValueError("no finite per-client error to summarise")
        p10, p50, p90 = (float(v) for v in np.percentile(values, [10, 50, 90]))
        return cls(float(values.mean()), p10, p50, p90, int(values.size))


@dataclass(frozen=True, slots=True)
class RoundRecord:
    """What happened in one round.

    Attributes
    ----------
    index
        Round number t (0-based).
    sampled, rejected, dropped, survivors
        Clients sampled; rejected for a non-finite loss or update; dropped out (before their
        masked input); and in the released average (0 for a skipped round).
    skipped, skip_reason
        Whether the model was kept, and why (``None`` otherwise).
    train_loss
        Data-weighted mean training loss of the round's finite clients at the broadcast model.
    secure_averages, secure_sums
        Secure averages completed (RFA's communication cost), and all secure sums including the
        DP quantile's histogram. A Δ-FL empty tail counts the call that revealed it.
    threshold, tail_clients, empty_tail
        Δ-FL only (else ``None``): the loss threshold Q̂, how many clients reached it (simulator
        only), and whether none did (the DP quantile overshot; ``config.empty_tail`` applied).
    rho_spent
        The zCDP ρ the run's budget has spent so far, after this round (``None``: no DP).
    seconds
        Wall time of the round.
    corrupted_weight
        Share of the round's aggregation weight (data sizes of the finite updates) held by
        corrupted clients (0 without a corruption model). At ≥ 0.5 the geometric median's
        breakdown point is passed (RFA §4).

    Examples
    --------
    >>> RoundRecord(0, 10, 0, 0, 10, False, None, 2.3, 1, 1, None, None, None, None, 0.1).survivors
    10
    """

    index: int
    sampled: int
    rejected: int
    dropped: int
    survivors: int
    skipped: bool
    skip_reason: str | None
    train_loss: float
    secure_averages: int
    secure_sums: int
    threshold: float | None
    tail_clients: int | None
    empty_tail: bool | None
    rho_spent: float | None
    seconds: float
    corrupted_weight: float = 0.0


@dataclass(frozen=True, eq=False, kw_only=True)
class RunResult:
    """The base of every trainer's result: the fields, accuracy, what ε covers, the JSON record.

    Attributes
    ----------
    config, dataset, dataset_seed
        The run's configuration (a :class:`~protocols.training.trainer_config.RunConfig`), the
        dataset's name and seed.
    history
        One :class:`RoundRecord` per round.
    client_ids, client_errors, errors
        The evaluated clients, their test errors (error rate; MSE for regression) and the
        :class:`ErrorSummary`.
    num_secure_averages, rounds_skipped, rejected_updates, wall_time
        Secure averages run, skipped rounds, updates rejected for non-finite values, seconds.
    seeds
        The seeds the run derives everything from (``"seed"``, ``"dataset_seed"``, ...).
    rho_spent, epsilon_spent, privacy
        What the run's one :class:`~dpquantile.PrivacyBudget` spent: the zCDP ρ, the (ε, δ)
        it certifies at the configuration's δ for what :attr:`dp_covers` names, and the plan
        and ledger; ``None`` for all three without DP (never "ε = 0").

    Examples
    --------
    >>> from protocols.training.datasets import synthetic_iid
    >>> from protocols.training.trainers import train
    >>> data = synthetic_iid(num_clients=4, num_test_clients=0, seed=0)
    >>> result = train(data, TrainerConfig(rounds=1, clients_per_round=4, epsilon=5.0))
    >>> result.dp_covers, 0.0 <= result.accuracy <= 1.0
    ('model', True)
    """

    config: Any
    dataset: str
    dataset_seed: int
    history: tuple[RoundRecord, ...]
    client_ids: tuple[int, ...]
    client_errors: NDArray[np.float64]
    errors: ErrorSummary
    num_secure_averages: int
    rounds_skipped: int
    rejected_updates: int
    wall_time: float
    seeds: Mapping[str, int] = field(default_factory=dict)
    rho_spent: float | None = None
    epsilon_spent: float | None = None
    privacy: Mapping[str, Any] | None = None

    @property
    def accuracy(self) -> float:
        """Mean test accuracy 1 − mean error over the evaluated clients (classification)."""
        return 1.0 - self.errors.mean

    @property
    def dp_covers(self) -> str:
        """What ``epsilon_spent`` is a guarantee for: ``"nothing (no DP)"``, or the run's
        :attr:`~protocols.training.privacy.RunPrivacyPlan.covers`: ``"model"`` (every model
        average was noisy: user-level DP of the released models), ``"thresholds only (model: no
        DP)"`` (Δ-FL's loss thresholds) or ``"model + thresholds"``.

        Examples
        --------
        >>> from protocols.training.datasets import synthetic
        >>> from protocols.training.trainers import train
        >>> data = synthetic(1, 1, num_clients=4, num_test_clients=0, seed=0)
        >>> train(data, TrainerConfig(rounds=1, clients_per_round=2, secure=False)).dp_covers
        'nothing (no DP)'
        """
        if self.privacy is None:
            return "nothing (no DP)"
        return str(self.privacy["plan"]["covers"])

    def _run_record(self) -> dict[str, Any]:
        """The JSON fields every result shares; each ``to_dict`` adds its own."""
        return {
            "algorithm": getattr(self.config, "algorithm", None),
            "config": self.config.to_dict(),
            "dataset": self.dataset,
            "dataset_seed": self.dataset_seed,
            "errors": dataclasses.asdict(self.errors),
            "client_ids": list(self.client_ids),
            "client_errors": [float(e) for e in self.client_errors],
            "num_secure_averages": self.num_secure_averages,
            "rounds_skipped": self.rounds_skipped,
            "rejected_updates": self.rejected_updates,
            "dp_covers": self.dp_covers,
            "rho_spent": self.rho_spent,
            "epsilon_spent": self.epsilon_spent,
            "privacy": None if self.privacy is None else dict(self.privacy),
            "wall_time": self.wall_time,
            "seeds": dict(self.seeds),
            "history": [dataclasses.asdict(r) for r in self.history],
        }


@dataclass(frozen=True, eq=False, kw_only=True)
class TrainingResult(RunResult):
    """The outcome of a training run.

    Attributes
    ----------
    config
        The :class:`~protocols.training.TrainerConfig`.
    dataset, dataset_seed
        The dataset's name and seed.
    evaluation
        Where the per-client errors were measured: ``"heldout"`` (training clients' held-out
        splits) or ``"test_clients"`` (unseen clients).
    history
        One :class:`RoundRecord` per round.
    parameters
        The final flat parameter vector.
    client_ids, client_errors
        The evaluated clients and their error rates.
    errors
        :class:`ErrorSummary` of ``client_errors``.
    initial_train_loss, final_train_loss
        Data-weighted mean training loss over all training clients before and after training.
    rho_spent, epsilon_spent, delta
        What the run's one :class:`~dpquantile.PrivacyBudget` spent (each release's worst case,
        charged before its noise was drawn): the zCDP ρ and the (ε, δ)-DP it certifies at
        ``delta``, for what :attr:`dp_covers` names. ``None`` for both without DP (a run with no
        noisy release has no DP guarantee, never "ε = 0"). ``epsilon_spent ≤ config.epsilon``.
    num_secure_averages, num_secure_sums
        Totals over the run (see :class:`RoundRecord`).
    rounds_skipped, rejected_updates
        Skipped rounds, and client updates rejected for non-finite values.
    corrupted_clients
        Training clients chosen by the corruption plan.
    wall_time
        Seconds for the whole run (evaluation included).
    seeds
        ``{"seed", "dataset_seed", "corruption_seed"}``.
    privacy
        ``{"plan": ..., "ledger": [...]}``: the run's
        :class:`~protocols.training.privacy.RunPrivacyPlan` and every spend of its budget (round,
        event, ρ, relation, clients, σ, dimension); ``None`` without DP.

    Examples
    --------
    >>> from protocols.training.datasets import synthetic
    >>> from protocols.training.trainers import train
    >>> data = synthetic(1, 1, num_clients=6, num_test_clients=0, seed=0)
    >>> result = train(data, TrainerConfig(rounds=2, clients_per_round=3, secure=False))
    >>> result.num_secure_averages, result.evaluation, result.epsilon_spent, result.dp_covers
    (2, 'heldout', None, 'nothing (no DP)')
    """

    config: TrainerConfig
    evaluation: str
    parameters: NDArray[np.float64]
    initial_train_loss: float
    final_train_loss: float
    delta: float
    num_secure_sums: int
    corrupted_clients: tuple[int, ...]

    @property
    def corrupted_majority_rounds(self) -> int:
        """Rounds whose corrupted clients held at least half the aggregation weight.

        Examples
        --------
        >>> from protocols.training.corruption import Corruption
        >>> from protocols.training.datasets import synthetic
        >>> from protocols.training.trainers import train
        >>> data = synthetic(1, 1, num_clients=4, num_test_clients=0, seed=0)
        >>> config = TrainerConfig(rounds=2, clients_per_round=4, secure=False,
        ...                        corruption=Corruption("gaussian", 1.0))
        >>> train(data, config).corrupted_majority_rounds   # every client is corrupted
        2
        """
        return sum(record.corrupted_weight >= 0.5 for record in self.history)

    @property
    def empty_tail_rounds(self) -> int:
        """Δ-FL rounds whose DP quantile overshot every loss (0 for the other algorithms).

        Examples
        --------
        >>> from protocols.training.datasets import synthetic
        >>> from protocols.training.trainers import train
        >>> data = synthetic(1, 1, num_clients=4, num_test_clients=0, seed=0)
        >>> config = TrainerConfig(algorithm="deltafl", epsilon=60.0, rounds=1, dp="thresholds",
        ...                        threshold_method="histogram", clients_per_round=4,
        ...                        secure=False)
        >>> train(data, config).empty_tail_rounds   # tied losses at the zero model
        1
        """
        return sum(bool(r.empty_tail) for r in self.history)

    def to_dict(self, *, per_client: bool = True) -> dict[str, Any]:
        """A JSON-serialisable record (the parameters are left out).

        Examples
        --------
        >>> from protocols.training.datasets import synthetic
        >>> from protocols.training.trainers import train
        >>> data = synthetic(1, 1, num_clients=4, num_test_clients=0, seed=0)
        >>> record = train(data, TrainerConfig(rounds=1, clients_per_round=2,
        ...                                    secure=False)).to_dict()
        >>> record["config"]["algorithm"], len(record["history"]), sorted(record["errors"])
        ('fedavg', 1, ['mean', 'num_clients', 'p10', 'p50', 'p90'])
        """
        record = self._run_record()
        record.update(
            {
                "evaluation": self.evaluation,
                "initial_train_loss": self.initial_train_loss,
                "final_train_loss": self.final_train_loss,
                "delta": self.delta,
                "model_dp": self.config.model_dp,
                "update_clip": self.config.clip,
                "update_clip_public": self.config.clip_is_public,
                "num_secure_sums": self.num_secure_sums,
                "empty_tail_rounds": self.empty_tail_rounds,
                "corrupted_clients": list(self.corrupted_clients),
            }
        )
        if not per_client:
            del record["client_ids"], record["client_errors"]
        return record


@dataclass(frozen=True, eq=False, kw_only=True)
class CurveResult(RunResult):
    """A result with an evaluation curve and byte counts (Fed+'s and FFGB's).

    Attributes
    ----------
    curve
        (round, mean test error, ...) every ``eval_every`` rounds and at the end.
    upload_bytes
        Bytes uploaded in the secure sums (0 on the plain path).
    payload_bytes
        Nominal upload: every summed client's ring vector at ``bits`` bits per coordinate.

    The other fields are :class:`RunResult`'s.

    Examples
    --------
    >>> from protocols.training.datasets import synthetic
    >>> from protocols.training.ffgb import FFGBConfig, train_ffgb
    >>> data = synthetic(1, 1, num_clients=3, num_test_clients=0, seed=0)
    >>> result = train_ffgb(FFGBConfig(rounds=1, clients_per_round=2, num_features=8), data,
    ...                     secure=False)
    >>> record = result.to_dict()
    >>> record["model_dp"], record["dp_covers"], len(record["history"]), record["curve"][-1][0]
    (False, 'nothing (no DP)', 1, 1)
    """

    curve: tuple[tuple[Any, ...], ...]
    upload_bytes: int
    payload_bytes: int

    def _run_record(self) -> dict[str, Any]:
        record = super()._run_record()
        record.update(
            {
                "curve": [list(point) for point in self.curve],
                "upload_bytes": self.upload_bytes,
                "payload_bytes": self.payload_bytes,
                "model_dp": self.privacy is not None,
                "delta": self.config.delta if self.privacy is not None else None,
            }
        )
        return record
