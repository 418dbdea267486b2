"""KLS21's flattening (randomised Walsh–Hadamard rotation) and conditional rounding."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from protocols.aggregation import (
    AverageSettings,
    DiscreteGaussianNoise,
    geometric_median,
    secure_weighted_average,
)
from protocols.aggregation import secure_average as secure_average_module
from protocols.aggregation._quantization import _largest_within, plan_quantization
from protocols.aggregation._rotation import Rotation, padded_dimension, walsh_hadamard
from secagg import KeystreamRandom

finite = st.floats(-1e3, 1e3, allow_nan=False, allow_subnormal=False)


@settings(max_examples=50, deadline=None)
@given(st.integers(0, 10).flatmap(lambda k: arrays(np.float64, 1 << k, elements=finite)))
def test_walsh_hadamard_is_orthonormal_and_its_own_inverse(x: np.ndarray) -> None:
    y = walsh_hadamard(x)
    scale = max(1.0, float(np.abs(x).max()))
    assert np.linalg.norm(y) == pytest.approx(np.linalg.norm(x), rel=1e-12, abs=1e-12 * scale)
    np.testing.assert_allclose(walsh_hadamard(y), x, atol=1e-9 * scale)


def test_blockwise_rotation_is_orthonormal_and_keeps_padding_small() -> None:
    rng = np.random.default_rng(9)
    for dimension in (611, 10_001, 100_001, 7_851):
        rotation = Rotation.from_seed(dimension, KeystreamRandom(1, label=b"b"))
        assert rotation.padded - dimension <= dimension / 16 or rotation.padded <= 64
        x = rng.standard_normal(dimension)
        y = rotation.forward(x)
        assert y.size == rotation.padded
        assert np.linalg.norm(y) == pytest.approx(np.linalg.norm(x), rel=1e-12)
        np.testing.assert_allclose(rotation.inverse(y), x, atol=1e-9)
        # Flattened: a spike spreads evenly over its block, |y| = 1/√B everywhere in it.
        spike = np.zeros(dimension)
        spike[0] = 1.0
        block = rotation.forward(spike)[: rotation.block]
        np.testing.assert_allclose(np.abs(block), 1 / np.sqrt(rotation.block))


def test_walsh_hadamard_known_answer_and_bad_length() -> None:
    # H₄ = ½[[1,1,1,1],[1,−1,1,−1],[1,1,−1,−1],[1,−1,−1,1]] (Sylvester order).
    np.testing.assert_allclose(walsh_hadamard(np.array([1.0, 2.0, 3.0, 4.0])), [5, -1, -2, 0])
    with pytest.raises(ValueError, match="power-of-two"):
        walsh_hadamard(np.ones(3))


def test_the_signs_come_from_the_public_seed() -> None:
    a = Rotation.from_seed(611, KeystreamRandom(5, label=b"t"))
    b = Rotation.from_seed(611, KeystreamRandom(5, label=b"t"))
    c = Rotation.from_seed(611, KeystreamRandom(6, label=b"t"))
    assert a.padded == padded_dimension(611) == 640 and a.block == 128  # 4.7 % padding
    assert np.array_equal(a.signs, b.signs) and not np.array_equal(a.signs, c.signs)
    assert set(np.unique(a.signs).tolist()) == {-1.0, 1.0}


def rotated(**changes: Any) -> AverageSettings:
    return AverageSettings(clip=1.0, rotate=True, **changes)


@pytest.mark.parametrize("shape", ["spiky", "dense"])
def test_rotated_averages_are_exact_up_to_quantisation_at_low_bits(shape: str) -> None:
    # 20 clients, d = 1000 at 20 bits: the unrotated grid is 1/26 214 per unit; rotated ≈ 4×
    # finer. Spiky inputs (all mass on one coordinate, the same one for everyone) are the case
    # the rotation's probabilistic headroom must still hold; 30 seeds of it never wrap.
    n, d = 20, 1000
    vectors = np.zeros((n, d))
    if shape == "spiky":
        vectors[:, 7] = 1.0
    else:
        vectors = np.random.default_rng(1).standard_normal((n, d))
        vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    exact = vectors.mean(axis=0)
    flat_plan = plan_quantization(
        n, d + 1, 1.0, math.sqrt(1 + 0.25**2), 20, None, None, n, "add_remove", True
    )
    plain_plan = plan_quantization(n, d + 1, 1.0, math.sqrt(1 + 0.25**2), 20, None, None, n)
    assert flat_plan.quantizer.scale > 3.5 * plain_plan.quantizer.scale
    for seed in range(30):
        result = secure_weighted_average(
            vectors,
            np.ones(n),
            settings=rotated(bits=20, quantize=True),
            weight_cap=1.0,
            seed=seed,
            secure=False,
            dropouts=None,
        )
        step = result.quantization_step
        assert step is not None and step == pytest.approx(1 / flat_plan.quantizer.scale)
        # Rounding error: < 1 grid unit per client and coordinate, rotated back (orthonormal).
        assert np.linalg.norm(result.average - exact) < 2 * math.sqrt(d + 1) * step


def test_secure_and_plain_agree_bit_for_bit_with_rotation_and_noise() -> None:
    vectors = np.random.default_rng(2).standard_normal((6, 50))
    noisy = rotated(bits=32, noise=DiscreteGaussianNoise(rho=1.0), rounding_beta=math.exp(-0.5))
    secure = secure_weighted_average(vectors, np.ones(6), settings=noisy, weight_cap=1.0, seed=4)
    plain = secure_weighted_average(
        vectors, np.ones(6), settings=noisy, weight_cap=1.0, seed=4, secure=False
    )
    np.testing.assert_array_equal(secure.average, plain.average)
    assert secure.event is not None and secure.event.dimension == 64


def test_conditional_rounding_enforces_the_calibrated_norm(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[tuple[np.ndarray, float | None]] = []
    original = secure_average_module._client_row

    def spy(*args: Any, **options: Any) -> Any:
        row = original(*args, **options)
        plan = args[2]
        quiet = original(args[0], args[1], _without_noise(plan), *args[3:], **options)
        seen.append((quiet, plan.rounding_bound))
        return row

    monkeypatch.setattr(secure_average_module, "_client_row", spy)
    vectors = np.random.default_rng(3).standard_normal((8, 1000))
    conditional = rotated(
        bits=14, noise=DiscreteGaussianNoise(rho=0.5), rounding_beta=math.exp(-0.5)
    )
    result = secure_weighted_average(
        vectors, np.ones(8), settings=conditional, weight_cap=1.0, seed=1, secure=False
    )
    assert seen and all(bound is not None for _, bound in seen)
    for quiet, bound in seen:
        assert bound is not None and float(np.linalg.norm(quiet)) <= bound
    plain = secure_weighted_average(
        vectors,
        np.ones(8),
        settings=rotated(bits=14, noise=DiscreteGaussianNoise(rho=0.5)),
        weight_cap=1.0,
        seed=1,
        secure=False,
    )
    assert result.event is not None and plain.event is not None
    assert result.quantization_step is not None and plain.quantization_step is not None
    # KLS21 Prop. 22: a smaller Δ₂ at 14 bits (c·s ≈ 750 against √D = 32), so less noise.
    sigma = result.event.sigma * result.quantization_step
    assert sigma < 0.98 * plain.event.sigma * plain.quantization_step


def _without_noise(plan: Any) -> Any:
    import dataclasses  # noqa: PLC0415

    return dataclasses.replace(plan, mechanism=None)


def test_the_rotated_noise_has_the_planned_spread_in_model_units() -> None:
    # The noise of m survivors, rotated back, is an orthonormal mix of independent N_Z(0, σ²):
    # per coordinate SD √m·σ·step. With d = 2000 the sample SD is within ±15 % except w.p. <1e-9.
    n, d = 10, 2000
    vectors = np.zeros((n, d))
    noisy = rotated(noise=DiscreteGaussianNoise(rho=0.5))
    result = secure_weighted_average(
        vectors, np.ones(n), settings=noisy, weight_cap=1.0, seed=3, secure=False
    )
    assert result.event is not None and result.quantization_step is not None
    expected = math.sqrt(n) * result.event.sigma * result.quantization_step / result.weight_sum
    assert np.std(result.average) == pytest.approx(expected, rel=0.15)


def test_a_rotated_session_keeps_one_key_setup() -> None:
    points = np.random.default_rng(4).standard_normal((8, 20))
    result = geometric_median(
        points,
        settings=AverageSettings(bits=64, clip=10.0, rotate=True),
        max_iterations=3,
        ftol=0.0,
        seed=1,
    )
    assert result.iterative is not None
    first = result.iterative.results[0].secure_sum
    assert first is not None and first.total.shape == (32,)  # 20 + 1 + 1 → padded to 32
    assert result.num_secure_averages == 4
    plain = geometric_median(points, secure=False, max_iterations=3, ftol=0.0)
    np.testing.assert_allclose(result.median, plain.median, atol=1e-6)


def test_the_effective_weight_certificate_is_not_claimed_for_rotated_rows() -> None:
    with pytest.raises(ValueError, match="unrotated"):
        AverageSettings(clip=1.0, rotate=True, max_effective_weight=0.5)


@settings(max_examples=200, deadline=None)
@given(
    slope=st.floats(1e-3, 1e6),
    clients=st.integers(1, 64),
    budget=st.integers(64, 2**40),
    start=st.floats(1e-3, 1e12),
)
def test_the_scale_fix_up_bisects_to_the_largest_admissible_scale(
    slope: float, clients: int, budget: int, start: float
) -> None:
    # A step-function bound n·⌈a·s⌉ like the worst-case signal bound; from far above the
    # boundary the fix-up must land on its last admissible float, not crawl down by 10⁻¹².
    def bound(scale: float) -> int:
        return clients * math.ceil(slope * scale)

    scale = _largest_within(bound, budget, start)
    assert 0 < scale <= start and bound(scale) <= budget
    assert scale == start or bound(math.nextafter(scale, math.inf)) > budget
