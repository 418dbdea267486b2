"""Numpy models: analytic vs finite-difference gradients, the flat-vector contract, local SGD."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from numpy.typing import NDArray

from protocols.training import (
    MLP,
    Classifier,
    LinearRegression,
    LocalSGDStats,
    Model,
    MultinomialLogisticRegression,
)
from protocols.training.models import minibatches

D, C, N = 5, 4, 40


def _classification(seed: int, n: int = N) -> tuple[NDArray[np.float64], NDArray[np.int64]]:
    rng = np.random.default_rng(seed)
    return rng.normal(size=(n, D)), rng.integers(0, C, size=n)


def _regression(seed: int, n: int = N) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, D))
    return X, X @ rng.normal(size=D) + 0.1 * rng.normal(size=n)


# One factory per implementation; the contract tests below run on each (DESIGN: tests, 5).
FACTORIES: dict[str, Callable[[], tuple[Model, Any, Any]]] = {
    "linear": lambda: (LinearRegression(D, seed=1, init_scale=0.5), *_regression(0)),
    "logreg": lambda: (
        MultinomialLogisticRegression(D, C, seed=1, init_scale=0.5),
        *_classification(0),
    ),
    "mlp-relu": lambda: (MLP(D, 7, C, activation="relu", seed=2), *_classification(0)),
    "mlp-tanh": lambda: (MLP(D, 7, C, activation="tanh", seed=2), *_classification(0)),
}


@pytest.fixture(params=sorted(FACTORIES))
def case(request: pytest.FixtureRequest) -> tuple[Model, Any, Any]:
    return FACTORIES[request.param]()


def _finite_difference(model: Model, X: Any, y: Any, eps: float = 1e-6) -> NDArray[np.float64]:
    base = model.get_parameters()
    grad = np.empty_like(base)
    for i in range(base.size):
        step = np.zeros_like(base)
        step[i] = eps
        model.set_parameters(base + step)
        upper = model.loss(X, y)
        model.set_parameters(base - step)
        lower = model.loss(X, y)
        grad[i] = (upper - lower) / (2 * eps)
    model.set_parameters(base)
    return grad


class TestModelContract:
    def test_gradient_matches_central_differences(self, case: tuple[Model, Any, Any]) -> None:
        model, X, y = case
        analytic = model.gradient(X, y)
        numeric = _finite_difference(model, X, y)
        assert analytic.shape == (model.num_parameters,)
        # Central differences at eps = 1e-6 are accurate to ~1e-9 here; a wrong term is O(0.1).
        np.testing.assert_allclose(analytic, numeric, atol=1e-7, rtol=1e-6)
        assert np.abs(analytic).max() > 1e-3  # the check is not vacuous

    def test_parameters_are_one_flat_float64_copy(self, case: tuple[Model, Any, Any]) -> None:
        model, _, _ = case
        params = model.get_parameters()
        assert params.dtype == np.float64 and params.ndim == 1
        assert params.size == model.num_parameters
        params += 1.0  # a copy: the model is unaffected
        assert not np.array_equal(params, model.get_parameters())
        model.set_parameters(params)
        np.testing.assert_array_equal(model.get_parameters(), params)

    def test_set_parameters_rejects_bad_vectors(self, case: tuple[Model, Any, Any]) -> None:
        model, _, _ = case
        with pytest.raises(ValueError, match="length"):
            model.set_parameters(np.zeros(model.num_parameters + 1))
        bad = model.get_parameters()
        bad[0] = np.nan
        with pytest.raises(ValueError, match="finite"):
            model.set_parameters(bad)

    def test_loss_and_gradient_agree_with_separate_calls(
        self, case: tuple[Model, Any, Any]
    ) -> None:
        model, X, y = case
        loss, grad = model.loss_and_gradient(X, y)
        assert loss == model.loss(X, y)
        np.testing.assert_array_equal(grad, model.gradient(X, y))

    def test_local_sgd_is_deterministic_and_leaves_model_unchanged(
        self, case: tuple[Model, Any, Any]
    ) -> None:
        model, X, y = case
        before = model.get_parameters()
        kwargs: dict[str, Any] = dict(steps=7, batch_size=8, lr=0.05, weight_decay=1e-3)
        first, stats = model.local_sgd(X, y, rng=np.random.default_rng(5), **kwargs)
        again, _ = model.local_sgd(X, y, rng=np.random.default_rng(5), **kwargs)
        other, _ = model.local_sgd(X, y, rng=np.random.default_rng(6), **kwargs)
        np.testing.assert_array_equal(first, again)
        assert not np.array_equal(first, other)  # minibatches come from the rng
        np.testing.assert_array_equal(model.get_parameters(), before)
        assert isinstance(stats, LocalSGDStats)
        assert stats.steps == 7 and stats.batch_size == 8 and stats.finite
        assert stats.update_norm == pytest.approx(float(np.linalg.norm(first - before)))

    def test_full_batch_local_sgd_is_gradient_descent_with_weight_decay(
        self, case: tuple[Model, Any, Any]
    ) -> None:
        model, X, y = case
        lr, decay = 0.1, 0.3
        start = model.get_parameters()
        expected = start.copy()
        for _ in range(3):
            model.set_parameters(expected)
            expected = expected - lr * (model.gradient(X, y) + decay * expected)
        model.set_parameters(start)
        got, stats = model.local_sgd(
            X,
            y,
            steps=3,
            batch_size=10 * N,
            lr=lr,
            weight_decay=decay,
            rng=np.random.default_rng(0),
        )
        np.testing.assert_allclose(got, expected, rtol=1e-12, atol=1e-12)
        assert stats.batch_size == N

    def test_local_sgd_accepts_float32_inputs(self, case: tuple[Model, Any, Any]) -> None:
        model, X, y = case
        got32, _ = model.local_sgd(
            X.astype(np.float32), y, steps=3, batch_size=8, lr=0.05, rng=np.random.default_rng(1)
        )
        got64, _ = model.local_sgd(
            X.astype(np.float32).astype(np.float64),
            y,
            steps=3,
            batch_size=8,
            lr=0.05,
            rng=np.random.default_rng(1),
        )
        assert got32.dtype == np.float64
        np.testing.assert_allclose(got32, got64, rtol=1e-12, atol=1e-12)

    @pytest.mark.parametrize(
        ("name", "value", "error"),
        [
            ("steps", 0, ValueError),
            ("steps", 2.5, TypeError),
            ("batch_size", 0, ValueError),
            ("lr", 0.0, ValueError),
            ("lr", float("inf"), ValueError),
            ("weight_decay", -1.0, ValueError),
            ("rng", 0, TypeError),
        ],
    )
    def test_local_sgd_validates_arguments(
        self, case: tuple[Model, Any, Any], name: str, value: object, error: type[Exception]
    ) -> None:
        model, X, y = case
        kwargs: dict[str, Any] = dict(
            steps=2, batch_size=4, lr=0.1, weight_decay=0.0, rng=np.random.default_rng(0)
        )
        kwargs[name] = value
        with pytest.raises(error, match=name):
            model.local_sgd(X, y, **kwargs)

    def test_shape_errors(self, case: tuple[Model, Any, Any]) -> None:
        model, X, y = case
        with pytest.raises(ValueError, match="columns"):
            model.loss(X[:, :-1], y)
        with pytest.raises(ValueError, match="1-D"):
            model.loss(X, y[:-1])
        with pytest.raises(ValueError, match="at least one"):
            model.local_sgd(
                X[:0], y[:0], steps=1, batch_size=1, lr=0.1, rng=np.random.default_rng(0)
            )


def test_minibatches_walk_a_permutation_without_repeats() -> None:
    # With τ·b = n, each example is used exactly once: the summed updates of a linear model with
    # lr so small that the parameters barely move equal lr × (sum over all examples' gradients).
    X, y = _regression(3, n=32)
    model = LinearRegression(D)
    lr = 1e-9
    params, _ = model.local_sgd(X, y, steps=4, batch_size=8, lr=lr, rng=np.random.default_rng(2))
    full = model.gradient(X, y)  # mean over all 32 at w = 0; four means of 8 sum to 4 × it
    np.testing.assert_allclose(params, -lr * 4 * full, rtol=1e-6)


def test_logistic_regression_loss_values() -> None:
    model = MultinomialLogisticRegression(3, 5)
    X = np.ones((2, 3))
    assert model.loss(X, np.array([0, 4])) == pytest.approx(np.log(5))
    np.testing.assert_allclose(model.predict_proba(X), np.full((2, 5), 0.2))


def test_softmax_is_numerically_stable_for_huge_logits() -> None:
    model = MultinomialLogisticRegression(1, 3)
    model.set_parameters([1e4, -1e4, 0.0, 0.0, 0.0, 0.0])  # logits (1e4 x, −1e4 x, 0)
    X = np.array([[1.0], [-1.0]])
    y = np.array([1, 1])
    loss, grad = model.loss_and_gradient(X, y)
    assert loss == pytest.approx(0.5 * 2e4)  # first row costs 2e4 nats, second 0
    assert np.all(np.isfinite(grad))
    probs = model.predict_proba(X)
    np.testing.assert_allclose(probs.sum(axis=1), 1.0)


def test_divergent_sgd_reports_non_finite_without_raising() -> None:
    X, y = _regression(0)
    _, stats = LinearRegression(D).local_sgd(
        X * 1e3, y, steps=50, batch_size=8, lr=10.0, rng=np.random.default_rng(0)
    )
    assert not stats.finite


def test_classifier_metrics() -> None:
    model = MultinomialLogisticRegression(1, 2)
    model.set_parameters([-1.0, 1.0, 0.0, 0.0])
    X = np.array([[2.0], [-2.0], [3.0], [-1.0]])
    y = np.array([1, 0, 0, 0])
    assert isinstance(model, Classifier)
    assert model.error_rate(X, y) == 0.25 == model.error(X, y)
    assert model.accuracy(X, y) == 0.75
    np.testing.assert_array_equal(model.predict(X), [1, 0, 1, 0])
    assert np.isnan(model.error_rate(X[:0], y[:0]))


def test_label_validation() -> None:
    model = MultinomialLogisticRegression(2, 3)
    with pytest.raises(ValueError, match=r"\[0, 2\]"):
        model.loss(np.zeros((2, 2)), np.array([0, 3]))
    with pytest.raises(ValueError, match="integer"):
        model.loss(np.zeros((2, 2)), np.array([0.0, 1.0]))


def test_constructor_validation() -> None:
    with pytest.raises(ValueError, match="num_classes"):
        MultinomialLogisticRegression(3, 1)
    with pytest.raises(ValueError, match="activation"):
        MLP(3, 4, 2, activation="sigmoid")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="num_features"):
        LinearRegression(2.0)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="init_scale"):
        LinearRegression(2, init_scale=-1.0)


def test_initialisation_comes_from_the_seed() -> None:
    a = MLP(10, 6, 3, seed=4).get_parameters()
    b = MLP(10, 6, 3, seed=4).get_parameters()
    c = MLP(10, 6, 3, seed=5).get_parameters()
    np.testing.assert_array_equal(a, b)
    assert not np.array_equal(a, c)
    assert not MultinomialLogisticRegression(10, 3).get_parameters().any()  # zeros by default
    # He initialisation: first-layer weights have variance 2/d.
    wide = MLP(400, 500, 2, seed=0).get_parameters()[: 400 * 500]
    assert wide.var() == pytest.approx(2 / 400, rel=0.02)


def test_local_sgd_learns_a_linear_separator() -> None:
    rng = np.random.default_rng(0)
    X = rng.normal(size=(600, D))
    truth = rng.normal(size=(D, C)) * 3
    y = np.argmax(X @ truth, axis=1)
    model = MultinomialLogisticRegression(D, C)
    start = model.loss(X, y)
    params, _ = model.local_sgd(X, y, steps=300, batch_size=32, lr=0.5, rng=rng)
    model.set_parameters(params)
    assert start == pytest.approx(np.log(C))
    assert model.loss(X, y) < 0.35 * start
    assert model.error_rate(X, y) < 0.08


def test_mlp_learns_what_a_linear_model_cannot() -> None:
    # Concentric classes: the label is whether ‖x‖ exceeds the median radius.
    rng = np.random.default_rng(1)
    X = rng.normal(size=(800, 2))
    y = (np.linalg.norm(X, axis=1) > np.median(np.linalg.norm(X, axis=1))).astype(np.int64)
    linear = MultinomialLogisticRegression(2, 2)
    mlp = MLP(2, 32, 2, activation="tanh", seed=0)
    for model in (linear, mlp):
        params, _ = model.local_sgd(
            X, y, steps=1500, batch_size=32, lr=0.3, rng=np.random.default_rng(2)
        )
        model.set_parameters(params)
    assert linear.error_rate(X, y) > 0.35
    assert mlp.error_rate(X, y) < 0.1


@settings(max_examples=60, deadline=None)
@given(
    n=st.integers(1, 40),
    batch=st.integers(1, 50),
    steps=st.integers(1, 30),
    seed=st.integers(0, 2**32 - 1),
)
def test_minibatches_are_passes_over_fresh_permutations(
    n: int, batch: int, steps: int, seed: int
) -> None:
    drawn = list(minibatches(n, batch, steps, np.random.default_rng(seed)))
    assert len(drawn) == steps
    if batch >= n:
        assert drawn == [None] * steps
        return
    per_pass = n // batch  # a pass is this many batches: no example twice within one
    for start in range(0, steps, per_pass):
        chunk = np.concatenate([b for b in drawn[start : start + per_pass] if b is not None])
        assert np.unique(chunk).size == chunk.size
    # The same rng, replayed (what keeps every seed's run reproducible): every batch is the
    # next slice of the current permutation, a new one drawn exactly when it cannot fill one.
    rng = np.random.default_rng(seed)
    order, cursor = np.empty(0, dtype=np.intp), 0
    for index in drawn:
        assert index is not None and index.size == batch
        if cursor + batch > order.size:
            order, cursor = rng.permutation(n), 0
        np.testing.assert_array_equal(index, order[cursor : cursor + batch])
        cursor += batch
