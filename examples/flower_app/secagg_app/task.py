"""The app's learning task: linear regression on synthetic data, one partition per node.

Plain numpy and fully deterministic given (seed, partition, global model), so a test can
recompute every client's reply outside Flower. ``model_size`` > 11 appends a payload block
(``model_size − 11`` values that each node's training pulls halfway towards its own target in
[−1, 1]) so benchmarks can move a model of the size they need through the same app.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

FEATURES = 10
LEARNING_RATE = 0.05
LOCAL_STEPS = 5


def initial_model(model_size: int = 0) -> list[NDArray[np.float64]]:
    """Weights (FEATURES,) and bias (1,), all zero; a zero payload block of the remaining
    ``model_size − FEATURES − 1`` values if ``model_size`` is larger."""
    model = [np.zeros(FEATURES), np.zeros(1)]
    if model_size > FEATURES + 1:
        model.append(np.zeros(model_size - FEATURES - 1))
    return model


def partition_data(partition: int, seed: int) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """The partition's examples: 20 + 3·(partition mod 7) rows, a shared true model plus skew."""
    rng = np.random.default_rng([seed, partition])
    truth = np.random.default_rng(seed).normal(size=FEATURES + 1)
    rows = 20 + 3 * (partition % 7)
    x = rng.normal(size=(rows, FEATURES)) + 0.02 * partition
    y = x @ truth[:-1] + truth[-1] + 0.1 * rng.normal(size=rows)
    return x, y


def local_train(
    model: list[NDArray[np.float64]], partition: int, seed: int
) -> tuple[list[NDArray[np.float64]], int]:
    """LOCAL_STEPS of full-batch gradient descent on the squared loss; (new model, examples)."""
    x, y = partition_data(partition, seed)
    weights, bias = model[0].astype(np.float64).copy(), model[1].astype(np.float64).copy()
    for _ in range(LOCAL_STEPS):
        residual = x @ weights + bias[0] - y
        weights -= LEARNING_RATE * (x.T @ residual) / len(y)
        bias -= LEARNING_RATE * residual.mean()
    payload = [
        0.5 * (block + np.random.default_rng([seed, partition, 1]).uniform(-1, 1, block.size))
        for block in model[2:]
    ]
    return [weights, bias, *payload], len(y)


def loss(model: list[NDArray[np.float64]], partitions: range, seed: int) -> float:
    """Mean squared error over the given partitions' data."""
    errors = []
    for p in partitions:
        x, y = partition_data(p, seed)
        errors.append((x @ model[0] + model[1][0] - y) ** 2)
    return float(np.mean(np.concatenate(errors)))
