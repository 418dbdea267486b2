"""Fed+ aggregation (Yu et al., "Robustness and Personalization in Federated Learning: A Unified
Approach via Regularization"): the Moreau-envelope aggregate of local models, through secure sums.

For a convex regulariser Ψ with Ψ/σ ∈ {δ/2‖·‖², δ‖·‖₂, δ‖·‖₁} (FedAvg+, FedGeoMed+, FedCoMed+),
the global model minimises the Moreau envelope of Ψ/σ summed over the parties (Fed+ eq. (6)–(7)):

    w̃ = argmin_z Σₖ αₖ·M(wₖ − z),   M(v) = min_θ ½‖v − θ‖² + Ψ(θ)/σ,

and each party's personal offset is θₖ = prox_{Ψ/σ}(wₖ − w̃) (Fed+ eq. (11)). The paper's
aggregation iteration (Fed+ §3, initialised at the mean) alternates θₖ and w̃:

    w̃ ← w̃ + Σₖ αₖ·(wₖ − w̃ − θₖ) / Σₖ αₖ,

which only needs *sums*: for the ℓ2 regulariser wₖ − w̃ − θₖ = cₖ(wₖ − w̃) with the scalar
cₖ = min(1, δ/‖wₖ − w̃‖), so each step is one secure weighted average with weights αₖcₖ (an
iterative secure aggregate, RFA Definition 1); for ℓ1 wₖ − w̃ − θₖ = clip(wₖ − w̃, ±δ) per
coordinate, so each step is one secure weighted average of those bounded pulls (and the
majorise–minimise iteration's per-coordinate weights need :func:`secure_coordinate_average`,
one sum of [βₖ ⊙ wₖ ; βₖ]). The squared
ℓ2 iteration is stationary at its start (the mean): FedAvg+ costs one secure average.
``method="weiszfeld"`` minimises the same envelope by majorise–minimise (weights αₖ/max(δ, dₖ)),
which for ℓ2 is RFA's smoothed Weiszfeld with ν = δ, far faster when δ is small.
Derivations that are ours: ``fedplus_notes.md``.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Literal, get_args

import numpy as np
from numpy.typing import ArrayLike, NDArray

from dpquantile import PrivacyBudget
from protocols.aggregation._arrays import as_matrix
from protocols.aggregation._quantization import plan_quantization
from protocols.aggregation.geometric_median import geometric_median
from protocols.aggregation.iterative import CallPlan, Contributions, run_iterative_aggregate
from protocols.aggregation.secure_average import (
    AverageResult,
    AverageSettings,
    ServerView,
    ZeroWeightSumError,
    secure_weighted_average,
)
from secagg import (
    KeystreamRandom,
    LazyInputs,
    Quantizer,
    Ring,
    TooFewSurvivorsError,
    default_threshold,
    parse_dropouts,
    plain_outcome,
    secure_sum,
    summed_clients,
)
from secagg.validation import check_int, check_nonnegative, check_positive, check_seed

__all__ = [
    "REGULARIZERS",
    "CoordinateAverageResult",
    "FedPlusAggregate",
    "FedPlusL2Rule",
    "Regularizer",
    "fedplus_aggregate",
    "fedplus_objective",
    "fedplus_offsets",
    "secure_coordinate_average",
]

logger = logging.getLogger(__name__)

Regularizer = Literal["squared_l2", "l2", "l1"]
REGULARIZERS: tuple[str, ...] = get_args(Regularizer)
"""Ψ/σ = δ/2‖·‖² (FedAvg+), δ‖·‖₂ (FedGeoMed+), δ‖·‖₁ (FedCoMed+)."""

_METHODS = ("moreau", "weiszfeld")
_DOMAIN = b"secagg-dp/v1/protocols/fedplus-coordinate-average"


def _check_regularizer(regularizer: str) -> str:
    if regularizer not in REGULARIZERS:
        raise ValueError(
            f"regularizer must be one of {', '.join(REGULARIZERS)}; got {regularizer!r}"
        )
    return regularizer


def _pull_factors(
    differences: NDArray[np.float64], regularizer: str, smoothing: float
) -> NDArray[np.float64]:
    """c with wₖ − w̃ − θₖ = c ⊙ (wₖ − w̃): (n,) for ℓ2 and squared ℓ2, (n, d) for ℓ1."""
    if regularizer == "squared_l2":
        # prox of δ/2‖·‖² is v/(1 + δ), so v − prox(v) = δ/(1 + δ)·v (fedplus_notes.md §1).
        return np.full(differences.shape[0], smoothing / (1.0 + smoothing))
    if regularizer == "l2":
        # prox of δ‖·‖₂ is block soft-thresholding: v − prox(v) = min(1, δ/‖v‖)·v (notes §1).
        norms = np.sqrt(np.einsum("ij,ij->i", differences, differences))
        factors: NDArray[np.float64] = np.minimum(1.0, smoothing / np.maximum(norms, 1e-300))
        return factors
    # prox of δ‖·‖₁ is soft-thresholding per coordinate: v − prox(v) = clip(v, −δ, δ) (notes §1).
    return np.minimum(1.0, smoothing / np.maximum(np.abs(differences), 1e-300))


def fedplus_offsets(
    local: ArrayLike, centre: ArrayLike, *, regularizer: Regularizer, smoothing: float
) -> NDArray[np.float64]:
    """Each party's personal offset θₖ = prox_{Ψ/σ}(wₖ − w̃) (Fed+ eq. (11)).

    Parameters
    ----------
    local
        (n, d) local models wₖ (or one (d,) model).
    centre
        The global model w̃, shape (d,).
    regularizer
        ``"squared_l2"``, ``"l2"`` or ``"l1"`` (:data:`REGULARIZERS`).
    smoothing
        δ > 0.

    Returns
    -------
    numpy.ndarray
        θ with the shape of ``local``; the party pulls towards w̃ + θₖ.

    Examples
    --------
    >>> fedplus_offsets([[3.0, 4.0]], [0.0, 0.0], regularizer="l2", smoothing=1.0).tolist()
    [[2.4, 3.2]]
    >>> fedplus_offsets([[3.0, -0.5]], [0.0, 0.0], regularizer="l1", smoothing=1.0).tolist()
    [[2.0, 0.0]]
    >>> fedplus_offsets([3.0, 4.0], [0.0, 0.0], regularizer="squared_l2", smoothing=1.0).tolist()
    [1.5, 2.0]
    """
    _check_regularizer(regularizer)
    delta = check_positive("smoothing", smoothing)
    points = np.asarray(local, dtype=np.float64)
    single = points.ndim == 1
    matrix = as_matrix(points[None, :] if single else points)
    z = np.asarray(centre, dtype=np.float64)
    if z.shape != (matrix.shape[1],):
        raise ValueError(f"centre must have shape ({matrix.shape[1]},); got {z.shape}")
    differences = matrix - z
    factors = _pull_factors(differences, regularizer, delta)
    pulled = differences * (factors if factors.ndim == 2 else factors[:, None])
    offsets: NDArray[np.float64] = differences - pulled
    if single:
        first: NDArray[np.float64] = offsets[0]
        return first
    return offsets


def fedplus_objective(
    points: ArrayLike,
    centre: ArrayLike,
    weights: ArrayLike | None = None,
    *,
    regularizer: Regularizer,
    smoothing: float,
) -> float:
    """Σₖ αₖ·M(wₖ − z): the Moreau envelope of Ψ/σ summed over the parties (Fed+ eq. (6)).

    M is ½‖v‖²/(1 + δ)·δ for squared ℓ2, the Huber function H_δ(‖v‖) for ℓ2 and Σⱼ H_δ(vⱼ) for
    ℓ1, with H_δ(t) = t²/2 for |t| ≤ δ and δ|t| − δ²/2 beyond (fedplus_notes.md §1).

    Examples
    --------
    >>> fedplus_objective([[0.0], [3.0]], [0.0], regularizer="l2", smoothing=1.0)
    2.5
    """
    _check_regularizer(regularizer)
    delta = check_positive("smoothing", smoothing)
    matrix = as_matrix(points)
    alpha = _weights(weights, matrix.shape[0])
    differences = matrix - np.asarray(centre, dtype=np.float64)
    if regularizer == "squared_l2":
        values = 0.5 * delta / (1.0 + delta) * np.einsum("ij,ij->i", differences, differences)
    elif regularizer == "l2":
        values = _huber(np.sqrt(np.einsum("ij,ij->i", differences, differences)), delta)
    else:
        values = _huber(np.abs(differences), delta).sum(axis=1)
    return float(alpha @ values)


def _huber(t: NDArray[np.float64], delta: float) -> NDArray[np.float64]:
    result: NDArray[np.float64] = np.where(t <= delta, 0.5 * t * t, delta * t - 0.5 * delta**2)
    return result


def _weights(weights: ArrayLike | None, n: int) -> NDArray[np.float64]:
    alpha = np.ones(n) if weights is None else np.asarray(weights, dtype=np.float64)
    if alpha.shape != (n,):
        raise ValueError(f"weights must have shape ({n},) to match the points; got {alpha.shape}")
    if (alpha[np.isfinite(alpha)] < 0).any():
        raise ValueError("weights must be non-negative")
    return alpha


# --------------------------------------------------------------------------------------------------
# Per-coordinate weighted average through one secure sum (FedCoMed+)
# --------------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, eq=False)
class CoordinateAverageResult:
    """The outcome of :func:`secure_coordinate_average`.

    Attributes
    ----------
    weighted_sum, weight_sum
        The released Σₖβₖ ⊙ wₖ and Σₖβₖ over the survivors, each of shape (d,).
    survivors, dropped, rejected
        Clients in the sum; all others; those rejected before the protocol (non-finite input).
    quantization_step
        Grid step in units of βw (``None`` on the exact plain path).
    upload_bytes
        Bytes the clients uploaded in the secure sum (0 on the plain path).
    secure
        Whether the secure sum ran.

    Examples
    --------
    >>> r = secure_coordinate_average([[1.0, 2.0], [3.0, 4.0]], [[1.0, 0.0], [1.0, 1.0]],
    ...                               secure=False)
    >>> r.average(np.zeros(2)).tolist()
    [2.0, 4.0]
    """

    weighted_sum: NDArray[np.float64]
    weight_sum: NDArray[np.float64]
    survivors: tuple[int, ...]
    dropped: tuple[int, ...]
    rejected: tuple[int, ...]
    quantization_step: float | None
    upload_bytes: int
    secure: bool

    def average(self, fallback: NDArray[np.float64]) -> NDArray[np.float64]:
        """Σβw/Σβ per coordinate; ``fallback`` where the released weight sum is not positive."""
        positive = self.weight_sum > 0
        result = np.array(fallback, dtype=np.float64, copy=True)
        result[positive] = self.weighted_sum[positive] / self.weight_sum[positive]
        return result


class _CoordinateRows(LazyInputs):
    """Ring vectors [βₖ ⊙ wₖ ; c·βₖ] of the participants, quantised when the runner reads them."""

    def __init__(
        self,
        rows: NDArray[np.float64],
        participants: NDArray[np.intp],
        quantizer: Quantizer,
        root: KeystreamRandom,
        ring: Ring,
    ) -> None:
        super().__init__(int(participants.size), int(rows.shape[1]))
        self._rows, self._participants, self._root = rows, participants, root
        self._quantizer = quantizer
        self._mask = np.uint64(ring.word_mask)
        self._dtype = ring.dtype

    def row(self, index: int) -> NDArray[np.uint64]:
        client = int(self._participants[index])
        values = self._quantizer.quantize(
            self._rows[client], rng=self._root.spawn(b"round/%d" % client)
        )
        return (values.view(np.uint64) & self._mask).astype(self._dtype, copy=False)


def secure_coordinate_average(
    vectors: ArrayLike,
    weights: ArrayLike,
    *,
    bits: int = 32,
    clip: float | None = None,
    weight_cap: float | None = None,
    seed: int | None = None,
    neighbors: int | None = None,
    threshold: int | None = None,
    dropouts: Mapping[str, Iterable[int]] | None = None,
    secure: bool = True,
    threat_model: str = "malicious",
    settings: AverageSettings | None = None,
) -> CoordinateAverageResult:
    """Σₖβₖ ⊙ wₖ and Σₖβₖ (vectors) through one secure sum: a per-coordinate weighted average.

    Client k clips each coordinate of wₖ to [−c, c] and of βₖ to [0, B], quantises the vector
    [βₖ ⊙ wₖ ; c·βₖ] (length 2d) on one grid by stochastic rounding from its own cryptographic
    stream, and masks it in a SecAgg(+) secure sum; the grid is the finest whose sum over all
    clients cannot wrap modulo 2^bits (as in :func:`~protocols.aggregation.
    secure_weighted_average`). No noise: this path carries no privacy event.

    Parameters
    ----------
    vectors
        (n, d) client vectors wₖ; a client with a non-finite entry (or weight) is rejected.
    weights
        (n, d) per-coordinate weights βₖ ≥ 0.
    bits
        Ring size (the sum of n values of magnitude B·c must fit in 2^(bits−1)).
    clip
        Public per-coordinate bound c (``None``: the largest |wₖⱼ|, simulator convenience).
    weight_cap
        Public cap B on each βₖⱼ (``None``: the largest weight, simulator convenience).
    seed
        Seed of the rounding streams and the secure sum (``None``: fresh randomness).
    neighbors, threshold, dropouts
        As for :func:`secagg.secure_sum` (dropouts in the caller's client indices).
    secure
        ``False``: the same sums in exact plain numpy.
    threat_model
        Of the secure sum (:class:`secagg.ThreatModel`).
    settings
        ``bits``, ``clip`` (here per coordinate), ``neighbors``, ``threshold`` and
        ``threat_model`` as an :class:`AverageSettings` (those options left at their defaults).
        Settings this path cannot honour are refused: noise, ``max_effective_weight`` (no
        per-coordinate certificate exists) and ``quantize=True`` on the plain path.

    Returns
    -------
    CoordinateAverageResult

    Raises
    ------
    secagg.TooFewSurvivorsError
        When too few clients remain for the threshold.

    Examples
    --------
    >>> points = [[0.0, 10.0], [1.0, 20.0], [2.0, 30.0]]
    >>> beta = [[1.0, 0.0], [1.0, 1.0], [1.0, 0.0]]
    >>> result = secure_coordinate_average(points, beta, seed=1)
    >>> np.round(result.average(np.zeros(2)), 6).tolist(), result.survivors
    ([1.0, 20.0], (0, 1, 2))
    """
    if settings is not None:
        if not isinstance(settings, AverageSettings):
            raise TypeError(f"settings must be AverageSettings; got {type(settings).__name__}")
        given = (bits, clip, neighbors, threshold, threat_model)
        if given != (32, None, None, None, "malicious"):
            raise ValueError(
                "give settings or the individual options (bits, clip, neighbors, threshold, "
                "threat_model), not both"
            )
        if settings.noise is not None:
            raise ValueError("secure_coordinate_average adds no noise: settings.noise must be None")
        if settings.max_effective_weight is not None:
            raise ValueError(
                "secure_coordinate_average cannot certify max_effective_weight (no per-coordinate "
                "certificate): settings.max_effective_weight must be None"
            )
        if settings.quantize and not secure:
            raise ValueError("secure_coordinate_average's plain path is exact: quantize=True")
        bits, clip, neighbors = settings.bits, settings.clip, settings.neighbors
        threshold, threat_model = settings.threshold, settings.threat_model
    matrix = as_matrix(vectors)
    n, d = matrix.shape
    beta = np.asarray(weights, dtype=np.float64)
    if beta.shape != (n, d):
        raise ValueError(
            f"weights must have shape ({n}, {d}) to match the vectors; got {beta.shape}"
        )
    seed = check_seed(seed)
    bits = check_int("bits", bits, minimum=2)
    finite = np.asarray(np.isfinite(matrix).all(axis=1) & np.isfinite(beta).all(axis=1))
    rejected = tuple(int(i) for i in np.flatnonzero(~finite))
    if rejected:
        logger.warning("rejected %d client(s) with non-finite input: %s", len(rejected), rejected)
    participants = np.flatnonzero(finite)
    if participants.size == 0:
        raise TooFewSurvivorsError(f"all {n} clients sent non-finite vectors or weights")
    live = beta[participants]
    if (live < 0).any():
        raise ValueError("weights must be non-negative")
    c = float(np.abs(matrix[participants]).max()) if clip is None else check_positive("clip", clip)
    c = c if c > 0 else 1.0
    cap = float(live.max()) if weight_cap is None else check_positive("weight_cap", weight_cap)
    cap = cap if cap > 0 else 1.0
    safe = np.where(finite[:, None], matrix, 0.0)
    clipped_beta = np.minimum(np.where(finite[:, None], beta, 0.0), cap)
    rows = np.concatenate([clipped_beta * np.clip(safe, -c, c), c * clipped_beta], axis=1)

    local_of = {int(k): j for j, k in enumerate(participants)}
    local_dropouts: dict[str, list[int]] = {}
    for client, phase in parse_dropouts(dropouts, n).items():
        if client in local_of:
            local_dropouts.setdefault(phase, []).append(local_of[client])
    m = participants.size
    threshold = threshold or default_threshold(m, neighbors)
    completes, why = (
        plain_outcome(
            m, local_dropouts, threshold=threshold, neighbors=neighbors, threat_model=threat_model
        )
        if m >= 2
        else (False, "fewer than 2 clients")
    )
    if not completes:
        raise TooFewSurvivorsError(
            f"{m} of {n} clients take part ({len(rejected)} rejected): {why}"
        )
    upload = 0
    step: float | None = None
    if secure:
        magnitude = cap * c
        # ‖[β⊙w ; cβ]‖₂ ≤ B·c·√(2d); no noise, so only the headroom matters.
        plan = plan_quantization(
            m, 2 * d, magnitude, magnitude * math.sqrt(2 * d), bits, None, None, m
        )
        root = KeystreamRandom(seed, label=_DOMAIN)
        sum_seed = None if seed is None else root.derive_seed(b"secure-sum")
        result = secure_sum(
            _CoordinateRows(rows, participants, plan.quantizer, root, Ring(bits)),
            modulus_bits=bits,
            threshold=threshold,
            neighbors=neighbors,
            dropouts=local_dropouts,
            seed=sum_seed,
            threat_model=threat_model,
        )
        survivors_local = np.asarray(result.survivors, dtype=np.intp)
        total = result.centered().astype(np.float64) / plan.quantizer.scale
        step = 1.0 / plan.quantizer.scale
        upload = sum(result.upload_bytes.values())
    else:
        survivors_local = np.array(summed_clients(local_dropouts, m), dtype=np.intp)
        total = rows[participants[survivors_local]].sum(axis=0)
    survivors = tuple(sorted(int(participants[j]) for j in survivors_local))
    dropped = tuple(sorted(set(range(n)) - set(survivors)))
    return CoordinateAverageResult(
        weighted_sum=total[:d],
        weight_sum=total[d:] / c,
        survivors=survivors,
        dropped=dropped,
        rejected=rejected,
        quantization_step=step,
        upload_bytes=upload,
        secure=secure,
    )


# --------------------------------------------------------------------------------------------------
# The ℓ2 iteration as an iterative secure aggregate
# --------------------------------------------------------------------------------------------------


class FedPlusL2Rule:
    """The Fed+ ℓ2 aggregation iteration as an :class:`~protocols.aggregation.IterativeRule`.

    Call 0 is the weighted mean (weights αₖ), which releases w̃₀ and A = Σαₖ. Call r ≥ 1 has
    weights αₖcₖ with cₖ = min(1, δ/‖wₖ − w̃ᵣ₋₁‖), and the server sets
    w̃ᵣ = w̃ᵣ₋₁ + (Bᵣ/A)(āᵣ − w̃ᵣ₋₁) from the released average āᵣ and weight sum Bᵣ (Fed+ §3,
    the θ/w̃ alternation; fedplus_notes.md §2). w̃ᵣ is a function of the public transcript
    only, so every client can recompute it; the rule caches it for the simulation.

    Examples
    --------
    >>> rule = FedPlusL2Rule(np.ones(3), smoothing=0.5, max_iterations=100, tol=1e-7)
    >>> result = run_iterative_aggregate(rule, [[0.0], [1.0], [9.0]], secure=False)
    >>> round(float(rule.centre[0]), 4), rule.iterations < 50
    (1.0, True)
    """

    def __init__(
        self,
        alpha: NDArray[np.float64],
        *,
        smoothing: float,
        max_iterations: int,
        tol: float,
        weight_cap: float | None = None,
    ) -> None:
        self.alpha = np.asarray(alpha, dtype=np.float64)
        self.smoothing = check_positive("smoothing", smoothing)
        self.max_iterations = check_int("max_iterations", max_iterations, minimum=0)
        self.tol = check_nonnegative("tol", tol)
        finite = self.alpha[np.isfinite(self.alpha)]
        self.weight_cap = (
            float(finite.max()) if weight_cap is None else check_positive("weight_cap", weight_cap)
        )
        self._centres: list[NDArray[np.float64]] = []
        self._steps: list[float] = []

    @property
    def centre(self) -> NDArray[np.float64]:
        """The current global model w̃ (public)."""
        return self._centres[-1]

    @property
    def iterations(self) -> int:
        """θ/w̃ alternations done (secure averages minus one)."""
        return max(0, len(self._centres) - 1)

    @property
    def step_norms(self) -> tuple[float, ...]:
        """‖w̃ᵣ − w̃ᵣ₋₁‖ per iteration (public)."""
        return tuple(self._steps)

    def plan(self, transcript: tuple[ServerView, ...]) -> CallPlan | None:
        """The server's half: update w̃ from the last release, then stop or plan the next call."""
        if not transcript:
            self._centres, self._steps = [], []
            return CallPlan(0, weight_cap=self.weight_cap)
        last = transcript[-1]
        if len(transcript) == 1:
            self._centres.append(last.average.copy())
        else:
            previous = self._centres[-1]
            ratio = last.weight_sum / transcript[0].weight_sum
            step = ratio * (last.average - previous)
            self._centres.append(previous + step)
            self._steps.append(float(np.linalg.norm(step)))
            if self._steps[-1] <= self.tol:
                return None
        if len(transcript) > self.max_iterations:
            return None
        return CallPlan(len(transcript), weight_cap=self.weight_cap, previous=last)

    def contributions(self, plan: CallPlan, vectors: NDArray[np.float64]) -> Contributions:
        """The clients' half: αₖ at call 0, then αₖ·min(1, δ/‖wₖ − w̃‖)."""
        if plan.index == 0:
            return Contributions(self.alpha)
        factors = _pull_factors(vectors - self.centre, "l2", self.smoothing)
        return Contributions(self.alpha * factors)


# --------------------------------------------------------------------------------------------------
# The aggregate
# --------------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, eq=False)
class FedPlusAggregate:
    """The outcome of :func:`fedplus_aggregate`.

    Attributes
    ----------
    aggregate
        The global model w̃.
    regularizer, smoothing, method
        Ψ, δ and the iteration used.
    iterations
        Aggregation iterations after the initial mean.
    num_secure_sums
        Secure sums run (one per iteration plus the mean).
    survivors, rejected
        Clients in the last sum; clients rejected for non-finite input.
    upload_bytes
        Bytes uploaded by the clients over every secure sum (0 on the plain path).
    step_norms
        ‖w̃ᵣ − w̃ᵣ₋₁‖ per iteration (public).
    secure, seed
        The path and the seed.

    Examples
    --------
    >>> fedplus_aggregate([[0.0], [2.0]], regularizer="squared_l2", smoothing=1.0,
    ...                   secure=False).aggregate.tolist()
    [1.0]
    """

    aggregate: NDArray[np.float64]
    regularizer: str
    smoothing: float
    method: str
    iterations: int
    num_secure_sums: int
    survivors: tuple[int, ...]
    rejected: tuple[int, ...]
    upload_bytes: int
    step_norms: tuple[float, ...]
    secure: bool
    seed: int | None


def fedplus_aggregate(
    points: ArrayLike,
    weights: ArrayLike | None = None,
    *,
    regularizer: Regularizer,
    smoothing: float,
    method: Literal["moreau", "weiszfeld"] = "moreau",
    max_iterations: int = 10,
    tol: float = 1e-6,
    secure: bool = True,
    settings: AverageSettings | None = None,
    weight_cap: float | None = None,
    seed: int | None = None,
    dropouts: Mapping[str, Iterable[int]] | None = None,
    budget: PrivacyBudget | None = None,
) -> FedPlusAggregate:
    """The Fed+ global model argmin_z Σαₖ·M(wₖ − z), computed only through secure sums.

    Parameters
    ----------
    points
        (n, d) local models wₖ (or model differences: the aggregate is translation equivariant).
        Rows with a non-finite entry are rejected, never summed.
    weights
        αₖ ≥ 0 (default 1: the paper's Mean).
    regularizer
        ``"squared_l2"`` (FedAvg+: one secure average, the mean), ``"l2"`` (FedGeoMed+: one
        secure average per iteration) or ``"l1"`` (FedCoMed+: one secure average of the pulls
        per iteration; by ``"weiszfeld"`` one per-coordinate secure sum per iteration).
    smoothing
        δ > 0 of the Moreau envelope (δ → 0: geometric / coordinate-wise median).
    method
        ``"moreau"``: the paper's θ/w̃ alternation (a gradient step of step 1 on the envelope);
        ``"weiszfeld"``: majorise–minimise with weights αₖ/max(δ, distance) (ℓ2: RFA's smoothed
        Weiszfeld with ν = δ; ℓ1: its per-coordinate analogue). Same minimiser.
    max_iterations, tol
        At most this many iterations after the mean; stop once ‖w̃ᵣ − w̃ᵣ₋₁‖ ≤ tol.
    secure
        ``False``: plain numpy (exact); otherwise every sum is a SecAgg(+) secure sum.
    settings
        :class:`AverageSettings` (bits, clip, graph, noise). Noise (the clients' distributed
        discrete Gaussian, user-level DP of the aggregate) is supported where every sum is a
        secure weighted average: ``"squared_l2"``, ``"l2"`` with ``method="weiszfeld"``
        (RFA's geometric median, each average noised) and ``"l1"`` with ``method="moreau"``
        (each average of the pulls noised, L2-clipped to ``settings.clip``); it needs a public
        ``weight_cap``.
    weight_cap
        Public cap on αₖ (``None``: the largest).
    seed
        Root seed of the secure sums.
    dropouts
        Dropouts applied to every secure sum of this aggregate.
    budget
        A :class:`dpquantile.PrivacyBudget` every noisy average is paid from before its noise
        is drawn (see :func:`secure_weighted_average`).

    Returns
    -------
    FedPlusAggregate

    Raises
    ------
    ValueError
        On a bad regulariser, method, smoothing or iteration count, or noise where a sum is
        not a secure weighted average (``"l1"`` with ``"weiszfeld"``; ``"l2"`` with
        ``"moreau"``).
    secagg.TooFewSurvivorsError, ZeroWeightSumError
        When a secure sum cannot complete (the trainer skips the round).

    Examples
    --------
    >>> points = np.array([[0.0, 0.0], [1.0, 1.0], [2.0, 2.0], [3.0, -3.0], [50.0, -50.0]])
    >>> mean = fedplus_aggregate(points, regularizer="squared_l2", smoothing=0.1, secure=False)
    >>> mean.aggregate.tolist(), mean.num_secure_sums
    ([11.2, -10.0], 1)
    >>> cw = fedplus_aggregate(points, regularizer="l1", smoothing=1e-3, method="weiszfeld",
    ...                        max_iterations=100, tol=1e-9, secure=False)
    >>> np.round(cw.aggregate, 3) + 0.0   # the coordinate-wise median
    array([2., 0.])
    >>> paper = fedplus_aggregate(points, regularizer="l2", smoothing=0.5, max_iterations=400,
    ...                           tol=1e-9, secure=False)
    >>> np.round(paper.aggregate, 3).tolist(), paper.iterations   # slow from a far mean
    ([1.397, 0.285], 259)
    >>> fast = fedplus_aggregate(points, regularizer="l2", smoothing=0.5, method="weiszfeld",
    ...                          max_iterations=40, tol=1e-12, seed=0)
    >>> np.round(fast.aggregate, 3).tolist(), fast.secure, fast.num_secure_sums
    ([1.397, 0.285], True, 41)
    """
    _check_regularizer(regularizer)
    delta = check_positive("smoothing", smoothing)
    if method not in _METHODS:
        raise ValueError(f"method must be one of {', '.join(_METHODS)}; got {method!r}")
    max_iterations = check_int("max_iterations", max_iterations, minimum=0)
    tol = check_nonnegative("tol", tol)
    settings = AverageSettings(bits=32) if settings is None else settings
    if not isinstance(settings, AverageSettings):
        raise TypeError(f"settings must be AverageSettings; got {type(settings).__name__}")
    if settings.noise is not None and not (
        regularizer == "squared_l2"
        or (regularizer == "l2" and method == "weiszfeld")
        or (regularizer == "l1" and method == "moreau")
    ):
        raise ValueError(
            f"noise needs every sum to be a secure weighted average: regularizer={regularizer!r} "
            f"with method={method!r} has no noisy release (use 'squared_l2', 'l2' with "
            "method='weiszfeld', or 'l1' with method='moreau': the same minimisers)"
        )
    run = _Run(
        regularizer=regularizer,
        delta=delta,
        method=method,
        max_iterations=max_iterations,
        tol=tol,
        settings=settings,
        weight_cap=weight_cap,
        secure=secure,
        seed=check_seed(seed),
        dropouts=dropouts,
        budget=budget,
    )
    matrix = as_matrix(points)
    alpha = _weights(weights, matrix.shape[0])
    if regularizer == "squared_l2" or max_iterations == 0:
        return _mean_only(matrix, alpha, run)
    per_call = None if dropouts is None else dict.fromkeys(range(max_iterations + 1), dropouts)
    if regularizer == "l2" and method == "weiszfeld":
        median = geometric_median(
            matrix,
            alpha,
            smoothing=delta,
            ftol=tol,
            max_iterations=max_iterations,
            secure=secure,
            settings=settings,
            weight_cap=weight_cap,
            seed=run.seed,
            dropouts=per_call,
            budget=budget,
        )
        record = _iterative_record(median.iterative, matrix, alpha)
        return run.result(median.median, median.iterations, median.num_secure_averages, record)
    if regularizer == "l2":
        rule = FedPlusL2Rule(
            alpha, smoothing=delta, max_iterations=max_iterations, tol=tol, weight_cap=weight_cap
        )
        iterative = run_iterative_aggregate(
            rule, matrix, settings=settings, secure=secure, seed=run.seed, dropouts=per_call
        )
        rule.plan(iterative.transcript)  # fold in the last release (the driver stopped before)
        record = _iterative_record(iterative, matrix, alpha)
        sums = iterative.num_secure_averages
        return run.result(rule.centre, rule.iterations, sums, record, rule.step_norms)
    if method == "moreau":
        return _pull_iteration(matrix, alpha, run)
    return _coordinate_iteration(matrix, alpha, run)


@dataclass(frozen=True, slots=True)
class _Run:
    """One :func:`fedplus_aggregate` call's validated options, shared by its iterations."""

    regularizer: str
    delta: float
    method: str
    max_iterations: int
    tol: float
    settings: AverageSettings
    weight_cap: float | None
    secure: bool
    seed: int | None
    dropouts: Mapping[str, Iterable[int]] | None
    budget: PrivacyBudget | None

    def call_seeds(self, label: bytes) -> Callable[[int], int | None]:
        """The seed of the ``index``-th secure sum of an iteration (``None``: unseeded)."""
        root = None if self.seed is None else KeystreamRandom(self.seed, label=_DOMAIN + label)

        def seed_of(index: int) -> int | None:
            if root is None:
                return None
            return root.derive_seed(b"call/%d" % index)

        return seed_of

    def result(
        self,
        aggregate: NDArray[np.float64],
        iterations: int,
        sums: int,
        record: tuple[tuple[int, ...], tuple[int, ...], int],
        steps: tuple[float, ...] = (),
    ) -> FedPlusAggregate:
        """The :class:`FedPlusAggregate` of this call; ``record``: (survivors, rejected, upload)."""
        survivors, rejected, upload = record
        return FedPlusAggregate(
            aggregate,
            self.regularizer,
            self.delta,
            self.method,
            iterations,
            sums,
            survivors,
            rejected,
            upload,
            steps,
            self.secure,
            self.seed,
        )


def _uploaded(result: AverageResult) -> int:
    return 0 if result.secure_sum is None else sum(result.secure_sum.upload_bytes.values())


def _iterative_record(
    iterative: object, matrix: NDArray[np.float64], alpha: NDArray[np.float64]
) -> tuple[tuple[int, ...], tuple[int, ...], int]:
    results = getattr(iterative, "results", None)
    if not results:
        finite = np.isfinite(matrix).all(axis=1) & np.isfinite(alpha)
        keep = tuple(int(i) for i in np.flatnonzero(finite))
        drop = tuple(int(i) for i in np.flatnonzero(~finite))
        return keep, drop, 0
    last = results[-1]
    upload = sum(sum(r.secure_sum.upload_bytes.values()) for r in results if r.secure_sum)
    return last.survivors, last.rejected, upload


def _mean_only(
    matrix: NDArray[np.float64], alpha: NDArray[np.float64], run: _Run
) -> FedPlusAggregate:
    # The squared-ℓ2 iteration started at the mean never moves (fedplus_notes.md §2).
    result = secure_weighted_average(
        matrix,
        alpha,
        settings=run.settings,
        weight_cap=run.weight_cap,
        seed=run.seed,
        dropouts=run.dropouts,
        secure=run.secure,
        budget=run.budget if run.settings.noise is not None else None,
    )
    return run.result(result.average, 0, 1, (result.survivors, result.rejected, _uploaded(result)))


def _coordinate_iteration(
    matrix: NDArray[np.float64], alpha: NDArray[np.float64], run: _Run
) -> FedPlusAggregate:
    """FedCoMed+ by majorise–minimise: per-coordinate weights, one secure sum of [β⊙w ; β] per
    iteration."""
    seed_of = run.call_seeds(b"/iteration")
    d, delta = matrix.shape[1], run.delta
    finite_alpha = alpha[np.isfinite(alpha)]
    cap_alpha = (
        float(finite_alpha.max())
        if run.weight_cap is None
        else check_positive("weight_cap", run.weight_cap)
    )

    def call(index: int, beta: NDArray[np.float64], cap: float) -> CoordinateAverageResult:
        return secure_coordinate_average(
            matrix,
            beta,
            settings=run.settings,
            weight_cap=cap,
            seed=seed_of(index),
            dropouts=run.dropouts,
            secure=run.secure,
        )

    first = call(0, np.repeat(alpha[:, None], d, axis=1), cap_alpha)
    if not (first.weight_sum > 0).all():
        raise ZeroWeightSumError("the released weight sum of the mean is not positive")
    centre = first.weighted_sum / first.weight_sum
    upload, steps, last = first.upload_bytes, [], first
    for index in range(1, run.max_iterations + 1):
        beta = alpha[:, None] / np.maximum(delta, np.abs(matrix - centre))
        beta = np.where(np.isfinite(beta), beta, 0.0)
        last = call(index, beta, cap_alpha / delta)
        upload += last.upload_bytes
        new_centre = last.average(centre)
        steps.append(float(np.linalg.norm(new_centre - centre)))
        centre = new_centre
        if steps[-1] <= run.tol:
            break
    record = (last.survivors, last.rejected, upload)
    return run.result(centre, len(steps), len(steps) + 1, record, tuple(steps))


def _pull_iteration(
    matrix: NDArray[np.float64], alpha: NDArray[np.float64], run: _Run
) -> FedPlusAggregate:
    """FedCoMed+ by the paper's alternation: w̃ ← w̃ + Σαₖ·clip(wₖ − w̃, ±δ)/A, each step one
    secure weighted average of the bounded pulls (with noise: DP, fedplus_notes.md §5)."""
    seed_of = run.call_seeds(b"/pull")
    budget = run.budget if run.settings.noise is not None else None

    def call(index: int, vectors: NDArray[np.float64]) -> AverageResult:
        return secure_weighted_average(
            vectors,
            alpha,
            settings=run.settings,
            weight_cap=run.weight_cap,
            seed=seed_of(index),
            dropouts=run.dropouts,
            secure=run.secure,
            budget=budget,
        )

    # A row with a non-finite entry stays non-finite in every call (clip(inf) would be δ).
    broken = ~np.isfinite(matrix).all(axis=1)
    last = call(0, matrix)
    centre, upload, steps = last.average, _uploaded(last), []
    for index in range(1, run.max_iterations + 1):
        # r(wₖ − w̃) = clip(wₖ − w̃, −δ, δ) per coordinate (notes §1).
        pulls = np.clip(matrix - centre, -run.delta, run.delta)
        pulls[broken] = np.nan
        last = call(index, pulls)
        upload += _uploaded(last)
        steps.append(float(np.linalg.norm(last.average)))
        centre = centre + last.average
        if steps[-1] <= run.tol:
            break
    record = (last.survivors, last.rejected, upload)
    return run.result(centre, len(steps), len(steps) + 1, record, tuple(steps))
