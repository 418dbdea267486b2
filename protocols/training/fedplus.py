"""Fed+ trainers (Yu et al., "Robustness and Personalization in Federated Learning: A Unified
Approach via Regularization"): FedAvg+, FedGeoMed+, FedCoMed+, and FedProx as a baseline.

Every party k keeps a personal model wₖ = w̃ + θₖ. In round t (Fed+ Algorithm 1):

1. sample m parties; party k starts from (1 − λ)·wₖ + λ·w̃ (λ = 0 by default: its own last
   model; a party never sampled before starts from w̃);
2. it computes its offset θₖ = prox_{Ψ/σ}(wₖ − w̃) (Fed+ eq. (11),
   :func:`~protocols.aggregation.fedplus.fedplus_offsets`) and runs E steps of the two-step update
   w ← κ·(w − η∇f̂ₖ(w)) + (1 − κ)·(w̃ + θₖ) with κ = 1/(1 + ση) (Fed+ eq. (9)–(10); ∇f̂ₖ a
   minibatch gradient): a gradient step, then the proximal pull of (σ/2)‖w − w̃ − θₖ‖²;
3. a party whose loss or model is not finite is rejected (dropped and counted, its model kept);
4. the server computes w̃ ← w̃ + A(w₁ − w̃, …, wₘ − w̃) with A the Fed+ aggregate of the
   regulariser (:func:`~protocols.aggregation.fedplus.fedplus_aggregate`): the mean (FedAvg+),
   the δ-smoothed geometric median (FedGeoMed+) or coordinate-wise median (FedCoMed+), every sum
   a secure sum.

FedProx (Li et al. 2020) is the same loop with θₖ ≡ 0, λ = 1 and the mean: the two-step update
is then its proximal local step with μ = σ; FedAvg also has κ = 1 (plain local SGD) and RFA
replaces the mean by the smoothed geometric median. Personalised test error is each party's own
test split under its own model for the Fed+ variants, under the global model for the baselines
(Fed+ §5).
"""

from __future__ import annotations

import dataclasses
import logging
import math
from dataclasses import dataclass
from typing import Any, Literal, get_args

import numpy as np
from numpy.typing import NDArray

from protocols.aggregation.fedplus import Regularizer, fedplus_aggregate, fedplus_offsets
from protocols.aggregation.secure_average import (
    AverageSettings,
)
from protocols.training._round_loop import (
    ROUND_FAILURES,
    Contributions,
    ProgressCallback,
    Release,
    check_trainer_inputs,
    model_privacy_round,
    override,
    run_round,
    run_with_curve,
)
from protocols.training.data import ClientData, FederatedDataset
from protocols.training.models import (
    MLP,
    Classifier,
    LinearRegression,
    Model,
    MultinomialLogisticRegression,
    minibatches,
)
from protocols.training.privacy import DEFAULT_DP_CLIP, ModelPrivacy
from protocols.training.seeds import derived_seed, stream
from protocols.training.trainer_config import RunConfig
from protocols.training.trainer_results import CurveResult, ErrorSummary, RoundRecord
from secagg.validation import (
    check_fraction,
    check_nonnegative,
    check_positive,
)

__all__ = [
    "FEDPLUS_ALGORITHMS",
    "PERSONALISED",
    "FedPlusAlgorithm",
    "FedPlusConfig",
    "FedPlusResult",
    "FedPlusTrainer",
    "fedplus_local_solve",
    "train_fedplus",
]

logger = logging.getLogger(__name__)

FedPlusAlgorithm = Literal["fedavg+", "fedgeomed+", "fedcomed+", "fedprox", "fedavg", "rfa"]
FEDPLUS_ALGORITHMS: tuple[str, ...] = get_args(FedPlusAlgorithm)
"""FedAvg+ (Ψ/σ = δ/2‖·‖²), FedGeoMed+ (δ‖·‖₂), FedCoMed+ (δ‖·‖₁); the non-personalised
baselines FedProx (θ ≡ 0, λ = 1), FedAvg (also κ = 1) and RFA (κ = 1, geometric median by
smoothed Weiszfeld with ν = δ), on the same local solver and data."""

PERSONALISED: frozenset[str] = frozenset({"fedavg+", "fedgeomed+", "fedcomed+"})
"""Algorithms whose parties are evaluated with their own models (the others: the global one)."""

_REGULARIZERS: dict[str, Regularizer] = {
    "fedavg+": "squared_l2",
    "fedgeomed+": "l2",
    "fedcomed+": "l1",
    "fedprox": "squared_l2",
    "fedavg": "squared_l2",
    "rfa": "l2",
}
# Fed+ §5 (Li et al. benchmarks): δ = 0.001, 0.1, 0.1 for FedAvg+, FedGeoMed+, FedCoMed+;
# RFA's ν = 1e-6 (REFERENCES §3).
_DEFAULT_SMOOTHING = {
    "fedavg+": 0.001,
    "fedgeomed+": 0.1,
    "fedcomed+": 0.1,
    "fedprox": 1.0,
    "fedavg": 1.0,
    "rfa": 1e-6,
}
# Purposes of the derived random streams (spawn_key[0]); fixed forever so seeds stay reproducible.
_SAMPLE, _SGD, _DROPOUT, _AGGREGATE = 11, 12, 13, 14


@dataclass(frozen=True, slots=True)
class FedPlusConfig(RunConfig):
    """Everything a Fed+ run depends on besides the data (frozen; validated on construction).

    Parameters
    ----------
    algorithm
        ``"fedavg+"``, ``"fedgeomed+"``, ``"fedcomed+"``, or a baseline: ``"fedprox"``,
        ``"fedavg"``, ``"rfa"`` (:data:`FEDPLUS_ALGORITHMS`).
    rounds, clients_per_round
        Rounds T and parties m sampled per round (uniformly without replacement).
    local_steps, batch_size, lr
        E two-step updates per round on minibatches of B examples with learning rate η.
    sigma
        σ > 0 of the penalty (σ/2)‖wₖ − w̃ − θₖ‖²; κ = 1/(1 + ση) (FedProx: μ = σ).
    smoothing
        δ > 0 of the Moreau envelope (``None``: the paper's 0.001 / 0.1 / 0.1; RFA: ν = 1e-6).
    mixing
        λ ∈ [0, 1]: a party starts from (1 − λ)wₖ + λw̃ (FedProx always uses 1).
    aggregation_method, aggregation_iterations, aggregation_tol
        The Fed+ aggregate's iteration (``"moreau"``: the paper's; ``"weiszfeld"``: the faster
        majorise–minimise with the same minimiser), its most iterations after the mean, and its
        step tolerance.
    weighting
        ``"uniform"`` (the paper's Mean) or ``"data"`` (weights = training-set sizes).
    model, hidden
        ``"auto"`` (linear regression for real targets, else multinomial logistic regression),
        ``"logreg"``, ``"mlp"`` (ReLU, ``hidden`` units) or ``"linear"``.
    secure, bits, update_clip
        Every sum through SecAgg(+) (default), its ring size (64 for the majorise–minimise
        iteration and RFA, whose weights reach α/δ), and the public clip of wₖ − w̃ (``None``:
        :data:`~protocols.training.privacy.DEFAULT_DP_CLIP` under DP, else the largest, a
        simulator convenience).
    epsilon, delta, noise_seed
        ``epsilon``: the whole run's (ε, δ)-DP budget on the global models (user-level,
        add/remove): every secure average carries the clients' distributed discrete Gaussian
        noise (KLS21's client procedure), planned before round 1 and paid from one
        :class:`~dpquantile.PrivacyBudget`; every party weighs 1. Personal models never leave
        their party. FedAvg+, FedProx and FedAvg (one average per round), FedGeoMed+ and RFA
        with ``aggregation_method="weiszfeld"`` and FedCoMed+ with ``"moreau"`` (each of the
        K + 1 averages noised; FedCoMed+ averages the L2-clipped pulls clip(wₖ − w̃, ±δ)).
        ``None``: no DP.
        ``noise_seed`` reseeds the noise only (``None``: from ``seed``).
    dropout
        Probability that a sampled party drops out before sending its masked input.
    eval_every
        Record the mean personalised test error every this many rounds (0: only at the end).
    seed
        Root seed: sampling, minibatches, dropouts and every secure sum derive from it.
    blas_threads
        BLAS threads during the run (``None``: unchanged).

    Examples
    --------
    >>> FedPlusConfig(algorithm="fedcomed+").resolved_smoothing
    0.1
    >>> FedPlusConfig(sigma=0.0)
    Traceback (most recent call last):
    ...
    ValueError: sigma must be positive (a finite number > 0); got 0.0
    >>> round(FedPlusConfig(sigma=15.0, lr=0.02).kappa, 4)
    0.7692
    """

    algorithm: FedPlusAlgorithm = "fedgeomed+"
    rounds: int = 100
    clients_per_round: int = 10
    local_steps: int = 20
    batch_size: int = 20
    lr: float = 0.02
    sigma: float = 15.0
    smoothing: float | None = None
    mixing: float = 0.0
    aggregation_method: Literal["moreau", "weiszfeld"] = "moreau"
    aggregation_iterations: int = 10
    aggregation_tol: float = 1e-6
    weighting: Literal["uniform", "data"] = "uniform"
    model: Literal["auto", "logreg", "mlp", "linear"] = "auto"
    hidden: int = 64
    secure: bool = True
    bits: int = 32
    update_clip: float | None = None
    dropout: float = 0.0
    eval_every: int = 0
    seed: int = 0
    blas_threads: int | None = 1
    epsilon: float | None = None
    delta: float = 1e-5
    noise_seed: int | None = None

    def __post_init__(self) -> None:
        self._check_choice("algorithm", FEDPLUS_ALGORITHMS)
        self._check_run(aggregation_iterations=0, hidden=1)
        self._set("sigma", check_positive("sigma", self.sigma))
        if self.smoothing is not None:
            self._set("smoothing", check_positive("smoothing", self.smoothing))
        self._set("mixing", check_fraction("mixing", self.mixing, zero=True, one=True))
        self._check_choice("aggregation_method", ("moreau", "weiszfeld"))
        self._set("aggregation_tol", check_nonnegative("aggregation_tol", self.aggregation_tol))
        self._check_choice("weighting", ("uniform", "data"))
        self._check_choice("model", ("auto", "logreg", "mlp", "linear"))
        if self.epsilon is not None:
            regularizer = _REGULARIZERS[self.algorithm]
            if regularizer == "l1" and self._method == "weiszfeld":
                raise ValueError(
                    f"epsilon: {self.algorithm} under DP needs aggregation_method='moreau' (the "
                    "same minimiser, each step one noisy secure average of the clients' pulls); "
                    "the majorise–minimise per-coordinate sums have no noisy release"
                )
            if regularizer == "l2" and self._method == "moreau":
                raise ValueError(
                    f"epsilon: {self.algorithm} under DP needs aggregation_method='weiszfeld' "
                    "(the same minimiser, each step one noisy secure average); the Moreau "
                    "alternation has no noisy release"
                )

    @property
    def _method(self) -> Literal["moreau", "weiszfeld"]:
        return "weiszfeld" if self.algorithm == "rfa" else self.aggregation_method

    @property
    def clip(self) -> float | None:
        """The public clip of wₖ − w̃: ``update_clip``, else the DP default under DP.

        Examples
        --------
        >>> FedPlusConfig().clip is None, FedPlusConfig(algorithm="fedavg+", epsilon=5.0).clip
        (True, 1.0)
        """
        if self.update_clip is not None or not self.model_dp:
            return self.update_clip
        return DEFAULT_DP_CLIP

    @property
    def averages_per_round(self) -> int:
        """The most secure averages of the model one round releases (planned under DP).

        Examples
        --------
        >>> FedPlusConfig(algorithm="fedavg+").averages_per_round
        1
        >>> config = FedPlusConfig(aggregation_method="weiszfeld", aggregation_iterations=3)
        >>> config.averages_per_round
        4
        """
        if _REGULARIZERS[self.algorithm] == "squared_l2" or self.aggregation_iterations == 0:
            return 1
        return self.aggregation_iterations + 1

    @property
    def kappa(self) -> float:
        """κ = 1/(1 + ση) of the two-step update (Fed+ eq. (10)); 1 for FedAvg and RFA."""
        if self.algorithm in ("fedavg", "rfa"):
            return 1.0
        return 1.0 / (1.0 + self.sigma * self.lr)

    @property
    def resolved_smoothing(self) -> float:
        """δ: the configured one, or the paper's default for the algorithm."""
        return self.smoothing if self.smoothing is not None else _DEFAULT_SMOOTHING[self.algorithm]


@dataclass(frozen=True, eq=False, kw_only=True)
class FedPlusResult(CurveResult):
    """The outcome of :func:`train_fedplus`.

    Attributes
    ----------
    config
        The :class:`FedPlusConfig`.
    global_parameters
        The final global model w̃.
    client_ids, client_errors, errors
        Training parties with a test split, their personalised test errors (error rate, or MSE
        for regression) and the :class:`ErrorSummary`.
    global_client_errors, global_errors
        The same parties' test errors under the global model w̃.
    curve
        (round, mean personalised test error) every ``eval_every`` rounds and at the end.
    num_secure_averages, num_secure_sums
        Secure sums run (equal here: each Fed+ sum is one secure average or one per-coordinate
        secure sum).
    dp_covers
        Under DP ``"model"``: the released global models (a party's personalised model never
        leaves it; it reaches the release only through the party's noisy update).

    The other fields are :class:`~protocols.training.trainer_results.CurveResult`'s.

    Examples
    --------
    >>> from protocols.training.datasets import synthetic
    >>> data = synthetic(1, 1, num_clients=4, num_test_clients=0, seed=0)
    >>> result = train_fedplus(FedPlusConfig(rounds=2, clients_per_round=3), data, secure=False)
    >>> len(result.history), result.errors.num_clients, 0.0 <= result.accuracy <= 1.0
    (2, 4, True)
    """

    config: FedPlusConfig
    global_parameters: NDArray[np.float64]
    global_client_errors: NDArray[np.float64]
    global_errors: ErrorSummary
    curve: tuple[tuple[int, float], ...]
    num_secure_sums: int

    def to_dict(self) -> dict[str, Any]:
        """A JSON-serialisable record (parameters left out).

        Examples
        --------
        >>> from protocols.training.datasets import synthetic
        >>> data = synthetic(1, 1, num_clients=3, num_test_clients=0, seed=0)
        >>> record = train_fedplus(FedPlusConfig(rounds=1, clients_per_round=2), data,
        ...                        secure=False).to_dict()
        >>> record["algorithm"], sorted(record["errors"])[:2]
        ('fedgeomed+', ['mean', 'num_clients'])
        """
        record = self._run_record()
        record["global_errors"] = dataclasses.asdict(self.global_errors)
        record["num_secure_sums"] = self.num_secure_sums
        return record


def fedplus_local_solve(
    model: Model,
    client: ClientData,
    start: NDArray[np.float64],
    target: NDArray[np.float64],
    *,
    steps: int,
    batch_size: int,
    lr: float,
    kappa: float,
    rng: np.random.Generator,
) -> tuple[NDArray[np.float64], float, bool]:
    """E two-step updates w ← κ(w − η∇f̂(w)) + (1 − κ)·target (Fed+ eq. (9)–(10)).

    Minibatches are consecutive slices of random permutations (as
    :meth:`~protocols.training.Model.local_sgd`). The model's own parameters are left as they
    were on entry.

    Returns
    -------
    (parameters, first_loss, finite)
        The new flat vector, the loss of the first minibatch, and whether all is finite.

    Examples
    --------
    >>> X = np.array([[1.0], [2.0]]); y = np.array([2.0, 4.0])
    >>> client = ClientData(0, X, y, X, y)
    >>> model = LinearRegression(1)
    >>> w, _, ok = fedplus_local_solve(model, client, np.zeros(2), np.zeros(2), steps=3000,
    ...                                batch_size=2, lr=0.1, kappa=1.0,
    ...                                rng=np.random.default_rng(0))
    >>> np.round(w, 2).tolist(), ok      # κ = 1: plain SGD to the least-squares fit
    ([2.0, 0.0], True)
    """
    saved = model.get_parameters()
    n = client.num_train
    batch = min(batch_size, n)
    params = start.copy()
    first_loss = math.nan
    finite = True
    X, y = client.X_train, client.y_train
    try:
        with np.errstate(over="ignore", invalid="ignore"):
            for step, index in enumerate(minibatches(n, batch, steps, rng)):
                xb, yb = (X, y) if index is None else (X[index], y[index])
                model.set_parameters(params)  # raises on a non-finite vector
                loss, grad = model.loss_and_gradient(xb, yb)
                if step == 0:
                    first_loss = loss
                params -= lr * grad
                params *= kappa
                params += (1.0 - kappa) * target
        finite = bool(np.isfinite(params).all() and math.isfinite(first_loss))
    except ValueError:
        finite = False
    finally:
        model.set_parameters(saved)
    return params, first_loss, finite


class FedPlusTrainer:
    """The Fed+ loop (see the module docstring): per-party personal models, global w̃.

    Examples
    --------
    >>> from protocols.training.datasets import synthetic
    >>> data = synthetic(1, 1, num_clients=5, num_test_clients=0, seed=0)
    >>> trainer = FedPlusTrainer(data, FedPlusConfig(clients_per_round=3, secure=False))
    >>> record = trainer.run_round(0)
    >>> record.sampled, record.survivors, len(trainer.personal)
    (3, 3, 3)
    """

    def __init__(self, dataset: FederatedDataset, config: FedPlusConfig) -> None:
        check_trainer_inputs(dataset, config, FedPlusConfig)
        self.dataset, self.config = dataset, config
        self.model = self._build_model()
        self.global_parameters = self.model.get_parameters()
        self.personal: dict[int, NDArray[np.float64]] = {}
        self.upload_bytes = 0
        self.payload_bytes = 0
        self.privacy: ModelPrivacy | None = None
        if config.epsilon is not None:
            assert config.clip is not None  # the DP default when none is given
            self.privacy = ModelPrivacy.plan_for(
                epsilon=config.epsilon,
                delta=config.delta,
                rounds=config.rounds,
                averages_per_round=config.averages_per_round,
                participants=config.clients_per_round,
                dropout=config.dropout,
                dimension=self.global_parameters.size,
                bits=self._bits(),
                clip=config.clip,
            )

    def _bits(self) -> int:
        # Majorise–minimise weights span α/δ: 64-bit rings, as RFA in trainers.py.
        squared = _REGULARIZERS[self.config.algorithm] == "squared_l2"
        return 64 if self.config._method == "weiszfeld" and not squared else self.config.bits

    def _settings(self) -> AverageSettings:
        """The round's secure-average settings: under DP, KLS21's noisy rows (the mean divides
        by the public survivor count; the Weiszfeld weights are not a count)."""
        if self.privacy is None:
            return AverageSettings(bits=self._bits(), clip=self.config.clip)
        # FedAvg+'s mean and FedCoMed+'s averaged pulls weigh every party 1 over the public
        # survivor count; the Weiszfeld weights are not a count.
        return self.privacy.settings(mean=_REGULARIZERS[self.config.algorithm] != "l2")

    def _build_model(self) -> Model:
        config, data = self.config, self.dataset
        kind = config.model
        if kind == "auto":
            real = not np.issubdtype(data.train_clients[0].y_train.dtype, np.integer)
            kind = "linear" if real or data.num_classes < 2 else "logreg"
        if kind == "linear":
            return LinearRegression(data.num_features)
        if data.num_classes < 2:
            raise ValueError(f"{data.name} has {data.num_classes} class: use model='linear'")
        if kind == "mlp":
            return MLP(data.num_features, config.hidden, data.num_classes, seed=config.seed)
        return MultinomialLogisticRegression(data.num_features, data.num_classes)

    def _error(self, parameters: NDArray[np.float64], client: ClientData) -> float:
        self.model.set_parameters(parameters)
        if isinstance(self.model, Classifier):
            return self.model.error_rate(client.X_test, client.y_test)
        return self.model.error(client.X_test, client.y_test)

    def personal_errors(self) -> tuple[tuple[int, ...], NDArray[np.float64], NDArray[np.float64]]:
        """(party ids, personalised errors, global-model errors) on each party's test split.

        A non-personalised algorithm's parties deploy the global model: both columns agree.
        """
        clients = [c for c in self.dataset.train_clients if c.num_test > 0]
        if not clients:
            raise ValueError(f"{self.dataset.name} has no training client with a test split")
        shared = np.array([self._error(self.global_parameters, c) for c in clients])
        personal = shared
        if self.config.algorithm in PERSONALISED:
            personal = np.array(
                [
                    self._error(self.personal.get(c.client_id, self.global_parameters), c)
                    for c in clients
                ]
            )
        self.model.set_parameters(self.global_parameters)
        return tuple(c.client_id for c in clients), personal, shared

    def run_round(self, index: int) -> RoundRecord:
        """Run round ``index``: sample, local solves, reject, secure Fed+ aggregate, update."""
        return run_round(self, index, sample=_SAMPLE, dropout=_DROPOUT, what="local model(s)")

    def begin_round(self, index: int) -> None:
        """Nothing to fix: the round broadcasts the global model w̃ as it stands."""

    def local_update(self, client: ClientData, index: int) -> tuple[Any, float, bool]:
        """The party's two-step local solve from its own and the global model (Fed+ eq. (10))."""
        config = self.config
        centre = self.global_parameters
        own = self.personal.get(client.client_id, centre)
        if config.algorithm in PERSONALISED:
            regularizer = _REGULARIZERS[config.algorithm]
            smoothing = config.resolved_smoothing
            offset = fedplus_offsets(own, centre, regularizer=regularizer, smoothing=smoothing)
            mixing = config.mixing
        else:  # FedProx and FedAvg: θ ≡ 0 and λ = 1
            offset, mixing = np.zeros(centre.size), 1.0
        return fedplus_local_solve(
            self.model,
            client,
            (1.0 - mixing) * own + mixing * centre,
            centre + offset,
            steps=config.local_steps,
            batch_size=config.batch_size,
            lr=config.lr,
            kappa=config.kappa,
            rng=stream(config.seed, _SGD, index, client.client_id),
        )

    def release(self, contributions: Contributions) -> Release:
        """Keep each party's new model, then the secure Fed+ aggregate of w̃ᵢ − w̃."""
        config, privacy, index = self.config, self.privacy, contributions.index
        for client, model in zip(contributions.clients, contributions.updates, strict=True):
            self.personal[client.client_id] = model.copy()
        # Under DP every party counts once: its number of examples is a private, unbounded weight.
        uniform = config.weighting == "uniform" or config.model_dp
        alpha = np.ones(contributions.count) if uniform else contributions.sizes
        centre = self.global_parameters
        regularizer, method, bits = _REGULARIZERS[config.algorithm], config._method, self._bits()
        root = config.seed if config.noise_seed is None else config.noise_seed
        aggregate = None
        with model_privacy_round(
            privacy, index, contributions.count, "finite local model(s)"
        ) as why:
            reason = why
            if reason is None:
                try:
                    aggregate = fedplus_aggregate(
                        np.array(contributions.updates) - centre,
                        alpha,
                        regularizer=regularizer,
                        smoothing=config.resolved_smoothing,
                        method=method,
                        max_iterations=config.aggregation_iterations,
                        tol=config.aggregation_tol,
                        secure=config.secure,
                        settings=self._settings(),
                        weight_cap=1.0 if privacy is not None else None,
                        seed=derived_seed(root, _AGGREGATE, index),
                        dropouts=contributions.dropouts,
                        budget=None if privacy is None else privacy.budget,
                    )
                except ROUND_FAILURES as error:
                    reason = f"{type(error).__name__}: {error}"
        rho = None if privacy is None else privacy.rho_spent
        if aggregate is None:
            return Release(reason, rho_spent=rho)
        sums, survivors = aggregate.num_secure_sums, len(aggregate.survivors)
        self.upload_bytes += aggregate.upload_bytes
        d = centre.size
        width = 2 * d if regularizer == "l1" and method == "weiszfeld" else d + 1
        self.payload_bytes += sums * survivors * math.ceil(width * bits / 8)
        if np.isfinite(aggregate.aggregate).all():
            self.global_parameters = centre + aggregate.aggregate
        else:
            reason = "the released aggregate is not finite"
        return Release(reason, survivors, sums, sums, rho_spent=rho)

    def run(self, progress: ProgressCallback | None = None) -> FedPlusResult:
        """Train for ``config.rounds`` rounds and evaluate (personalised and global).

        Examples
        --------
        >>> from protocols.training.datasets import synthetic
        >>> data = synthetic(1, 1, num_clients=4, num_test_clients=0, seed=0)
        >>> config = FedPlusConfig(algorithm="fedcomed+", rounds=2, clients_per_round=2,
        ...                        eval_every=1)
        >>> result = FedPlusTrainer(data, config).run()
        >>> [r for r, _ in result.curve], result.num_secure_sums >= 2
        ([1, 2], True)
        """

        def evaluate() -> tuple[tuple[float], tuple[Any, ...]]:
            ids, personal, shared = self.personal_errors()
            return (float(personal.mean()),), (ids, personal, shared)

        (ids, personal, shared), totals = run_with_curve(self, evaluate, progress)
        return FedPlusResult(
            config=self.config,
            global_parameters=self.global_parameters.copy(),
            client_ids=ids,
            client_errors=personal,
            errors=ErrorSummary.from_errors(personal),
            global_client_errors=shared,
            global_errors=ErrorSummary.from_errors(shared),
            num_secure_sums=sum(r.secure_sums for r in totals["history"]),
            **totals,
        )


def train_fedplus(
    config: FedPlusConfig,
    dataset: FederatedDataset,
    *,
    seed: int | None = None,
    secure: bool | None = None,
    progress: ProgressCallback | None = None,
) -> FedPlusResult:
    """Train FedAvg+, FedGeoMed+, FedCoMed+ or a baseline (``config.algorithm``) on ``dataset``.

    Parameters
    ----------
    config
        A :class:`FedPlusConfig`.
    dataset
        A :class:`~protocols.training.FederatedDataset` (classification, or real targets with
        ``model="linear"``/``"auto"``); personalised errors are measured on the training
        parties' own test splits.
    seed, secure
        Override ``config.seed`` / ``config.secure`` when given.
    progress
        Optional callback ``(rounds_done, rounds)``.

    Returns
    -------
    FedPlusResult

    Examples
    --------
    >>> from protocols.training.datasets import synthetic
    >>> data = synthetic(1, 1, num_clients=6, num_test_clients=0, seed=0)
    >>> config = FedPlusConfig(algorithm="fedavg+", rounds=3, clients_per_round=3, lr=0.05,
    ...                        sigma=1.0)
    >>> secure = train_fedplus(config, data, seed=1)
    >>> plain = train_fedplus(config, data, seed=1, secure=False)
    >>> bool(np.abs(secure.global_parameters - plain.global_parameters).max() < 1e-5)
    True
    >>> secure.num_secure_sums, plain.upload_bytes, secure.upload_bytes > 0
    (3, 0, True)
    """
    config = override(config, seed=seed, secure=secure)
    return FedPlusTrainer(dataset, config).run(progress)
