"""Settings pass straight through every aggregation built on the secure average: each honours
all of an :class:`AverageSettings` or refuses what it cannot honour."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from protocols.aggregation import (
    AverageSettings,
    DiscreteGaussianNoise,
    EffectiveWeightError,
    SuperquantileResult,
    fedplus_aggregate,
    one_step_rfa,
    secure_coordinate_average,
    secure_weighted_average,
    superquantile_aggregate,
)
from secagg import TooFewSurvivorsError

POINTS = np.array([[0.0, 1.0], [1.0, 0.0], [0.5, 0.5]])
# One client holds 1/1.2 of the weight: the certified effective weight is 0.833 > 0.5.
HEAVY = np.array([1.0, 0.1, 0.1])

RNG = np.random.default_rng(0)
TEN = RNG.normal(size=(10, 3))
THREE_DROP = {"masked_input": [0, 1, 2]}  # 7 of 10: semi-honest completes, malicious refuses


def test_fedplus_mean_honours_max_effective_weight() -> None:
    """Regression: Fed+'s squared-ℓ2 path dropped max_effective_weight and released an
    average that secure_weighted_average withholds."""
    settings = AverageSettings(clip=2.0, max_effective_weight=0.5)
    with pytest.raises(EffectiveWeightError) as alone:
        secure_weighted_average(POINTS, HEAVY, weight_cap=1.0, settings=settings, seed=0)
    assert alone.value.certified == pytest.approx(1.0 / 1.2)
    for secure in (True, False):
        with pytest.raises(EffectiveWeightError) as fedplus:
            fedplus_aggregate(
                POINTS,
                HEAVY,
                regularizer="squared_l2",
                smoothing=1.0,
                settings=settings,
                weight_cap=1.0,
                secure=secure,
                seed=0,
            )
        assert fedplus.value.certified == pytest.approx(alone.value.certified)


Aggregation = Callable[[AverageSettings, bool], Any]


def _raised(result: SuperquantileResult) -> SuperquantileResult:
    """Δ-FL records a failed round instead of raising: raise it here."""
    if result.failure is not None:
        raise TooFewSurvivorsError(result.failure)
    return result


AGGREGATIONS: dict[str, Aggregation] = {
    "secure_weighted_average": lambda settings, secure: secure_weighted_average(
        TEN, np.ones(10), settings=settings, secure=secure, dropouts=THREE_DROP, seed=1
    ),
    "fedplus squared_l2": lambda settings, secure: fedplus_aggregate(
        TEN,
        np.ones(10),
        regularizer="squared_l2",
        smoothing=1.0,
        settings=settings,
        secure=secure,
        dropouts=THREE_DROP,
        seed=1,
    ),
    "one_step_rfa": lambda settings, secure: one_step_rfa(
        TEN, np.ones(10), settings=settings, secure=secure, dropouts=THREE_DROP, seed=1
    ),
    "superquantile_aggregate": lambda settings, secure: _raised(
        superquantile_aggregate(
            TEN,
            np.ones(10),
            np.arange(10.0),
            theta=1.0,
            settings=settings,
            secure=secure,
            dropouts=THREE_DROP,
            seed=1,
        )
    ),
    "secure_coordinate_average": lambda settings, secure: secure_coordinate_average(
        TEN, np.ones((10, 3)), settings=settings, secure=secure, dropouts=THREE_DROP, seed=1
    ),
}


@pytest.mark.parametrize("secure", [True, False])
@pytest.mark.parametrize("name", sorted(AGGREGATIONS))
def test_the_threat_model_reaches_the_secure_sum(name: str, secure: bool) -> None:
    aggregation = AGGREGATIONS[name]
    semi_honest = AverageSettings(bits=48, clip=4.0, threat_model="semi-honest")
    aggregation(semi_honest, secure)  # 7 of 10 is enough without the consistency quorum
    with pytest.raises(TooFewSurvivorsError, match="consistency quorum"):
        aggregation(dataclasses.replace(semi_honest, threat_model="malicious"), secure)


def test_settings_and_options_are_not_mixed() -> None:
    with pytest.raises(ValueError, match="not both"):
        secure_weighted_average(POINTS, HEAVY, bits=40, settings=AverageSettings())
    with pytest.raises(ValueError, match="not both"):
        secure_coordinate_average(POINTS, np.ones((3, 2)), clip=1.0, settings=AverageSettings())
    with pytest.raises(TypeError, match="AverageSettings"):
        secure_weighted_average(POINTS, HEAVY, settings={"bits": 40})  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "settings",
    [
        AverageSettings(clip=1.0, noise=DiscreteGaussianNoise(rho=1.0)),
        AverageSettings(max_effective_weight=0.5),
    ],
)
def test_the_coordinate_average_refuses_what_it_cannot_honour(settings: AverageSettings) -> None:
    with pytest.raises(ValueError, match="secure_coordinate_average"):
        secure_coordinate_average(POINTS, np.ones((3, 2)), settings=settings, seed=0)
