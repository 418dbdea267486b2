"""Statistical building blocks of the audits, each with its source.

Everything here is a plain function of counts or samples: Clopper–Pearson intervals, a χ² test
against an exact pmf with pooled tails, the Gaussian trade-off curve and privacy profile, the
exact privacy profile of composed discrete Gaussians (direct pmf sums), and the one-run bound of
Steinke, Nasr and Jagielski (2023).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Sequence

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy import optimize, signal, stats

from dpquantile import discrete_gaussian_pmf

__all__ = [
    "ChiSquareResult",
    "chi_square_against_pmf",
    "clopper_pearson",
    "composed_discrete_gaussian_delta",
    "gaussian_delta",
    "gaussian_epsilon",
    "gaussian_trade_off",
    "one_run_epsilon_lower_bound",
    "one_sided_z",
    "threshold_epsilon_lower_bound",
]


def one_sided_z(alpha: float) -> float:
    """z with P[N(0,1) > z] = α.

    Examples
    --------
    >>> round(one_sided_z(0.025), 3)
    1.96
    """
    return float(stats.norm.isf(alpha))


def clopper_pearson(successes: int, trials: int, alpha: float) -> tuple[float, float]:
    """Two one-sided Clopper–Pearson bounds, each failing with probability ≤ α.

    Clopper & Pearson (1934): the lower bound is the α quantile of Beta(k, n − k + 1), the upper
    the 1 − α quantile of Beta(k + 1, n − k).

    Examples
    --------
    >>> low, high = clopper_pearson(50, 100, 0.025)
    >>> round(low, 3), round(high, 3)
    (0.398, 0.602)
    >>> clopper_pearson(0, 10, 0.05)[0]
    0.0
    """
    if not 0 <= successes <= trials or trials < 1:
        raise ValueError(f"need 0 <= successes <= trials, trials >= 1; got {successes}/{trials}")
    low = 0.0 if successes == 0 else float(stats.beta.ppf(alpha, successes, trials - successes + 1))
    high = (
        1.0
        if successes == trials
        else float(stats.beta.isf(alpha, successes + 1, trials - successes))
    )
    return low, high


class ChiSquareResult:
    """A χ² goodness-of-fit test result (statistic, degrees of freedom, p-value, bins).

    Examples
    --------
    >>> ChiSquareResult(3.0, 4, 0.56, 5).dof
    4
    """

    __slots__ = ("bins", "dof", "p_value", "statistic")

    def __init__(self, statistic: float, dof: int, p_value: float, bins: int) -> None:
        self.statistic = statistic
        self.dof = dof
        self.p_value = p_value
        self.bins = bins

    def __repr__(self) -> str:
        return (
            f"ChiSquareResult(statistic={self.statistic:.4g}, dof={self.dof}, "
            f"p_value={self.p_value:.3g}, bins={self.bins})"
        )


def chi_square_against_pmf(
    samples: ArrayLike,
    pmf: Callable[[NDArray[np.int64]], NDArray[np.float64]],
    *,
    min_expected: float = 5.0,
) -> ChiSquareResult:
    """Pearson's χ² of integer samples against an exact pmf, tails pooled into two bins.

    The central support is every integer whose expected count is ≥ ``min_expected``; everything
    left of it is one bin and everything right of it another (the tail bins), so all mass
    counts and a sampler that puts too much in the tails is caught (Cochran's rule for the
    expected counts).

    Examples
    --------
    >>> from secagg import KeystreamRandom
    >>> from dpquantile import ExactDiscreteGaussian, discrete_gaussian_pmf
    >>> x = ExactDiscreteGaussian(2.0).sample(20_000, rng=KeystreamRandom(seed=1))
    >>> result = chi_square_against_pmf(x, lambda k: discrete_gaussian_pmf(k, 2.0))
    >>> result.p_value > 1e-6
    True
    """
    values = np.asarray(samples, dtype=np.int64).ravel()
    n = values.size
    if n == 0:
        raise ValueError("no samples")
    # Find the central support by walking out from the mode until expected counts are small.
    reach = 1
    while True:
        points = np.arange(-reach, reach + 1, dtype=np.int64)
        if (
            n * float(pmf(np.array([-reach], dtype=np.int64))[0]) < min_expected
            and n * float(pmf(np.array([reach], dtype=np.int64))[0]) < min_expected
        ):
            break
        reach *= 2
    probabilities = pmf(points)
    central = np.flatnonzero(n * probabilities >= min_expected)
    if central.size == 0:
        central = np.array([int(np.argmax(probabilities))])
    low, high = int(points[central[0]]), int(points[central[-1]])
    support = np.arange(low, high + 1, dtype=np.int64)
    expected_central = n * pmf(support)
    inside = float(expected_central.sum()) / n
    # The two tails share the remaining mass by symmetry of the pmf's evaluation, computed as
    # 1 − (mass inside) split by the pmf itself over a wide window.
    wide = np.arange(low - 64 * (high - low + 1) - 64, low, dtype=np.int64)
    left_mass = float(pmf(wide).sum())
    right_mass = max(0.0, 1.0 - inside - left_mass)
    observed_central = np.bincount(
        values[(values >= low) & (values <= high)] - low, minlength=high - low + 1
    ).astype(np.float64)
    observed = np.concatenate(
        ([float(np.sum(values < low))], observed_central, [float(np.sum(values > high))])
    )
    expected = np.concatenate(([n * left_mass], expected_central, [n * right_mass]))
    keep = expected > 0
    # A tail bin with expected mass 0 that is hit is an impossible outcome.
    impossible = float(observed[~keep].sum())
    observed, expected = observed[keep], expected[keep]
    expected *= n / expected.sum()
    statistic = float(np.sum((observed - expected) ** 2 / expected))
    dof = max(1, observed.size - 1)
    p_value = 0.0 if impossible > 0 else float(stats.chi2.sf(statistic, dof))
    return ChiSquareResult(statistic, dof, p_value, int(observed.size))


# ----------------------------------------------------------------------- privacy profiles


def gaussian_delta(epsilon: float, mu: float) -> float:
    """δ(ε) of the Gaussian mechanism with μ = Δ/σ (Balle & Wang 2018, Thm. 8).

    δ = Φ(−ε/μ + μ/2) − e^ε·Φ(−ε/μ − μ/2).

    Examples
    --------
    >>> round(gaussian_delta(4.3772, 1.0) * 1e5, 3)
    1.0
    """
    if mu <= 0:
        return 0.0
    head = stats.norm.logcdf(-epsilon / mu + mu / 2)
    tail = stats.norm.logcdf(-epsilon / mu - mu / 2) + epsilon
    return float(max(0.0, math.exp(head) - math.exp(tail)))


def gaussian_epsilon(delta: float, mu: float) -> float:
    """The smallest ε with :func:`gaussian_delta` ≤ δ (Balle & Wang 2018).

    Examples
    --------
    >>> round(gaussian_epsilon(1e-5, 1.0), 4)
    4.3772
    """
    if mu <= 0 or gaussian_delta(0.0, mu) <= delta:
        return 0.0
    upper = 1.0
    while gaussian_delta(upper, mu) > delta:
        upper *= 2.0
    return float(optimize.brentq(lambda e: gaussian_delta(e, mu) - delta, 0.0, upper, xtol=1e-12))


def gaussian_trade_off(alpha: ArrayLike, mu: float) -> NDArray[np.float64]:
    """The trade-off curve G_μ(α) = Φ(Φ⁻¹(1 − α) − μ) (Dong, Roth, Su 2019, μ-GDP).

    Examples
    --------
    >>> round(float(gaussian_trade_off(0.5, 0.0)), 3)
    0.5
    """
    a = np.clip(np.asarray(alpha, dtype=np.float64), 0.0, 1.0)
    return np.asarray(stats.norm.cdf(stats.norm.isf(a) - mu), dtype=np.float64)


# Widest composed support convolved directly (beyond it, FFT).
_DIRECT_CONVOLUTION_POINTS = 1 << 17


def _flush_tiny(values: NDArray[np.float64]) -> NDArray[np.float64]:
    """Masses below 10⁻¹⁵⁰ set to 0, so that no product of two kept masses is subnormal:
    subnormal arithmetic made a direct convolution several times slower for some (σ, T)
    (audit 4's (5, 1, 89): 1.3 s → 0.3 s). Dropped, they move any δ(ε) by less than the
    support's size × 10⁻¹⁵⁰ — far below every δ the audits decide on."""
    values[values < 1e-150] = 0.0
    return values


@functools.lru_cache(maxsize=128)  # audit 4 asks for the same (σ, Δ, T) in several checks
def composed_discrete_gaussian_delta(
    sigma: float, sensitivity: float, rounds: int, *, then: Sequence[int] = ()
) -> Callable[[float], float]:
    """Exact δ(ε) of ``rounds`` discrete Gaussian releases, each of sensitivity Δ (direct sums),
    followed by one release of sensitivity m·Δ (same σ) for each integer m in ``then``.

    The privacy loss of N_ℤ(0,σ²)^T against N_ℤ(Δ,σ²)^T depends on the sum S = ΣXᵢ only:
    L = (TΔ² − 2ΔS)/(2σ²); the pmf of S is the T-fold convolution of the discrete Gaussian pmf
    (CKS20 §2 pmf, convolved numerically), and δ(ε) = E[(1 − e^(ε − L))₊] (the privacy profile,
    Balle & Wang 2018 Thm. 5; for T = 1 this is CKS20 Thm. 7). A release Y at m·Δ adds
    (m²Δ² − 2mΔY)/(2σ²): S becomes S + mY, whose pmf convolves in Y's stretched by m.

    Examples
    --------
    >>> delta = composed_discrete_gaussian_delta(1.0, 1.0, 1)
    >>> round(delta(4.4302) * 1e5, 2)
    1.0
    >>> then = composed_discrete_gaussian_delta(2.0, 1.0, 3, then=(1,))
    >>> abs(then(1.0) - composed_discrete_gaussian_delta(2.0, 1.0, 4)(1.0)) < 1e-12
    True
    """
    reach = math.ceil(40.0 * sigma) + 10
    support = np.arange(-reach, reach + 1, dtype=np.int64)
    pmf = _flush_tiny(discrete_gaussian_pmf(support, sigma))
    total = pmf.copy()
    low = -reach
    # Exponentiation by squaring keeps the number of convolutions at O(log T). Direct
    # convolution sums non-negative terms, so even 1e-10 tails keep ~1e-13 relative accuracy;
    # FFT's absolute error (~1e-17 of the peak) would not, so it only serves very wide supports.
    direct = (2 * reach + 1) * rounds <= _DIRECT_CONVOLUTION_POINTS

    def convolve(a: NDArray[np.float64], b: NDArray[np.float64]) -> NDArray[np.float64]:
        if direct:
            return _flush_tiny(np.asarray(np.convolve(a, b), dtype=np.float64))
        return np.asarray(np.clip(signal.fftconvolve(a, b), 0.0, None), dtype=np.float64)

    power, base, base_low = rounds - 1, pmf.copy(), -reach
    while power > 0:
        if power & 1:
            total = convolve(total, base)
            low += base_low
        power >>= 1
        if power:
            base = convolve(base, base)
            base_low *= 2
    shift = float(rounds)  # Σ of the squared multiples: T·1² then each m²
    for multiple in then:
        if isinstance(multiple, bool) or not isinstance(multiple, int) or multiple < 1:
            raise ValueError(f"multiples must be positive integers; got {multiple!r}")
        stretched = np.zeros(multiple * (pmf.size - 1) + 1)
        stretched[::multiple] = pmf
        total = convolve(total, stretched)
        low -= multiple * reach
        shift += multiple**2
    total /= total.sum()
    s = np.arange(low, low + total.size, dtype=np.float64)
    loss = (shift * sensitivity**2 - 2.0 * sensitivity * s) / (2.0 * sigma**2)

    def delta(epsilon: float) -> float:
        gain = -np.expm1(np.minimum(epsilon - loss, 700.0))
        return float(np.sum(total * np.clip(gain, 0.0, None)))

    return delta


def epsilon_from_delta_curve(delta_curve: Callable[[float], float], delta: float) -> float:
    """Invert a decreasing δ(ε) curve: the smallest ε with δ(ε) ≤ δ.

    Examples
    --------
    >>> round(epsilon_from_delta_curve(lambda e: gaussian_delta(e, 1.0), 1e-5), 4)
    4.3772
    """
    if delta_curve(0.0) <= delta:
        return 0.0
    upper = 1.0
    while delta_curve(upper) > delta:
        upper *= 2.0
        if upper > 1e6:
            return math.inf
    return float(optimize.brentq(lambda e: delta_curve(e) - delta, 0.0, upper, xtol=1e-12))


def threshold_epsilon_lower_bound(
    hits_on_one: int,
    trials_one: int,
    hits_on_zero: int,
    trials_zero: int,
    *,
    delta: float,
    alpha: float,
) -> float:
    """ε lower bound from one threshold test, with Clopper–Pearson bounds on both rates.

    With p = P[T ≥ c | D′] and q = P[T ≥ c | D], (ε, δ)-DP forces p ≤ e^ε q + δ, so
    ε ≥ log((p_low − δ)/q_high) with probability ≥ 1 − 2α (Clopper–Pearson on each side;
    the standard auditing argument of Jagielski, Ullman, Oprea 2020).

    Examples
    --------
    >>> round(threshold_epsilon_lower_bound(9000, 10000, 1000, 10000, delta=1e-5, alpha=1e-3), 2)
    2.09
    """
    p_low, _ = clopper_pearson(hits_on_one, trials_one, alpha)
    _, q_high = clopper_pearson(hits_on_zero, trials_zero, alpha)
    if p_low - delta <= 0 or q_high <= 0:
        return 0.0
    return max(0.0, math.log((p_low - delta) / q_high))


# ----------------------------------------------------------------------- one-run audit


def _one_run_p_value(m: int, r: int, v: int, epsilon: float, delta: float) -> float:
    """P[≥ v correct of r guesses] under (ε, δ)-DP (SNJ23 Thm. 5.2 with its δ term)."""
    q = 1.0 / (1.0 + math.exp(-epsilon))
    beta = float(stats.binom.sf(v - 1, r, q))
    if delta == 0.0:
        return beta
    alpha_term = 0.0
    running = 0.0
    pmf = stats.binom.pmf(np.arange(v - 1, -1, -1), r, q)
    for i in range(1, v + 1):
        running += float(pmf[i - 1])
        alpha_term = max(alpha_term, running / i)
    return min(1.0, beta + alpha_term * delta * 2 * m)


def one_run_epsilon_lower_bound(
    canaries: int, guesses: int, correct: int, *, delta: float, alpha: float
) -> float:
    """ε lower bound from one training run's canary guesses (Steinke, Nasr, Jagielski 2023).

    m canaries are each included with probability 1/2; an auditor makes r guesses of which v are
    right. Under (ε, δ)-DP, P[v' ≥ v] ≤ P[Binomial(r, e^ε/(1+e^ε)) ≥ v] + 2mδ·max_i(...)
    (SNJ23 Thm. 5.2 and its Algorithm); the largest ε rejected at level α is returned.

    Examples
    --------
    >>> round(one_run_epsilon_lower_bound(1000, 100, 100, delta=0.0, alpha=0.05), 2)
    3.49
    >>> one_run_epsilon_lower_bound(1000, 100, 50, delta=0.0, alpha=0.05)
    0.0
    """
    if not 0 <= correct <= guesses <= canaries:
        raise ValueError("need 0 <= correct <= guesses <= canaries")
    if guesses == 0 or _one_run_p_value(canaries, guesses, correct, 0.0, delta) >= alpha:
        return 0.0
    low, high = 0.0, 1.0
    while _one_run_p_value(canaries, guesses, correct, high, delta) < alpha:
        low, high = high, 2.0 * high
        if high > 100:
            return low
    for _ in range(50):
        middle = 0.5 * (low + high)
        if _one_run_p_value(canaries, guesses, correct, middle, delta) < alpha:
            low = middle
        else:
            high = middle
    return low
