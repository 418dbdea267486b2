"""The one contribution layout: bounds of a row, decoding of a sum, validation."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dpquantile import kls21_sensitivities
from protocols.aggregation import (
    WEIGHT_COORDINATE_SCALE,
    AverageSettings,
    ContributionLayout,
    DiscreteGaussianNoise,
    secure_weighted_average,
)

finite = st.floats(-1e3, 1e3, allow_nan=False)


@st.composite
def layouts_and_clients(draw: st.DrawFn) -> tuple[ContributionLayout, list[tuple]]:
    d = draw(st.integers(0, 6))
    k = draw(st.integers(0, 3))
    layout = ContributionLayout(
        d,
        clip=draw(st.floats(0.01, 100.0)),
        weight_cap=draw(st.floats(0.01, 100.0)),
        extra_bounds=tuple(draw(st.lists(st.floats(0.01, 10.0), min_size=k, max_size=k))),
        weight_coordinate=draw(st.booleans()),
        unit=draw(st.sampled_from([1.0, 0.5, 7.0])),
    )
    clients = []
    for _ in range(draw(st.integers(1, 5))):
        vector = np.array(draw(st.lists(finite, min_size=d, max_size=d)), dtype=np.float64)
        norm = float(np.linalg.norm(vector))
        factor = 1.0 if norm <= layout.clip else layout.clip / norm
        weight = draw(st.floats(0.0, 1.0)) * layout.weight_cap
        extras = np.array(
            [draw(st.floats(-1.0, 1.0)) * b for b in layout.extra_bounds], dtype=np.float64
        )
        clients.append((vector, weight, extras, factor))
    return layout, clients


@settings(max_examples=200, deadline=None)
@given(layouts_and_clients())
def test_rows_meet_the_layouts_bounds_and_a_sum_decodes_to_the_blocks_sums(
    case: tuple[ContributionLayout, list[tuple]],
) -> None:
    layout, clients = case
    rows = [layout.encode(v, w, e, factor=f) for v, w, e, f in clients]
    slack = 1 + 1e-9
    for row in rows:
        assert row.shape == (layout.width,)
        assert float(np.abs(row).max(initial=0.0)) <= layout.magnitude * slack
        assert float(np.linalg.norm(row)) <= layout.l2_bound * slack
    decoded = layout.decode(np.sum(rows, axis=0))
    weighted = sum((v * (w * f) for v, w, _, f in clients), np.zeros(layout.dimension))
    np.testing.assert_allclose(decoded.weighted_sum, weighted, rtol=1e-9, atol=1e-9)
    weight_sum = sum(w for _, w, _, _ in clients) if layout.weight_coordinate else 0.0
    assert decoded.weight_sum == pytest.approx(weight_sum, rel=1e-9, abs=1e-9)
    extras = sum((e for _, _, e, _ in clients), np.zeros(len(layout.extra_bounds)))
    np.testing.assert_allclose(decoded.extras, extras, rtol=1e-9, atol=1e-9)
    # encode_sums is the same linear map, from the blocks' sums.
    np.testing.assert_allclose(
        layout.encode_sums(weighted, weight_sum, extras), np.sum(rows, axis=0), atol=1e-9
    )


def test_the_l2_bound_is_the_notes_formula_and_is_attained() -> None:
    # notes §2: B·c·√(1 + λ²(w + k)), attained by ‖w‖ = c, β = B, |eⱼ| = Eⱼ.
    layout = ContributionLayout(3, clip=2.0, weight_cap=5.0, extra_bounds=(1.0, 3.0))
    expected = 10.0 * math.sqrt(1 + WEIGHT_COORDINATE_SCALE**2 * 3)
    assert layout.l2_bound == pytest.approx(expected)
    row = layout.encode(np.array([2.0, 0.0, 0.0]), 5.0, np.array([1.0, -3.0]))
    assert float(np.linalg.norm(row)) == pytest.approx(expected)
    fixed = ContributionLayout(3, clip=2.0, weight_cap=5.0, weight_coordinate=False)
    assert fixed.l2_bound == pytest.approx(10.0)
    assert fixed.encode(np.ones(3), 5.0)[3] == 0.0


@pytest.mark.parametrize("denominator", ["released", "survivors"])
def test_the_secure_average_calibrates_for_the_layouts_bound(denominator: str) -> None:
    # The noise's Δ₂ is KLS21's for the layout's L2 bound at the grid step (with the weight
    # coordinate only when the denominator is released).
    vectors = np.random.default_rng(0).standard_normal((6, 4))
    settings_ = AverageSettings(
        clip=1.5,
        bits=40,
        noise=DiscreteGaussianNoise(rho=50.0),  # at ρ = 2 the noisy Σβ is ≤ 0 one time in 3
        denominator=denominator,  # type: ignore[arg-type]
    )
    result = secure_weighted_average(
        vectors,
        np.ones(6),
        settings=settings_,
        weight_cap=2.0,
        secure=False,
        extras=np.ones(6),
        extra_bounds=(1.0,),
        seed=0,
    )
    assert result.event is not None and result.quantization_step is not None
    layout = ContributionLayout(4, 1.5, 2.0, (1.0,), weight_coordinate=denominator == "released")
    _, l2 = kls21_sensitivities(layout.l2_bound, result.quantization_step, layout.width)
    assert result.event.l2_sensitivity == pytest.approx(l2, rel=1e-6)  # the scale's float nudge


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"dimension": -1}, "dimension"),
        ({"clip": 0.0}, "clip"),
        ({"weight_cap": float("nan")}, "weight_cap"),
        ({"extra_bounds": (1.0, -2.0)}, "extra bound"),
        ({"unit": 0.0}, "unit"),
    ],
)
def test_bad_layouts_are_refused(kwargs: dict[str, object], match: str) -> None:
    base: dict[str, object] = {"dimension": 2, "clip": 1.0, "weight_cap": 1.0}
    with pytest.raises(ValueError, match=match):
        ContributionLayout(**{**base, **kwargs})  # type: ignore[arg-type]


def test_decoding_a_sum_of_the_wrong_width_is_refused() -> None:
    with pytest.raises(ValueError, match="3 coordinates"):
        ContributionLayout(2, 1.0, 1.0).decode(np.zeros(4))
