"""The secure weighted-average oracle: agreement with plain numpy, errors, headroom, effective
weights and the distributed discrete Gaussian noise."""

from __future__ import annotations

import logging
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dpquantile import DistributedDiscreteGaussian, ZCDPAccountant, kls21_sensitivities
from protocols.aggregation import (
    WEIGHT_COORDINATE_SCALE,
    AverageResult,
    AverageSettings,
    DiscreteGaussianNoise,
    EffectiveWeightError,
    ZeroWeightSumError,
    secure_weighted_average,
)
from secagg import HeadroomError, TooFewSurvivorsError, plain_outcome, secure_sum


def clients(n: int = 8, d: int = 20, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    return rng.standard_normal((n, d)), rng.uniform(0.5, 2.0, n)


def exact_average(vectors: np.ndarray, weights: np.ndarray, keep: list[int]) -> np.ndarray:
    return (weights[keep] @ vectors[keep]) / weights[keep].sum()


def quantisation_bound(result: AverageResult) -> float:
    """|q − x·scale| < 1 per client and coordinate, and |average| ≤ clip: a deterministic bound."""
    assert result.quantization_step is not None
    survivors = len(result.survivors)
    return (
        survivors
        * result.quantization_step
        * (1 + 1 / WEIGHT_COORDINATE_SCALE)
        / (
            result.weight_sum
            - survivors * result.quantization_step / (WEIGHT_COORDINATE_SCALE * result.clip)
        )
    )


# -- agreement of the three paths ------------------------------------------------------------------


@pytest.mark.parametrize(("bits", "neighbors"), [(32, None), (20, None), (64, 4)])
def test_secure_agrees_with_exact_to_quantisation_error(bits: int, neighbors: int | None) -> None:
    vectors, weights = clients()
    secure = secure_weighted_average(
        vectors, weights, bits=bits, clip=10.0, weight_cap=2.0, neighbors=neighbors, seed=1
    )
    exact = secure_weighted_average(vectors, weights, clip=10.0, weight_cap=2.0, secure=False)
    assert exact.quantization_step is None and exact.bits is None and exact.secure_sum is None
    assert secure.secure and secure.bits == bits and secure.secure_sum is not None
    np.testing.assert_allclose(exact.average, exact_average(vectors, weights, list(range(8))))
    assert np.abs(secure.average - exact.average).max() <= quantisation_bound(secure)
    assert secure.weight_sum == pytest.approx(weights.sum(), abs=8 * secure.quantization_step / 2.5)


def test_quantised_plain_path_reproduces_the_secure_integers() -> None:
    vectors, weights = clients(n=6, d=30, seed=4)
    kwargs = dict(clip=6.0, weight_cap=2.0, seed=9, dropouts={"masked_input": [2], "unmask": [4]})
    secure = secure_weighted_average(vectors, weights, **kwargs)  # type: ignore[arg-type]
    plain = secure_weighted_average(vectors, weights, secure=False, quantize=True, **kwargs)  # type: ignore[arg-type]
    assert secure.survivors == plain.survivors == (0, 1, 3, 4, 5)
    assert np.array_equal(secure.average, plain.average)
    assert secure.weight_sum == plain.weight_sum


def test_seed_is_recorded_and_reproducible() -> None:
    vectors, weights = clients(n=4, d=5)
    first = secure_weighted_average(vectors, weights, bits=16, clip=5.0, seed=3)
    again = secure_weighted_average(vectors, weights, bits=16, clip=5.0, seed=3)
    other = secure_weighted_average(vectors, weights, bits=16, clip=5.0, seed=4)
    assert first.seed == 3 and np.array_equal(first.average, again.average)
    assert not np.array_equal(first.average, other.average)  # stochastic rounding differs


@settings(max_examples=40, deadline=None)
@given(
    n=st.integers(2, 12),
    d=st.integers(1, 16),
    bits=st.integers(24, 64),
    seed=st.integers(0, 2**32),
    spread=st.floats(1e-3, 1e3),
)
def test_quantised_average_within_the_deterministic_bound(
    n: int, d: int, bits: int, seed: int, spread: float
) -> None:
    rng = np.random.default_rng(seed)
    vectors = rng.standard_normal((n, d)) * spread
    weights = rng.uniform(0.0, 1.0, n)
    weights[0] = 1.0
    quantised = secure_weighted_average(
        vectors, weights, bits=bits, secure=False, quantize=True, seed=seed
    )
    exact = secure_weighted_average(vectors, weights, secure=False)
    assert np.abs(quantised.average - exact.average).max() <= quantisation_bound(quantised)


def test_extreme_inputs_never_wrap() -> None:
    # Every client at +clip on one axis with the full weight cap: the largest possible sum.
    n, bits = 9, 12
    vectors = np.zeros((n, 3))
    vectors[:, 0] = 4.0
    result = secure_weighted_average(vectors, np.full(n, 3.0), bits=bits, clip=4.0, seed=2)
    assert result.average[0] == pytest.approx(4.0, abs=quantisation_bound(result))
    negative = secure_weighted_average(-vectors, np.full(n, 3.0), bits=bits, clip=4.0, seed=2)
    assert negative.average[0] == pytest.approx(-4.0, abs=quantisation_bound(negative))


def test_extreme_inputs_with_noise_never_wrap() -> None:
    # The noise tail is planned for (wrap probability ≤ 2^-40), so the sign of the sum survives.
    n = 9
    vectors = np.zeros((n, 3))
    vectors[:, 0] = 4.0
    noise = DiscreteGaussianNoise(rho=5.0)
    for sign in (1.0, -1.0):
        result = secure_weighted_average(
            sign * vectors, np.full(n, 3.0), bits=16, clip=4.0, weight_cap=3.0, noise=noise, seed=2
        )
        assert np.sign(result.average[0]) == sign and abs(result.average[0]) < 8.0


# -- clipping --------------------------------------------------------------------------------------


def test_vectors_and_weights_are_clipped_to_the_public_bounds() -> None:
    vectors = np.array([[3.0, 4.0], [0.0, 0.5]])
    result = secure_weighted_average(vectors, [10.0, 1.0], clip=1.0, weight_cap=1.0, secure=False)
    np.testing.assert_allclose(result.average, (np.array([0.6, 0.8]) + np.array([0.0, 0.5])) / 2)
    assert result.weight_sum == 2.0 and result.weight_cap == 1.0 and result.clip == 1.0


def test_default_clip_and_cap_are_the_largest_norm_and_weight() -> None:
    result = secure_weighted_average([[3.0, 4.0], [1.0, 0.0]], [1.0, 3.0], secure=False)
    assert result.clip == 5.0 and result.weight_cap == 3.0


# -- errors ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("secure", [True, False])
def test_non_finite_clients_are_rejected_and_never_averaged_in(secure: bool) -> None:
    vectors, weights = clients(n=6, d=4)
    vectors[1, 2] = np.nan
    vectors[3, 0] = np.inf
    weights[4] = np.nan
    result = secure_weighted_average(vectors, weights, clip=10.0, secure=secure, seed=0)
    assert result.rejected == (1, 3, 4)
    assert result.dropped == (1, 3, 4) and result.survivors == (0, 2, 5)
    expected = exact_average(vectors, weights, [0, 2, 5])
    tolerance = quantisation_bound(result) if secure else 1e-12
    assert np.abs(result.average - expected).max() <= tolerance


def test_huge_finite_vectors_are_not_rejected() -> None:
    vectors = np.array([[1e200, 1e200], [1.0, 1.0]])
    result = secure_weighted_average(vectors, [1.0, 1.0], clip=1.0, secure=False)
    assert result.rejected == () and np.isfinite(result.average).all()


def test_all_clients_rejected_is_too_few_survivors() -> None:
    with pytest.raises(TooFewSurvivorsError, match="non-finite"):
        secure_weighted_average([[np.nan], [np.inf]], [1.0, 1.0])


def test_weight_errors() -> None:
    vectors, _ = clients(n=3, d=2)
    with pytest.raises(ValueError, match="every weight is zero"):
        secure_weighted_average(vectors, [0.0, 0.0, 0.0], secure=False)
    with pytest.raises(ValueError, match="non-negative"):
        secure_weighted_average(vectors, [1.0, -1.0, 1.0], secure=False)
    with pytest.raises(ValueError, match="shape"):
        secure_weighted_average(vectors, [1.0, 1.0], secure=False)
    with pytest.raises(ValueError, match=r"\(n, d\)"):
        secure_weighted_average([[1.0, 2.0], [1.0]], [1.0, 1.0], secure=False)
    with pytest.raises(ValueError, match=r"\(n, d\)"):
        secure_weighted_average([1.0, 2.0], [1.0, 1.0], secure=False)
    with pytest.raises(ValueError, match="extras"):
        secure_weighted_average(vectors, [1.0] * 3, extras=np.ones((3, 2)), extra_bounds=(1.0,))


def test_zero_weight_clients_still_send() -> None:
    vectors, _ = clients(n=5, d=3)
    result = secure_weighted_average(vectors, [1.0, 0.0, 0.0, 2.0, 0.0], clip=10.0, seed=1)
    assert result.survivors == (0, 1, 2, 3, 4)
    assert result.secure_sum is not None and result.secure_sum.survivors == (0, 1, 2, 3, 4)
    assert np.abs(
        result.average - exact_average(vectors, np.array([1.0, 0, 0, 2.0, 0]), [0, 3])
    ).max() <= quantisation_bound(result)


def test_zero_released_weight_sum_raises() -> None:
    vectors, _ = clients(n=5, d=3)
    with pytest.raises(ZeroWeightSumError, match="weight sum"):
        secure_weighted_average(
            vectors, [1.0, 0.0, 0.0, 0.0, 0.0], dropouts={"masked_input": [0]}, secure=False
        )


@pytest.mark.parametrize("secure", [True, False])
def test_too_few_survivors_propagates(secure: bool) -> None:
    vectors, weights = clients(n=6, d=3)
    # Complete graph, t = 3 (default for 6): the round needs t + 1 = 4 clients to the end.
    ok = secure_weighted_average(
        vectors, weights, dropouts={"share_keys": [0], "unmask": [1]}, secure=secure, seed=0
    )
    assert ok.survivors == (1, 2, 3, 4, 5)
    with pytest.raises(TooFewSurvivorsError):
        secure_weighted_average(
            vectors, weights, dropouts={"share_keys": [0, 2], "unmask": [1]}, secure=secure, seed=0
        )


def test_plain_threshold_rule_matches_secure_sum() -> None:
    # The plain path's rule (secagg.plain_outcome: t + 1 clients, and the malicious mode's
    # consistency quorum) against the real protocol, complete graph.
    inputs = np.ones((6, 2), dtype=np.int64)
    assert plain_outcome(6, {"masked_input": [0, 1]}, threshold=3)[0] is False
    for dropped in range(4):
        dropouts = {"masked_input": list(range(dropped))}
        try:
            secure_sum(inputs, threshold=3, dropouts=dropouts, seed=0)
            secure_ok = True
        except TooFewSurvivorsError:
            secure_ok = False
        try:
            secure_weighted_average(
                inputs.astype(float), np.ones(6), threshold=3, dropouts=dropouts, secure=False
            )
            plain_ok = True
        except TooFewSurvivorsError:
            plain_ok = False
        assert secure_ok == plain_ok == (6 - dropped >= 5)


def test_single_client_is_too_few() -> None:
    with pytest.raises(TooFewSurvivorsError):
        secure_weighted_average([[1.0]], [1.0])


# -- headroom --------------------------------------------------------------------------------------


def test_headroom_error_names_the_bits_needed() -> None:
    vectors, weights = clients(n=40, d=2)
    with pytest.raises(HeadroomError, match="use at least 7 bits") as info:
        secure_weighted_average(vectors, weights, bits=6)
    assert info.value.required_bits == 7
    noise = DiscreteGaussianNoise(rho=0.001)  # σ ≥ 6 grid units: the noise tail alone overflows
    with pytest.raises(HeadroomError, match="use at least") as noisy:
        secure_weighted_average(vectors, weights, bits=8, clip=5.0, weight_cap=2.0, noise=noise)
    assert noisy.value.required_bits > 8


def test_finest_scale_fills_the_ring() -> None:
    vectors, weights = clients(n=10, d=2)
    result = secure_weighted_average(vectors, weights, bits=32, clip=4.0, weight_cap=2.0, seed=0)
    assert result.quantization_step is not None
    max_abs = math.ceil(8.0 / result.quantization_step)
    assert 10 * max_abs <= 2**31 - 1 < 10 * (max_abs + 1)


# -- effective weights -----------------------------------------------------------------------------


def test_effective_weights_reported_and_certified() -> None:
    vectors, _ = clients(n=5, d=3)
    weights = np.array([4.0, 1.0, 1.0, 1.0, 1.0])
    result = secure_weighted_average(vectors, weights, clip=10.0, weight_cap=4.0, seed=0)
    assert result.true_max_effective_weight == pytest.approx(0.5)
    assert result.certified_max_effective_weight == pytest.approx(4.0 / result.weight_sum)
    capped = secure_weighted_average(vectors, weights, clip=10.0, weight_cap=8.0, secure=False)
    assert capped.certified_max_effective_weight == pytest.approx(1.0)  # 8 / 8: no guarantee
    assert capped.true_max_effective_weight == pytest.approx(0.5)


# Subnormal weights are left out: λc·5e-324 underflows to a released weight sum of 0, which is
# ZeroWeightSumError (test_zero_released_weight_sum_is_a_typed_error), not a certificate question.
@settings(max_examples=30, deadline=None)
@given(
    weights=st.lists(st.floats(0.0, 10.0, allow_subnormal=False), min_size=2, max_size=10),
    cap=st.floats(0.1, 20.0),
)
def test_certificate_never_understates_the_true_effective_weight(
    weights: list[float], cap: float
) -> None:
    if max(weights) == 0:
        weights[0] = 1.0
    vectors = np.ones((len(weights), 2))
    result = secure_weighted_average(vectors, weights, weight_cap=cap, secure=False)
    assert result.true_max_effective_weight <= result.certified_max_effective_weight + 1e-12


@pytest.mark.parametrize("secure", [True, False])
def test_max_effective_weight_is_enforced(secure: bool) -> None:
    vectors, _ = clients(n=10, d=3)
    weights = np.ones(10)
    weights[9] = 2.0  # one client weighs twice the others
    ok = secure_weighted_average(
        vectors, weights, weight_cap=2.0, max_effective_weight=0.2, secure=secure, seed=0
    )
    assert ok.certified_max_effective_weight <= 0.2  # 2 / 11
    with pytest.raises(EffectiveWeightError, match="withheld") as info:
        secure_weighted_average(
            vectors,
            weights,
            weight_cap=2.0,
            max_effective_weight=0.2,
            secure=secure,
            seed=0,
            threshold=2,
            dropouts={"masked_input": [0, 1, 2, 3]},
        )
    assert info.value.limit == 0.2 and info.value.certified == pytest.approx(2 / 7, rel=1e-6)


def test_heavy_dropout_needs_the_semi_honest_mode() -> None:
    # Six of ten drop: below the malicious mode's consistency quorum (⌊(10 + 1)/2⌋ + 1 = 6),
    # fine for the semi-honest mode's threshold t = 2.
    vectors, weights = clients(n=10, d=3)
    run = {"threshold": 2, "dropouts": {"masked_input": [0, 1, 2, 3, 4, 5]}, "seed": 0}
    with pytest.raises(TooFewSurvivorsError, match="consistency quorum"):
        secure_weighted_average(vectors, weights, **run)  # type: ignore[arg-type]
    result = secure_weighted_average(vectors, weights, threat_model="semi-honest", **run)  # type: ignore[arg-type]
    assert result.survivors == (6, 7, 8, 9)


# -- noise -----------------------------------------------------------------------------------------


def test_noise_event_has_the_right_sensitivities_and_rho() -> None:
    vectors, weights = clients(n=8, d=30)
    noise = DiscreteGaussianNoise(rho=0.25)
    result = secure_weighted_average(
        vectors, weights, clip=5.0, weight_cap=2.0, noise=noise, seed=5
    )
    event = result.event
    assert isinstance(event, DistributedDiscreteGaussian) and result.quantization_step is not None
    assert event.num_clients == 8 and event.dimension == 31
    norm = 2.0 * 5.0 * math.sqrt(1 + WEIGHT_COORDINATE_SCALE**2)
    l1, l2 = kls21_sensitivities(norm, result.quantization_step, 31, beta=None)
    assert (event.l1_sensitivity, event.l2_sensitivity) == pytest.approx((l1, l2), rel=1e-12)
    assert result.planned_rho is not None and result.planned_rho <= 0.25
    assert event.rho == pytest.approx(0.25, rel=1e-6) and not result.privacy_shortfall
    assert ZCDPAccountant().compose(event).rho == event.rho
    assert event.sampler_tv_bound > 0  # the fast sampler's bound is carried, never dropped


def test_fewer_survivors_than_planned_reports_the_rho_delivered(
    caplog: pytest.LogCaptureFixture,
) -> None:
    vectors, weights = clients(n=8, d=10)
    noise = DiscreteGaussianNoise(rho=0.5)
    with caplog.at_level(logging.WARNING):
        result = secure_weighted_average(
            vectors,
            weights,
            clip=5.0,
            weight_cap=2.0,
            noise=noise,
            seed=5,
            dropouts={"masked_input": [0, 1]},
        )
    assert result.event is not None and result.event.num_clients == 6
    assert result.privacy_shortfall and result.event.rho > result.planned_rho  # type: ignore[operator]
    assert result.event.rho == pytest.approx(0.5 * 8 / 6, rel=1e-3)  # ρ ∝ 1/(survivors·σ²)
    assert "only 6 survived" in caplog.text
    planned_low = DiscreteGaussianNoise(rho=0.5, min_survivors=6)
    enough = secure_weighted_average(
        vectors,
        weights,
        clip=5.0,
        weight_cap=2.0,
        noise=planned_low,
        seed=5,
        dropouts={"masked_input": [0, 1]},
    )
    assert not enough.privacy_shortfall and enough.event is not None
    assert enough.event.rho == pytest.approx(0.5, rel=1e-6)


def test_noise_given_as_sigma_in_model_units() -> None:
    vectors, weights = clients(n=6, d=5)
    result = secure_weighted_average(
        vectors, weights, clip=5.0, weight_cap=2.0, noise=DiscreteGaussianNoise(sigma=0.01), seed=1
    )
    assert result.event is not None and result.quantization_step is not None
    assert result.event.sigma * result.quantization_step == pytest.approx(0.01, rel=1e-9)


def test_noisy_secure_and_plain_paths_are_identical() -> None:
    vectors, weights = clients(n=6, d=10)
    kwargs = dict(clip=5.0, weight_cap=2.0, noise=DiscreteGaussianNoise(rho=50.0), seed=8)
    secure = secure_weighted_average(vectors, weights, **kwargs)  # type: ignore[arg-type]
    plain = secure_weighted_average(vectors, weights, secure=False, **kwargs)  # type: ignore[arg-type]
    assert plain.event is not None and plain.bits == 32
    assert np.array_equal(secure.average, plain.average) and secure.event == plain.event


def test_noise_has_the_planned_variance() -> None:
    # The released numerator minus the exact one is Σ noise (plus rounding ≤ 1 grid unit per
    # client): per coordinate N_ℤ(0, nσ²). Over 4000 coordinates the sample variance is within
    # 15 % of nσ² except with probability < 1e-9 (chi-square, 6.7 standard deviations).
    n, d = 5, 4000
    vectors, weights = clients(n=n, d=d, seed=2)
    noise = DiscreteGaussianNoise(sigma=0.05)
    result = secure_weighted_average(
        vectors, weights, clip=100.0, weight_cap=2.0, noise=noise, seed=3, secure=False
    )
    exact = secure_weighted_average(vectors, weights, clip=100.0, weight_cap=2.0, secure=False)
    error = result.average * result.weight_sum - exact.average * exact.weight_sum
    assert np.var(error) == pytest.approx(n * 0.05**2, rel=0.15)


def test_noise_requires_public_bounds_and_quantisation() -> None:
    vectors, weights = clients(n=3, d=2)
    with pytest.raises(ValueError, match="public clip"):
        secure_weighted_average(vectors, weights, noise=DiscreteGaussianNoise(rho=1.0))
    with pytest.raises(ValueError, match="quantize=False"):
        AverageSettings(clip=1.0, noise=DiscreteGaussianNoise(rho=1.0), quantize=False)
    with pytest.raises(ValueError, match="secure=False"):
        secure_weighted_average(vectors, weights, quantize=False)


def test_settings_validation() -> None:
    with pytest.raises(ValueError, match="exactly one"):
        DiscreteGaussianNoise()
    with pytest.raises(ValueError, match="positive"):
        DiscreteGaussianNoise(rho=0.0)
    with pytest.raises(ValueError, match=r"\[1, 64\]"):
        AverageSettings(bits=65)
    with pytest.raises(TypeError):
        AverageSettings(bits=32.0)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"\(0, 1\]"):
        AverageSettings(max_effective_weight=1.5)
    with pytest.raises(TypeError, match="DiscreteGaussianNoise"):
        AverageSettings(clip=1.0, noise=0.5)  # type: ignore[arg-type]


# -- extras ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("secure", [True, False])
def test_extras_are_summed_and_clipped(secure: bool) -> None:
    vectors, weights = clients(n=4, d=3)
    extras = np.array([[1.0, -2.0], [2.0, 50.0], [3.0, 0.5], [4.0, 0.0]])
    result = secure_weighted_average(
        vectors, weights, clip=10.0, extras=extras, extra_bounds=(5.0, 10.0), secure=secure, seed=0
    )
    np.testing.assert_allclose(result.extras, [10.0, -2.0 + 10.0 + 0.5], atol=1e-6)
    view = result.server_view()
    assert np.array_equal(view.extras, result.extras) and view.survivors == result.survivors


def test_noise_needs_a_public_weight_cap() -> None:
    # With weight_cap=None the cap would be the largest private weight, so the noise's
    # sensitivity (and the recorded event) would depend on the data.
    vectors, weights = np.ones((4, 3)), np.array([1.0, 2.0, 3.0, 1000.0])
    noise = DiscreteGaussianNoise(rho=1e6)
    with pytest.raises(ValueError, match="public weight_cap"):
        secure_weighted_average(vectors, weights, clip=2.0, noise=noise, secure=False, seed=0)
    capped = secure_weighted_average(
        vectors, weights, clip=2.0, weight_cap=3.0, noise=noise, secure=False, seed=0
    )
    assert capped.event is not None


def test_zero_released_weight_sum_is_a_typed_error() -> None:
    # A positive but subnormal weight: its weight coordinate λc·β underflows to 0.
    with pytest.raises(ZeroWeightSumError, match="released weight sum"):
        secure_weighted_average(np.ones((2, 2)), [0.0, 5e-324], weight_cap=1.0, secure=False)
