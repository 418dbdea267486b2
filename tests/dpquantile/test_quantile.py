"""The hierarchical histogram and the distributed DP quantile."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

from dpquantile import (
    DistributedDiscreteGaussian,
    HistogramTree,
    discrete_gaussian_variance,
    dp_quantile,
    quantile_noise_sigma,
)
from secagg import HeadroomError, TooFewSurvivorsError

trees = st.sampled_from([(2, 2), (2, 8), (2, 64), (4, 16), (4, 64), (3, 27), (8, 64)]).map(
    lambda kb: HistogramTree(kb[1], 0.0, 1.0, kb[0])
)


def bin_quantile(values: np.ndarray, q: float, tree: HistogramTree) -> float:
    """Reference: the right edge of the bin holding the empirical q-quantile."""
    index, _ = tree.bin_index(values)
    counts = np.bincount(index, minlength=tree.bins)
    j = int(np.flatnonzero(np.cumsum(counts) >= q * values.size)[0])
    return float(tree.edges[j + 1])


@settings(max_examples=60)
@given(trees, st.lists(st.floats(-0.5, 1.5), min_size=1, max_size=80), st.floats(0.01, 0.99))
def test_noise_free_tree_returns_the_exact_bin_quantile(
    tree: HistogramTree, values: list[float], q: float
) -> None:
    x = np.array(values)
    counts = tree.encode(x).sum(axis=0)
    by_partition = tree.quantile_from_cdf(tree.prefix_counts(counts), q, x.size, interpolate=False)
    consistent = np.cumsum(tree.make_consistent(counts, total=float(x.size)))
    by_leaves = tree.quantile_from_cdf(consistent, q, x.size, interpolate=False)
    assert by_partition == by_leaves == pytest.approx(bin_quantile(x, q, tree))


@settings(max_examples=60)
@given(trees, st.integers(0, 2**32), st.floats(0.5, 30.0))
def test_consistency_is_the_constrained_least_squares_fit(
    tree: HistogramTree, seed: int, noise: float
) -> None:
    rng = np.random.default_rng(seed)
    noisy = rng.normal(10.0, noise, tree.dimension)
    total = float(rng.integers(0, 500))
    leaves = tree.make_consistent(noisy, total=total)
    assert leaves.sum() == pytest.approx(total)
    # Independent solution: minimise ‖A x − h‖² subject to Σ x = total (KKT system), where row
    # r of A sums the leaves under tree node r.
    rows = []
    for size in tree.level_sizes:
        width = tree.bins // size
        for node in range(size):
            row = np.zeros(tree.bins)
            row[node * width : (node + 1) * width] = 1.0
            rows.append(row)
    a = np.array(rows)
    kkt = np.block([[2 * a.T @ a, np.ones((tree.bins, 1))], [np.ones((1, tree.bins)), 0.0]])
    solution = np.linalg.solve(kkt, np.concatenate([2 * a.T @ noisy, [total]]))[: tree.bins]
    assert np.allclose(leaves, solution, atol=1e-8 * max(1.0, np.abs(solution).max()))
    # Every parent of the projected tree is the sum of its children.
    consistent = np.concatenate([leaves.reshape(size, -1).sum(axis=1) for size in tree.level_sizes])
    assert np.allclose(tree.prefix_counts(consistent), np.cumsum(leaves))


@settings(max_examples=40)
@given(trees, st.integers(0, 2**32))
def test_estimate_is_monotone_in_q_for_a_fixed_noisy_tree(tree: HistogramTree, seed: int) -> None:
    rng = np.random.default_rng(seed)
    noisy = tree.encode(rng.random(50)).sum(axis=0) + rng.normal(0, 3, tree.dimension)
    for cdf in (tree.prefix_counts(noisy), np.cumsum(tree.make_consistent(noisy, 50.0))):
        for interpolate in (False, True):
            estimates = [
                tree.quantile_from_cdf(cdf, q, 50.0, interpolate=interpolate)
                for q in np.linspace(0.01, 0.99, 40)
            ]
            assert all(np.diff(estimates) >= 0)


def kls21_rho_by_hand(n: int, sigma: float, l1: float, l2: float, d: int) -> float:
    """KLS21 Thm. 1, written out: the smallest ξ + ρ over its three Rényi lines."""
    tau = 10 * sum(math.exp(-2 * math.pi**2 * sigma**2 * k / (k + 1)) for k in range(1, n))
    first = tau * d + l2**2 / (2 * n * sigma**2)
    second = 0.5 * (l2**2 / (n * sigma**2) + 2 * l1 * tau / (math.sqrt(n) * sigma) + tau**2 * d)
    third = 0.5 * (l2 / (math.sqrt(n) * sigma) + tau * math.sqrt(d)) ** 2
    return min(first, second, third)


def test_privacy_event_matches_a_hand_calculation() -> None:
    # b = 64 → L = 6 levels, d = 64 + 32 + … + 2 = 126; replace-one adjacency changes 2L = 12
    # counts by one: Δ₁ = 12, Δ₂ = √12. Without τ, ρ = Δ₂²/(2nσ²) = 0.05 at σ = √1.2 for n = 100;
    # τ (≈ 7.6e-5 there) pushes the smallest admissible σ slightly higher.
    sigma = quantile_noise_sigma(0.05, num_clients=100, bins=64)
    assert kls21_rho_by_hand(100, sigma, 12.0, math.sqrt(12.0), 126) <= 0.05
    assert kls21_rho_by_hand(100, sigma * (1 - 1e-5), 12.0, math.sqrt(12.0), 126) > 0.05
    assert math.sqrt(1.2) < sigma < math.sqrt(1.2) * 1.001
    values = np.linspace(0.0, 1.0, 100)
    result = dp_quantile(values, 0.5, lower=0.0, upper=1.0, rho=0.05, seed=0, secure=False, scale=1)
    assert result.sigma == sigma and result.scale == 1
    assert result.event == DistributedDiscreteGaussian(
        100,
        sigma,
        12.0,
        math.sqrt(12.0),
        126,
        sampler_tv_bound=result.event.sampler_tv_bound,
        neighbouring="replace_one",
    )
    assert result.rho == pytest.approx(kls21_rho_by_hand(100, sigma, 12.0, math.sqrt(12.0), 126))
    assert 0 < result.event.sampler_tv_bound < 100 * 126 * 2e-58  # n·d draws of the fast sampler
    flat = dp_quantile(
        values, 0.5, lower=0.0, upper=1.0, rho=0.05, seed=0, secure=False, mechanism="flat", scale=1
    )
    assert (flat.event.l1_sensitivity, flat.event.l2_sensitivity) == (2.0, math.sqrt(2.0))
    # Add/remove changes L = 6 counts: Δ₁ = 6, Δ₂ = √6; τ now dominates (σ = √0.6 ≈ 0.77 is
    # where τ·d stops being negligible), which the hand formula also shows.
    add_remove = quantile_noise_sigma(0.05, num_clients=100, bins=64, adjacency="add_remove")
    assert kls21_rho_by_hand(100, add_remove, 6.0, math.sqrt(6.0), 126) <= 0.05
    assert kls21_rho_by_hand(100, add_remove * (1 - 1e-5), 6.0, math.sqrt(6.0), 126) > 0.05
    assert add_remove > math.sqrt(0.6)


def test_default_scale_reaches_the_central_noise_level() -> None:
    # With counts scaled by s = ⌈2·√(2nρ)/Δ₂⌉ each client's σ is ≥ 2 grid units, τ vanishes,
    # and ρ = (sΔ₂)²/(2nσ²): the noise relative to the counts, σ/s, is Δ₂/√(2nρ) — the level a
    # trusted curator would need — instead of the τ floor of the unscaled counts.
    n, rho = 10_000, 0.125
    values = np.random.default_rng(0).random(n)
    result = dp_quantile(values, 0.9, lower=0.0, upper=1.0, rho=rho, seed=0, secure=False)
    s = math.ceil(2 * math.sqrt(2 * n * rho) / math.sqrt(12))
    assert result.scale == s == 29
    assert (result.event.l1_sensitivity, result.event.l2_sensitivity) == (
        12.0 * s,
        s * math.sqrt(12),
    )
    assert result.sigma >= 2.0
    assert result.sigma == pytest.approx(s * math.sqrt(12) / math.sqrt(2 * n * rho), rel=1e-5)
    assert kls21_rho_by_hand(n, result.sigma, 12.0 * s, s * math.sqrt(12), 126) <= rho
    unscaled = quantile_noise_sigma(rho, num_clients=n, bins=64)  # the τ floor, in counts
    assert result.sigma / result.scale < unscaled / 10


def test_secure_and_plain_paths_release_identical_sums() -> None:
    values = np.random.default_rng(1).chisquare(3, size=40)
    kwargs = dict(lower=0.0, upper=12.0, bins=16, rho=0.5, seed=7)
    for dropouts in (None, {"share_keys": [3], "masked_input": [5, 6], "unmask": [9]}):
        plain = dp_quantile(values, 0.8, secure=False, dropouts=dropouts, **kwargs)  # type: ignore[arg-type]
        secure = dp_quantile(values, 0.8, secure=True, dropouts=dropouts, **kwargs)  # type: ignore[arg-type]
        assert secure.secure and not plain.secure
        assert np.array_equal(secure.released, plain.released)
        assert secure.estimate == plain.estimate and secure.survivors == plain.survivors


def test_dropouts_never_overstate_privacy() -> None:
    values = np.random.default_rng(2).random(60)
    kwargs = dict(lower=0.0, upper=1.0, bins=16, rho=0.02, seed=3, secure=False)
    dropped = {"masked_input": list(range(20))}
    short = dp_quantile(values, 0.5, dropouts=dropped, **kwargs)  # type: ignore[arg-type]
    assert short.survivors == 40 and short.planned_survivors == 60
    assert short.privacy_shortfall and short.rho == pytest.approx(0.02 * 60 / 40, rel=1e-4)
    planned = dp_quantile(values, 0.5, dropouts=dropped, min_survivors=40, **kwargs)  # type: ignore[arg-type]
    assert not planned.privacy_shortfall and planned.rho <= 0.02
    assert planned.sigma / planned.scale > short.sigma / short.scale  # more noise per count


@pytest.mark.parametrize("secure", [False, True])
def test_refuse_shortfall_releases_nothing_below_the_planned_survivors(secure: bool) -> None:
    values = np.random.default_rng(4).random(12)
    kwargs: dict[str, object] = dict(lower=0.0, upper=1.0, bins=8, rho=0.5, seed=5, secure=secure)
    kwargs["neighbors"] = None
    dropped = {"masked_input": [0, 1, 2]}
    kwargs["dropouts"], kwargs["refuse_shortfall"] = dropped, True
    with pytest.raises(TooFewSurvivorsError, match="9"):
        dp_quantile(values, 0.5, min_survivors=10, **kwargs)  # type: ignore[arg-type]
    # At exactly the planned count the release goes ahead, within its ρ.
    ok = dp_quantile(values, 0.5, min_survivors=9, **kwargs)  # type: ignore[arg-type]
    assert ok.survivors == 9 and ok.rho <= 0.5


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"q": 0.0}, "q must lie"),
        ({"q": 1.0}, "q must lie"),
        ({"lower": 1.0, "upper": 1.0}, "lower < upper"),
        ({"bins": 48}, "power of the branching"),
        ({"rho": 0.0}, "rho must be"),
        ({"rho": float("nan")}, "rho must be"),
        ({"mechanism": "wavelet"}, "mechanism"),
        ({"values": [0.1, float("nan")]}, "NaN value at index 1"),
        ({"values": [0.1]}, "at least 2 clients"),
        ({"min_survivors": 0}, "min_survivors"),
    ],
)
def test_bad_arguments(kwargs: dict[str, object], match: str) -> None:
    arguments: dict[str, object] = {
        "values": [0.1, 0.5, 0.9],
        "q": 0.5,
        "lower": 0.0,
        "upper": 1.0,
        "rho": 1.0,
        "secure": False,
    }
    arguments.update(kwargs)
    with pytest.raises(ValueError, match=match):
        dp_quantile(**arguments)  # type: ignore[arg-type]


def test_modulus_too_small_names_the_bits_needed() -> None:
    with pytest.raises(HeadroomError, match="use at least") as info:
        dp_quantile(np.linspace(0, 1, 50), 0.5, lower=0.0, upper=1.0, rho=0.1, modulus_bits=6)
    assert info.value.required_bits > 6
    result = dp_quantile(
        np.linspace(0, 1, 50), 0.5, lower=0.0, upper=1.0, rho=0.1, seed=0, secure=False
    )
    assert result.modulus_bits == info.value.required_bits


def test_values_outside_the_range_are_clipped_and_counted() -> None:
    values = np.array([-5.0, 0.2, 0.4, 0.6, 9.0, np.inf])
    result = dp_quantile(values, 0.5, lower=0.0, upper=1.0, rho=5.0, seed=0, secure=False)
    assert result.clipped == 3


def test_cdf_error_variance_follows_the_noise_model() -> None:
    # Without consistency, Ĥ(j) − H(j) sums |P_j| tree nodes, each carrying the sum of n
    # clients' independent N_ℤ(0, σ²) noise divided by the scale s: variance |P_j|·n·Var/s².
    # For R independent releases, Σ_r (Ĥ(j) − H(j))² / variance is close to χ²_R (sums of n
    # discrete Gaussians are very nearly Gaussian). Three two-sided tests at α = 1e-7 each keep
    # the family-wise error below 1e-6; a variance off by 50 % moves the statistic by ≈ 9 s.d.
    n, bins, runs = 64, 16, 600
    tree = HistogramTree(bins, 0.0, 1.0)
    values = np.random.default_rng(5).random(n)
    truth = np.cumsum(tree.encode_flat(values).sum(axis=0))
    errors = []
    sigma, scale = 0.0, 1
    for seed in range(runs):
        result = dp_quantile(
            values,
            0.5,
            lower=0.0,
            upper=1.0,
            bins=bins,
            rho=0.3,
            seed=seed,
            secure=False,
            consistency=False,
        )
        sigma, scale = result.sigma, result.scale
        errors.append(result.cdf - truth)
    squared = np.square(np.array(errors))
    per_node = n * discrete_gaussian_variance(sigma) / scale**2  # the CDF is in counts
    for j, nodes in ((8, 1), (12, 2), (15, 4)):  # |P_j| for j = 8, 12, 15 with b = 16
        statistic = squared[:, j - 1].sum() / (nodes * per_node)
        p_value = 2 * min(stats.chi2.cdf(statistic, runs), stats.chi2.sf(statistic, runs))
        assert p_value > 1e-7, (j, statistic / runs)


def test_accuracy_improves_with_epsilon_and_consistency_helps() -> None:
    values = np.random.default_rng(8).chisquare(3, size=512)
    rank_error: dict[tuple[float, bool], float] = {}
    for rho in (0.002, 2.0):
        for consistency in (False, True):
            errors = []
            for seed in range(25):
                result = dp_quantile(
                    values,
                    0.9,
                    lower=0.0,
                    upper=16.0,
                    bins=64,
                    rho=rho,
                    seed=seed,
                    secure=False,
                    consistency=consistency,
                )
                errors.append(abs(np.mean(values <= result.estimate) - 0.9))
            rank_error[(rho, consistency)] = float(np.median(errors))
    assert rank_error[(2.0, True)] < rank_error[(0.002, True)]
    assert rank_error[(0.002, True)] <= rank_error[(0.002, False)]


@pytest.mark.parametrize("n", [8, 100, 1000])
def test_the_modulus_holds_every_clients_noise_not_one(n: int) -> None:
    # Recomputed here from its definition: the sum of n clients' σ²-subgaussian noise stays within
    # t·σ·√n in each of the D released coordinates except w.p. 2^-40, t = √(2 ln(2D·2^40)); the
    # ring must hold n·scale (each client's one-hot count per level) plus that. Sizing the noise
    # for one client (σ instead of σ√n) picks fewer bits at these n and fails this test.
    losses = np.linspace(0.0, 1.0, n)
    result = dp_quantile(losses, 0.5, lower=0.0, upper=1.0, bins=32, rho=0.5, secure=False, seed=1)
    dimension = result.released.size
    t = math.sqrt(2.0 * (math.log(2.0 * dimension) + 40.0 * math.log(2.0)))
    bound = math.ceil(t * result.sigma * math.sqrt(n))
    expected = (n * result.scale + bound).bit_length() + 1
    assert result.modulus_bits == expected
    with pytest.raises(HeadroomError):
        dp_quantile(
            losses, 0.5, lower=0.0, upper=1.0, bins=32, rho=0.5, secure=False, seed=1,
            modulus_bits=expected - 1,
        )
