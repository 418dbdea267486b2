"""The fixed denominator f·B·|survivors| (DP-FedAvg's, and Δ-FL's θ·|survivors| under model DP)."""

from __future__ import annotations

import numpy as np
import pytest

from protocols.aggregation import (
    AverageSettings,
    DiscreteGaussianNoise,
    secure_weighted_average,
    superquantile_aggregate,
)


def test_denominator_share_is_validated() -> None:
    with pytest.raises(ValueError, match="denominator_share applies to the fixed denominator"):
        AverageSettings(denominator_share=0.5)
    for bad in (0.0, 1.5, float("nan")):
        with pytest.raises(ValueError, match="denominator_share"):
            AverageSettings(denominator="survivors", denominator_share=bad)


@pytest.mark.parametrize("secure", [False, True])
def test_the_sum_is_divided_by_the_public_share_of_the_survivors(secure: bool) -> None:
    rng = np.random.default_rng(4)
    vectors = rng.uniform(-1, 1, size=(6, 5))
    weights = np.array([1.0, 0.0, 1.0, 1.0, 0.0, 1.0])
    settings = AverageSettings(clip=10.0, denominator="survivors", denominator_share=0.5)
    result = secure_weighted_average(
        vectors, weights, settings=settings, weight_cap=1.0, seed=3, secure=secure
    )
    expected = (weights @ vectors) / (0.5 * 6)  # not Σβᵢ = 4: the count is never read
    np.testing.assert_allclose(result.average, expected, atol=1e-6)


def test_all_zero_weights_release_noise_only_under_a_fixed_denominator() -> None:
    vectors = np.ones((5, 3))
    with pytest.raises(ValueError, match="every weight is zero"):
        secure_weighted_average(vectors, np.zeros(5), settings=AverageSettings(clip=1.0))
    settings = AverageSettings(clip=1.0, denominator="survivors")
    result = secure_weighted_average(
        vectors, np.zeros(5), settings=settings, weight_cap=1.0, seed=0, secure=True
    )
    np.testing.assert_allclose(result.average, 0.0, atol=1e-6)


def test_a_noisy_tail_over_a_fixed_denominator_is_released_even_when_empty() -> None:
    # A public threshold above every loss: without noise the tail is empty and "all" falls back;
    # with a fixed denominator the server cannot tell, so the tail's noisy sum is released once.
    rng = np.random.default_rng(0)
    updates = rng.uniform(-0.1, 0.1, size=(8, 4))
    losses = rng.uniform(0.0, 1.0, size=8)
    plain = superquantile_aggregate(
        updates, np.ones(8), losses, theta=0.5, threshold=2.0, settings=AverageSettings(clip=1.0)
    )
    assert plain.empty_tail and plain.fallback == "all" and plain.num_secure_averages == 2
    noise = DiscreteGaussianNoise(rho=1.0, min_survivors=8)
    fixed = AverageSettings(
        clip=1.0, noise=noise, denominator="survivors", denominator_share=0.5, rotate=True
    )
    result = superquantile_aggregate(
        updates,
        np.ones(8),
        losses,
        theta=0.5,
        threshold=2.0,
        settings=fixed,
        weight_cap=1.0,
        seed=1,
    )
    assert result.empty_tail and result.fallback is None and result.average is not None
    assert result.num_secure_averages == 1 and len(result.averages) == 1
    assert result.events and all(e.rho > 0 for e in result.events)


@pytest.mark.parametrize("secure", [False, True])
def test_a_fixed_denominator_sends_no_weight_coordinate(secure: bool) -> None:
    # The divisor is public, so the row's weight coordinate carries 0 and leaves Δ₂: the noise
    # is calibrated to c·s (+ rounding) instead of c·s·√(1 + λ²) — 3 % less noise at ε fixed.
    rng = np.random.default_rng(7)
    vectors = rng.normal(size=(8, 4))
    weights = np.ones(8)
    noise = DiscreteGaussianNoise(rho=0.5)
    released = AverageSettings(bits=32, clip=1.0, noise=noise)
    fixed = AverageSettings(bits=32, clip=1.0, noise=noise, denominator="survivors")
    kwargs = {"weight_cap": 1.0, "seed": 5, "secure": secure}
    by_count = secure_weighted_average(vectors, weights, settings=released, **kwargs)
    by_public = secure_weighted_average(vectors, weights, settings=fixed, **kwargs)
    assert by_count.event is not None and by_public.event is not None
    public_step, count_step = by_public.quantization_step, by_count.quantization_step
    assert public_step is not None and count_step is not None
    # Plain rounding: Δ₂ = s·c·√(1 + λ²·w) + √D with w = 1 (released) or 0 (fixed), D = 5.
    lam = 0.25
    assert by_public.event.l2_sensitivity == pytest.approx(1 / public_step + np.sqrt(5), rel=1e-9)
    assert by_count.event.l2_sensitivity == pytest.approx(
        np.sqrt(1 + lam**2) / count_step + np.sqrt(5), rel=1e-9
    )
    # In model units the noise is smaller by √(1 + λ²) (to the rounding terms, negligible here).
    ratio = (by_count.event.sigma * count_step) / (by_public.event.sigma * public_step)
    assert ratio == pytest.approx(np.sqrt(1 + lam**2), rel=1e-6)
    # What the caller is told: the public divisor, and each survivor's share ≤ 1/|survivors|.
    assert by_public.weight_sum == 8.0
    assert by_public.certified_max_effective_weight == pytest.approx(1 / 8)
