"""Geometric median (smoothed Weiszfeld), one-step RFA, and RFA's privacy condition."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import optimize

from protocols.aggregation import (
    AverageSettings,
    DiscreteGaussianNoise,
    EffectiveWeightError,
    WeiszfeldRule,
    geometric_median,
    geometric_median_objective,
    one_step_rfa,
    privacy_smoothing,
    run_iterative_aggregate,
    secure_weighted_average,
)


def outlier_data(n: int, d: int, fraction: float, seed: int = 0) -> np.ndarray:
    """Inliers N(0, I); a fraction of clients in a far cluster at distance 10·√d."""
    rng = np.random.default_rng(seed)
    points = rng.standard_normal((n, d))
    count = round(fraction * n)
    if count:
        direction = rng.standard_normal(d)
        direction /= np.linalg.norm(direction)
        points[:count] = 10 * np.sqrt(d) * direction + rng.standard_normal((count, d))
    return points


def optimum(points: np.ndarray, weights: np.ndarray | None = None) -> float:
    """F* = min_z Σαᵢ‖z − wᵢ‖ by an independent solver (BFGS on the exact gradient, not
    Weiszfeld), certified: F is convex, so F(z) − F* ≤ ‖∇F(z)‖·‖z − z*‖ ≤ ‖∇F(z)‖·diameter."""
    alpha = np.ones(len(points)) if weights is None else np.asarray(weights, dtype=np.float64)

    def objective(z: np.ndarray) -> float:
        return float(alpha @ np.linalg.norm(points - z, axis=1))

    def gradient(z: np.ndarray) -> np.ndarray:
        differences = z - points
        norms = np.maximum(np.linalg.norm(differences, axis=1), 1e-300)
        return np.asarray((alpha / norms) @ differences)

    solution = optimize.minimize(
        objective,
        np.median(points, axis=0),
        jac=gradient,
        method="BFGS",
        options={"gtol": 1e-13, "maxiter": 20_000},
    )
    z = solution.x
    for _ in range(8):  # Newton polish: H = Σ αᵢ(I − uᵢuᵢᵀ)/‖z − wᵢ‖, uᵢ the unit direction
        differences = z - points
        norms = np.linalg.norm(differences, axis=1)
        units = differences / norms[:, None]
        hessian = np.diag(np.full(z.size, float((alpha / norms).sum())))
        hessian -= (units * (alpha / norms)[:, None]).T @ units
        z = z - np.linalg.solve(hessian, gradient(z))
    best = objective(z)
    diameter = 2.0 * float(np.linalg.norm(points - z, axis=1).max())
    assert float(np.linalg.norm(gradient(z))) * diameter <= 1e-9 * best
    return best


# -- the goal: 1e-6 relative objective accuracy within 5 secure averages at <= 20 % outliers


@pytest.mark.parametrize("fraction", [0.0, 0.1, 0.2])
def test_five_secure_averages_reach_1e6_relative_accuracy(fraction: float) -> None:
    points = outlier_data(20, 50, fraction, seed=7)
    result = geometric_median(points, max_iterations=4, seed=11)
    assert result.num_secure_averages <= 5 and result.secure
    assert result.iterative is not None
    assert result.iterative.num_secure_averages == result.num_secure_averages
    best = optimum(points)
    assert (geometric_median_objective(points, result.median) - best) / best <= 1e-6


@pytest.mark.slow
@pytest.mark.parametrize(("fraction", "calls"), [(0.2, 5), (0.45, 23)])
def test_secagg_plus_at_100_clients_meets_the_iteration_budget(fraction: float, calls: int) -> None:
    # n = 100 over SecAgg+ (k = 14): ≤ 20 % outliers within 5 secure averages, 45 % within 23.
    points = outlier_data(100, 200, fraction, seed=1)
    guarded = AverageSettings(bits=64, neighbors=14)
    result = geometric_median(
        points, max_iterations=calls - 1, ftol=0.0, settings=guarded, seed=calls
    )
    best = optimum(points)
    assert result.num_secure_averages == calls
    assert (geometric_median_objective(points, result.median) - best) / best <= 1e-6


def test_secure_and_plain_paths_agree() -> None:
    points = outlier_data(12, 30, 0.25, seed=3)
    secure = geometric_median(points, seed=5)
    plain = geometric_median(points, secure=False)
    assert secure.iterations == plain.iterations and secure.termination == plain.termination
    assert np.abs(secure.median - plain.median).max() < 1e-6
    np.testing.assert_allclose(secure.objective_history, plain.objective_history, rtol=1e-9)
    assert secure.objective is None and plain.objective is not None
    assert plain.iterative is None and secure.iterative is not None


@pytest.mark.parametrize("solver", ["gram", "direct", "auto"])
def test_fast_plain_path_is_the_rule_run_through_the_oracle(solver: str) -> None:
    points = outlier_data(15, 40, 0.2, seed=8)
    weights = np.random.default_rng(0).uniform(0.5, 2.0, 15)
    fast = geometric_median(points, weights, secure=False, ftol=1e-9, solver=solver)
    rule = WeiszfeldRule(weights, clip=float(np.linalg.norm(points, axis=1).max()), ftol=1e-9)
    oracle = run_iterative_aggregate(rule, points, secure=False)
    assert oracle.num_secure_averages == fast.num_secure_averages
    np.testing.assert_allclose(oracle.aggregate, fast.median, rtol=0, atol=1e-10)
    np.testing.assert_allclose(
        rule.objectives(oracle.transcript), fast.objective_history, rtol=1e-12
    )


def test_quantised_plain_path_reproduces_the_secure_run() -> None:
    points = outlier_data(8, 10, 0.25, seed=1)
    quantised = AverageSettings(bits=64, quantize=True)
    secure = geometric_median(points, seed=2, max_iterations=3)
    plain = geometric_median(points, seed=2, max_iterations=3, secure=False, settings=quantised)
    assert np.array_equal(secure.median, plain.median)


# -- properties -----------------------------------------------------------------------------------


@settings(max_examples=40, deadline=None)
@given(
    seed=st.integers(0, 2**32),
    pairs=st.integers(1, 8),
    d=st.integers(1, 12),
    scale=st.floats(1e-3, 1e3),
    offset=st.floats(-1e3, 1e3),
    solver=st.sampled_from(["gram", "direct"]),
)
def test_median_of_symmetric_points_is_their_centre(
    seed: int, pairs: int, d: int, scale: float, offset: float, solver: str
) -> None:
    rng = np.random.default_rng(seed)
    centre = np.full(d, offset)
    spokes = rng.standard_normal((pairs, d)) * scale
    weights = rng.uniform(0.5, 2.0, pairs)
    points = np.vstack([centre + spokes, centre - spokes])
    # Mirror pairs carry equal weights: the weighted mean is the centre, a fixed point of Weiszfeld.
    result = geometric_median(
        points, np.concatenate([weights, weights]), secure=False, solver=solver
    )
    assert np.abs(result.median - centre).max() <= 1e-9 * (scale + abs(offset))


def test_secure_median_of_symmetric_points_is_their_centre() -> None:
    centre = np.array([2.0, -1.0, 0.5])
    spokes = np.random.default_rng(4).standard_normal((4, 3))
    points = np.vstack([centre + spokes, centre - spokes, centre[None, :]])
    result = geometric_median(points, seed=9)
    assert np.abs(result.median - centre).max() < 1e-9


@settings(max_examples=60, deadline=None)
@given(
    seed=st.integers(0, 2**32),
    n=st.integers(2, 30),
    d=st.integers(1, 20),
    duplicates=st.booleans(),
    smoothing=st.sampled_from([1e-6, 1e-2, 1.0]),
    outliers=st.floats(0.0, 0.49),
    solver=st.sampled_from(["gram", "direct"]),
)
def test_weiszfeld_objective_never_increases(
    seed: int, n: int, d: int, duplicates: bool, smoothing: float, outliers: float, solver: str
) -> None:
    points = outlier_data(n, d, outliers, seed=seed)
    if duplicates:  # points that Weiszfeld's iterates can land on (distances below ν)
        points[n // 2 :] = points[0]
    weights = np.random.default_rng(seed).uniform(0.1, 3.0, n)
    result = geometric_median(
        points,
        weights,
        secure=False,
        ftol=0.0,
        max_iterations=25,
        smoothing=smoothing,
        solver=solver,
    )
    assert result.smoothed_objective_history is not None and result.objective is not None
    smoothed = np.array(result.smoothed_objective_history)
    # F_ν is non-increasing (RFA's descent lemma); allow float rounding only.
    assert (np.diff(smoothed) <= 1e-10 * smoothed[:-1]).all()
    # The true objective: F(z_{k+1}) ≤ F_ν(z_k) ≤ F(z_k) + ν·Σα/2, with equality of F_ν and F
    # when no point is within ν of the iterate.
    objective = np.array([*result.objective_history, result.objective])
    slack = smoothing * weights.sum() / 2 + 1e-10 * objective[:-1]
    assert (np.diff(objective) <= slack).all()


# -- behaviour ------------------------------------------------------------------------------------


def test_robust_to_45_percent_far_outliers() -> None:
    points = outlier_data(40, 20, 0.45, seed=2)
    result = geometric_median(points, secure=False)
    mean = points.mean(axis=0)  # 18 of 40 clients at distance 10·√20 ≈ 44.7 pull it to ≈ 20
    assert np.linalg.norm(result.median) < 0.4 * np.linalg.norm(mean)
    assert result.termination == "ftol" and 15 <= result.iterations <= 40


def test_zero_iterations_is_the_weighted_mean() -> None:
    points = outlier_data(6, 3, 0.0)
    weights = np.arange(1.0, 7.0)
    result = geometric_median(points, weights, max_iterations=0, seed=0)
    assert result.num_secure_averages == 1 and result.termination == "max_iterations"
    np.testing.assert_allclose(result.median, weights @ points / weights.sum(), atol=1e-9)
    plain = geometric_median(points, weights, max_iterations=0, secure=False)
    np.testing.assert_allclose(plain.median, weights @ points / weights.sum(), atol=1e-12)
    assert plain.objective == pytest.approx(
        geometric_median_objective(points, plain.median, weights)
    )


def test_max_iterations_termination() -> None:
    points = outlier_data(10, 5, 0.45)
    result = geometric_median(points, secure=False, max_iterations=3, ftol=0.0)
    assert result.iterations == 3 and result.termination == "max_iterations"
    assert len(result.objective_history) == 3


@pytest.mark.parametrize("secure", [True, False])
def test_non_finite_points_are_rejected(secure: bool) -> None:
    points = outlier_data(7, 4, 0.0, seed=1)
    broken = points.copy()
    broken[2, 1] = np.nan
    result = geometric_median(broken, seed=0, secure=secure)
    reference = geometric_median(np.delete(points, 2, axis=0), secure=False)
    assert np.abs(result.median - reference.median).max() < 1e-6
    if secure:
        assert result.iterative is not None
        assert all(v.dropped == (2,) for v in result.iterative.transcript)


def test_objective_and_errors() -> None:
    assert geometric_median_objective([[0.0], [2.0]], [0.5]) == 2.0
    with pytest.raises(ValueError, match="shape"):
        geometric_median(np.ones((3, 2)), np.ones(2), secure=False)
    with pytest.raises(ValueError, match="zero"):
        geometric_median(np.ones((3, 2)), np.zeros(3), secure=False)
    with pytest.raises(ValueError, match="positive"):
        geometric_median(np.ones((3, 2)), smoothing=0.0, secure=False)
    with pytest.raises(TypeError, match="AverageSettings"):
        geometric_median(np.ones((3, 2)), settings=64)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="solver"):
        geometric_median(np.ones((3, 2)), secure=False, solver="fast")


def test_solvers_agree_on_points_far_from_the_origin() -> None:
    # Cancellation guard: a spread of 1e-3 around a centre at 1e4 (model parameters, not updates).
    points = 1e4 + 1e-3 * outlier_data(30, 200, 0.3, seed=4)
    gram = geometric_median(points, secure=False, solver="gram", ftol=1e-10)
    direct = geometric_median(points, secure=False, solver="direct", ftol=1e-10)
    assert gram.iterations == direct.iterations
    assert np.abs(gram.median - direct.median).max() < 1e-12 * 1e4
    best = optimum(points - 1e4)
    for result in (gram, direct):
        gap = geometric_median_objective(points - 1e4, result.median - 1e4) - best
        assert gap / best <= 1e-6


# -- one-step RFA ---------------------------------------------------------------------------------


@pytest.mark.parametrize("secure", [True, False])
def test_one_step_rfa_is_one_weiszfeld_step_from_the_anchor(secure: bool) -> None:
    points = outlier_data(8, 5, 0.25, seed=6)
    anchor = np.full(5, 0.3)
    result = one_step_rfa(points, anchor=anchor, secure=secure, seed=1)
    beta = 1.0 / np.maximum(1e-6, np.linalg.norm(points - anchor, axis=1))
    assert np.abs(result.average - beta @ points / beta.sum()).max() < 1e-7
    assert result.weight_cap == pytest.approx(1e6)  # α_cap / ν


# -- RFA's privacy condition ----------------------------------------------------------------------


@pytest.mark.parametrize("secure", [True, False])
def test_effective_weight_condition_holds_in_every_call(secure: bool) -> None:
    points = outlier_data(20, 10, 0.2, seed=5)
    points[3] = points[4]  # an iterate may sit on a point: without smoothing its weight explodes
    guarded = AverageSettings(bits=64, max_effective_weight=0.2)
    result = geometric_median(points, settings=guarded, seed=3, secure=secure, max_iterations=6)
    assert result.smoothing > 1e-6
    plain = geometric_median(points, secure=False, max_iterations=6, settings=guarded)
    assert result.smoothing == pytest.approx(plain.smoothing, rel=1e-6)
    if secure:
        assert result.iterative is not None
        assert result.iterative.max_certified_effective_weight <= 0.2
        assert result.iterative.max_true_effective_weight <= 0.2


def test_privacy_smoothing_bound_and_impossible_requests() -> None:
    assert privacy_smoothing(0.5, total_weight=10.0, weight_cap=1.0, rms_distance=7.0) == 2.0
    with pytest.raises(EffectiveWeightError, match="3/2"):
        privacy_smoothing(0.1, total_weight=10.0, weight_cap=1.0, rms_distance=1.0)
    with pytest.raises(EffectiveWeightError):
        geometric_median(
            outlier_data(10, 3, 0.0), settings=AverageSettings(max_effective_weight=0.1), seed=0
        )


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 2**32), s=st.floats(0.1, 0.9), n=st.integers(16, 40))
def test_privacy_smoothing_certifies_every_plain_step(seed: int, s: float, n: int) -> None:
    # The derivation (notes §4) in exact arithmetic: every Weiszfeld step's B/Σβ is at most s.
    points = outlier_data(n, 5, 0.3, seed=seed)
    rule = WeiszfeldRule(np.ones(n), clip=1e6, max_iterations=8, max_effective_weight=s)
    result = run_iterative_aggregate(
        rule, points, settings=AverageSettings(max_effective_weight=s), secure=False
    )
    assert result.max_certified_effective_weight <= s


def test_noisy_geometric_median_accounts_every_call() -> None:
    points = outlier_data(10, 4, 0.1, seed=2)
    noisy = AverageSettings(bits=64, clip=20.0, noise=DiscreteGaussianNoise(sigma=1e-3))
    result = geometric_median(
        points, settings=noisy, max_iterations=3, ftol=0.0, seed=1, weight_cap=1.0
    )
    assert result.event is not None
    assert len(list(result.event.leaves())) == result.num_secure_averages == 4
    plain = secure_weighted_average(points, np.ones(10), secure=False)
    assert np.linalg.norm(result.median) < np.linalg.norm(plain.average)
