"""Weak-learning oracles for FFGB (Shen et al., "Federated Functional Gradient Boosting").

An oracle WO_α takes a client's inputs X and a query q (the values, on X, of the function it
should approximate: a functional gradient plus residual) and returns a function h with
⟨h, q⟩_α ≥ γ‖q‖²_α-type guarantees (FFGB eq. (9)). Functions map ℝ^d → ℝ^c. Three oracles:

* :class:`FourierRidgeLearner` — ridge regression on random Fourier features (Rahimi & Recht
  2007) whose basis the *server* fixes each round by broadcasting a seed. A function is then a
  (D × c) coefficient matrix in the round's basis, any linear combination of a client's functions
  is one such matrix, and the server's average of the clients' functions is a vector average:
  it runs over the secure sum. The basis is expanded from the seed with the AES-CTR keystream
  (:class:`secagg.KeystreamRandom`), so every client builds the same basis whatever its numpy.
* :class:`MLPRegressorLearner` — a one-hidden-layer tanh network fitted by Adam on the squared
  error (the reference code's learner). Its functions are networks: the server must receive
  each client's networks to average them, so it is NOT compatible with secure aggregation.
* :class:`InterpolatingLearner` — exact on the client's points (γ = 1; 1-nearest-neighbour
  elsewhere), or, with ``keep=k``, deliberately weak: only the k largest-magnitude query entries
  are fitted. For tests and ablations; not secure-aggregation compatible either.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from secagg import KeystreamRandom
from secagg.validation import check_int, check_positive

__all__ = [
    "FourierRidgeLearner",
    "InterpolatingLearner",
    "MLPRegressorLearner",
    "WeakLearner",
    "random_fourier_features",
]

FloatArray = NDArray[np.float64]
_BASIS_DOMAIN = b"secagg-dp/v1/protocols/ffgb-fourier-basis"


def _as_queries(X: ArrayLike, query: ArrayLike) -> tuple[FloatArray, FloatArray]:
    features = np.asarray(X, dtype=np.float64)
    targets = np.asarray(query, dtype=np.float64)
    if features.ndim != 2 or targets.ndim != 2 or targets.shape[0] != features.shape[0]:
        raise ValueError(
            f"X must be (M, d) and query (M, c) with the same M; got {features.shape} "
            f"and {targets.shape}"
        )
    if not np.isfinite(targets).all():
        raise ValueError("the query must be finite")
    return features, targets


class WeakLearner(ABC):
    """The oracle interface FFGB uses (one instance serves every client of a run).

    A *function* is whatever :meth:`fit` returns; a client's round increment Σₖ cₖhₖ is
    :meth:`combine` of its functions, and the server's average of the clients' increments is
    :meth:`average` (or, for a shared basis, a vector average of :meth:`to_vector`).

    Attributes
    ----------
    shared_basis
        Whether increments are vectors in a basis the server fixes, so their average can be
        computed by a secure sum (only :class:`FourierRidgeLearner`).
    """

    shared_basis: bool = False

    def begin_round(self, seed: int) -> None:  # noqa: B027 (optional hook, a no-op by default)
        """The server's broadcast at the start of a round (the basis seed, for a shared basis)."""

    @abstractmethod
    def fit(
        self, X: ArrayLike, query: ArrayLike, *, rng: np.random.Generator
    ) -> tuple[FloatArray, Any]:
        """Approximate ``query`` (M × c) on the rows of ``X``: (values on X, the function)."""

    @abstractmethod
    def evaluate(self, function: Any, X: ArrayLike) -> FloatArray:
        """A fitted function's values on ``X`` (M × c)."""

    def combine(self, terms: Sequence[tuple[float, Any]]) -> Any:
        """Σ cₖ·hₖ of one client's functions (generic: the list itself)."""
        return [(float(c), h) for c, h in terms]

    def evaluate_combined(self, combined: Any, X: ArrayLike) -> FloatArray:
        """Values of a :meth:`combine` result (or an :meth:`average`) on ``X``."""
        values: FloatArray | None = None
        for coefficient, function in combined:
            part = coefficient * self.evaluate(function, X)
            values = part if values is None else values + part
        if values is None:
            raise ValueError("an empty combination has no output dimension")
        return values

    def average(self, combined: Sequence[Any], weights: ArrayLike) -> Any:
        """Σᵢ αᵢ·incrementᵢ / Σαᵢ (the server sees every client's functions)."""
        alpha = np.asarray(weights, dtype=np.float64)
        total = float(alpha.sum())
        return [
            (a / total * c, h) for a, terms in zip(alpha, combined, strict=True) for c, h in terms
        ]

    def to_vector(self, combined: Any) -> FloatArray:
        """The increment as a flat vector (shared-basis learners only)."""
        raise ValueError(
            f"{type(self).__name__} has no shared basis: its functions cannot be averaged by a "
            "secure sum (the server must see each client's function)"
        )

    def from_vector(self, vector: FloatArray) -> Any:
        """Inverse of :meth:`to_vector` (shared-basis learners only)."""
        raise ValueError(f"{type(self).__name__} has no shared basis")

    def num_values(self, combined: Any) -> int:
        """How many reals a client uploads to send ``combined``."""
        return sum(self._function_size(h) for _, h in combined)

    def _function_size(self, function: Any) -> int:
        return int(sum(np.size(part) for part in function))


def random_fourier_features(
    seed: int, num_inputs: int, num_features: int, bandwidth: float
) -> tuple[FloatArray, FloatArray]:
    """(W, b) of φ(x) = √(2/D)·cos(x·W + b), W ~ N(0, 1/ℓ²), b ~ U[0, 2π) (Rahimi–Recht 2007).

    Drawn from the AES-CTR keystream of ``seed`` (uniforms from 53-bit words, normals by
    Box–Muller), so every party expands the same basis.

    Examples
    --------
    >>> W, b = random_fourier_features(3, num_inputs=2, num_features=4, bandwidth=1.0)
    >>> W.shape, b.shape, bool(np.array_equal(W, random_fourier_features(3, 2, 4, 1.0)[0]))
    ((2, 4), (4,), True)
    """
    stream = KeystreamRandom(seed, label=_BASIS_DOMAIN)
    count = num_inputs * num_features
    pairs = (count + 1) // 2
    words = stream.uint64(2 * pairs + num_features)
    uniforms = ((words >> np.uint64(11)).astype(np.float64) + 0.5) * 2.0**-53
    u1, u2 = uniforms[:pairs], uniforms[pairs : 2 * pairs]
    radius = np.sqrt(-2.0 * np.log(u1))
    normals = np.concatenate([radius * np.cos(2 * math.pi * u2), radius * np.sin(2 * math.pi * u2)])
    W = normals[:count].reshape(num_inputs, num_features) / bandwidth
    b = 2 * math.pi * uniforms[2 * pairs :]
    return W, b


class FourierRidgeLearner(WeakLearner):
    """Ridge regression on D random Fourier features whose seed the server sends each round.

    h(x) = φ_t(x)·A with A = (ΦᵀΦ + λM·I)⁻¹ΦᵀQ on the client's M points (ridge normal
    equations); the linear map Q ↦ A is formed once per (round, client inputs), so each of the
    K fits is one matrix product.

    Parameters
    ----------
    num_features
        D (the increment of one client is D × c reals).
    bandwidth
        ℓ of the Gaussian kernel exp(−‖x − x'‖²/(2ℓ²)) that the features approximate.
    ridge
        λ > 0 (scaled by the number of points M).

    Examples
    --------
    >>> learner = FourierRidgeLearner(num_features=200, bandwidth=1.0, ridge=1e-6)
    >>> learner.begin_round(seed=1)
    >>> X = np.linspace(-2, 2, 40)[:, None]
    >>> values, coefficients = learner.fit(X, np.sin(X), rng=np.random.default_rng(0))
    >>> coefficients.shape, bool(np.abs(values - np.sin(X)).max() < 1e-2)
    ((200, 1), True)
    >>> bool(np.allclose(learner.evaluate(coefficients, X), values))
    True
    """

    shared_basis = True

    def __init__(self, num_features: int = 256, bandwidth: float = 1.0, ridge: float = 1e-3):
        self.num_features = check_int("num_features", num_features, minimum=1)
        self.bandwidth = check_positive("bandwidth", bandwidth)
        self.ridge = check_positive("ridge", ridge)
        self._seed: int | None = None
        self._basis: dict[int, tuple[FloatArray, FloatArray]] = {}
        self._cache: tuple[int, int, FloatArray, FloatArray] | None = None

    def begin_round(self, seed: int) -> None:
        """Fix the round's basis (the server broadcasts ``seed``)."""
        self._seed = seed
        self._cache = None

    def _features(self, X: FloatArray, seed: int) -> FloatArray:
        if seed not in self._basis:
            if len(self._basis) > 4096:
                self._basis.clear()
            self._basis[seed] = random_fourier_features(
                seed, X.shape[1], self.num_features, self.bandwidth
            )
        W, b = self._basis[seed]
        phi = X @ W
        phi += b
        np.cos(phi, out=phi)
        phi *= math.sqrt(2.0 / self.num_features)
        return phi

    def fit(
        self, X: ArrayLike, query: ArrayLike, *, rng: np.random.Generator
    ) -> tuple[FloatArray, FloatArray]:
        """Ridge fit of ``query``: (values on X, D × c coefficients)."""
        if self._seed is None:
            raise ValueError("begin_round(seed) must fix the basis before fitting")
        features, targets = _as_queries(X, query)
        key = id(X)
        if self._cache is None or self._cache[:2] != (self._seed, key):
            phi = self._features(features, self._seed)
            m = features.shape[0]
            # A = (ΦᵀΦ + λM·I)⁻¹ΦᵀQ = Φᵀ(ΦΦᵀ + λM·I)⁻¹Q: invert the smaller of the two once.
            if m <= self.num_features:
                kernel = phi @ phi.T
                kernel[np.diag_indices_from(kernel)] += self.ridge * m
                operator = phi.T @ np.linalg.inv(kernel)
            else:
                gram = phi.T @ phi
                gram[np.diag_indices_from(gram)] += self.ridge * m
                operator = np.linalg.solve(gram, phi.T)
            self._cache = (self._seed, key, phi, np.asarray(operator, dtype=np.float64))
        _, _, phi, operator = self._cache
        coefficients: FloatArray = operator @ targets
        return phi @ coefficients, coefficients

    def evaluate(self, function: Any, X: ArrayLike) -> FloatArray:
        """Values of a (seed, coefficients) pair or of the current round's coefficients."""
        seed, coefficients = function if isinstance(function, tuple) else (self._seed, function)
        if seed is None:
            raise ValueError("no basis: call begin_round first")
        result: FloatArray = self._features(np.asarray(X, dtype=np.float64), seed) @ coefficients
        return result

    def combine(self, terms: Sequence[tuple[float, Any]]) -> tuple[int, FloatArray]:
        """Σ cₖAₖ in the round's basis: one (seed, D × c) pair."""
        if self._seed is None:
            raise ValueError("no basis: call begin_round first")
        total = sum((c * A for c, A in terms), start=np.zeros_like(terms[0][1]))
        return self._seed, total

    def evaluate_combined(self, combined: Any, X: ArrayLike) -> FloatArray:
        """Values of a (seed, coefficients) increment on ``X``."""
        return self.evaluate(combined, X)

    def average(self, combined: Sequence[Any], weights: ArrayLike) -> tuple[int, FloatArray]:
        """The weighted average of increments in one basis (what the secure sum computes)."""
        alpha = np.asarray(weights, dtype=np.float64)
        seeds = {seed for seed, _ in combined}
        if len(seeds) != 1:
            raise ValueError("increments from different bases cannot be averaged")
        total = sum((a * A for a, (_, A) in zip(alpha, combined, strict=True)), start=0.0)
        return seeds.pop(), np.asarray(total / alpha.sum(), dtype=np.float64)

    def to_vector(self, combined: Any) -> FloatArray:
        """The flattened coefficients (D·c reals)."""
        vector: FloatArray = np.asarray(combined[1], dtype=np.float64).ravel()
        return vector

    def from_vector(self, vector: FloatArray) -> tuple[int, FloatArray]:
        """Coefficients in the current round's basis from a flat (D·c) vector."""
        if self._seed is None:
            raise ValueError("no basis: call begin_round first")
        return self._seed, np.asarray(vector, dtype=np.float64).reshape(self.num_features, -1)

    def num_values(self, combined: Any) -> int:
        """D·c: one coefficient matrix per client and round, whatever K."""
        return int(np.size(combined[1]))


@dataclass(frozen=True, slots=True, eq=False)
class _Network:
    W1: FloatArray
    b1: FloatArray
    W2: FloatArray
    b2: FloatArray

    def __iter__(self) -> Any:
        return iter((self.W1, self.b1, self.W2, self.b2))

    def __call__(self, X: FloatArray) -> FloatArray:
        result: FloatArray = np.tanh(X @ self.W1 + self.b1) @ self.W2 + self.b2
        return result


class MLPRegressorLearner(WeakLearner):
    """A one-hidden-layer tanh MLP fitted to the query by full-batch Adam on the squared error.

    NOT compatible with secure aggregation: a client's increment is a list of networks, which
    the server must receive one by one to form the ensemble average.

    Parameters
    ----------
    hidden
        Width h.
    steps, lr
        Adam steps and step size (Kingma & Ba 2015, β = (0.9, 0.999)).

    Examples
    --------
    >>> learner = MLPRegressorLearner(hidden=16, steps=300, lr=0.02)
    >>> X = np.linspace(-2, 2, 50)[:, None]
    >>> values, net = learner.fit(X, np.sin(X), rng=np.random.default_rng(0))
    >>> bool(np.mean((values - np.sin(X)) ** 2) < 0.01), learner.shared_basis
    (True, False)
    """

    def __init__(self, hidden: int = 32, steps: int = 200, lr: float = 0.01) -> None:
        self.hidden = check_int("hidden", hidden, minimum=1)
        self.steps = check_int("steps", steps, minimum=1)
        self.lr = check_positive("lr", lr)

    def fit(
        self, X: ArrayLike, query: ArrayLike, *, rng: np.random.Generator
    ) -> tuple[FloatArray, _Network]:
        """Adam on ½·mean‖net(x) − q‖² from a LeCun-normal initialisation."""
        features, targets = _as_queries(X, query)
        m, d = features.shape
        c = targets.shape[1]
        params = [
            rng.standard_normal((d, self.hidden)) / math.sqrt(d),
            np.zeros(self.hidden),
            rng.standard_normal((self.hidden, c)) / math.sqrt(self.hidden),
            np.zeros(c),
        ]
        first = [np.zeros_like(p) for p in params]
        second = [np.zeros_like(p) for p in params]
        for step in range(1, self.steps + 1):
            W1, b1, W2, b2 = params
            hidden = np.tanh(features @ W1 + b1)
            error = (hidden @ W2 + b2 - targets) / m
            dhidden = (error @ W2.T) * (1.0 - hidden * hidden)
            grads = [features.T @ dhidden, dhidden.sum(0), hidden.T @ error, error.sum(0)]
            for index, grad in enumerate(grads):
                first[index] = 0.9 * first[index] + 0.1 * grad
                second[index] = 0.999 * second[index] + 0.001 * grad * grad
                corrected = first[index] / (1 - 0.9**step)
                scale = np.sqrt(second[index] / (1 - 0.999**step)) + 1e-8
                params[index] = params[index] - self.lr * corrected / scale
        network = _Network(*params)
        return network(features), network

    def evaluate(self, function: Any, X: ArrayLike) -> FloatArray:
        """The network's output on ``X``."""
        result: FloatArray = function(np.asarray(X, dtype=np.float64))
        return result


class InterpolatingLearner(WeakLearner):
    """Exact oracle (γ = 1) on the client's points, or a deliberately weak top-k one.

    The fitted function equals the query on the client's points (1-nearest-neighbour value
    elsewhere). With ``keep = k`` only the k entries of the query largest in magnitude are kept
    and all others are 0: ⟨h, q⟩ ≥ (k/(Mc))‖q‖², a weak oracle whose error does not vanish where
    the query does not.

    Examples
    --------
    >>> X = np.array([[0.0], [1.0], [2.0]])
    >>> q = np.array([[1.0], [-3.0], [2.0]])
    >>> InterpolatingLearner().fit(X, q, rng=np.random.default_rng(0))[0].ravel().tolist()
    [1.0, -3.0, 2.0]
    >>> weak = InterpolatingLearner(keep=1)
    >>> values, h = weak.fit(X, q, rng=np.random.default_rng(0))
    >>> values.ravel().tolist(), weak.evaluate(h, [[1.1]]).ravel().tolist()
    ([0.0, -3.0, 0.0], [-3.0])
    """

    def __init__(self, keep: int | None = None) -> None:
        self.keep = None if keep is None else check_int("keep", keep, minimum=1)

    def fit(
        self, X: ArrayLike, query: ArrayLike, *, rng: np.random.Generator
    ) -> tuple[FloatArray, tuple[FloatArray, FloatArray]]:
        """The query itself (or its top-k entries) as a lookup table on X."""
        features, targets = _as_queries(X, query)
        values = targets.copy()
        if self.keep is not None and self.keep < values.size:
            flat = np.abs(values).ravel()
            cut = np.argpartition(flat, flat.size - self.keep)[: flat.size - self.keep]
            values.ravel()[cut] = 0.0
        return values.copy(), (features.copy(), values)

    def evaluate(self, function: Any, X: ArrayLike) -> FloatArray:
        """Table values at the nearest stored point."""
        points, values = function
        queries = np.asarray(X, dtype=np.float64)
        distances = (
            (queries * queries).sum(1)[:, None]
            - 2.0 * queries @ points.T
            + (points * points).sum(1)[None, :]
        )
        result: FloatArray = values[np.argmin(distances, axis=1)]
        return result
