"""The geometric median by smoothed Weiszfeld (RFA Algorithm 2), one-step RFA (RFA Algorithm 3),
and a fast plain numpy path.

Smoothed Weiszfeld (REFERENCES §3): start at the weighted mean z₀; repeat
βᵢ = αᵢ / max(ν, ‖z − wᵢ‖), z ← Σβᵢwᵢ / Σβᵢ; stop when the objective F(z) = Σαᵢ‖z − wᵢ‖ changes
by less than ``ftol`` relatively. Each step is one secure average.

What the server learns about the objective: nothing but secure sums. In call k + 1 each client
already computes dᵢ = ‖zₖ − wᵢ‖ for its weight, so it also sends αᵢdᵢ as an *extra* scalar in the
same secure sum; the server learns F(zₖ) one call late, at no extra communication. The stopping
rule therefore tests F(zₖ₋₂) against F(zₖ₋₁) after call k and returns the latest iterate zₖ (one
step past the geom-median package's rule; Weiszfeld never increases F_ν, so it is no worse).
The plain path follows the same rule step for step, so both return the same iterate count.
"""

from __future__ import annotations

import dataclasses
import logging
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike, NDArray

from dpquantile import PrivacyBudget, PrivacyEvent
from protocols.aggregation._arrays import as_matrix, row_norms
from protocols.aggregation.iterative import (
    CallPlan,
    Contributions,
    IterativeResult,
    clip_rows,
    clip_rows_with_norms,
    run_iterative_aggregate,
)
from protocols.aggregation.secure_average import (
    AverageResult,
    AverageSettings,
    EffectiveWeightError,
    ServerView,
    secure_weighted_average,
)
from secagg.validation import (
    check_fraction,
    check_int,
    check_nonnegative,
    check_positive,
)

__all__ = [
    "GeometricMedianResult",
    "WeiszfeldRule",
    "geometric_median",
    "geometric_median_objective",
    "one_step_rfa",
    "privacy_smoothing",
]

logger = logging.getLogger(__name__)

#: Default settings of the geometric median's secure averages: Weiszfeld weights span
#: αᵢ/dᵢ up to the cap α/ν, a dynamic range of d/ν ≈ 10⁶ that 32-bit grids cannot resolve.
DEFAULT_SETTINGS = AverageSettings(bits=64)
# Direct distances go block of rows by block of rows: each block's difference is about 1 MiB.
_CHUNK_BYTES = 1 << 20
# "auto" picks the Gram solver for few clients in high dimension: its n²d setup costs about n/30
# direct steps on these machines, after which every step is O(n²) instead of two passes over W.
_GRAM_MAX_CLIENTS = 256
_GRAM_MIN_DIMENSION_RATIO = 4
_SOLVERS = ("auto", "gram", "direct")


def geometric_median_objective(
    points: ArrayLike, median: ArrayLike, weights: ArrayLike | None = None
) -> float:
    """F(z) = Σαᵢ‖z − wᵢ‖₂, the objective the geometric median minimises (RFA).

    Examples
    --------
    >>> geometric_median_objective([[0.0, 0.0], [3.0, 4.0]], [0.0, 0.0], [1.0, 2.0])
    10.0
    """
    matrix = as_matrix(points, "points")
    alpha = np.ones(matrix.shape[0]) if weights is None else np.asarray(weights, dtype=np.float64)
    centre = np.asarray(median, dtype=np.float64)
    if centre.shape != (matrix.shape[1],) or alpha.shape != (matrix.shape[0],):
        raise ValueError("median must have shape (d,) and weights shape (n,)")
    return float(alpha @ _distances_to(matrix, centre))


def _smoothed(alpha: NDArray[np.float64], distances: NDArray[np.float64], nu: float) -> float:
    """F_ν = Σαᵢ g_ν(dᵢ), g_ν = d (d ≥ ν) else d²/2ν + ν/2: what smoothed Weiszfeld decreases."""
    g = np.where(distances >= nu, distances, distances**2 / (2.0 * nu) + nu / 2.0)
    return float(alpha @ g)


def privacy_smoothing(
    max_effective_weight: float, total_weight: float, weight_cap: float, rms_distance: float
) -> float:
    """The smoothing ν that certifies RFA's privacy condition for every Weiszfeld step.

    With βᵢ = αᵢ/max(ν, dᵢ) ≤ α_cap/ν = B and Σβ ≥ A/(r₀ + 3ν/2) (Cauchy–Schwarz, F_ν monotone,
    F(z₀) ≤ A·r₀; secure_average_notes.md §4), B/Σβ ≤ s as soon as ν ≥ r₀ / (sA/α_cap − 3/2).

    Parameters
    ----------
    max_effective_weight
        s in (0, 1].
    total_weight
        A = Σαᵢ (released by the first secure average).
    weight_cap
        The public cap α_cap on every αᵢ.
    rms_distance
        r₀ = (Σαᵢ‖wᵢ − z₀‖² / A)^½, released (via extras) by the first secure average.

    Raises
    ------
    EffectiveWeightError
        If sA/α_cap ≤ 3/2: no smoothing certifies s (too few clients for s).

    Examples
    --------
    >>> privacy_smoothing(0.1, total_weight=100.0, weight_cap=1.0, rms_distance=8.5)
    1.0
    """
    s = check_fraction("max_effective_weight", max_effective_weight, zero=False, one=True)
    total = check_positive("total_weight", total_weight)
    ratio = s * total / check_positive("weight_cap", weight_cap)
    if ratio <= 1.5:
        raise EffectiveWeightError(
            f"max_effective_weight {s} cannot be certified with total weight {total_weight:.4g} "
            f"and weight cap {weight_cap:.4g}: s·A/α_cap = {ratio:.4g} must exceed 3/2",
            certified=1.0,
            limit=s,
        )
    return check_nonnegative("rms_distance", rms_distance) / (ratio - 1.5)


def _termination(objectives: tuple[float, ...], steps: int, ftol: float, limit: int) -> str | None:
    """``"ftol"``/``"max_iterations"`` once the rule stops after ``steps`` Weiszfeld steps."""
    if len(objectives) >= 2:
        previous, latest = objectives[-2], objectives[-1]
        if abs(previous - latest) <= ftol * latest:
            return "ftol"
    if steps >= limit:
        return "max_iterations"
    return None


class WeiszfeldRule:
    """Smoothed Weiszfeld as an :class:`~protocols.aggregation.IterativeRule` (RFA Algorithm 2).

    Call 0 averages with weights αᵢ (the weighted mean z₀). Call k ≥ 1 sends
    βᵢ = αᵢ/max(ν, ‖zₖ₋₁ − wᵢ‖) with the public cap α_cap/ν, and the extra αᵢ‖zₖ₋₁ − wᵢ‖ whose
    sum is F(zₖ₋₁). With ``max_effective_weight`` s, call 0 also sends αᵢ‖wᵢ‖² (so the server
    learns the spread r₀ around z₀) and ν is raised to :func:`privacy_smoothing`.

    When every weight is the cap (αᵢ = α_cap: public, as under model DP where every client
    counts once), each call also states the public floor of the weights — α_cap in call 0,
    α_cap/max(ν, ‖zₖ₋₁‖ + c) after (dᵢ ≤ ‖zₖ₋₁‖ + c) — so a noisy released weight sum is
    clamped into [floor·|S|, cap·|S|] instead of ending the median when it comes out ≤ 0.

    Parameters
    ----------
    weights
        αᵢ ≥ 0 (clipped to ``weight_cap``).
    clip
        The public L2 clip of the points (bounds the extras).
    weight_cap
        The public cap α_cap (``None``: the largest αᵢ).
    smoothing, ftol, max_iterations
        ν > 0, the relative objective tolerance, and the most Weiszfeld steps.
    max_effective_weight
        RFA's privacy condition s, or ``None``.

    Examples
    --------
    >>> rule = WeiszfeldRule(np.ones(3), clip=10.0)
    >>> rule.plan(()).weight_cap
    1.0
    """

    def __init__(
        self,
        weights: ArrayLike,
        *,
        clip: float,
        weight_cap: float | None = None,
        smoothing: float = 1e-6,
        ftol: float = 1e-6,
        max_iterations: int = 100,
        max_effective_weight: float | None = None,
    ) -> None:
        alpha = np.asarray(weights, dtype=np.float64)
        if alpha.ndim != 1:
            raise ValueError(f"weights must be 1-D; got shape {alpha.shape}")
        finite = alpha[np.isfinite(alpha)]
        if (finite < 0).any():
            raise ValueError("weights must be non-negative")
        if not (finite > 0).any():
            raise ValueError("every weight is zero: the geometric median needs a positive weight")
        self.weight_cap = (
            float(finite.max()) if weight_cap is None else check_positive("weight_cap", weight_cap)
        )
        self.weights = np.minimum(alpha, self.weight_cap)
        self.uniform = bool(np.all(self.weights[np.isfinite(self.weights)] == self.weight_cap))
        self.clip = check_positive("clip", clip)
        self.smoothing = check_positive("smoothing", smoothing)
        self.ftol = check_nonnegative("ftol", ftol)
        self.max_iterations = check_int("max_iterations", max_iterations, minimum=0)
        self.max_effective_weight = (
            None
            if max_effective_weight is None
            else check_fraction("max_effective_weight", max_effective_weight, zero=False, one=True)
        )

    def effective_smoothing(self, first: ServerView) -> float:
        """ν used from call 1 on: ``smoothing``, raised by :func:`privacy_smoothing` if needed."""
        if self.max_effective_weight is None:
            return self.smoothing
        total = first.weight_sum
        spread = max(0.0, float(first.extras[0]) / total - float(first.average @ first.average))
        needed = privacy_smoothing(
            self.max_effective_weight, total, self.weight_cap, math.sqrt(spread)
        )
        return max(self.smoothing, needed)

    @staticmethod
    def objectives(transcript: tuple[ServerView, ...]) -> tuple[float, ...]:
        """F(z₀), …, F(z_{k−1}) as released by calls 1…k (the objective lags one call)."""
        return tuple(float(view.extras[0]) for view in transcript[1:])

    def plan(self, transcript: tuple[ServerView, ...]) -> CallPlan | None:
        """Server half: stop, or broadcast zₖ, ν and the public caps of call k + 1."""
        if not transcript:
            bounds = () if self.max_effective_weight is None else (self.weight_cap * self.clip**2,)
            floor = self.weight_cap if self.uniform else None
            return CallPlan(0, weight_cap=self.weight_cap, extra_bounds=bounds, weight_floor=floor)
        steps = len(transcript) - 1
        if _termination(self.objectives(transcript), steps, self.ftol, self.max_iterations):
            return None
        nu = self.effective_smoothing(transcript[0])
        previous = transcript[-1]
        # dᵢ ≤ ‖zₖ‖ + ‖wᵢ‖ ≤ ‖zₖ‖ + c bounds the objective term αᵢdᵢ.
        reach = float(np.linalg.norm(previous.average)) + self.clip
        return CallPlan(
            len(transcript),
            weight_cap=self.weight_cap / nu,
            extra_bounds=(self.weight_cap * reach,),
            previous=previous,
            parameters={"smoothing": nu},
            weight_floor=self.weight_cap / max(nu, reach) if self.uniform else None,
        )

    def contributions(self, plan: CallPlan, vectors: NDArray[np.float64]) -> Contributions:
        """Client half: αᵢ (call 0) or αᵢ/max(ν, dᵢ) with the objective term αᵢdᵢ."""
        alpha = self.weights
        if plan.previous is None:
            if self.max_effective_weight is None:
                return Contributions(alpha.copy())
            return Contributions(alpha.copy(), (alpha * row_norms(vectors) ** 2)[:, None])
        distances = _distances_to(vectors, plan.previous.average)
        nu = plan.parameters["smoothing"]
        # βᵢ = αᵢ / max(ν, ‖z − wᵢ‖) (RFA Algorithm 2, smoothed Weiszfeld step).
        return Contributions(alpha / np.maximum(nu, distances), (alpha * distances)[:, None])


def _distances_to(matrix: NDArray[np.float64], centre: NDArray[np.float64]) -> NDArray[np.float64]:
    """‖wᵢ − z‖ row by row, in blocks of rows (no (n, d) temporary)."""
    n, d = matrix.shape
    out = np.empty(n)
    rows = max(1, _CHUNK_BYTES // (8 * d))
    for start in range(0, n, rows):
        block = matrix[start : start + rows] - centre
        out[start : start + rows] = np.sqrt(np.einsum("ij,ij->i", block, block))
    return out


@dataclass(frozen=True, slots=True, eq=False)
class GeometricMedianResult:
    """The outcome of :func:`geometric_median`.

    Attributes
    ----------
    median
        The returned iterate z_K (float64).
    objective
        F(z_K) on the plain path; ``None`` on the secure path, where the server would need one
        more secure average to learn it (see ``objective_history``).
    objective_history
        F(z₀), …, F(z_{K−1}): what the server learned (one call late) and what stopping used.
    smoothed_objective_history
        F_ν(z₀), …, F_ν(z_K) on the plain path (non-increasing, notes §4), else ``None``.
    iterations
        K, the number of Weiszfeld steps.
    num_secure_averages
        K + 1 (the weighted mean is the first).
    termination
        ``"ftol"`` or ``"max_iterations"``.
    smoothing
        The ν actually used (raised above the requested one by a privacy condition).
    secure
        Whether the averages ran through the secure sum.
    iterative
        The full :class:`IterativeResult` (transcript, plans, per-call results), or ``None`` on
        the fast plain path (nothing was released there).

    Examples
    --------
    >>> result = geometric_median([[0.0], [1.0], [10.0]], secure=False)
    >>> round(float(result.median[0]), 4), result.num_secure_averages == result.iterations + 1
    (1.0, True)
    """

    median: NDArray[np.float64]
    objective: float | None
    objective_history: tuple[float, ...]
    smoothed_objective_history: tuple[float, ...] | None
    iterations: int
    num_secure_averages: int
    termination: str
    smoothing: float
    secure: bool
    iterative: IterativeResult | None

    def __post_init__(self) -> None:
        if self.num_secure_averages != self.iterations + 1:
            raise ValueError("a geometric median costs one secure average per step plus one")
        if self.termination not in ("ftol", "max_iterations"):
            raise ValueError(f"unknown termination {self.termination!r}")

    @property
    def event(self) -> PrivacyEvent | None:
        """The composed privacy event of all calls, or ``None`` without noise."""
        return None if self.iterative is None else self.iterative.event


def _centred_gram(matrix: NDArray[np.float64], centre: NDArray[np.float64]) -> NDArray[np.float64]:
    """(W − z)(W − z)ᵀ, accumulated over column blocks (no (n, d) temporary)."""
    n, d = matrix.shape
    gram = np.zeros((n, n))
    columns = max(1, _CHUNK_BYTES // (8 * n))
    for start in range(0, d, columns):
        block = matrix[:, start : start + columns] - centre[start : start + columns]
        gram += block @ block.T
    return gram


def _plain_weiszfeld(
    matrix: NDArray[np.float64],
    alpha: NDArray[np.float64],
    norms: NDArray[np.float64],
    rule: WeiszfeldRule,
    solver: str,
) -> GeometricMedianResult:
    """Smoothed Weiszfeld in plain numpy, vectorised over clients (no Python loop over them).

    Every iterate is z = Σcⱼwⱼ with Σcⱼ = 1, and with z₀ the weighted mean and u = z − z₀,
    ‖wᵢ − z‖² = ‖wᵢ − z₀‖² − 2(wᵢ − z₀)·u + ‖u‖². The ``direct`` solver forms z = cᵀW and W·u: two
    matrix-vector passes over the points per step. The ``gram`` solver precomputes the centred
    Gram matrix G = (W − z₀)(W − z₀)ᵀ once, after which ‖wᵢ − z‖² = Gᵢᵢ − 2(Gc)ᵢ + cᵀGc costs
    O(n²) per step and z is formed once at the end. Both reuse the distances for the objective;
    rows whose distance is small against the terms it is computed from (cancellation) are
    recomputed directly.
    """
    n, d = matrix.shape
    total = float(alpha.sum())
    z0 = (alpha @ matrix) / total
    if solver == "auto":
        few = n <= _GRAM_MAX_CLIENTS and d >= _GRAM_MIN_DIMENSION_RATIO * n
        solver = "gram" if few and rule.max_iterations >= 2 else "direct"
    gram: NDArray[np.float64] | None = None
    if solver == "gram":
        gram = _centred_gram(matrix, z0)
        q = np.diagonal(gram).copy()
    else:
        z0_norm2 = float(z0 @ z0)
        squared_norms = norms**2
        # ‖wᵢ − z₀‖² by expansion; rows with cancellation beyond ~1e-12 relative are redone.
        q = squared_norms - 2.0 * (matrix @ z0) + z0_norm2
        risky = q < 1e-4 * (squared_norms + z0_norm2)
        if risky.any():
            q[risky] = _distances_to(matrix[risky], z0) ** 2
    np.maximum(q, 0.0, out=q)
    distances = np.sqrt(q)
    spread = math.sqrt(float(alpha @ q) / total)
    nu = rule.smoothing
    if rule.max_effective_weight is not None:
        nu = max(nu, privacy_smoothing(rule.max_effective_weight, total, rule.weight_cap, spread))
    root_q_max = math.sqrt(float(q.max()))
    z = z0.copy()
    u = np.empty(d)
    projection = np.empty(n)
    coefficients = alpha / total
    objectives: list[float] = []
    smoothed = [_smoothed(alpha, distances, nu)]
    steps = 0
    termination = _termination((), 0, rule.ftol, rule.max_iterations)
    while termination is None:
        objectives.append(float(alpha @ distances))  # F(z_k), released with step k + 1
        coefficients = alpha / np.maximum(nu, distances)  # RFA Algorithm 2
        coefficients /= coefficients.sum()
        if gram is not None:
            np.dot(gram, coefficients, out=projection)  # (W − z₀)·u, as u = Σcⱼ(wⱼ − z₀)
            shift_norm = float(coefficients @ projection)
            squared = q - 2.0 * projection + shift_norm
            # Rounding error is O(ε·(qᵢ + √qᵢ·max√q + ‖u‖²)).
            near = squared < 1e-4 * (q + distances * root_q_max + shift_norm)
        else:
            np.dot(coefficients, matrix, out=z)
            np.subtract(z, z0, out=u)
            np.dot(matrix, u, out=projection)
            shift_norm = float(u @ u)
            squared = q - 2.0 * (projection - float(z0 @ u)) + shift_norm
            # Rounding error is O(ε·(qᵢ + ‖wᵢ‖‖u‖ + ‖u‖²)).
            near = squared < 1e-4 * (q + norms * math.sqrt(shift_norm) + shift_norm)
        np.maximum(squared, 0.0, out=squared)
        distances = np.sqrt(squared)
        if near.any():
            if gram is not None:
                np.dot(coefficients, matrix, out=z)
            distances[near] = _distances_to(matrix[near], z)
        smoothed.append(_smoothed(alpha, distances, nu))
        steps += 1
        termination = _termination(tuple(objectives), steps, rule.ftol, rule.max_iterations)
    if gram is not None and steps:
        np.dot(coefficients, matrix, out=z)
    return GeometricMedianResult(
        median=z,
        objective=float(alpha @ distances),
        objective_history=tuple(objectives),
        smoothed_objective_history=tuple(smoothed),
        iterations=steps,
        num_secure_averages=steps + 1,
        termination=termination,
        smoothing=nu,
        secure=False,
        iterative=None,
    )


def _client_weights(weights: ArrayLike | None, n: int) -> NDArray[np.float64]:
    alpha = np.ones(n) if weights is None else np.asarray(weights, dtype=np.float64)
    if alpha.shape != (n,):
        raise ValueError(f"weights must have shape ({n},) to match the points; got {alpha.shape}")
    return alpha


def _require_public_cap(settings: AverageSettings, weight_cap: float | None) -> None:
    """Noise is calibrated to α_cap/ν: the cap must be public, never the largest weight."""
    if settings.noise is not None and weight_cap is None:
        raise ValueError(
            "noise needs a public weight_cap (the sensitivity cannot depend on the data)"
        )


def geometric_median(
    points: ArrayLike,
    weights: ArrayLike | None = None,
    *,
    smoothing: float = 1e-6,
    ftol: float = 1e-6,
    max_iterations: int = 100,
    secure: bool = True,
    settings: AverageSettings | None = None,
    weight_cap: float | None = None,
    seed: int | None = None,
    dropouts: Mapping[int, Mapping[str, Iterable[int]]] | None = None,
    solver: str = "auto",
    session_sums: int | None = None,
    budget: PrivacyBudget | None = None,
) -> GeometricMedianResult:
    """The geometric median argmin_z Σαᵢ‖z − wᵢ‖ by smoothed Weiszfeld (RFA Algorithm 2).

    Parameters
    ----------
    points
        (n, d) points wᵢ, one per client (non-finite rows are rejected, never averaged in).
    weights
        αᵢ ≥ 0 (default 1).
    smoothing
        ν > 0: weights are αᵢ/max(ν, dᵢ).
    ftol
        Stop once |F(zₖ₋₁) − F(zₖ)| ≤ ftol·F(zₖ) (objectives released one call late).
    max_iterations
        The most Weiszfeld steps K (K + 1 secure averages).
    secure
        ``True``: every step is a secure average (:func:`run_iterative_aggregate`).
        ``False``: the fast vectorised numpy path (or, with quantisation, noise or dropouts in
        ``settings``, the plain per-call oracle).
    settings
        :class:`AverageSettings` (default ``AverageSettings(bits=64)``); ``max_effective_weight``
        s raises ν to :func:`privacy_smoothing` so each step's certificate holds.
    weight_cap
        Public cap on αᵢ (``None``: the largest).
    seed
        Root seed of the secure averages.
    dropouts
        Call index → that call's dropouts.
    solver
        The fast plain path's solver: ``"gram"`` (precompute the n×n Gram matrix; each step is
        then O(n²)), ``"direct"`` (two passes over the points per step), or ``"auto"`` (Gram for
        n ≤ 256 clients with d ≥ 4n). Same iterates either way, up to rounding.
    session_sums
        Secure averages per key setup (:func:`run_iterative_aggregate`; default
        min(K + 1, 8)); ``1`` runs every average as a fresh round.
    budget
        With ``settings.noise``: the :class:`~dpquantile.PrivacyBudget` every Weiszfeld average
        is paid from, before its noise is drawn (K + 1 averages at most).

    Returns
    -------
    GeometricMedianResult

    Examples
    --------
    >>> points = np.array([[1.0, 0.0], [-1.0, 0.0], [0.0, 1.0], [0.0, -1.0], [50.0, 50.0]])
    >>> plain = geometric_median(points, secure=False)
    >>> np.round(plain.median, 3).tolist(), plain.termination
    ([0.313, 0.313], 'ftol')
    >>> secure = geometric_median(points, seed=0)
    >>> secure.iterations == plain.iterations
    True
    >>> bool(np.abs(secure.median - plain.median).max() < 1e-6)  # quantisation error only
    True
    """
    settings = DEFAULT_SETTINGS if settings is None else settings
    if not isinstance(settings, AverageSettings):
        raise TypeError(f"settings must be AverageSettings; got {type(settings).__name__}")
    if solver not in _SOLVERS:
        raise ValueError(f"solver must be one of {', '.join(_SOLVERS)}; got {solver!r}")
    _require_public_cap(settings, weight_cap)
    matrix, clip, norms = clip_rows_with_norms(points, settings.clip)
    alpha = _client_weights(weights, matrix.shape[0])
    rule = WeiszfeldRule(
        alpha,
        clip=clip,
        weight_cap=weight_cap,
        smoothing=smoothing,
        ftol=ftol,
        max_iterations=max_iterations,
        max_effective_weight=settings.max_effective_weight,
    )
    fast = not secure and dropouts is None and not settings.quantize and settings.noise is None
    if fast:
        finite = np.isfinite(norms) & np.isfinite(alpha)
        if not finite.all():
            logger.warning("rejected %d client(s) with non-finite input", int((~finite).sum()))
            matrix, alpha, norms = matrix[finite], alpha[finite], norms[finite]
        return _plain_weiszfeld(matrix, np.minimum(alpha, rule.weight_cap), norms, rule, solver)
    iterative = run_iterative_aggregate(
        rule,
        matrix,
        settings=dataclasses.replace(settings, clip=clip),
        secure=secure,
        seed=seed,
        dropouts=dropouts,
        session_sums=min(max_iterations + 1, 8) if session_sums is None else session_sums,
        budget=budget,
    )
    transcript = iterative.transcript
    steps = len(transcript) - 1
    objectives = rule.objectives(transcript)
    termination = _termination(objectives, steps, rule.ftol, rule.max_iterations)
    assert termination is not None
    smoothing_used = rule.effective_smoothing(transcript[0]) if steps else rule.smoothing
    return GeometricMedianResult(
        median=iterative.aggregate,
        objective=None,
        objective_history=objectives,
        smoothed_objective_history=None,
        iterations=steps,
        num_secure_averages=len(transcript),
        termination=termination,
        smoothing=smoothing_used,
        secure=secure,
        iterative=iterative,
    )


def one_step_rfa(
    points: ArrayLike,
    weights: ArrayLike | None = None,
    *,
    anchor: ArrayLike | None = None,
    smoothing: float = 1e-6,
    secure: bool = True,
    settings: AverageSettings | None = None,
    weight_cap: float | None = None,
    seed: int | None = None,
    dropouts: Mapping[str, Iterable[int]] | None = None,
    budget: PrivacyBudget | None = None,
) -> AverageResult:
    """One-step RFA (RFA Algorithm 3): one secure average with βᵢ = αᵢ/max(ν, ‖wᵢ − v₀‖).

    RFA runs Algorithm 2 with v⁽⁰⁾ = 0 and R = 1 on model *updates*; ``anchor`` is v⁽⁰⁾ (public,
    default 0). The public weight cap is α_cap/ν.

    Parameters
    ----------
    points, weights
        (n, d) client vectors and αᵢ ≥ 0 (default 1).
    anchor
        v⁽⁰⁾, shape (d,) (default zeros).
    smoothing
        ν > 0.
    secure, settings, weight_cap, seed, dropouts, budget
        As for :func:`geometric_median` (``dropouts`` is one call's mapping).

    Returns
    -------
    AverageResult

    Examples
    --------
    >>> updates = np.array([[1.0, 0.0], [0.0, 1.0], [100.0, 100.0]])
    >>> result = one_step_rfa(updates, secure=False)
    >>> np.round(result.average, 3).tolist()
    [0.851, 0.851]
    """
    settings = DEFAULT_SETTINGS if settings is None else settings
    if not isinstance(settings, AverageSettings):
        raise TypeError(f"settings must be AverageSettings; got {type(settings).__name__}")
    _require_public_cap(settings, weight_cap)
    matrix, clip = clip_rows(points, settings.clip)
    alpha = _client_weights(weights, matrix.shape[0])
    nu = check_positive("smoothing", smoothing)
    centre = np.zeros(matrix.shape[1]) if anchor is None else np.asarray(anchor, dtype=np.float64)
    if centre.shape != (matrix.shape[1],):
        raise ValueError(f"anchor must have shape ({matrix.shape[1]},); got {centre.shape}")
    finite_alpha = alpha[np.isfinite(alpha)]
    cap = (
        float(finite_alpha.max())
        if weight_cap is None
        else check_positive("weight_cap", weight_cap)
    )
    capped = np.minimum(alpha, cap)
    beta = capped / np.maximum(nu, _distances_to(matrix, centre))
    # Every weight at the cap (public, as under model DP): βᵢ ≥ cap/max(ν, ‖anchor‖ + c).
    uniform = bool(np.all(capped[np.isfinite(capped)] == cap))
    reach = float(np.linalg.norm(centre)) + clip
    return secure_weighted_average(
        matrix,
        beta,
        settings=dataclasses.replace(settings, clip=clip),
        weight_cap=cap / nu,
        seed=seed,
        dropouts=dropouts,
        secure=secure,
        budget=budget,
        weight_floor=cap / max(nu, reach) if uniform else None,
    )
