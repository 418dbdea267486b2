"""SecureStrategy: our secure weighted average and secure geometric median (RFA) for Flower users,
over the loopback Grid (fast; no Ray). Each must equal the plain aggregation of the protocols
package up to quantisation."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

pytest.importorskip(
    "flwr", reason="the Flower integration needs flwr (pip install 'secagg-dp[flower]')"
)

from flwr.app import ArrayRecord, Context, Message, MetricRecord, RecordDict
from flwr.clientapp import ClientApp
from flwr.serverapp.strategy import FedAvg

from protocols.aggregation import geometric_median
from protocols.integrations.flower import SecureStrategy, make_protocols_mod

DIM = 6


def strategy_apps(
    vectors: dict[int, Any], weights: dict[int, float], losses: dict[int, float] | None = None
) -> Any:
    """ClientApps whose Mod knows the aggregations' encoders."""
    apps = {}
    for node, vector in vectors.items():
        app = ClientApp(mods=[make_protocols_mod(seed=3)])

        def train(
            message: Message, context: Context, vector: Any = vector, node: int = node
        ) -> Message:
            content = RecordDict(
                {
                    "arrays": ArrayRecord([np.asarray(vector, dtype=np.float64)]),
                    "metrics": MetricRecord(
                        {"num-examples": weights[node], "loss": (losses or {}).get(node, 0.0)}
                    ),
                }
            )
            return Message(content, reply_to=message)

        app.train()(train)
        apps[node] = app
    return apps


def test_secure_mean_is_the_weighted_average(loopback_grid: Any) -> None:
    rng = np.random.default_rng(0)
    nodes = list(range(1, 7))
    vectors = {n: rng.uniform(-1, 1, DIM) for n in nodes}
    weights = {n: float(5 * n) for n in nodes}
    grid = loopback_grid(strategy_apps(vectors, weights))
    strategy = SecureStrategy(FedAvg(min_available_nodes=6), "mean", clip=2.0, weight_cap=40.0)
    result = strategy.start(grid, ArrayRecord([np.zeros(DIM)]), num_rounds=1)
    beta = np.array([min(weights[n], 40.0) for n in nodes])
    expected = beta @ np.stack([vectors[n] for n in nodes]) / beta.sum()
    np.testing.assert_allclose(result.arrays.to_numpy_ndarrays()[0], expected, atol=1e-6)
    assert len(strategy.history) == 1 and strategy.history[0].sums[0].dropped == {}


def test_secure_geometric_median_resists_outliers(
    loopback_grid: Any, vector_client_app: Any
) -> None:
    rng = np.random.default_rng(1)
    nodes = list(range(1, 9))
    vectors = {n: rng.normal(0.0, 0.1, DIM) + 1.0 for n in nodes}
    vectors[7] = np.full(DIM, -4.0)  # two corrupted clients
    vectors[8] = np.full(DIM, 4.5)
    weights = {n: 10.0 for n in nodes}
    grid = loopback_grid(strategy_apps(vectors, weights), silent={5: "unmask"})
    strategy = SecureStrategy(
        FedAvg(min_available_nodes=8),
        "geometric_median",
        clip=20.0,
        weight_cap=10.0,
        max_iterations=30,
        smoothing=1e-4,
        ftol=1e-8,
    )
    result = strategy.start(grid, ArrayRecord([np.zeros(DIM)]), num_rounds=1)
    median = result.arrays.to_numpy_ndarrays()[0]
    points = np.stack([vectors[n] for n in nodes])
    plain = geometric_median(
        points, np.ones(8), smoothing=1e-4, ftol=1e-8, max_iterations=30, secure=False
    )
    np.testing.assert_allclose(median, plain.median, atol=1e-3)
    mean = points.mean(axis=0)
    honest = points[:6].mean(axis=0)
    assert np.linalg.norm(median - honest) < 0.5 * np.linalg.norm(mean - honest)
    summary = strategy.history[0]
    assert len(summary.sums) >= 3 and len(summary.objectives) == len(summary.sums) - 1
    assert summary.objectives[-1] <= summary.objectives[0]


def test_superquantile_averages_the_high_loss_clients(loopback_grid: Any) -> None:
    rng = np.random.default_rng(2)
    nodes = list(range(1, 9))
    vectors = {n: rng.uniform(-1, 1, DIM) for n in nodes}
    weights = {n: float(10 + n) for n in nodes}
    losses = {n: float(n) for n in nodes}  # client n's pre-training loss is n
    grid = loopback_grid(strategy_apps(vectors, weights, losses))
    strategy = SecureStrategy(
        FedAvg(min_available_nodes=8), "superquantile", clip=5.0, weight_cap=20.0, theta=0.5
    )
    result = strategy.start(grid, ArrayRecord([np.zeros(DIM)]), num_rounds=1)
    summary = strategy.history[0]
    assert summary.threshold is not None and 4.0 < summary.threshold <= 5.0
    tail = [5, 6, 7, 8]
    beta = np.array([weights[n] for n in tail])
    expected = beta @ np.stack([vectors[n] for n in tail]) / beta.sum()
    np.testing.assert_allclose(result.arrays.to_numpy_ndarrays()[0], expected, atol=1e-6)
    assert summary.events == () and len(summary.sums) == 2


def test_superquantile_with_a_dp_quantile_records_its_event(loopback_grid: Any) -> None:
    nodes = list(range(1, 9))
    vectors = {n: np.full(DIM, float(n)) for n in nodes}
    grid = loopback_grid(
        strategy_apps(vectors, dict.fromkeys(nodes, 1.0), {n: float(n) for n in nodes})
    )
    strategy = SecureStrategy(
        FedAvg(min_available_nodes=8),
        "superquantile",
        clip=100.0,
        weight_cap=1.0,
        theta=0.5,
        quantile_rho=2.0,
    )
    result = strategy.start(grid, ArrayRecord([np.zeros(DIM)]), num_rounds=1)
    (event,) = strategy.history[0].events
    assert event.num_clients == 8 and event.rho <= 2.0 + 1e-9
    # Whatever the noisy τ, the result is the mean of a non-empty top set of clients.
    average = result.arrays.to_numpy_ndarrays()[0]
    tails = [np.mean([float(n) for n in nodes[k:]]) for k in range(8)]
    assert min(abs(average[0] - t) for t in tails) < 1e-6


def test_noisy_secure_mean_records_its_event_and_stays_close(loopback_grid: Any) -> None:
    rng = np.random.default_rng(4)
    nodes = list(range(1, 7))
    vectors = {n: rng.uniform(-1, 1, DIM) for n in nodes}
    grid = loopback_grid(strategy_apps(vectors, dict.fromkeys(nodes, 10.0)))
    strategy = SecureStrategy(
        FedAvg(min_available_nodes=6),
        "mean",
        clip=2.0,
        weight_cap=10.0,
        noise_rho=50.0,
        modulus_bits=64,
    )
    result = strategy.start(grid, ArrayRecord([np.zeros(DIM)]), num_rounds=1)
    (event,) = strategy.history[0].events
    assert event.num_clients == 6 and event.rho == pytest.approx(50.0, rel=1e-3)
    expected = np.mean([vectors[n] for n in nodes], axis=0)
    error = np.abs(result.arrays.to_numpy_ndarrays()[0] - expected).max()
    assert 0 < error < 0.5  # noisy (never exact), but at ρ = 50 close
