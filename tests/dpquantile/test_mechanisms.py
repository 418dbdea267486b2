"""The distributed discrete Gaussian mechanism (calibration, noise, event, tail bound) and the
neighbouring relation events carry."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import dpquantile.quantile as quantile_module
from dpquantile import (
    ZCDP,
    BudgetExceededError,
    ComposedEvent,
    DiscreteGaussian,
    DiscreteLaplace,
    DistributedDiscreteGaussian,
    DistributedDiscreteGaussianMechanism,
    NeighbouringMismatchError,
    PrivacyBudget,
    SelfComposedEvent,
    ZCDPAccountant,
    dp_quantile,
    noise_tail_bound,
    quantile_mechanism,
    quantile_scale,
    sigma_for_rho,
    tail_factor,
)
from secagg import KeystreamRandom, TooFewSurvivorsError


@settings(max_examples=60, deadline=None)
@given(
    rho=st.floats(1e-3, 50.0),
    clients=st.integers(1, 500),
    l2=st.floats(0.1, 100.0),
    dimension=st.integers(1, 10_000),
)
def test_sigma_for_rho_is_the_smallest_sigma_meeting_the_target(
    rho: float, clients: int, l2: float, dimension: int
) -> None:
    l1 = l2 * min(math.sqrt(dimension), max(l2, 1.0))
    sigma = sigma_for_rho(
        rho, clients=clients, l1_sensitivity=l1, l2_sensitivity=l2, dimension=dimension
    )
    assert DistributedDiscreteGaussian(clients, sigma, l1, l2, dimension).rho <= rho
    smaller = sigma * (1 - 1e-8)  # ten times the search's precision
    if smaller >= 0.5:  # not at KLS21's floor: a slightly smaller σ misses the target
        assert DistributedDiscreteGaussian(clients, smaller, l1, l2, dimension).rho > rho


def test_tail_factor_against_the_subgaussian_bound() -> None:
    # 2·D·exp(−t²/2) = p exactly at the returned t.
    for dimension, p in [(1, 2.0**-40), (127, 1e-9), (10**5, 1e-3)]:
        t = tail_factor(dimension, p)
        assert 2 * dimension * math.exp(-(t**2) / 2) == pytest.approx(p, rel=1e-9)
    assert noise_tail_bound(2.0, 9, 1, 1e-9) == math.ceil(tail_factor(1, 1e-9) * 2.0 * 3.0)
    with pytest.raises(ValueError, match="failure_probability"):
        tail_factor(1, 0.0)


def test_the_tail_bound_holds_empirically() -> None:
    # 400 sums of 16 clients' noise in 32 coordinates at p = 1e-3: the bound is exceeded with
    # probability ≤ 1e-3 per sum, so by at most a handful of sums (P[> 8 | p=1e-3] < 1e-6).
    mechanism = DistributedDiscreteGaussianMechanism(3.0, 1.0, 1.0, 32, 16)
    bound = mechanism.tail_bound(16, 1e-3)
    root = KeystreamRandom(0)
    exceeded = 0
    for trial in range(400):
        total = sum(mechanism.noise(root.spawn(b"%d/%d" % (trial, i))) for i in range(16))
        exceeded += int(np.abs(total).max() > bound)
    assert exceeded <= 8
    # ...and it is not loose by more than the union bound's slack: a 60 % bound is exceeded.
    tight = int(0.6 * bound)
    over = 0
    for trial in range(50):
        total = sum(mechanism.noise(root.spawn(b"t%d/%d" % (trial, i))) for i in range(16))
        over += int(np.abs(total).max() > tight)
    assert over > 0


def test_the_event_counts_the_survivors_and_the_sampler() -> None:
    mechanism = DistributedDiscreteGaussianMechanism.calibrated(
        1.0, planned_survivors=10, l1_sensitivity=3.0, l2_sensitivity=2.0, dimension=5
    )
    assert mechanism.planned_rho <= 1.0 < mechanism.event(7).rho
    event = mechanism.event(7)
    assert event.num_clients == 7 and event.neighbouring == "add_remove"
    assert event.sampler_tv_bound == pytest.approx(7 * 5 * mechanism.noise_sampler.tv_bound)
    exact = DistributedDiscreteGaussianMechanism(
        mechanism.sigma, 3.0, 2.0, 5, 10, "replace_one", "exact"
    )
    assert exact.event(10).sampler_tv_bound == 0.0
    assert exact.event(10).neighbouring == "replace_one"


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ((0.4, 1.0, 1.0, 1, 2), "sigma must be >= 1/2"),
        ((1.0, 1.0, 2.0, 1, 2), "l1_sensitivity must be >= l2"),
        ((1.0, 1.0, 1.0, 0, 2), "dimension"),
        ((1.0, 1.0, 1.0, 1, 0), "num_clients"),
        ((1.0, 1.0, 1.0, 1, 2, "neighbours"), "neighbouring"),
        ((1.0, 1.0, 1.0, 1, 2, "add_remove", "slow"), "sampler"),
    ],
)
def test_bad_mechanisms_are_refused(arguments: tuple[object, ...], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        DistributedDiscreteGaussianMechanism(*arguments)  # type: ignore[arg-type]


# -- the neighbouring relation ---------------------------------------------------------------------

ADD_REMOVE = [
    ZCDP(0.5),
    DiscreteGaussian(sigma=2.0, l2_sensitivity=1.0),
    DiscreteLaplace(scale=2.0, l1_sensitivity=1.0),
    DistributedDiscreteGaussian(4, 2.0, 2.0, 2.0, 4),
]


@pytest.mark.parametrize("event", ADD_REMOVE, ids=lambda e: type(e).__name__)
def test_converting_to_replace_one_costs_what_group_privacy_or_doubled_sensitivity_says(
    event: ZCDP | DiscreteGaussian | DiscreteLaplace | DistributedDiscreteGaussian,
) -> None:
    converted = event.under_replace_one()
    assert converted.neighbouring == "replace_one" and converted.under_replace_one() is converted
    if isinstance(event, DiscreteLaplace):
        assert converted.rho == pytest.approx(min(1.0, 0.5))  # ε₀ 0.5 → 1.0: min(ε₀, ε₀²/2)
    elif isinstance(event, DistributedDiscreteGaussian):
        # The squared-sensitivity line scales by exactly 4; the τ lines by at most 4.
        assert event.rho < converted.rho <= 4 * event.rho + 1e-12
    else:
        assert converted.rho == pytest.approx(4 * event.rho)  # Δ doubles, ρ ∝ Δ²; BS16 Prop. 27


def test_mismatched_relations_are_refused_everywhere() -> None:
    histogram = ZCDP(0.5, neighbouring="replace_one")
    average = DiscreteGaussian(sigma=2.0, l2_sensitivity=1.0)
    with pytest.raises(NeighbouringMismatchError):
        ComposedEvent((histogram, average))
    with pytest.raises(NeighbouringMismatchError):
        ComposedEvent((SelfComposedEvent(histogram, 3), ComposedEvent((average,))))
    accountant = ZCDPAccountant().compose(histogram)
    with pytest.raises(NeighbouringMismatchError):
        accountant.compose(average)
    assert accountant.rho == 0.5  # refused before anything was recorded
    budget = PrivacyBudget(rho=10.0)
    budget.spend(average)
    with pytest.raises(NeighbouringMismatchError):
        budget.spend(histogram)
    assert budget.spent() == pytest.approx(0.125)
    both = ComposedEvent((histogram, average.under_replace_one()))
    assert both.relation == "replace_one" and both.rho == pytest.approx(1.0)
    assert ZCDPAccountant().compose(both).relation == "replace_one"
    with pytest.raises(ValueError, match="neighbouring must be one of"):
        ZCDP(0.5, neighbouring="zero_out")  # type: ignore[arg-type]


# -- budgets on the release path -------------------------------------------------------------------

LOSSES = np.linspace(0.0, 1.0, 12)


@pytest.mark.parametrize("secure", [True, False])
def test_dp_quantile_spends_its_budget_before_any_noise(
    monkeypatch: pytest.MonkeyPatch, secure: bool
) -> None:
    draws: list[int] = []
    original = quantile_module._NoisyVectors.row

    def counted(self: object, index: int) -> np.ndarray:
        draws.append(index)
        return original(self, index)  # type: ignore[arg-type]

    monkeypatch.setattr(quantile_module._NoisyVectors, "row", counted)
    # ε of one release at δ = 1e-6 is ≈ 7.77; a limit 20 % above it cannot hold two.
    one = ZCDPAccountant().compose(_planned_quantile_event()).epsilon(1e-6)
    budget = PrivacyBudget(epsilon=1.2 * one, delta=1e-6)
    first = dp_quantile(
        LOSSES, 0.5, lower=0.0, upper=1.0, bins=8, rho=1.0, seed=1, secure=secure, budget=budget
    )
    assert first.event == _planned_quantile_event()  # all 12 survived: charged = released
    assert budget.spent() == pytest.approx(one) and len(draws) == 12
    draws.clear()
    with pytest.raises(BudgetExceededError):
        dp_quantile(
            LOSSES, 0.5, lower=0.0, upper=1.0, bins=8, rho=1.0, seed=2, secure=secure, budget=budget
        )
    assert draws == [] and budget.spent() == pytest.approx(one)


def _planned_quantile_event() -> DistributedDiscreteGaussian:
    scale = quantile_scale(1.0, num_clients=12, bins=8)
    return quantile_mechanism(1.0, num_clients=12, bins=8, scale=scale).event(12)


def test_a_budgeted_quantile_is_withheld_below_its_plan() -> None:
    budget = PrivacyBudget(epsilon=100.0, delta=1e-6)
    with pytest.raises(TooFewSurvivorsError):
        dp_quantile(
            LOSSES,
            0.5,
            lower=0.0,
            upper=1.0,
            bins=8,
            rho=1.0,
            seed=3,
            secure=False,
            budget=budget,
            dropouts={"masked_input": [0]},
        )
    # Charged (the noise was drawn), though nothing was released: never an undercharge.
    assert budget.history == ((_planned_quantile_event(), 1),)


def test_bad_input_costs_no_budget() -> None:
    budget = PrivacyBudget(epsilon=100.0, delta=1e-6)
    with pytest.raises(ValueError):
        dp_quantile(
            LOSSES,
            0.5,
            lower=0.0,
            upper=1.0,
            bins=8,
            rho=1.0,
            seed=3,
            budget=budget,
            dropouts={"masked_input": [99]},
        )
    with pytest.raises(ValueError):
        dp_quantile(
            LOSSES, 0.5, lower=0.0, upper=1.0, bins=8, rho=1.0, seed=3, budget=budget, threshold=50
        )
    assert budget.spent() == 0.0


def test_a_budget_refuses_to_mix_relations_before_any_noise() -> None:
    budget = PrivacyBudget(epsilon=100.0, delta=1e-6)
    budget.spend(DiscreteGaussian(sigma=4.0, l2_sensitivity=1.0))  # an add/remove release
    with pytest.raises(NeighbouringMismatchError):
        dp_quantile(
            LOSSES, 0.5, lower=0.0, upper=1.0, bins=8, rho=1.0, seed=4, secure=False, budget=budget
        )
    assert len(budget.history) == 1
