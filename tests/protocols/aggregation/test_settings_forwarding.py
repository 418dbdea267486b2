"""Settings pass straight through every aggregation built on the secure average: each honours
all of an :class:`AverageSettings` or refuses what it cannot honour."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import protocols.aggregation.secure_average as secure_average_module
from dpquantile import BudgetExceededError, PrivacyBudget
from protocols.aggregation import (
    AverageSettings,
    DiscreteGaussianNoise,
    EffectiveWeightError,
    QuantileSettings,
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


def test_a_budgeted_average_is_charged_before_its_rows_and_withheld_below_plan(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    built: list[int] = []
    original = secure_average_module._client_row

    def counted(clients: Any, index: int, *rest: Any, **options: Any) -> Any:
        built.append(index)
        return original(clients, index, *rest, **options)

    monkeypatch.setattr(secure_average_module, "_client_row", counted)
    noise = DiscreteGaussianNoise(rho=0.5, min_survivors=9)
    settings = AverageSettings(clip=4.0, noise=noise)
    budget = PrivacyBudget(epsilon=30.0, delta=1e-6)
    released = secure_weighted_average(
        TEN,
        np.ones(10),
        weight_cap=1.0,
        settings=settings,
        seed=3,
        budget=budget,
        dropouts={"masked_input": [4]},
    )
    assert len(released.survivors) == 9 and len(built) == 9
    ((charged, count),) = budget.history
    assert count == 1 and charged.num_clients == 9 and released.event is not None
    assert released.event.rho == pytest.approx(charged.rho)  # 9 survived: as planned
    built.clear()
    for secure in (True, False):
        with pytest.raises(TooFewSurvivorsError):
            secure_weighted_average(
                TEN,
                np.ones(10),
                weight_cap=1.0,
                settings=settings,
                seed=4,
                budget=budget,
                dropouts={"masked_input": [4, 5]},
                secure=secure,
            )
    assert len(budget.history) == 1 and budget.history[0][1] == 3  # charged, never released
    tight = PrivacyBudget(epsilon=1.0, delta=1e-6)
    with pytest.raises(BudgetExceededError):
        secure_weighted_average(
            TEN, np.ones(10), weight_cap=1.0, settings=settings, seed=5, budget=tight
        )
    assert tight.history == () and len(built) == 8  # the secure attempt's 8 senders only
    with pytest.raises(ValueError, match="no DP"):
        secure_weighted_average(TEN, np.ones(10), clip=4.0, budget=budget)


def test_a_private_quantile_and_noisy_averages_compose_on_one_relation() -> None:
    """Δ-FL with a DP quantile (replace-one) and a noisy tail average (add/remove): the round's
    events are stated for replace-one and compose (the average's Δ doubled)."""
    noise = DiscreteGaussianNoise(rho=0.5)
    result = superquantile_aggregate(
        TEN,
        np.ones(10),
        np.arange(10.0),
        theta=0.5,
        quantile=QuantileSettings(rho=1.0, upper=10.0),
        settings=AverageSettings(clip=4.0, noise=noise),
        weight_cap=1.0,
        secure=False,
        seed=2,
    )
    assert result.event is not None and result.event.relation == "replace_one"
    quantile_event, *averages = result.events
    assert quantile_event is result.quantile.event  # type: ignore[union-attr]
    assert averages and all(e.relation == "replace_one" for e in averages)
    assert all(e.rho > 0.5 for e in averages)  # 4× the add/remove target, up to τ terms
