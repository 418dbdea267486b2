"""FFGB trainers (Shen et al., "Federated Functional Gradient Boosting"): FFGB, FFGB.C, FFGB.L.

The model is a function f: ℝ^d → ℝ^c (logits, or regression outputs) built as an ensemble. In
round t the server broadcasts f^t (and, for the shared-basis learner, the round's basis seed);
each sampled client i runs K local functional steps (FFGB Algorithm 2, client procedure):

    g¹ = f^t;  Δ¹ = 0
    hᵏ = WO(Δᵏ + ∇Rᵢ[gᵏ])                  (weak-learning oracle, :mod:`weak_learners`)
    gᵏ⁺¹ = gᵏ − ηₜₖ(hᵏ + μgᵏ)
    Δᵏ⁺¹ = Δᵏ + ∇Rᵢ[gᵏ] − hᵏ                (the residual: error feedback)

where ∇Rᵢ[g](xⱼ) = ∇₁ℓ(g(xⱼ), yⱼ) on the client's points (FFGB eq. (6); softmax(g) − onehot(y)
for the cross entropy, g − y for the squared loss). FFGB.C (Algorithm 3) clips f^t to the
L∞ ball of radius B, the query to G₁ and the residual to G₂; FFGB.L (Algorithm 4, squared loss)
queries the oracle for the Lipschitz-extension target uᵢ (equal to yᵢ on the client's points)
and steps gᵏ⁺¹ = gᵏ − ηₜₖ(gᵏ − hᵏ), with Δᵏ⁺¹ = Δᵏ + uᵢ − hᵏ. Step sizes
ηₜₖ = η₀/((t + 1)K + k + 1)^p as in the reference code (REFERENCES §3).

Every client's g^{K+1} is c·[Π_B] f^t + Σₖ aₖhᵏ with the same public scalar c (a product of
step factors), so the server's average is f^{t+1} = c·[Π_B] f^t + average of the increments.
With :class:`~protocols.training.weak_learners.FourierRidgeLearner` the increments are
coefficient matrices in the round's shared basis and the average runs over the secure sum;
with the MLP (or interpolating) learner the server must receive each client's networks, which
is NOT compatible with secure aggregation (``secure=True`` raises).
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass
from typing import Any, Literal, get_args

import numpy as np
from numpy.typing import ArrayLike, NDArray

import protocols.training._round_loop as loop
from protocols.aggregation.secure_average import (
    AverageSettings,
    secure_weighted_average,
)
from protocols.training.data import ClientData, FederatedDataset
from protocols.training.privacy import ModelPrivacy
from protocols.training.seeds import derived_seed, stream
from protocols.training.trainer_config import RunConfig
from protocols.training.trainer_results import CurveResult, ErrorSummary, RoundRecord
from protocols.training.weak_learners import (
    FourierRidgeLearner,
    MLPRegressorLearner,
    WeakLearner,
)
from secagg.validation import (
    check_nonnegative,
    check_positive,
)

__all__ = [
    "FFGB_DP_CLIP",
    "FFGB_VARIANTS",
    "FFGBConfig",
    "FFGBResult",
    "FFGBTrainer",
    "FFGBVariant",
    "FunctionalModel",
    "train_ffgb",
]

logger = logging.getLogger(__name__)

FFGBVariant = Literal["ffgb", "ffgb-c", "ffgb-l"]
FFGB_VARIANTS: tuple[str, ...] = get_args(FFGBVariant)
"""FFGB (Algorithm 2), FFGB.C (clipping, Algorithm 3), FFGB.L (squared loss, Algorithm 4)."""

FFGB_DP_CLIP = 20.0
"""The public L2 clip of a client's Fourier coefficients under DP when none is given (never
derived from the data at run time). Chosen on seed 0 of the default job (Synthetic-IID, D = 256,
c = 10, whose median coefficient norm is ≈ 45) among 5, 10, 20, 50: mean error with DP at ε = 5
0.53, 0.48, 0.48, 0.50 (without DP, clipped alike: 0.23, 0.19, 0.14, 0.10)."""

# Purposes of the derived random streams (spawn_key[0]); fixed forever so seeds stay reproducible.
_SAMPLE, _ORACLE, _DROPOUT, _AGGREGATE, _BASIS = 21, 22, 23, 24, 25


@dataclass(frozen=True, slots=True)
class FFGBConfig(RunConfig):
    """Everything an FFGB run depends on besides the data (frozen; validated on construction).

    Parameters
    ----------
    variant
        ``"ffgb"``, ``"ffgb-c"`` or ``"ffgb-l"``.
    rounds, clients_per_round
        Rounds T and clients m sampled per round.
    local_steps
        K functional steps per round.
    step_size, step_power
        η₀ and p of ηₜₖ = η₀/((t + 1)K + k + 1)^p (p = 0: constant steps).
    mu
        Tikhonov regularisation μ ≥ 0 (FFGB eq. (3)); unused by FFGB.L.
    residual
        ``"round"`` (Algorithm 2: Δ starts at 0 every round), ``"persistent"`` (each client
        keeps its Δ across rounds) or ``"none"`` (no error feedback: an ablation).
    learner
        ``"fourier"`` (shared random Fourier basis + ridge: secure-aggregation compatible) or
        ``"mlp"`` (a small MLP per step: not compatible, requires ``secure=False``).
    num_features, bandwidth, ridge
        The Fourier learner's D, kernel bandwidth ℓ (``None``: ½√d) and ridge λ.
    mlp_hidden, mlp_steps, mlp_lr
        The MLP learner's width, Adam steps and step size.
    function_clip, query_clip, residual_clip
        FFGB.C's B, G₁ and G₂ (our defaults; the paper's constants depend on unknowns).
    weighting
        ``"data"`` (clients weighted by training-set size) or ``"uniform"``.
    secure, bits
        Average the shared-basis increments through SecAgg(+) (default) with this ring size.
    dropout
        Probability that a sampled client drops out before sending its masked input.
    evaluation
        ``"auto"`` (unseen test clients if the dataset has them and is not Synthetic, else the
        training clients' held-out splits), ``"heldout"`` or ``"test_clients"``.
    eval_every
        Record the test error every this many rounds (0: only at the end).
    seed, blas_threads
        Root seed; BLAS threads during the run.
    epsilon, delta, noise_seed, coefficient_clip
        ``epsilon``: the whole run's (ε, δ)-DP budget on the model (user-level, add/remove):
        each round's average of the clients' shared-basis coefficients carries their
        distributed discrete Gaussian noise (KLS21's client procedure), planned before round 1
        and paid from one :class:`~dpquantile.PrivacyBudget`; every client weighs 1. Needs the
        Fourier learner. ``coefficient_clip``: the public L2 clip of each client's coefficient
        vector (``None``: :data:`FFGB_DP_CLIP` under DP; without DP the largest norm, a
        simulator convenience). ``noise_seed`` reseeds the noise only.

    Examples
    --------
    >>> FFGBConfig(variant="ffgb-c").function_clip
    10.0
    >>> FFGBConfig(learner="mlp")
    Traceback (most recent call last):
    ...
    ValueError: the MLP learner is not compatible with secure aggregation (the server must see \
each client's networks): set secure=False
    """

    variant: FFGBVariant = "ffgb"
    rounds: int = 20
    clients_per_round: int = 10
    local_steps: int = 5
    step_size: float = 1.0
    step_power: float = 0.0
    mu: float = 0.0
    residual: Literal["round", "persistent", "none"] = "round"
    learner: Literal["fourier", "mlp"] = "fourier"
    num_features: int = 256
    bandwidth: float | None = None
    ridge: float = 1e-3
    mlp_hidden: int = 32
    mlp_steps: int = 100
    mlp_lr: float = 0.01
    function_clip: float = 10.0
    query_clip: float = 2.0
    residual_clip: float = 4.0
    weighting: Literal["data", "uniform"] = "data"
    secure: bool = True
    bits: int = 32
    dropout: float = 0.0
    evaluation: Literal["auto", "heldout", "test_clients"] = "auto"
    eval_every: int = 1
    seed: int = 0
    blas_threads: int | None = 1
    epsilon: float | None = None
    delta: float = 1e-5
    noise_seed: int | None = None
    coefficient_clip: float | None = None

    def __post_init__(self) -> None:
        self._check_choice("variant", FFGB_VARIANTS)
        self._check_run(num_features=1, mlp_hidden=1, mlp_steps=1)
        positive = ("step_size", "ridge", "mlp_lr", "function_clip", "query_clip", "residual_clip")
        for name in positive:
            self._set(name, check_positive(name, getattr(self, name)))
        self._set("step_power", check_nonnegative("step_power", self.step_power))
        self._set("mu", check_nonnegative("mu", self.mu))
        if self.bandwidth is not None:
            self._set("bandwidth", check_positive("bandwidth", self.bandwidth))
        self._check_choice("residual", ("round", "persistent", "none"))
        self._check_choice("learner", ("fourier", "mlp"))
        self._check_choice("weighting", ("data", "uniform"))
        if self.secure and self.learner == "mlp":
            raise ValueError(
                "the MLP learner is not compatible with secure aggregation (the server must see "
                "each client's networks): set secure=False"
            )
        if self.coefficient_clip is not None:
            self._set("coefficient_clip", check_positive("coefficient_clip", self.coefficient_clip))
        if self.epsilon is not None and self.learner != "fourier":
            raise ValueError(
                "epsilon: DP needs the Fourier learner (a shared basis whose coefficients "
                "the noisy secure average sums)"
            )

    @property
    def clip(self) -> float | None:
        """The public clip of each coefficient vector (the DP default under DP).

        Examples
        --------
        >>> FFGBConfig().clip is None, FFGBConfig(epsilon=5.0).clip == FFGB_DP_CLIP
        (True, True)
        """
        if self.coefficient_clip is not None or not self.model_dp:
            return self.coefficient_clip
        return FFGB_DP_CLIP

    def step(self, round_index: int, local_index: int) -> float:
        """ηₜₖ = η₀/((t + 1)K + k + 1)^p (reference code's schedule, REFERENCES §3).

        Examples
        --------
        >>> FFGBConfig(step_size=2.0, step_power=1.0, local_steps=3).step(0, 0)
        0.5
        """
        position = (round_index + 1) * self.local_steps + local_index + 1
        return float(self.step_size / position**self.step_power)


class FunctionalModel:
    """f^t as the chain f^{s+1} = cₛ·[Π_Bₛ] f^s + incrementₛ from f⁰ = 0.

    Examples
    --------
    >>> from protocols.training.weak_learners import InterpolatingLearner
    >>> learner = InterpolatingLearner()
    >>> X = np.array([[0.0], [1.0]])
    >>> _, h = learner.fit(X, np.array([[1.0], [2.0]]), rng=np.random.default_rng(0))
    >>> model = FunctionalModel(learner, num_outputs=1)
    >>> model.append(0.5, None, learner.combine([(2.0, h)]))
    >>> model.append(0.5, 1.5, learner.combine([(1.0, h)]))
    >>> model(X).ravel().tolist()           # 0.5·clip(2·q, 1.5) + q
    [1.75, 2.75]
    """

    def __init__(self, learner: WeakLearner, num_outputs: int) -> None:
        self.learner = learner
        self.num_outputs = num_outputs
        self.stages: list[tuple[float, float | None, Any]] = []

    def append(self, decay: float, clip: float | None, increment: Any) -> None:
        """Add one round's stage."""
        self.stages.append((decay, clip, increment))

    def apply_stage(
        self, values: NDArray[np.float64], stage: tuple[float, float | None, Any], X: ArrayLike
    ) -> NDArray[np.float64]:
        """One stage on cached values of the previous function at ``X``."""
        decay, clip, increment = stage
        previous = values if clip is None else np.clip(values, -clip, clip)
        result: NDArray[np.float64] = decay * previous + self.learner.evaluate_combined(
            increment, X
        )
        return result

    def __call__(self, X: ArrayLike) -> NDArray[np.float64]:
        """f(X), shape (M, c)."""
        points = np.asarray(X, dtype=np.float64)
        values = np.zeros((points.shape[0], self.num_outputs))
        for stage in self.stages:
            values = self.apply_stage(values, stage, points)
        return values


@dataclass(frozen=True, eq=False, kw_only=True)
class FFGBResult(CurveResult):
    """The outcome of :func:`train_ffgb`.

    Attributes
    ----------
    config, evaluation
        The :class:`FFGBConfig` and where errors were measured.
    model
        The trained :class:`FunctionalModel`.
    curve
        (round, mean test error, cumulative payload bytes) every ``eval_every`` rounds and at
        the end.
    num_secure_averages
        Secure averages run (one per completed round with the Fourier learner; 0 otherwise).
    payload_bytes
        Nominal upload: each summed client's increment at ``bits`` bits per real (Fourier) or
        64 bits per real (networks sent in the clear).
    secure_aggregation_compatible
        Whether the learner's increments can be averaged by a secure sum.

    The other fields are :class:`~protocols.training.trainer_results.CurveResult`'s.

    Examples
    --------
    >>> from protocols.training.datasets import synthetic
    >>> data = synthetic(1, 1, num_clients=4, num_test_clients=0, seed=0)
    >>> result = train_ffgb(FFGBConfig(rounds=2, clients_per_round=3, num_features=32), data)
    >>> len(result.history), result.num_secure_averages, result.secure_aggregation_compatible
    (2, 2, True)
    """

    config: FFGBConfig
    evaluation: str
    model: FunctionalModel
    curve: tuple[tuple[int, float, int], ...]
    secure_aggregation_compatible: bool

    def to_dict(self) -> dict[str, Any]:
        """A JSON-serialisable record (the model left out).

        Examples
        --------
        >>> from protocols.training.datasets import synthetic
        >>> data = synthetic(1, 1, num_clients=3, num_test_clients=0, seed=0)
        >>> record = train_ffgb(FFGBConfig(rounds=1, clients_per_round=2, num_features=8),
        ...                     data, secure=False).to_dict()
        >>> record["variant"], record["secure_aggregation_compatible"]
        ('ffgb', True)
        """
        record = self._run_record()
        record["algorithm"] = record["variant"] = self.config.variant
        record["evaluation"] = self.evaluation
        record["secure_aggregation_compatible"] = self.secure_aggregation_compatible
        return record


def _softmax(logits: NDArray[np.float64]) -> NDArray[np.float64]:
    shifted: NDArray[np.float64] = logits - logits.max(axis=1, keepdims=True)
    np.exp(shifted, out=shifted)
    shifted /= shifted.sum(axis=1, keepdims=True)
    return shifted


class FFGBTrainer:
    """The FFGB loop (see the module docstring).

    Parameters
    ----------
    dataset, config
        The data and an :class:`FFGBConfig`.
    learner
        A custom :class:`~protocols.training.weak_learners.WeakLearner` (``None``: the one
        ``config.learner`` names). A learner without a shared basis needs ``secure=False``.

    Examples
    --------
    >>> from protocols.training.datasets import synthetic
    >>> data = synthetic(1, 1, num_clients=5, num_test_clients=0, seed=0)
    >>> trainer = FFGBTrainer(data, FFGBConfig(clients_per_round=3, num_features=16,
    ...                                        secure=False))
    >>> record = trainer.run_round(0)
    >>> record.sampled, record.survivors, len(trainer.model.stages)
    (3, 3, 1)
    """

    def __init__(
        self, dataset: FederatedDataset, config: FFGBConfig, learner: WeakLearner | None = None
    ) -> None:
        loop.check_trainer_inputs(dataset, config, FFGBConfig)
        self.dataset, self.config = dataset, config
        if learner is None:
            if config.learner == "mlp":
                learner = MLPRegressorLearner(config.mlp_hidden, config.mlp_steps, config.mlp_lr)
            else:
                bandwidth = config.bandwidth or 0.5 * math.sqrt(dataset.num_features)
                learner = FourierRidgeLearner(config.num_features, bandwidth, config.ridge)
        if config.secure and not learner.shared_basis:
            raise ValueError(
                f"{type(learner).__name__} has no shared basis: it is not compatible with secure "
                "aggregation; set secure=False"
            )
        self.learner = learner
        first = dataset.train_clients[0].y_train
        self.classification = bool(np.issubdtype(first.dtype, np.integer))
        self.num_outputs = dataset.num_classes if self.classification else 1
        self.model = FunctionalModel(learner, self.num_outputs)
        self.evaluation = self._resolve_evaluation()
        self.evaluation_clients = self._evaluation_clients()
        self._train_values = {
            c.client_id: np.zeros((c.num_train, self.num_outputs)) for c in dataset.train_clients
        }
        self._test_values = {
            c.client_id: np.zeros((c.num_test, self.num_outputs)) for c in self.evaluation_clients
        }
        self._residuals: dict[int, NDArray[np.float64]] = {}
        self.upload_bytes = 0
        self.payload_bytes = 0
        self.privacy: ModelPrivacy | None = None
        if config.epsilon is not None:
            if not learner.shared_basis:
                raise ValueError(f"{type(learner).__name__} has no shared basis: no DP")
            assert config.clip is not None
            self.privacy = ModelPrivacy.plan_for(
                epsilon=config.epsilon,
                delta=config.delta,
                rounds=config.rounds,
                averages_per_round=1,
                participants=config.clients_per_round,
                dropout=config.dropout,
                dimension=config.num_features * self.num_outputs,
                bits=config.bits,
                clip=config.clip,
            )

    def _resolve_evaluation(self) -> str:
        choice = self.config.evaluation
        if choice == "auto":
            unseen = not self.dataset.name.startswith("synthetic(") and self.dataset.test_clients
            return "test_clients" if unseen else "heldout"
        return choice

    def _evaluation_clients(self) -> tuple[ClientData, ...]:
        pool = (
            self.dataset.test_clients
            if self.evaluation == "test_clients"
            else self.dataset.train_clients
        )
        clients = tuple(c for c in pool if c.num_test > 0)
        if not clients:
            raise ValueError(
                f"{self.dataset.name} has no client to evaluate on ({self.evaluation})"
            )
        return clients

    def _targets(self, y: NDArray[Any]) -> NDArray[np.float64]:
        if self.classification:
            onehot = np.zeros((y.shape[0], self.num_outputs))
            onehot[np.arange(y.shape[0]), y.astype(np.intp)] = 1.0
            return onehot
        return np.asarray(y, dtype=np.float64)[:, None]

    def _loss_gradient(
        self, values: NDArray[np.float64], targets: NDArray[np.float64]
    ) -> tuple[float, NDArray[np.float64]]:
        """(mean loss, ∇₁ℓ at each point): FFGB eq. (6) on the empirical measure."""
        if self.classification and self.config.variant != "ffgb-l":
            probabilities = _softmax(values)
            picked = np.maximum((probabilities * targets).sum(axis=1), 1e-300)
            return float(-np.log(picked).mean()), probabilities - targets
        difference = values - targets
        return 0.5 * float((difference * difference).sum(axis=1).mean()), difference

    def client_round(self, client: ClientData, round_index: int) -> tuple[Any, float, float, bool]:
        """Client i's K functional steps: (increment, decay c, loss at f^t, finite).

        Examples
        --------
        >>> from protocols.training.datasets import synthetic
        >>> data = synthetic(1, 1, num_clients=3, num_test_clients=0, seed=0)
        >>> trainer = FFGBTrainer(data, FFGBConfig(clients_per_round=2, num_features=8,
        ...                                        local_steps=3, step_size=0.5, secure=False))
        >>> trainer.learner.begin_round(1)
        >>> _, decay, loss, ok = trainer.client_round(data.train_clients[0], 0)
        >>> decay, round(loss, 4), ok             # μ = 0: no decay; log 10 at f = 0
        (1.0, 2.3026, True)
        """
        config = self.config
        rng = stream(config.seed, _ORACLE, round_index, client.client_id)
        values = self._train_values[client.client_id].copy()
        clipping = config.variant == "ffgb-c"
        lipschitz = config.variant == "ffgb-l"
        if clipping:
            np.clip(values, -config.function_clip, config.function_clip, out=values)
        targets = self._targets(client.y_train)
        residual = (
            self._residuals.get(client.client_id, np.zeros_like(values))
            if config.residual == "persistent"
            else np.zeros_like(values)
        )
        terms: list[tuple[float, Any]] = []
        decay = 1.0
        first_loss = math.nan
        with np.errstate(over="ignore", invalid="ignore"):
            try:
                for k in range(config.local_steps):
                    eta = config.step(round_index, k)
                    loss, gradient = self._loss_gradient(values, targets)
                    if k == 0:
                        first_loss = loss
                    # FFGB.L queries the oracle for uᵢ (= yᵢ on the data), Algorithm 4.
                    signal = targets if lipschitz else gradient
                    query = residual + signal
                    if clipping:
                        np.clip(query, -config.query_clip, config.query_clip, out=query)
                    fitted, function = self.learner.fit(client.X_train, query, rng=rng)
                    if lipschitz:  # g ← g − η(g − h)  (Algorithm 4, line 5)
                        factor, coefficient = 1.0 - eta, eta
                    else:  # g ← g − η(h + μg)  (Algorithm 2, line 5)
                        factor, coefficient = 1.0 - eta * config.mu, -eta
                    values *= factor
                    values += coefficient * fitted
                    terms = [(c * factor, h) for c, h in terms]
                    terms.append((coefficient, function))
                    decay *= factor
                    if config.residual != "none":  # Δ ← Δ + signal − h (line 6)
                        residual = residual + signal - fitted
                        if clipping:
                            np.clip(
                                residual, -config.residual_clip, config.residual_clip, out=residual
                            )
            except ValueError:  # the oracle refuses a non-finite query
                return None, decay, first_loss, False
        finite = bool(np.isfinite(values).all() and math.isfinite(first_loss))
        if finite and config.residual == "persistent":
            self._residuals[client.client_id] = residual
        return self.learner.combine(terms), decay, first_loss, finite

    def _advance(self, decay: float, increment: Any) -> None:
        """f^{t+1} = c·[Π_B] f^t + increment, on the stored function and every cached value."""
        clip = self.config.function_clip if self.config.variant == "ffgb-c" else None
        stage = (decay, clip, increment)
        self.model.append(*stage)
        for client in self.dataset.train_clients:
            cid = client.client_id
            self._train_values[cid] = self.model.apply_stage(
                self._train_values[cid], stage, client.X_train
            )
        for client in self.evaluation_clients:
            cid = client.client_id
            self._test_values[cid] = self.model.apply_stage(
                self._test_values[cid], stage, client.X_test
            )

    def client_errors(self) -> NDArray[np.float64]:
        """Test error of f^t on each evaluation client (error rate; MSE for regression)."""
        errors = []
        for client in self.evaluation_clients:
            values = self._test_values[client.client_id]
            if self.classification:
                errors.append(float((values.argmax(axis=1) != client.y_test).mean()))
            else:
                errors.append(float(((values[:, 0] - client.y_test) ** 2).mean()))
        return np.array(errors)

    def run_round(self, index: int) -> RoundRecord:
        """Run round ``index``: broadcast, K local steps per client, secure average, advance."""
        return loop.run_round(self, index, sample=_SAMPLE, dropout=_DROPOUT, what="function(s)")

    def begin_round(self, index: int) -> None:
        """Fix the round's shared basis (the Fourier learner's features) from the seed."""
        self.learner.begin_round(derived_seed(self.config.seed, _BASIS, index) % (1 << 63))

    def local_update(self, client: ClientData, index: int) -> tuple[Any, float, bool]:
        """The client's K functional steps: ((increment, decay c), first loss, finite)."""
        increment, decay, loss, finite = self.client_round(client, index)
        return (increment, decay), loss, finite

    def release(self, contributions: loop.Contributions) -> loop.Release:
        """Average the increments (securely on a shared basis) and advance f."""
        config, privacy, index = self.config, self.privacy, contributions.index
        increments = [increment for increment, _ in contributions.updates]
        # Under DP every client counts once: its number of examples is a private weight.
        uniform = config.weighting == "uniform" or privacy is not None
        alpha = np.ones(contributions.count) if uniform else contributions.sizes
        average: Any = None
        survivors = averages = 0
        what = "finite function(s)"
        with loop.model_privacy_round(privacy, index, contributions.count, what) as why:
            reason = why
            if reason is None and self.learner.shared_basis:
                vectors = np.array([self.learner.to_vector(inc) for inc in increments])
                root = config.seed if config.noise_seed is None else config.noise_seed
                try:
                    result = secure_weighted_average(
                        vectors,
                        alpha,
                        settings=AverageSettings(bits=config.bits, clip=config.clip)
                        if privacy is None
                        else privacy.settings(mean=True),
                        weight_cap=None if privacy is None else 1.0,
                        seed=derived_seed(root, _AGGREGATE, index),
                        dropouts=contributions.dropouts,
                        secure=config.secure,
                        budget=None if privacy is None else privacy.budget,
                    )
                except loop.ROUND_FAILURES as error:
                    reason = f"{type(error).__name__}: {error}"
                else:
                    averages, survivors = 1, len(result.survivors)
                    if result.secure_sum is not None:
                        self.upload_bytes += sum(result.secure_sum.upload_bytes.values())
                    width = vectors.shape[1] + 1
                    self.payload_bytes += survivors * math.ceil(width * config.bits / 8)
                    average = self.learner.from_vector(result.average)
                    if not np.isfinite(result.average).all():
                        reason = "the released aggregate is not finite"
            elif reason is None:  # networks in the clear: the plain average of the survivors
                dropped = set(contributions.dropped.tolist())
                keep = [j for j in range(contributions.count) if j not in dropped]
                if len(keep) < 2:
                    reason = f"{len(keep)} client(s) left after dropouts"
                else:
                    survivors = len(keep)
                    for j in keep:
                        self.payload_bytes += 8 * self.learner.num_values(increments[j])
                    average = self.learner.average([increments[j] for j in keep], alpha[keep])
        if reason is None:
            # The decay c is a public function of the step sizes: equal for every client.
            self._advance(contributions.updates[0][1], average)
        rho = None if privacy is None else privacy.rho_spent
        return loop.Release(reason, survivors, averages, averages, rho_spent=rho)

    def run(self, progress: loop.ProgressCallback | None = None) -> FFGBResult:
        """Train for ``config.rounds`` rounds and evaluate.

        Examples
        --------
        >>> from protocols.training.datasets import synthetic
        >>> data = synthetic(1, 1, num_clients=4, num_test_clients=0, seed=0)
        >>> config = FFGBConfig(rounds=2, clients_per_round=2, num_features=16, eval_every=1)
        >>> result = FFGBTrainer(data, config).run()
        >>> [point[0] for point in result.curve], result.payload_bytes > 0
        ([1, 2], True)
        """

        def evaluate() -> tuple[tuple[float, int], NDArray[np.float64]]:
            errors = self.client_errors()
            return (float(errors.mean()), self.payload_bytes), errors

        errors, totals = loop.run_with_curve(self, evaluate, progress)
        return FFGBResult(
            config=self.config,
            evaluation=self.evaluation,
            model=self.model,
            client_ids=tuple(c.client_id for c in self.evaluation_clients),
            client_errors=errors,
            errors=ErrorSummary.from_errors(errors),
            secure_aggregation_compatible=self.learner.shared_basis,
            **totals,
        )


def train_ffgb(
    config: FFGBConfig,
    dataset: FederatedDataset,
    *,
    seed: int | None = None,
    secure: bool | None = None,
    progress: loop.ProgressCallback | None = None,
    learner: WeakLearner | None = None,
) -> FFGBResult:
    """Train FFGB, FFGB.C or FFGB.L (``config.variant``) on ``dataset``.

    Parameters
    ----------
    config
        An :class:`FFGBConfig`.
    dataset
        A :class:`~protocols.training.FederatedDataset` (classes: cross entropy, or the squared
        loss on one-hot targets for FFGB.L; real targets: the squared loss).
    seed, secure
        Override ``config.seed`` / ``config.secure`` when given.
    progress
        Optional callback ``(rounds_done, rounds)``.
    learner
        A custom weak learner (see :class:`FFGBTrainer`).

    Returns
    -------
    FFGBResult

    Examples
    --------
    >>> from protocols.training.datasets import synthetic
    >>> data = synthetic(0.5, 0.5, num_clients=6, num_test_clients=0, seed=0)
    >>> config = FFGBConfig(rounds=3, clients_per_round=3, num_features=64)
    >>> secure = train_ffgb(config, data, seed=1)
    >>> plain = train_ffgb(config, data, seed=1, secure=False)
    >>> X = data.train_clients[0].X_test
    >>> bool(np.abs(secure.model(X) - plain.model(X)).max() < 1e-4), secure.upload_bytes > 0
    (True, True)
    """
    config = loop.override(config, seed=seed, secure=secure)
    return FFGBTrainer(dataset, config, learner).run(progress)
