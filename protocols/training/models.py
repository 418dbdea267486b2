"""Numpy models with analytic gradients, each exposing its parameters as one flat float64 vector.

Every model keeps its parameters in a single contiguous float64 buffer; the weight matrices and
bias vectors are reshaped views of it. ``get_parameters`` / ``set_parameters`` move that vector in
and out, so a trainer can send an update ``new − old`` through a secure weighted average without
knowing the model's structure. ``gradient`` returns the mean gradient over the examples in the same
layout. ``local_sgd`` runs τ minibatch SGD steps from the current parameters with an explicit
``np.random.Generator`` and returns the new vector, leaving the model itself unchanged.

Losses are means over the examples: ½(ŷ − y)² for :class:`LinearRegression`, the softmax cross
entropy for :class:`MultinomialLogisticRegression` and :class:`MLP`. Weight decay λ enters only
``local_sgd``, as the gradient of (λ/2)‖w‖² over all parameters (biases included), the
regulariser of the Δ-FL objective (Pillutla et al., eq. (6)).
"""

from __future__ import annotations

import logging
import math
from abc import ABC, abstractmethod
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
from numpy.typing import ArrayLike, NDArray

from secagg.validation import check_int, check_nonnegative, check_positive

__all__ = [
    "MLP",
    "Classifier",
    "LinearRegression",
    "LocalSGDStats",
    "Model",
    "MultinomialLogisticRegression",
    "minibatches",
]

logger = logging.getLogger(__name__)

FloatArray = NDArray[np.float64]


def minibatches(
    n: int, batch: int, steps: int, rng: np.random.Generator
) -> Iterator[NDArray[np.intp] | None]:
    """The example indices of each of ``steps`` minibatches of ``batch`` of n examples.

    Passes over a fresh ``rng.permutation(n)`` each (no example twice in a pass; a pass that
    cannot fill a batch is cut short); ``None`` means the full batch (``batch ≥ n``) and draws
    nothing from ``rng``. Every trainer's local solver samples its minibatches here.

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> [b.tolist() for b in minibatches(5, 2, 3, rng)]   # pass 1 leaves one out
    [[2, 4], [3, 0], [4, 1]]
    >>> list(minibatches(3, 8, 2, rng))
    [None, None]
    """
    if batch >= n:
        for _ in range(steps):
            yield None
        return
    order = np.empty(0, dtype=np.intp)
    cursor = 0
    for _ in range(steps):
        if cursor + batch > order.size:
            order = rng.permutation(n)
            cursor = 0
        yield order[cursor : cursor + batch]
        cursor += batch


@dataclass(frozen=True, slots=True)
class LocalSGDStats:
    """What one call of :meth:`Model.local_sgd` did.

    Attributes
    ----------
    steps
        Number of SGD steps τ taken.
    batch_size
        Examples per step (the requested size, or the client's size if that is smaller).
    first_batch_loss
        Data loss of the first minibatch at the starting parameters.
    mean_batch_loss
        Mean of the minibatch data losses, each measured before its step.
    update_norm
        ‖w_τ − w_0‖₂.
    finite
        Whether every loss and the returned parameters are finite (trainers drop the update
        otherwise).

    Examples
    --------
    >>> LocalSGDStats(steps=2, batch_size=8, first_batch_loss=0.7, mean_batch_loss=0.6,
    ...               update_norm=0.1, finite=True).steps
    2
    """

    steps: int
    batch_size: int
    first_batch_loss: float
    mean_batch_loss: float
    update_norm: float
    finite: bool


class Model(ABC):
    """The interface every model implements; parameters live in one flat float64 vector.

    Subclasses define the layout (``_allocate``), the loss with its gradient and the prediction on
    an explicit parameter vector, so ``local_sgd`` can step a private copy without touching the
    model's own parameters.

    Examples
    --------
    >>> model = MultinomialLogisticRegression(num_features=3, num_classes=2)
    >>> isinstance(model, Model), model.num_parameters
    (True, 8)
    """

    def __init__(self, num_features: int, num_parameters: int) -> None:
        self._num_features = check_int("num_features", num_features, minimum=1)
        self._params: FloatArray = np.zeros(num_parameters, dtype=np.float64)

    # -- parameters ---------------------------------------------------------------------------

    @property
    def num_features(self) -> int:
        """Number of input features d."""
        return self._num_features

    @property
    def num_parameters(self) -> int:
        """Length of the flat parameter vector."""
        return int(self._params.size)

    def get_parameters(self) -> FloatArray:
        """Return a copy of the flat float64 parameter vector.

        Examples
        --------
        >>> LinearRegression(num_features=2).get_parameters()
        array([0., 0., 0.])
        """
        return self._params.copy()

    def set_parameters(self, parameters: ArrayLike) -> None:
        """Replace the parameters by a copy of a flat vector of length :attr:`num_parameters`.

        Raises
        ------
        ValueError
            If the vector has the wrong shape or a non-finite entry.

        Examples
        --------
        >>> model = LinearRegression(num_features=2)
        >>> model.set_parameters([1.0, 2.0, 0.5])
        >>> model.predict([[1.0, 1.0]])
        array([3.5])
        """
        vector = np.asarray(parameters, dtype=np.float64)
        if vector.shape != self._params.shape:
            raise ValueError(
                f"parameters must be a 1-D vector of length {self.num_parameters}; "
                f"got shape {vector.shape}"
            )
        if not np.all(np.isfinite(vector)):
            raise ValueError("parameters must be finite")
        self._params[...] = vector

    # -- evaluation ---------------------------------------------------------------------------

    def loss(self, X: ArrayLike, y: ArrayLike) -> float:
        """Mean data loss over the examples (no weight decay).

        Examples
        --------
        >>> LinearRegression(num_features=1).loss([[1.0], [2.0]], [1.0, 3.0])
        2.5
        """
        features, targets = self._check_data(X, y)
        return self._loss_and_gradient(self._params, features, targets, None)

    def gradient(self, X: ArrayLike, y: ArrayLike) -> FloatArray:
        """Mean gradient of the data loss, flat, in the layout of :meth:`get_parameters`.

        Examples
        --------
        >>> LinearRegression(num_features=1).gradient([[1.0], [2.0]], [1.0, 3.0])
        array([-3.5, -2. ])
        """
        features, targets = self._check_data(X, y)
        grad = np.empty_like(self._params)
        self._loss_and_gradient(self._params, features, targets, grad)
        return grad

    def loss_and_gradient(self, X: ArrayLike, y: ArrayLike) -> tuple[float, FloatArray]:
        """Mean data loss and its flat gradient from one forward pass.

        Examples
        --------
        >>> loss, grad = LinearRegression(num_features=1).loss_and_gradient([[1.0]], [2.0])
        >>> loss, grad
        (2.0, array([-2., -2.]))
        """
        features, targets = self._check_data(X, y)
        grad = np.empty_like(self._params)
        value = self._loss_and_gradient(self._params, features, targets, grad)
        return value, grad

    def predict(self, X: ArrayLike) -> NDArray[Any]:
        """Predictions for the rows of ``X`` (class labels, or real values for regression).

        Examples
        --------
        >>> MultinomialLogisticRegression(num_features=2, num_classes=3).predict([[0.0, 1.0]])
        array([0])
        """
        return self._predict(self._params, self._check_features(X))

    @abstractmethod
    def error(self, X: ArrayLike, y: ArrayLike) -> float:
        """The evaluation error trainers report: error rate for classifiers, MSE for regression."""

    # -- training -----------------------------------------------------------------------------

    def local_sgd(
        self,
        X: ArrayLike,
        y: ArrayLike,
        *,
        steps: int,
        batch_size: int,
        lr: float,
        weight_decay: float = 0.0,
        rng: np.random.Generator,
    ) -> tuple[FloatArray, LocalSGDStats]:
        """Run τ minibatch SGD steps from the current parameters; return the new flat vector.

        Minibatches are consecutive slices of a random permutation of the examples, a fresh
        permutation being drawn when the current one has fewer than ``batch_size`` left, so within
        an epoch no example repeats. A client with fewer examples than ``batch_size`` uses all of
        them at every step. Each step is w ← w − lr·(∇F_B(w) + λw). The model's own parameters
        are not changed.

        Parameters
        ----------
        X, y
            The client's training examples and targets.
        steps
            Number of local steps τ ≥ 1.
        batch_size
            Examples per step (≥ 1).
        lr
            Learning rate (> 0).
        weight_decay
            L2 coefficient λ ≥ 0, applied to every parameter.
        rng
            The only source of randomness (minibatch sampling).

        Returns
        -------
        (parameters, stats)
            The new flat float64 vector and :class:`LocalSGDStats`.

        Examples
        --------
        >>> rng = np.random.default_rng(0)
        >>> X = rng.normal(size=(64, 3)); y = X @ np.array([1.0, -2.0, 0.5]) + 0.3
        >>> model = LinearRegression(num_features=3)
        >>> params, stats = model.local_sgd(X, y, steps=200, batch_size=16, lr=0.1,
        ...                                 rng=np.random.default_rng(1))
        >>> np.round(params, 3)
        array([ 1. , -2. ,  0.5,  0.3])
        >>> stats.steps, stats.finite, bool(model.get_parameters().any())
        (200, True, False)
        """
        features, targets = self._check_data(X, y)
        num_steps = check_int("steps", steps, minimum=1)
        batch = check_int("batch_size", batch_size, minimum=1)
        step_size = check_positive("lr", lr)
        decay = check_nonnegative("weight_decay", weight_decay)
        if not isinstance(rng, np.random.Generator):
            raise TypeError(f"rng must be a numpy.random.Generator; got {type(rng).__name__}")
        n = features.shape[0]
        if n == 0:
            raise ValueError("local_sgd needs at least one training example")
        batch = min(batch, n)
        params = self._params.copy()
        grad = np.empty_like(params)
        losses = np.empty(num_steps, dtype=np.float64)
        full_batch = batch == n
        # One float64 copy per batch (not one implicit cast per matmul) keeps BLAS on dgemm.
        full_x = features.astype(np.float64, copy=False) if full_batch else features
        with np.errstate(over="ignore", invalid="ignore"):
            for step, index in enumerate(minibatches(n, batch, num_steps, rng)):
                if index is None:
                    xb, yb = full_x, targets
                else:
                    xb = features[index].astype(np.float64, copy=False)
                    yb = targets[index]
                losses[step] = self._loss_and_gradient(params, xb, yb, grad)
                if decay:
                    params *= 1.0 - step_size * decay
                grad *= step_size
                params -= grad
            update_norm = float(np.linalg.norm(params - self._params))
        finite = bool(np.all(np.isfinite(losses)) and np.all(np.isfinite(params)))
        if not finite:
            logger.debug("local_sgd produced non-finite values (lr=%g)", step_size)
        stats = LocalSGDStats(
            steps=num_steps,
            batch_size=batch,
            first_batch_loss=float(losses[0]),
            mean_batch_loss=float(losses.mean()),
            update_norm=update_norm,
            finite=finite,
        )
        return params, stats

    # -- for subclasses -----------------------------------------------------------------------

    @abstractmethod
    def _loss_and_gradient(
        self,
        params: FloatArray,
        X: NDArray[np.floating[Any]],
        y: NDArray[Any],
        grad: FloatArray | None,
    ) -> float:
        """Mean loss at ``params``; when ``grad`` is given, the gradient is written into it."""

    @abstractmethod
    def _predict(self, params: FloatArray, X: NDArray[np.floating[Any]]) -> NDArray[Any]:
        """Predictions at ``params``."""

    @abstractmethod
    def _check_targets(self, y: ArrayLike, n: int) -> NDArray[Any]:
        """Validate and convert targets for ``n`` examples."""

    def _check_features(self, X: ArrayLike) -> NDArray[np.floating[Any]]:
        features = np.asarray(X)
        if not np.issubdtype(features.dtype, np.floating):
            features = features.astype(np.float64)
        if features.ndim != 2 or features.shape[1] != self._num_features:
            raise ValueError(
                f"X must be a 2-D array with {self._num_features} columns; "
                f"got shape {features.shape}"
            )
        return features

    def _check_data(
        self, X: ArrayLike, y: ArrayLike
    ) -> tuple[NDArray[np.floating[Any]], NDArray[Any]]:
        features = self._check_features(X)
        return features, self._check_targets(y, features.shape[0])


class LinearRegression(Model):
    """Linear regression ŷ = x·w + b with the squared loss ½(ŷ − y)², averaged over examples.

    Layout of the flat vector: ``[w (d), b]``. Parameters start at ``init_scale``·N(0, 1) drawn
    from ``seed`` (zeros by default: the problem is convex).

    Examples
    --------
    >>> model = LinearRegression(num_features=2)
    >>> model.set_parameters([2.0, 0.0, 1.0])
    >>> float(model.error([[1.0, 5.0], [0.0, 0.0]], [3.0, 2.0]))
    0.5
    """

    def __init__(self, num_features: int, *, seed: int = 0, init_scale: float = 0.0) -> None:
        super().__init__(num_features, num_features + 1)
        scale = check_nonnegative("init_scale", init_scale)
        self.seed = seed
        if scale:
            self._params[...] = scale * np.random.default_rng(seed).standard_normal(
                self.num_parameters
            )

    def error(self, X: ArrayLike, y: ArrayLike) -> float:
        """Mean squared error (ŷ − y)² (twice the loss).

        Examples
        --------
        >>> LinearRegression(num_features=1).error([[1.0]], [2.0])
        4.0
        """
        return 2.0 * self.loss(X, y)

    def _check_targets(self, y: ArrayLike, n: int) -> NDArray[Any]:
        targets = np.asarray(y, dtype=np.float64)
        if targets.shape != (n,):
            raise ValueError(
                f"y must be a 1-D array of {n} real targets; got shape {targets.shape}"
            )
        return targets

    def _predict(self, params: FloatArray, X: NDArray[np.floating[Any]]) -> NDArray[Any]:
        d = self._num_features
        result: FloatArray = X @ params[:d] + params[d]
        return result

    def _loss_and_gradient(
        self,
        params: FloatArray,
        X: NDArray[np.floating[Any]],
        y: NDArray[Any],
        grad: FloatArray | None,
    ) -> float:
        n: int = X.shape[0]
        if n == 0:
            raise ValueError("the loss needs at least one example")
        d = self._num_features
        residual = X @ params[:d] + params[d] - y
        value = 0.5 * float(residual @ residual) / n
        if grad is not None:
            grad[:d] = (X.T @ residual) / n
            grad[d] = residual.sum() / n
        return value


class Classifier(Model):
    """A C-class model whose last layer gives logits; softmax cross-entropy loss, argmax prediction.

    Examples
    --------
    >>> model = MLP(num_features=4, num_hidden=3, num_classes=2, seed=0)
    >>> isinstance(model, Classifier), model.num_classes
    (True, 2)
    """

    def __init__(self, num_features: int, num_classes: int, num_parameters: int) -> None:
        super().__init__(num_features, num_parameters)
        self._num_classes = num_classes

    @property
    def num_classes(self) -> int:
        """Number of classes C."""
        return self._num_classes

    def error(self, X: ArrayLike, y: ArrayLike) -> float:
        """Fraction of misclassified examples (same as :meth:`error_rate`).

        Examples
        --------
        >>> MultinomialLogisticRegression(num_features=1, num_classes=2).error([[1.0]], [1])
        1.0
        """
        return self.error_rate(X, y)

    def error_rate(self, X: ArrayLike, y: ArrayLike) -> float:
        """Fraction of misclassified examples; ``nan`` for no examples.

        Examples
        --------
        >>> model = MultinomialLogisticRegression(num_features=1, num_classes=2)
        >>> model.set_parameters([-1.0, 1.0, 0.0, 0.0])  # logits (−x, x)
        >>> model.error_rate([[2.0], [-2.0], [3.0]], [1, 0, 0])
        0.3333333333333333
        """
        features, labels = self._check_data(X, y)
        if labels.size == 0:
            return math.nan
        return float(np.mean(self._predict(self._params, features) != labels))

    def accuracy(self, X: ArrayLike, y: ArrayLike) -> float:
        """Fraction of correctly classified examples.

        Examples
        --------
        >>> MultinomialLogisticRegression(num_features=1, num_classes=2).accuracy([[1.0]], [0])
        1.0
        """
        return 1.0 - self.error_rate(X, y)

    def predict_proba(self, X: ArrayLike) -> FloatArray:
        """Class probabilities, shape (n, C).

        Examples
        --------
        >>> MultinomialLogisticRegression(num_features=1, num_classes=4).predict_proba([[3.0]])
        array([[0.25, 0.25, 0.25, 0.25]])
        """
        logits = self._logits(self._params, self._check_features(X), None)
        return _softmax_inplace(logits)

    @abstractmethod
    def _logits(
        self,
        params: FloatArray,
        X: NDArray[np.floating[Any]],
        cache: list[FloatArray] | None,
    ) -> FloatArray:
        """Logits (n, C); appends what the backward pass needs to ``cache`` when given."""

    @abstractmethod
    def _backward(
        self,
        params: FloatArray,
        X: NDArray[np.floating[Any]],
        dlogits: FloatArray,
        cache: list[FloatArray],
        grad: FloatArray,
    ) -> None:
        """Write into ``grad`` the gradient given d(loss)/d(logits)."""

    def _check_targets(self, y: ArrayLike, n: int) -> NDArray[Any]:
        labels = np.asarray(y)
        if labels.shape != (n,):
            raise ValueError(f"y must be a 1-D array of {n} labels; got shape {labels.shape}")
        if labels.size and not np.issubdtype(labels.dtype, np.integer):
            raise ValueError(f"y must hold integer class labels; got dtype {labels.dtype}")
        if labels.size and (labels.min() < 0 or labels.max() >= self._num_classes):
            raise ValueError(f"labels must lie in [0, {self._num_classes - 1}]")
        return labels

    def _predict(self, params: FloatArray, X: NDArray[np.floating[Any]]) -> NDArray[Any]:
        result: NDArray[np.intp] = np.argmax(self._logits(params, X, None), axis=1)
        return result

    def _loss_and_gradient(
        self,
        params: FloatArray,
        X: NDArray[np.floating[Any]],
        y: NDArray[Any],
        grad: FloatArray | None,
    ) -> float:
        n = X.shape[0]
        if n == 0:
            raise ValueError("the loss needs at least one example")
        cache: list[FloatArray] | None = [] if grad is not None else None
        logits = self._logits(params, X, cache)
        rows = np.arange(n)
        # Stable log-softmax: subtract the row maximum before exponentiating.
        logits -= logits.max(axis=1, keepdims=True)
        log_norm = np.log(np.exp(logits).sum(axis=1))
        value = float(np.mean(log_norm - logits[rows, y]))
        if grad is not None and cache is not None:
            probs = np.exp(logits - log_norm[:, None])
            probs[rows, y] -= 1.0
            probs /= n
            self._backward(params, X, probs, cache, grad)
        return value


def _softmax_inplace(logits: FloatArray) -> FloatArray:
    logits -= logits.max(axis=1, keepdims=True)
    np.exp(logits, out=logits)
    logits /= logits.sum(axis=1, keepdims=True)
    return logits


class MultinomialLogisticRegression(Classifier):
    """Multinomial logistic regression: logits x·W + b, softmax cross-entropy.

    Layout of the flat vector: ``[W (d × C, row-major), b (C)]``. Parameters start at
    ``init_scale``·N(0, 1) drawn from ``seed`` (zeros by default: the problem is convex).

    Examples
    --------
    >>> model = MultinomialLogisticRegression(num_features=2, num_classes=3)
    >>> round(model.loss([[1.0, 2.0]], [2]), 4)  # log 3 at zero parameters
    1.0986
    """

    def __init__(
        self, num_features: int, num_classes: int, *, seed: int = 0, init_scale: float = 0.0
    ) -> None:
        d = check_int("num_features", num_features, minimum=1)
        classes = check_int("num_classes", num_classes, minimum=2)
        super().__init__(d, classes, d * classes + classes)
        scale = check_nonnegative("init_scale", init_scale)
        self.seed = seed
        if scale:
            self._params[...] = scale * np.random.default_rng(seed).standard_normal(
                self.num_parameters
            )

    def _split(self, params: FloatArray) -> tuple[FloatArray, FloatArray]:
        d, c = self._num_features, self._num_classes
        return params[: d * c].reshape(d, c), params[d * c :]

    def _logits(
        self,
        params: FloatArray,
        X: NDArray[np.floating[Any]],
        cache: list[FloatArray] | None,
    ) -> FloatArray:
        weights, bias = self._split(params)
        result: FloatArray = X @ weights + bias
        return result

    def _backward(
        self,
        params: FloatArray,
        X: NDArray[np.floating[Any]],
        dlogits: FloatArray,
        cache: list[FloatArray],
        grad: FloatArray,
    ) -> None:
        grad_weights, grad_bias = self._split(grad)
        grad_weights[...] = X.T @ dlogits
        grad_bias[...] = dlogits.sum(axis=0)


class MLP(Classifier):
    """One-hidden-layer perceptron: x → act(x·W₁ + b₁) → ·W₂ + b₂ → softmax.

    Layout of the flat vector: ``[W₁ (d × h), b₁ (h), W₂ (h × C), b₂ (C)]``, matrices row-major.
    Weights start at N(0, g²/fan_in) drawn from ``seed`` (g² = 2 for ReLU, He et al. 2015;
    g² = 1 for tanh, LeCun), biases at zero.

    Examples
    --------
    >>> model = MLP(num_features=4, num_hidden=8, num_classes=3, activation="tanh", seed=1)
    >>> model.num_parameters
    67
    >>> bool(np.array_equal(model.get_parameters(),
    ...      MLP(num_features=4, num_hidden=8, num_classes=3, activation="tanh",
    ...          seed=1).get_parameters()))
    True
    """

    def __init__(
        self,
        num_features: int,
        num_hidden: int,
        num_classes: int,
        *,
        activation: Literal["relu", "tanh"] = "relu",
        seed: int = 0,
    ) -> None:
        d = check_int("num_features", num_features, minimum=1)
        h = check_int("num_hidden", num_hidden, minimum=1)
        classes = check_int("num_classes", num_classes, minimum=2)
        if activation not in ("relu", "tanh"):
            raise ValueError(f"activation must be 'relu' or 'tanh'; got {activation!r}")
        super().__init__(d, classes, d * h + h + h * classes + classes)
        self._num_hidden = h
        self.activation = activation
        self.seed = seed
        gain = 2.0 if activation == "relu" else 1.0
        rng = np.random.default_rng(seed)
        w1, _, w2, _ = self._split(self._params)
        w1[...] = rng.standard_normal(w1.shape) * math.sqrt(gain / d)
        w2[...] = rng.standard_normal(w2.shape) * math.sqrt(1.0 / h)

    @property
    def num_hidden(self) -> int:
        """Width h of the hidden layer."""
        return self._num_hidden

    def _split(self, params: FloatArray) -> tuple[FloatArray, FloatArray, FloatArray, FloatArray]:
        d, h, c = self._num_features, self._num_hidden, self._num_classes
        end_w1 = d * h
        end_b1 = end_w1 + h
        end_w2 = end_b1 + h * c
        return (
            params[:end_w1].reshape(d, h),
            params[end_w1:end_b1],
            params[end_b1:end_w2].reshape(h, c),
            params[end_w2:],
        )

    def _logits(
        self,
        params: FloatArray,
        X: NDArray[np.floating[Any]],
        cache: list[FloatArray] | None,
    ) -> FloatArray:
        w1, b1, w2, b2 = self._split(params)
        hidden: FloatArray = X @ w1 + b1
        if self.activation == "relu":
            np.maximum(hidden, 0.0, out=hidden)
        else:
            np.tanh(hidden, out=hidden)
        if cache is not None:
            cache.append(hidden)
        result: FloatArray = hidden @ w2 + b2
        return result

    def _backward(
        self,
        params: FloatArray,
        X: NDArray[np.floating[Any]],
        dlogits: FloatArray,
        cache: list[FloatArray],
        grad: FloatArray,
    ) -> None:
        _, _, w2, _ = self._split(params)
        g_w1, g_b1, g_w2, g_b2 = self._split(grad)
        (hidden,) = cache
        g_w2[...] = hidden.T @ dlogits
        g_b2[...] = dlogits.sum(axis=0)
        dhidden = dlogits @ w2.T
        if self.activation == "relu":
            dhidden *= hidden > 0.0
        else:
            dhidden *= 1.0 - hidden * hidden
        g_w1[...] = X.T @ dhidden
        g_b1[...] = dhidden.sum(axis=0)
