"""One contract, run against every integer-noise sampler (exact DG, fast DG in both regimes, DLap).

The quick distribution checks here use N = 50 000 draws per sampler with a Bonferroni-corrected
family-wise error of 1e-6 over all samplers and checks; the σ-sensitive statistical suite lives in
test_statistics.py.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from fractions import Fraction

import numpy as np
import pytest
from numpy.typing import NDArray
from scipy import stats

from dpquantile import (
    MAX_EXACT_SIGMA,
    MAX_FAST_SIGMA,
    ExactDiscreteGaussian,
    ExactDiscreteLaplace,
    FastDiscreteGaussian,
    IntegerNoiseSampler,
    sample_discrete_gaussian,
    sample_discrete_gaussian_exact,
    sample_discrete_laplace,
)
from secagg.randomness import KeystreamRandom

FACTORIES: dict[str, Callable[[], IntegerNoiseSampler]] = {
    "exact-gaussian-0.5": lambda: ExactDiscreteGaussian(0.5),
    "exact-gaussian-3.7": lambda: ExactDiscreteGaussian(3.7),
    "exact-gaussian-1e5": lambda: ExactDiscreteGaussian(1e5),
    "exact-gaussian-sqrt2": lambda: ExactDiscreteGaussian.from_variance(Fraction(2)),
    "fast-gaussian-2": lambda: FastDiscreteGaussian(2.0),
    "fast-gaussian-63.5": lambda: FastDiscreteGaussian(63.5),
    "fast-gaussian-1000": lambda: FastDiscreteGaussian(1000.0),
    "fast-gaussian-1234.567": lambda: FastDiscreteGaussian(1234.567),
    "exact-laplace-1.5": lambda: ExactDiscreteLaplace(1.5),
    "exact-laplace-0.3": lambda: ExactDiscreteLaplace(0.3),
}
# The law each sampler was *asked* for, written here from its definition (never the sampler's own
# pmf): N_ℤ(0, σ²) ∝ exp(−x²/2σ²), DLap(t) ∝ exp(−|x|/t).
REQUESTED: dict[str, tuple[str, float]] = {
    "exact-gaussian-0.5": ("gaussian", 0.5),
    "exact-gaussian-3.7": ("gaussian", 3.7),
    "exact-gaussian-1e5": ("gaussian", 1e5),
    "exact-gaussian-sqrt2": ("gaussian", math.sqrt(2.0)),
    "fast-gaussian-2": ("gaussian", 2.0),
    "fast-gaussian-63.5": ("gaussian", 63.5),
    "fast-gaussian-1000": ("gaussian", 1000.0),
    "fast-gaussian-1234.567": ("gaussian", 1234.567),
    "exact-laplace-1.5": ("laplace", 1.5),
    "exact-laplace-0.3": ("laplace", 0.3),
}
assert set(REQUESTED) == set(FACTORIES)


def requested_pmf(name: str, support: NDArray[np.int64]) -> NDArray[np.float64]:
    """The requested law on ``support``, normalised in closed form: Σ exp(−x²/2σ²) =
    σ√(2π)·(1 + 2Σₖ exp(−2π²σ²k²)) (Poisson summation), Σ exp(−|x|/t) = coth(1/2t)."""
    kind, parameter = REQUESTED[name]
    x = support.astype(np.float64)
    if kind == "gaussian":
        theta = 1.0 + 2.0 * sum(
            math.exp(-2.0 * math.pi**2 * parameter**2 * k**2) for k in range(1, 6)
        )
        return np.exp(-(x**2) / (2.0 * parameter**2)) / (parameter * math.sqrt(2 * math.pi) * theta)
    return np.exp(-np.abs(x) / parameter) / (1.0 / math.tanh(1.0 / (2.0 * parameter)))


QUICK_N = 50_000
CHECKS = 2  # χ² and symmetry
ALPHA = 1e-6 / (len(FACTORIES) * CHECKS)


class CountingSource:
    """A RandomSource that records how many bytes it handed out."""

    def __init__(self, seed: int) -> None:
        self._inner = KeystreamRandom(seed=seed)
        self.bytes_served = 0

    def fill(self, out: NDArray[np.generic] | bytearray | memoryview) -> None:
        self._inner.fill(out)
        self.bytes_served += memoryview(out).nbytes  # type: ignore[arg-type]

    def random_bytes(self, n: int) -> bytes:
        self.bytes_served += n
        return self._inner.random_bytes(n)


def _chi2_p(draws: NDArray[np.int64], name: str) -> float:
    """χ² of ``draws`` against the requested law of sampler ``name`` (bins expecting >= 50 and
    one tail bin)."""
    n = draws.size
    parameter = REQUESTED[name][1]
    reach = math.ceil(30 * parameter) + 10
    support = np.arange(-reach, reach + 1)
    pmf = requested_pmf(name, support)
    cdf = np.cumsum(pmf)
    # Interior [low, high]: each side's tail expects <= 25 draws; it forms the tail bin.
    low = int(support[np.argmax(n * cdf > 25)])
    high = int(support[len(support) - 1 - np.argmax(n * (1 - cdf[::-1] + pmf[::-1]) > 25)])
    edges, probabilities, mass = [low], [], 0.0
    for x in range(low, high + 1):
        mass += float(pmf[x + reach])
        if n * mass >= 50 and x < high:
            edges.append(x + 1)
            probabilities.append(mass)
            mass = 0.0
    if mass:
        if probabilities:
            probabilities[-1] += mass
        else:
            probabilities.append(mass)
        edges.append(high + 1)
    if len(edges) > len(probabilities) + 1:
        edges.pop(-2)
    counts = np.histogram(draws, bins=np.array(edges, dtype=np.float64) - 0.5)[0]
    tail = n - int(counts.sum())
    observed = np.append(counts, tail)
    expected = np.maximum(np.append(probabilities, max(0.0, 1 - sum(probabilities))) * n, 1e-300)
    return float(stats.chi2.sf(((observed - expected) ** 2 / expected).sum(), observed.size - 1))


class TestSamplerContract:
    """Everything a sampler promises, whatever its algorithm."""

    @pytest.fixture(params=sorted(FACTORIES))
    def name(self, request: pytest.FixtureRequest) -> str:
        return str(request.param)

    @pytest.fixture
    def sampler(self, name: str) -> IntegerNoiseSampler:
        return FACTORIES[name]()

    def test_satisfies_the_protocol(self, sampler: IntegerNoiseSampler) -> None:
        assert isinstance(sampler, IntegerNoiseSampler)

    @pytest.mark.parametrize("size", [1, 7, (3, 4), (2, 0, 5), 0, (0,)])
    def test_returns_int64_of_the_requested_shape(
        self, sampler: IntegerNoiseSampler, size: int | tuple[int, ...]
    ) -> None:
        draws = sampler.sample(size, rng=KeystreamRandom(seed=1))
        assert draws.dtype == np.int64
        assert draws.shape == (size if isinstance(size, tuple) else (size,))

    @pytest.mark.parametrize("size", [-1, (3, -2)])
    def test_negative_size_is_a_value_error(
        self, sampler: IntegerNoiseSampler, size: int | tuple[int, ...]
    ) -> None:
        with pytest.raises(ValueError, match=">= 0"):
            sampler.sample(size, rng=KeystreamRandom(seed=1))

    @pytest.mark.parametrize("size", [2.5, "3", None, True])
    def test_non_integer_size_is_a_type_error(
        self, sampler: IntegerNoiseSampler, size: object
    ) -> None:
        with pytest.raises(TypeError):
            sampler.sample(size, rng=KeystreamRandom(seed=1))  # type: ignore[arg-type]

    def test_same_stream_same_draws(self, sampler: IntegerNoiseSampler) -> None:
        first = sampler.sample(500, rng=KeystreamRandom(seed=42, label=b"x"))
        second = sampler.sample(500, rng=KeystreamRandom(seed=42, label=b"x"))
        np.testing.assert_array_equal(first, second)

    def test_different_streams_differ(self, sampler: IntegerNoiseSampler) -> None:
        first = sampler.sample(500, rng=KeystreamRandom(seed=1))
        second = sampler.sample(500, rng=KeystreamRandom(seed=2))
        assert not np.array_equal(first, second)

    def test_default_stream_is_fresh_os_randomness(self, sampler: IntegerNoiseSampler) -> None:
        assert not np.array_equal(sampler.sample(200), sampler.sample(200))

    def test_draws_only_from_the_injected_stream(self, sampler: IntegerNoiseSampler) -> None:
        source = CountingSource(seed=3)
        sampler.sample(1000, rng=source)
        assert source.bytes_served > 0

    def test_numpy_generators_are_refused(self, sampler: IntegerNoiseSampler) -> None:
        with pytest.raises(TypeError, match="cryptographic"):
            sampler.sample(3, rng=np.random.default_rng(0))  # type: ignore[arg-type]

    def test_non_sources_are_refused(self, sampler: IntegerNoiseSampler) -> None:
        with pytest.raises(TypeError, match="RandomSource"):
            sampler.sample(3, rng=b"seed")  # type: ignore[arg-type]

    def test_tv_bound_is_tiny(self, sampler: IntegerNoiseSampler) -> None:
        assert 0.0 <= sampler.tv_bound < 1e-57

    def test_pmf_is_a_distribution_with_the_stated_variance(
        self, sampler: IntegerNoiseSampler
    ) -> None:
        reach = math.ceil(60 * math.sqrt(sampler.variance())) + 10
        x = np.arange(-reach, reach + 1)
        pmf = sampler.pmf(x)
        assert pmf.sum() == pytest.approx(1.0, abs=1e-12)
        assert (x**2 * pmf).sum() == pytest.approx(sampler.variance(), rel=1e-9)

    def test_pmf_is_the_requested_law(self, sampler: IntegerNoiseSampler, name: str) -> None:
        parameter = REQUESTED[name][1]
        support = np.arange(-math.ceil(10 * parameter) - 5, math.ceil(10 * parameter) + 6)
        np.testing.assert_allclose(
            sampler.pmf(support), requested_pmf(name, support), rtol=1e-9, atol=1e-300
        )

    def test_distribution_matches_the_requested_law(
        self, sampler: IntegerNoiseSampler, name: str
    ) -> None:
        draws = sampler.sample(QUICK_N, rng=KeystreamRandom(seed=2024))
        assert _chi2_p(draws, name) >= ALPHA

    def test_distribution_is_symmetric(self, sampler: IntegerNoiseSampler) -> None:
        draws = sampler.sample(QUICK_N, rng=KeystreamRandom(seed=7))
        positive, negative = int((draws > 0).sum()), int((draws < 0).sum())
        z = (positive - negative) / math.sqrt(max(1, positive + negative))
        assert abs(z) <= stats.norm.isf(ALPHA / 2)

    def test_batches_are_identically_distributed(
        self, sampler: IntegerNoiseSampler, name: str
    ) -> None:
        """Many small calls on one stream follow the requested law too."""
        stream = KeystreamRandom(seed=11)
        small = np.concatenate([sampler.sample(7, rng=stream) for _ in range(2000)])
        assert _chi2_p(small, name) >= ALPHA


@pytest.mark.parametrize(
    "factory", [ExactDiscreteGaussian, FastDiscreteGaussian, ExactDiscreteLaplace]
)
@pytest.mark.parametrize("bad", [0.0, -1.0, math.nan, math.inf, -math.inf])
def test_bad_scales_are_value_errors(factory: Callable[[float], object], bad: float) -> None:
    with pytest.raises(ValueError, match=r"finite number > 0"):
        factory(bad)


@pytest.mark.parametrize(
    "factory, limit",
    [
        (ExactDiscreteGaussian, MAX_EXACT_SIGMA),
        (FastDiscreteGaussian, MAX_FAST_SIGMA),
        (ExactDiscreteLaplace, MAX_EXACT_SIGMA),
    ],
)
def test_scales_above_the_limit_are_value_errors(
    factory: Callable[[float], object], limit: float
) -> None:
    factory(limit)
    with pytest.raises(ValueError, match="at most"):
        factory(limit * 2)


@pytest.mark.parametrize(
    "factory", [ExactDiscreteGaussian, FastDiscreteGaussian, ExactDiscreteLaplace]
)
@pytest.mark.parametrize("bad", [True, "1.0", None, 1 + 0j])
def test_non_numbers_are_type_errors(factory: Callable[[object], object], bad: object) -> None:
    with pytest.raises(TypeError):
        factory(bad)


def test_fraction_and_float_sigma_agree() -> None:
    """σ = 1.5 as a float and as Fraction(3, 2) is the same exact rational, so the same draws."""
    a = ExactDiscreteGaussian(1.5).sample(100, rng=KeystreamRandom(seed=1))
    b = ExactDiscreteGaussian(Fraction(3, 2)).sample(100, rng=KeystreamRandom(seed=1))
    np.testing.assert_array_equal(a, b)
    assert ExactDiscreteGaussian(0.1).sigma_squared == Fraction(0.1) ** 2


def test_functional_forms_match_the_classes() -> None:
    cases: list[
        tuple[Callable[..., NDArray[np.int64]], Callable[[float], IntegerNoiseSampler], float]
    ] = [
        (sample_discrete_gaussian_exact, ExactDiscreteGaussian, 2.5),
        (sample_discrete_gaussian, FastDiscreteGaussian, 250.0),
        (sample_discrete_laplace, ExactDiscreteLaplace, 2.5),
    ]
    for function, cls, scale in cases:
        np.testing.assert_array_equal(
            function(scale, 64, rng=KeystreamRandom(seed=9)),
            cls(scale).sample(64, rng=KeystreamRandom(seed=9)),
        )


def test_events_describe_the_samplers() -> None:
    exact = ExactDiscreteGaussian(2.0).event(1.0, dimension=10)
    assert exact.sampler_tv_bound == 0.0 and exact.rho == 0.125
    fast = FastDiscreteGaussian(2.0).event(1.0, dimension=10)
    assert fast.sampler_tv_bound == pytest.approx(10 * FastDiscreteGaussian(2.0).tv_bound)
    assert ExactDiscreteGaussian.from_variance(Fraction(2)).event(2.0).rho >= 1.0
    assert ExactDiscreteLaplace(Fraction(1, 3)).event(1.0).epsilon0 >= 3.0


def test_fast_sampler_rounds_sigma_squared_up_only_when_it_must() -> None:
    assert FastDiscreteGaussian(1e5).sampled_sigma_squared == 10**10
    assert FastDiscreteGaussian(63.9).sampled_sigma_squared == Fraction(63.9) ** 2
    sampler = FastDiscreteGaussian(1234.567)
    exact = Fraction(1234.567) ** 2
    assert exact <= sampler.sampled_sigma_squared <= exact * (1 + Fraction(1, 2**52))


@pytest.mark.parametrize("sigma", [4409.7, 1.1e6, float(MAX_FAST_SIGMA) - 1.0])
def test_the_fast_sampler_at_the_sigmas_the_noisy_averages_run_at(sigma: float) -> None:
    # The model-DP averages plan σ up to the fast sampler's limit 2^25 (grid units). At these σ
    # the requested law's bin masses are the normal CDF's to ~exp(−2π²σ²) (Poisson summation),
    # so 64 equiprobable bins give an exact χ² test; and the sample variance must be σ² within
    # its own 5·SE (N = 50 000: SE of s²/σ² is √(2/N) ≈ 0.0063). Error rate < ALPHA + 1e-6.
    draws = FastDiscreteGaussian(sigma).sample(QUICK_N, rng=KeystreamRandom(seed=99))
    edges = np.round(stats.norm.ppf(np.linspace(0, 1, 65)[1:-1]) * sigma)
    counts = np.bincount(np.searchsorted(edges, draws, side="right"), minlength=64)
    cuts = np.concatenate([[-np.inf], (edges - 0.5) / sigma, [np.inf]])
    probabilities = np.diff(stats.norm.cdf(cuts))
    expected = probabilities * QUICK_N
    chi2 = float(((counts - expected) ** 2 / expected).sum())
    assert stats.chi2.sf(chi2, 63) >= ALPHA
    ratio = float(np.var(draws.astype(np.float64))) / sigma**2
    assert abs(ratio - 1.0) <= 5 * math.sqrt(2.0 / QUICK_N)
