"""One budget for many releases: sessions, relations, the fixed denominator, Δ-FL's round."""

from __future__ import annotations

import numpy as np
import pytest

from dpquantile import (
    ZCDP,
    BudgetExceededError,
    DistributedDiscreteGaussian,
    NeighbouringMismatchError,
    PrivacyBudget,
)
from protocols.aggregation import (
    AverageSettings,
    DiscreteGaussianNoise,
    QuantileSettings,
    SecureAverageSession,
    ZeroWeightSumError,
    secure_weighted_average,
    superquantile_aggregate,
)
from secagg import Session, TooFewSurvivorsError

RNG = np.random.default_rng(7)
VECTORS = RNG.standard_normal((8, 5))


def noisy(rho: float = 0.5, **noise: object) -> AverageSettings:
    return AverageSettings(
        clip=4.0,
        noise=DiscreteGaussianNoise(rho=rho, **noise),  # type: ignore[arg-type]
    )


def test_a_replace_one_ledger_restates_add_remove_events() -> None:
    budget = PrivacyBudget(rho=1.0, neighbouring="replace_one")
    budget.spend(ZCDP(0.125))
    budget.spend(ZCDP(0.25, neighbouring="replace_one"))
    assert budget.spent() == pytest.approx(0.75)
    assert [event.relation for event, _ in budget.ledger] == ["replace_one", "replace_one"]
    strict = PrivacyBudget(rho=1.0, neighbouring="add_remove")
    with pytest.raises(NeighbouringMismatchError):
        strict.spend(ZCDP(0.1, neighbouring="replace_one"))
    assert strict.ledger == () and strict.spent() == 0.0
    with pytest.raises(ValueError, match="neighbouring"):
        PrivacyBudget(rho=1.0, neighbouring="swap")  # type: ignore[arg-type]


@pytest.mark.parametrize("secure", [True, False])
def test_replace_one_noise_meets_its_target_on_replace_one(secure: bool) -> None:
    result = secure_weighted_average(
        VECTORS,
        np.ones(8),
        settings=noisy(0.5, neighbouring="replace_one"),
        weight_cap=1.0,
        seed=1,
        secure=secure,
    )
    assert isinstance(result.event, DistributedDiscreteGaussian)
    assert result.event.relation == "replace_one" and result.event.rho <= 0.5
    add_remove = secure_weighted_average(
        VECTORS, np.ones(8), settings=noisy(0.5), weight_cap=1.0, seed=1, secure=secure
    )
    assert add_remove.event is not None
    # Twice the sensitivity needs about twice the noise for the same ρ (in model units).
    assert result.quantization_step is not None and add_remove.quantization_step is not None
    sigma = result.event.sigma * result.quantization_step
    assert sigma == pytest.approx(
        2 * add_remove.event.sigma * add_remove.quantization_step, rel=0.05
    )


@pytest.mark.parametrize("secure", [True, False])
def test_session_averages_are_paid_before_their_noise_and_withheld_below_plan(
    secure: bool,
) -> None:
    budget = PrivacyBudget(epsilon=10.0, delta=1e-5)
    settings = noisy(0.5, min_survivors=7)
    session = SecureAverageSession(8, sums=3, settings=settings, secure=secure, seed=2)
    first = session.average(VECTORS, np.ones(8), weight_cap=1.0, seed=3, budget=budget)
    assert len(first.survivors) == 8 and len(budget.ledger) == 1
    second = session.average(
        VECTORS,
        np.ones(8),
        weight_cap=1.0,
        seed=4,
        budget=budget,
        dropouts={"masked_input": [0]},
    )
    assert len(second.survivors) == 7 and len(budget.ledger) == 2
    # One more drops: 6 < 7 planned. The release is withheld; its worst case was already paid.
    with pytest.raises(TooFewSurvivorsError):
        session.average(
            VECTORS,
            np.ones(8),
            weight_cap=1.0,
            seed=5,
            budget=budget,
            dropouts={"masked_input": [1]},
        )
    assert len(budget.ledger) == 3
    assert all(event.num_clients == 7 for event, _ in budget.ledger)  # type: ignore[attr-defined]


def test_a_budget_that_cannot_pay_stops_the_session_before_any_noise() -> None:
    budget = PrivacyBudget(rho=1e-6)
    session = SecureAverageSession(8, sums=2, settings=noisy(0.5), seed=2)
    with pytest.raises((BudgetExceededError, ValueError)):
        session.average(VECTORS, np.ones(8), weight_cap=1.0, seed=3, budget=budget)
    assert budget.ledger == ()


def test_secagg_session_min_inputs_is_per_sum() -> None:
    session = Session(4, 2, iterations=2, seed=0)
    session.sum([[1, 1]] * 4)
    with pytest.raises(TooFewSurvivorsError, match="min_inputs=4"):
        session.sum([[1, 1]] * 4, dropouts={"masked_input": [0]}, min_inputs=4)
    with pytest.raises(ValueError, match="min_inputs"):
        Session(4, 2, iterations=2, seed=0).sum([[1, 1]] * 4, min_inputs=5)


def test_the_fixed_denominator_survives_a_negative_noisy_weight_sum() -> None:
    # A tiny cohort with strong noise: the released weight sum is often ≤ 0. The fixed
    # denominator divides by the public B·|survivors| instead, so the release is never refused.
    settings = AverageSettings(clip=1.0, noise=DiscreteGaussianNoise(rho=1e-3))
    fixed = AverageSettings(
        clip=1.0, noise=DiscreteGaussianNoise(rho=1e-3), denominator="survivors"
    )
    refused = 0
    for seed in range(20):
        try:
            secure_weighted_average(
                VECTORS[:3],
                np.ones(3),
                settings=settings,
                weight_cap=1.0,
                seed=seed,
                secure=False,
            )
        except ZeroWeightSumError:
            refused += 1
        result = secure_weighted_average(
            VECTORS[:3], np.ones(3), settings=fixed, weight_cap=1.0, seed=seed, secure=False
        )
        total = result.average * 3  # B = 1
        assert np.isfinite(total).all()
    assert refused > 0  # P(N(3, σ²) ≤ 0) with σ ≈ 22 is ≈ 0.45 per seed: 20 seeds miss w.p. 1e-5
    exact = secure_weighted_average(
        VECTORS,
        np.ones(8),
        settings=AverageSettings(clip=4.0, denominator="survivors"),
        weight_cap=1.0,
        secure=False,
    )
    np.testing.assert_allclose(exact.average, VECTORS.mean(axis=0), atol=1e-12)
    with pytest.raises(ValueError, match="denominator"):
        AverageSettings(denominator="noisy")  # type: ignore[arg-type]


def test_deltafl_round_pays_quantile_and_tail_from_one_replace_one_budget() -> None:
    losses = RNG.chisquare(3, 8)
    quantile = QuantileSettings(rho=0.5, upper=16.0, bins=16)
    wrong = PrivacyBudget(epsilon=20.0, delta=1e-5)
    with pytest.raises(ValueError, match="replace_one"):
        superquantile_aggregate(
            VECTORS,
            np.ones(8),
            losses,
            theta=0.5,
            quantile=quantile,
            settings=noisy(0.5),
            weight_cap=1.0,
            seed=1,
            budget=wrong,
        )
    assert wrong.ledger == ()
    budget = PrivacyBudget(epsilon=20.0, delta=1e-5, neighbouring="replace_one")
    result = superquantile_aggregate(
        VECTORS,
        np.ones(8),
        losses,
        theta=0.5,
        quantile=quantile,
        settings=noisy(0.5, neighbouring="replace_one"),
        weight_cap=1.0,
        seed=1,
        budget=budget,
    )
    assert len(budget.ledger) == len(result.events) >= 2
    assert {event.relation for event, _ in budget.ledger} == {"replace_one"}
    with pytest.raises(ValueError, match="no DP"):
        superquantile_aggregate(
            VECTORS,
            np.ones(8),
            losses,
            theta=0.5,
            seed=1,
            budget=PrivacyBudget(rho=1.0),
        )


@pytest.mark.parametrize("bits", [10, 12, 16])
def test_the_effective_weight_certificate_holds_on_coarse_grids(bits: int) -> None:
    # At few bits the weight coordinate's rounding is a visible share of the released weight
    # sum: the certificate subtracts it, so it never falls below the true largest share.
    rng = np.random.default_rng(bits)
    for seed in range(40):
        weights = rng.uniform(0.0, 1.0, 8)
        result = secure_weighted_average(
            VECTORS,
            weights,
            settings=AverageSettings(clip=4.0, bits=bits, quantize=True),
            weight_cap=1.0,
            seed=seed,
            secure=False,
        )
        assert result.certified_max_effective_weight >= result.true_max_effective_weight
