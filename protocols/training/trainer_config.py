"""Configuration of the reference trainers, validated on creation.

One frozen dataclass, :class:`TrainerConfig`, holds everything a FedAvg, Δ-FL, RFA or one-step RFA
run depends on besides the data: the algorithm and its parameters, local SGD, the secure path,
dropouts, corruption, evaluation and the seed. The trainers themselves are in
:mod:`protocols.training.trainers`. :class:`RunConfig` is the base of every trainer's
configuration (this one, Fed+'s and FFGB's): the fields they share are validated in one place.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Collection
from dataclasses import dataclass
from typing import Any, ClassVar, Literal, Self, get_args

from dpquantile import QUANTILE_READERS, QuantileReader, rho_for_epsilon
from protocols.aggregation.superquantile import EMPTY_TAIL_POLICIES, EmptyTailPolicy
from protocols.training.corruption import Corruption
from protocols.training.privacy import DEFAULT_DP_CLIP, DP_SCOPES, DPScope
from secagg.validation import (
    check_fraction,
    check_int,
    check_nonnegative,
    check_positive,
    check_seed,
)

__all__ = [
    "ALGORITHMS",
    "EVALUATIONS",
    "MODELS",
    "THRESHOLD_METHODS",
    "Algorithm",
    "Evaluation",
    "ModelKind",
    "RunConfig",
    "ThresholdMethod",
    "TrainerConfig",
]

Algorithm = Literal["fedavg", "deltafl", "rfa", "rfa1"]
ALGORITHMS: tuple[str, ...] = get_args(Algorithm)
"""Valid :attr:`TrainerConfig.algorithm` values: FedAvg, Δ-FL, RFA (geometric median), RFA-1."""

Evaluation = Literal["auto", "heldout", "test_clients"]
EVALUATIONS: tuple[str, ...] = get_args(Evaluation)
"""Where per-client test errors are measured: ``"heldout"`` (the training clients' own held-out
splits, FedProx's convention for Synthetic, whose unseen users are unpredictable),
``"test_clients"`` (clients never seen in training), ``"auto"`` (held-out for Synthetic, unseen
test clients otherwise)."""

ThresholdMethod = Literal["auto", "histogram", "tracking"]
THRESHOLD_METHODS: tuple[str, ...] = get_args(ThresholdMethod)
"""How Δ-FL estimates its threshold: a (DP) histogram quantile per round, or quantile tracking."""

ModelKind = Literal["logreg", "mlp"]
MODELS: tuple[str, ...] = get_args(ModelKind)
"""Models the trainers build: multinomial logistic regression or a one-hidden-layer MLP."""

_NEIGHBORS_AUTO = "auto"

# Integer fields some trainers have, with their smallest value (checked where present).
_SHARED_INT_MINIMA: dict[str, int] = {
    "rounds": 1,
    "clients_per_round": 2,
    "local_steps": 1,
    "batch_size": 1,
    "eval_every": 0,
}


class RunConfig:
    """The base of every trainer's configuration: the fields they share, validated one way.

    Each subclass is a frozen dataclass with at least ``rounds``, ``clients_per_round``,
    ``local_steps``, ``secure``, ``bits`` (in [8, 64]), ``dropout`` (in [0, 1)), ``seed`` (an
    int: every run is reproducible), ``noise_seed``, ``blas_threads``, ``epsilon`` (the whole
    run's ε, ``None``: no DP) and ``delta``; ``batch_size``, ``eval_every``, ``lr``,
    ``update_clip`` and ``evaluation`` are checked where a subclass has them. Its
    ``__post_init__`` calls :meth:`_check_run` with its own integer fields, then checks the rest.

    Examples
    --------
    >>> from protocols.training.ffgb import FFGBConfig
    >>> from protocols.training.fedplus import FedPlusConfig
    >>> for kind in (TrainerConfig, FedPlusConfig, FFGBConfig):
    ...     try:
    ...         kind(bits=70)
    ...     except ValueError as error:
    ...         print(kind.__name__, error)
    TrainerConfig bits must lie in [8, 64]; got 70
    FedPlusConfig bits must lie in [8, 64]; got 70
    FFGBConfig bits must lie in [8, 64]; got 70
    >>> round(FFGBConfig(epsilon=5.0).rho_budget, 4)
    0.551
    """

    __slots__ = ()
    __dataclass_fields__: ClassVar[dict[str, dataclasses.Field[Any]]]
    rounds: int
    clients_per_round: int
    local_steps: int
    secure: bool
    bits: int
    dropout: float
    seed: int
    noise_seed: int | None
    blas_threads: int | None
    epsilon: float | None
    delta: float

    def _set(self, name: str, value: object) -> None:
        object.__setattr__(self, name, value)

    def _check_choice(self, name: str, choices: Collection[str]) -> None:
        value = getattr(self, name)
        if value not in choices:
            raise ValueError(f"{name} must be one of {', '.join(choices)}; got {value!r}")

    def _check_run(self, **int_minima: int) -> None:
        """Validate and normalise the shared fields and the subclass's ``int_minima``."""
        present = self.__dataclass_fields__
        minima = {name: m for name, m in _SHARED_INT_MINIMA.items() if name in present}
        for name, minimum in (minima | int_minima).items():
            self._set(name, check_int(name, getattr(self, name), minimum=minimum))
        bits = check_int("bits", self.bits, minimum=8)
        if bits > 64:
            raise ValueError(f"bits must lie in [8, 64]; got {bits}")
        self._set("bits", bits)
        for name in ("lr", "update_clip"):  # update_clip may be None
            if name in present and getattr(self, name) is not None:
                self._set(name, check_positive(name, getattr(self, name)))
        if not isinstance(self.secure, bool):
            raise TypeError(f"secure must be a bool; got {type(self.secure).__name__}")
        self._set("dropout", check_fraction("dropout", self.dropout, zero=True, one=False))
        if "evaluation" in present:
            self._check_choice("evaluation", EVALUATIONS)
        seed = check_seed(self.seed)
        if seed is None:
            raise TypeError("seed must be an int: every run is reproducible from its seed")
        self._set("seed", seed)
        self._set("noise_seed", check_seed(self.noise_seed))
        if self.blas_threads is not None:
            self._set("blas_threads", check_int("blas_threads", self.blas_threads, minimum=1))
        if self.epsilon is not None:
            self._set("epsilon", check_positive("epsilon", self.epsilon))
        self._set("delta", check_fraction("delta", self.delta, zero=False, one=False))

    @property
    def model_dp(self) -> bool:
        """Whether the released models carry DP noise (here: ``epsilon`` is set; Δ-FL's may
        cover its thresholds only, see :attr:`TrainerConfig.model_dp`).

        Examples
        --------
        >>> from protocols.training.ffgb import FFGBConfig
        >>> FFGBConfig().model_dp, FFGBConfig(epsilon=5.0).model_dp
        (False, True)
        """
        return self.epsilon is not None

    @property
    def rho_budget(self) -> float | None:
        """The whole run's zCDP budget: the largest ρ that is (ε, δ)-DP, or ``None`` without DP.

        Examples
        --------
        >>> round(TrainerConfig(algorithm="deltafl", epsilon=2.0, delta=1e-6).rho_budget, 4)
        0.0882
        """
        return None if self.epsilon is None else rho_for_epsilon(self.epsilon, self.delta)

    def with_changes(self, **changes: Any) -> Self:
        """A validated copy with some fields changed.

        Examples
        --------
        >>> TrainerConfig().with_changes(algorithm="rfa", rounds=3).rounds
        3
        """
        return dataclasses.replace(self, **changes)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-serialisable record of the configuration.

        Examples
        --------
        >>> record = TrainerConfig(corruption=Corruption("omniscient", 0.25)).to_dict()
        >>> record["corruption"], record["secure"]
        ({'kind': 'omniscient', 'fraction': 0.25}, True)
        """
        record: dict[str, Any] = {}
        for name in self.__dataclass_fields__:
            value = getattr(self, name)
            if isinstance(value, Corruption):
                value = {"kind": value.kind, "fraction": value.fraction}
            elif isinstance(value, float) and not math.isfinite(value):
                value = str(value)
            record[name] = value
        return record


@dataclass(frozen=True, slots=True)
class TrainerConfig(RunConfig):
    """Everything a training run depends on besides the data (frozen; validated on construction).

    Parameters
    ----------
    algorithm
        ``"fedavg"``, ``"deltafl"`` (Δ-FL), ``"rfa"`` (geometric median by smoothed Weiszfeld, one
        secure average per step) or ``"rfa1"`` (one-step RFA).
    rounds, clients_per_round
        Communication rounds T and clients m sampled (uniformly, without replacement) per round.
    local_steps, batch_size, lr, weight_decay
        Local SGD of each sampled client: τ minibatch steps of size B with learning rate γ and
        L2 coefficient λ (:meth:`~protocols.training.Model.local_sgd`).
    model, hidden
        ``"logreg"`` or ``"mlp"`` (ReLU, ``hidden`` units).
    theta
        Δ-FL's tail fraction θ in (0, 1] (θ = 1 is FedAvg); ignored by the other algorithms.
    epsilon
        The whole run's (ε, δ)-DP budget at ``delta``, over every release ``dp`` names. It is
        converted once to a total zCDP ρ (:func:`rho_for_epsilon`) and split before round 1
        (:class:`~protocols.training.privacy.RunPrivacyPlan`); each release is spent from one
        :class:`~dpquantile.PrivacyBudget` before its noise is drawn. ``None``: no DP at all.
    delta
        δ of the (ε, δ)-DP budget and of the ε reported.
    dp
        What ``epsilon`` covers: ``"model"`` (every secure average of the model carries the
        clients' distributed discrete Gaussian noise: user-level DP of the released models),
        ``"thresholds"`` (Δ-FL's loss quantiles only; the model has no DP), or ``"both"``.
        ``None``: ``"both"`` for Δ-FL with θ < 1, ``"model"`` otherwise.
    dp_threshold_share
        Under ``"both"``, the fraction of ρ given to the thresholds (the rest to the model).
    dp_noise
        ``"distributed"`` (default): the clients add distributed discrete Gaussian noise inside
        the secure sum (KLS21). ``"central"``: a comparison baseline only — a trusted server adds
        continuous Gaussian noise N(0, σ²), σ = clip/√(2ρ), to the exact sum of the clipped
        updates (FedAvg with ``dp="model"`` and ``secure=False``; no secure sum, no trust model
        a deployment could have).
    quantile_bins, loss_upper
        The DP quantile's histogram: bins (a power of 2) over the public loss range
        [0, ``loss_upper``] (``None``: 2·ln C, twice the loss of a uniform C-class prediction).
    threshold_method, tracking_rate
        How Δ-FL finds its loss threshold each round: ``"histogram"`` (a DP quantile from a
        hierarchical histogram, or the exact quantile without DP), ``"tracking"`` (private
        quantile tracking, :class:`~protocols.aggregation.QuantileTracker`: one noisy count per
        round and the geometric step η = ``tracking_rate``, starting from ln C), or ``"auto"``
        (tracking when the thresholds are private, the exact quantile otherwise). Measured on
        Synthetic(1, 1), θ = 0.5, 10 clients per round, 100 rounds, ε = 5 on the thresholds
        (``examples/dp_thresholds.py --draws 6 --rates 0.05``: 10 seeds × 6 noise draws, 95 % CI
        over seeds; 2026-12-04): p90 − exact p90 = +0.083 ± 0.046 with the histogram,
        +0.007 ± 0.057 with tracking at η = 0.05; paired difference −0.076 ± 0.068. On MNIST-5k
        (30 clients, ``--dataset mnist-5k``): −0.007 ± 0.009 and −0.006 ± 0.011.
    threshold_reader
        How the histogram threshold is read from its noisy CDF: ``"first"`` (the first bin
        reaching (1 − θ)·m, the paper's; biased low under noise) or ``"isotonic"`` (the same on
        the CDF's non-decreasing least-squares fit; :func:`dpquantile.isotonic_cdf`).
    threshold_every
        Release Δ-FL's private threshold every this many rounds (1: every round); the rounds
        between reuse the last released threshold (public once released), so each release gets
        ``threshold_every`` times the ρ (fewer threshold releases, each less noisy).
    empty_tail
        What Δ-FL does when the DP quantile overshoots every loss (see
        :func:`~protocols.aggregation.superquantile.superquantile_aggregate`).
    rfa_max_iterations, rfa_smoothing, rfa_ftol
        RFA's Weiszfeld steps R (R + 1 secure averages at most), smoothing ν (``None``: see
        :attr:`rfa_nu`) and relative objective tolerance; one-step RFA uses ν only.
    secure
        Run every aggregation through the secure sum (default); ``False`` is plain numpy, equal
        up to quantisation error and much faster.
    bits
        Ring size of FedAvg's and Δ-FL's secure averages (RFA uses 64 bits: its weights span
        α/‖z − w‖ up to α/ν).
    update_clip
        Public L2 clip of each update; a clip also bounds what an omniscient attacker can send.
        ``None``: :data:`~protocols.training.privacy.DEFAULT_DP_CLIP` under model DP, otherwise
        the round's largest norm — a simulator convenience only (the grid scale it sets is
        public, so it tells the server the largest norm; :attr:`clip_is_public` is false).
    adaptive_clip, clip_quantile, clip_rate, clip_share
        Under model DP, let the clip follow the ``clip_quantile`` of the update norms (Andrew
        et al. 2021, Alg. 1): each round releases a noisy count of the clients whose update norm
        is below the clip in force C (their own one-coordinate secure average, one
        :class:`~protocols.aggregation.QuantileTracker` step), C ← C·exp(−η(b̃ − γ)) with
        η = ``clip_rate``, γ = ``clip_quantile``, starting from :attr:`clip`. The counts are paid
        from the run's budget: ``clip_share`` of its ρ (the rest is split as without).
    neighbors
        Secure-sum graph: ``"auto"`` (SecAgg+ degree and threshold for the round's size from
        :func:`secagg.graph_parameters.secagg_plus_parameters`), ``None`` (complete graph), or a
        degree.
    dropout
        Probability that a sampled client drops out of the round before sending its masked
        input (every secure sum of the round then runs without it).
    corruption
        A :class:`~protocols.training.Corruption` (data poisoning before training, update
        corruption at aggregation time), or ``None``.
    evaluation
        See :data:`EVALUATIONS`.
    seed
        The root seed: client sampling, local SGD, dropouts, corruption and every secure sum's
        randomness are derived from it.
    noise_seed
        ``None``: as above. Otherwise the seed of every aggregation's own randomness (rounding,
        noise, masks) alone: the same clients, SGD and dropouts with a fresh noise draw.
    blas_threads
        BLAS threads during the run (via ``threadpoolctl`` when installed; ``None``: unchanged).
        One is ~10× faster than two on a loaded 2-core machine.

    Examples
    --------
    >>> config = TrainerConfig(algorithm="deltafl", theta=0.5, epsilon=5.0, rounds=20)
    >>> round(config.rho_budget, 4)   # (5, 1e-5)-DP as a total zCDP ρ
    0.551
    >>> TrainerConfig(theta=0.0)
    Traceback (most recent call last):
    ...
    ValueError: theta must be a number in (0, 1]; got 0.0
    >>> config.dp_scope, config.clip   # DP end to end by default; the public default clip
    ('both', 1.0)
    >>> TrainerConfig(algorithm="fedavg", dp="thresholds", epsilon=1.0)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    ValueError: dp='thresholds' privatises Δ-FL's loss thresholds; algorithm 'fedavg' ...
    """

    algorithm: Algorithm = "fedavg"
    rounds: int = 50
    clients_per_round: int = 10
    local_steps: int = 10
    batch_size: int = 32
    lr: float = 0.1
    weight_decay: float = 0.0
    model: ModelKind = "logreg"
    hidden: int = 64
    theta: float = 0.5
    epsilon: float | None = None
    delta: float = 1e-5
    dp: DPScope | None = None
    dp_threshold_share: float = 0.5
    dp_noise: Literal["distributed", "central"] = "distributed"
    quantile_bins: int = 32
    loss_upper: float | None = None
    threshold_method: ThresholdMethod = "auto"
    tracking_rate: float = 0.05
    threshold_every: int = 1
    threshold_reader: QuantileReader = "first"
    empty_tail: EmptyTailPolicy = "all"
    rfa_max_iterations: int = 4
    rfa_smoothing: float | None = None
    rfa_ftol: float = 1e-6
    secure: bool = True
    bits: int = 32
    update_clip: float | None = None
    adaptive_clip: bool = False
    clip_quantile: float = 0.5
    clip_rate: float = 0.2
    clip_share: float = 0.1
    neighbors: int | Literal["auto"] | None = "auto"
    dropout: float = 0.0
    corruption: Corruption | None = None
    evaluation: Evaluation = "auto"
    seed: int = 0
    noise_seed: int | None = None
    blas_threads: int | None = 1

    def __post_init__(self) -> None:
        self._check_choice("algorithm", ALGORITHMS)
        self._check_run(hidden=1, quantile_bins=2, rfa_max_iterations=0)
        if self.quantile_bins & (self.quantile_bins - 1):
            raise ValueError(f"quantile_bins must be a power of 2; got {self.quantile_bins}")
        self._set("weight_decay", check_nonnegative("weight_decay", self.weight_decay))
        self._check_choice("model", MODELS)
        self._set("theta", check_fraction("theta", self.theta, zero=False, one=True))
        self._check_dp()
        if self.loss_upper is not None:
            self._set("loss_upper", check_positive("loss_upper", self.loss_upper))
        self._check_choice("threshold_method", THRESHOLD_METHODS)
        self._set("tracking_rate", check_positive("tracking_rate", self.tracking_rate))
        self._check_choice("threshold_reader", QUANTILE_READERS)
        self._set("threshold_every", check_int("threshold_every", self.threshold_every, minimum=1))
        self._check_choice("empty_tail", EMPTY_TAIL_POLICIES)
        if self.rfa_smoothing is not None:
            self._set("rfa_smoothing", check_positive("rfa_smoothing", self.rfa_smoothing))
        self._set("rfa_ftol", check_nonnegative("rfa_ftol", self.rfa_ftol))
        if self.neighbors not in (_NEIGHBORS_AUTO, None):
            self._set("neighbors", check_int("neighbors", self.neighbors, minimum=2))
        if self.corruption is not None and not isinstance(self.corruption, Corruption):
            raise TypeError(
                f"corruption must be a Corruption or None; got {type(self.corruption).__name__}"
            )

    def _check_dp(self) -> None:
        share = check_fraction("dp_threshold_share", self.dp_threshold_share, zero=False, one=False)
        self._set("dp_threshold_share", share)
        if not isinstance(self.adaptive_clip, bool):
            raise TypeError(
                f"adaptive_clip must be a bool; got {type(self.adaptive_clip).__name__}"
            )
        for name in ("clip_quantile", "clip_share"):
            value = check_fraction(name, getattr(self, name), zero=False, one=False)
            self._set(name, value)
        self._set("clip_rate", check_positive("clip_rate", self.clip_rate))
        if self.adaptive_clip and not self.model_dp:
            raise ValueError(
                "adaptive_clip needs model DP (an epsilon covering the model): without noise the "
                "released count would reveal the norms' quantile exactly"
            )
        if self.adaptive_clip and self.dp_noise == "central":
            raise ValueError("adaptive_clip runs through the secure average: dp_noise='central'")
        if self.dp_noise not in ("distributed", "central"):
            raise ValueError(f"dp_noise must be 'distributed' or 'central'; got {self.dp_noise!r}")
        if self.dp_noise == "central" and not (
            self.algorithm == "fedavg" and not self.secure and self.epsilon is not None
        ):
            raise ValueError(
                "dp_noise='central' is the trusted-server baseline of FedAvg with model DP: "
                "it needs algorithm='fedavg', an epsilon and secure=False"
            )
        if self.dp is None:
            return
        if self.dp not in DP_SCOPES:
            raise ValueError(f"dp must be one of {', '.join(DP_SCOPES)}; got {self.dp!r}")
        if self.epsilon is None:
            raise ValueError(f"dp={self.dp!r} needs an epsilon (the run's budget)")
        has_thresholds = self.algorithm == "deltafl" and self.theta < 1.0
        if self.dp == "model" and has_thresholds:
            # The tail is every client with loss ≥ τ: with an exact τ, one client's loss moves τ
            # and with it other clients in or out of the noisy average — unbounded sensitivity.
            raise ValueError(
                "dp='model' for Δ-FL with θ < 1 is not DP: the exact threshold decides which "
                "other clients enter the noisy average; use dp='both' (the threshold private too)"
            )
        if self.dp != "model" and not has_thresholds:
            raise ValueError(
                f"dp={self.dp!r} privatises Δ-FL's loss thresholds; algorithm "
                f"{self.algorithm!r} with θ = {self.theta:g} has none (use dp='model')"
            )

    @property
    def dp_scope(self) -> DPScope | None:
        """What the run's ε covers (``None``: no DP).

        Examples
        --------
        >>> TrainerConfig(epsilon=1.0).dp_scope, TrainerConfig().dp_scope
        ('model', None)
        """
        if self.epsilon is None:
            return None
        if self.dp is not None:
            return self.dp
        return "both" if self.algorithm == "deltafl" and self.theta < 1.0 else "model"

    @property
    def model_dp(self) -> bool:
        """Whether the model averages carry noise (the released models are DP).

        Examples
        --------
        >>> TrainerConfig(algorithm="deltafl", epsilon=1.0, dp="thresholds").model_dp
        False
        """
        return self.dp_scope in ("model", "both")

    @property
    def tracks_threshold(self) -> bool:
        """Whether Δ-FL's threshold comes from quantile tracking (see ``threshold_method``).

        Examples
        --------
        >>> deltafl = TrainerConfig(algorithm="deltafl", epsilon=5.0, dp="thresholds")
        >>> deltafl.tracks_threshold, deltafl.with_changes(epsilon=None, dp=None).tracks_threshold
        (True, False)
        """
        if self.algorithm != "deltafl" or self.theta >= 1.0:
            return False
        if self.threshold_method == "auto":
            return self.dp_scope in ("thresholds", "both")
        return self.threshold_method == "tracking"

    @property
    def clip(self) -> float | None:
        """The update clip in force: ``update_clip``, else the public default under model DP,
        else ``None`` (the round's largest norm).

        Examples
        --------
        >>> TrainerConfig(update_clip=2.0).clip, TrainerConfig().clip
        (2.0, None)
        """
        if self.update_clip is not None:
            return self.update_clip
        return DEFAULT_DP_CLIP if self.model_dp else None

    @property
    def clip_is_public(self) -> bool:
        """False when the clip is the round's largest norm (derived from the updates).

        Examples
        --------
        >>> TrainerConfig().clip_is_public, TrainerConfig(epsilon=1.0).clip_is_public
        (False, True)
        """
        return self.clip is not None

    @property
    def rfa_nu(self) -> float:
        """RFA's smoothing ν in force: ``rfa_smoothing``, else 10⁻⁶ without model DP and a
        quarter of the clip with it (each noisy Weiszfeld average's sensitivity is clip/ν).

        Examples
        --------
        >>> rfa = TrainerConfig(algorithm="rfa")
        >>> rfa.rfa_nu, rfa.with_changes(epsilon=1.0).rfa_nu
        (1e-06, 0.25)
        """
        if self.rfa_smoothing is not None:
            return self.rfa_smoothing
        clip = self.clip
        return 0.25 * clip if self.model_dp and clip is not None else 1e-6
