"""Fed+ aggregation: offsets (prox), the Moreau-envelope aggregate over secure sums, and the
per-coordinate secure average."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from protocols.aggregation import AverageSettings, DiscreteGaussianNoise, geometric_median
from protocols.aggregation.fedplus import (
    fedplus_aggregate,
    fedplus_objective,
    fedplus_offsets,
    secure_coordinate_average,
)
from secagg import TooFewSurvivorsError


def clustered(n: int, d: int, outliers: int, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    points = rng.standard_normal((n, d))
    points[:outliers] += 40.0
    return points


def residual(
    points: np.ndarray,
    centre: np.ndarray,
    regularizer: str,
    delta: float,
    weights: np.ndarray | None = None,
) -> np.ndarray:
    """Σₖ αₖ r(wₖ − z) = Σₖ αₖ(wₖ − z − θₖ): zero exactly at the aggregate (notes §2)."""
    theta = fedplus_offsets(points, centre, regularizer=regularizer, smoothing=delta)
    alpha = np.ones(len(points)) if weights is None else weights
    return alpha @ (points - centre - theta)


@pytest.mark.parametrize("regularizer", ["squared_l2", "l2", "l1"])
def test_offsets_are_the_prox(regularizer: str) -> None:
    """θ minimises ½‖v − θ‖² + Ψ(θ)/σ: no random perturbation does better."""
    rng = np.random.default_rng(1)
    v, delta = rng.standard_normal(5) * 2, 0.7

    def penalty(theta: np.ndarray) -> float:
        psi = {
            "squared_l2": 0.5 * delta * float(theta @ theta),
            "l2": delta * float(np.linalg.norm(theta)),
            "l1": delta * float(np.abs(theta).sum()),
        }[regularizer]
        return 0.5 * float((v - theta) @ (v - theta)) + psi

    theta = fedplus_offsets(v, np.zeros(5), regularizer=regularizer, smoothing=delta)
    best = penalty(theta)
    for _ in range(500):
        assert penalty(theta + 0.05 * rng.standard_normal(5)) >= best - 1e-12


def test_squared_l2_is_the_weighted_mean_in_one_sum() -> None:
    points = clustered(7, 4, 2)
    weights = np.arange(1.0, 8.0)
    result = fedplus_aggregate(points, weights, regularizer="squared_l2", smoothing=0.3, seed=1)
    expected = weights @ points / weights.sum()
    assert result.num_secure_sums == 1
    np.testing.assert_allclose(result.aggregate, expected, atol=1e-6)
    assert np.abs(residual(points, result.aggregate, "squared_l2", 0.3, weights)).max() < 1e-5


@pytest.mark.parametrize("regularizer", ["l2", "l1"])
def test_both_iterations_reach_the_envelope_minimiser(regularizer: str) -> None:
    points = clustered(9, 3, 2, seed=2)
    delta = 0.5
    paper = fedplus_aggregate(
        points,
        regularizer=regularizer,
        smoothing=delta,
        max_iterations=3000,
        tol=1e-12,
        secure=False,
    )
    fast = fedplus_aggregate(
        points,
        regularizer=regularizer,
        smoothing=delta,
        method="weiszfeld",
        max_iterations=500,
        tol=1e-14,
        secure=False,
    )
    np.testing.assert_allclose(paper.aggregate, fast.aggregate, atol=1e-5)
    assert np.abs(residual(points, paper.aggregate, regularizer, delta)).max() < 1e-6
    # The aggregate ignores the outlier cluster: it sits with the inliers, not at the mean.
    assert np.linalg.norm(paper.aggregate) < 2.0 < np.linalg.norm(points.mean(axis=0))
    # Objective: no worse than the mean, and no nearby point is better.
    value = fedplus_objective(points, paper.aggregate, regularizer=regularizer, smoothing=delta)
    rng = np.random.default_rng(0)
    for _ in range(50):
        nearby = paper.aggregate + 0.01 * rng.standard_normal(3)
        other = fedplus_objective(points, nearby, regularizer=regularizer, smoothing=delta)
        assert other >= value - 1e-9


def test_paper_iteration_decreases_the_objective_every_step() -> None:
    points = clustered(8, 2, 3, seed=4)
    values = []
    for iterations in range(6):
        result = fedplus_aggregate(
            points,
            regularizer="l2",
            smoothing=0.2,
            max_iterations=iterations,
            tol=0.0,
            secure=False,
        )
        values.append(fedplus_objective(points, result.aggregate, regularizer="l2", smoothing=0.2))
    assert all(b <= a + 1e-12 for a, b in itertools.pairwise(values))
    assert values[-1] < values[0]


def test_fedcomed_approaches_the_coordinate_median_as_delta_shrinks() -> None:
    """Points with a clear per-coordinate median (odd n, distinct values, far outliers)."""
    rng = np.random.default_rng(3)
    points = rng.uniform(-1, 1, size=(11, 6))
    points[:3] += rng.choice([-50.0, 50.0], size=(3, 6))
    median = np.median(points, axis=0)
    errors = []
    for delta in (1.0, 0.1, 0.01, 1e-3, 1e-4):
        result = fedplus_aggregate(
            points,
            regularizer="l1",
            smoothing=delta,
            method="weiszfeld",
            max_iterations=300,
            tol=1e-13,
            secure=False,
        )
        errors.append(float(np.abs(result.aggregate - median).max()))
    assert errors[-1] < 1e-3
    assert errors[-1] < errors[0] / 50
    assert all(b <= a + 1e-9 for a, b in itertools.pairwise(errors))


def test_fedgeomed_approaches_the_geometric_median_as_delta_shrinks() -> None:
    points = clustered(9, 4, 3, seed=6)
    reference = geometric_median(
        points, smoothing=1e-10, ftol=1e-14, max_iterations=1000, secure=False
    ).median
    gaps = []
    for delta in (1.0, 0.01, 1e-4):
        result = fedplus_aggregate(
            points,
            regularizer="l2",
            smoothing=delta,
            method="weiszfeld",
            max_iterations=500,
            tol=1e-14,
            secure=False,
        )
        gaps.append(float(np.linalg.norm(result.aggregate - reference)))
    assert gaps[-1] < 1e-3 < gaps[0]


@pytest.mark.parametrize("regularizer", ["l2", "l1"])
def test_secure_matches_plain(regularizer: str) -> None:
    points = clustered(6, 5, 1, seed=7)
    kwargs = {"regularizer": regularizer, "smoothing": 0.5, "max_iterations": 5, "tol": 0.0}
    plain = fedplus_aggregate(points, secure=False, **kwargs)  # type: ignore[arg-type]
    secure = fedplus_aggregate(points, seed=3, **kwargs)  # type: ignore[arg-type]
    assert secure.num_secure_sums == plain.num_secure_sums == 6
    assert secure.upload_bytes > 0 == plain.upload_bytes
    np.testing.assert_allclose(secure.aggregate, plain.aggregate, atol=1e-5)


@pytest.mark.parametrize("regularizer", ["squared_l2", "l2", "l1"])
def test_non_finite_rows_are_rejected_not_summed(regularizer: str) -> None:
    points = clustered(6, 3, 0, seed=8)
    dirty = points.copy()
    dirty[2, 1] = np.nan
    dirty[4, 0] = np.inf
    result = fedplus_aggregate(dirty, regularizer=regularizer, smoothing=0.5, seed=1)
    clean = fedplus_aggregate(
        np.delete(points, [2, 4], axis=0), regularizer=regularizer, smoothing=0.5, secure=False
    )
    assert result.rejected == (2, 4)
    assert 2 not in result.survivors
    np.testing.assert_allclose(result.aggregate, clean.aggregate, atol=1e-5)


def test_coordinate_average_with_dropouts_and_zero_weight() -> None:
    points = np.array([[1.0, 5.0], [2.0, 6.0], [3.0, 7.0], [100.0, 100.0]])
    beta = np.array([[1.0, 0.0], [1.0, 0.0], [1.0, 0.0], [1.0, 0.0]])
    result = secure_coordinate_average(points, beta, seed=2, dropouts={"masked_input": [3]})
    assert result.survivors == (0, 1, 2) and result.dropped == (3,)
    average = result.average(np.array([-1.0, -1.0]))
    np.testing.assert_allclose(average, [2.0, -1.0], atol=1e-6)  # no weight: the fallback


def test_coordinate_average_too_few_survivors() -> None:
    with pytest.raises(TooFewSurvivorsError):
        secure_coordinate_average([[1.0], [np.nan]], [[1.0], [1.0]], secure=False)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"regularizer": "l3", "smoothing": 1.0}, "regularizer must be one of"),
        ({"regularizer": "l2", "smoothing": 0.0}, "smoothing must be positive"),
        ({"regularizer": "l2", "smoothing": -1.0}, "smoothing must be positive"),
        ({"regularizer": "l2", "smoothing": 1.0, "method": "newton"}, "method must be one of"),
        ({"regularizer": "l2", "smoothing": 1.0, "max_iterations": -1}, "max_iterations"),
        ({"regularizer": "l1", "smoothing": 1.0, "tol": -1.0}, "tol must be non-negative"),
        (
            {
                "regularizer": "l2",  # the Moreau alternation (the default method)
                "smoothing": 1.0,
                "settings": AverageSettings(clip=1.0, noise=DiscreteGaussianNoise(rho=1.0)),
            },
            "has no noisy release",
        ),
    ],
)
def test_bad_arguments_raise_value_error(kwargs: dict[str, object], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        fedplus_aggregate([[0.0], [1.0], [2.0]], **kwargs)  # type: ignore[arg-type]


def test_bad_shapes_raise_value_error() -> None:
    with pytest.raises(ValueError, match="weights must have shape"):
        fedplus_aggregate([[0.0], [1.0]], [1.0], regularizer="l2", smoothing=1.0)
    with pytest.raises(ValueError, match="weights must have shape"):
        secure_coordinate_average([[0.0], [1.0]], [1.0, 1.0])
    with pytest.raises(ValueError, match="centre must have shape"):
        fedplus_offsets([[0.0, 1.0]], [0.0], regularizer="l1", smoothing=1.0)
