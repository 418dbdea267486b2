"""The accountant at the extremes: large ρ, many events, heterogeneous histories, TV terms."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dpquantile import (
    ZCDP,
    BudgetExceededError,
    DistributedDiscreteGaussian,
    PrivacyBudget,
    ZCDPAccountant,
    rho_for_epsilon,
)


def kls21(rho_target_sigma: float, tv: float) -> DistributedDiscreteGaussian:
    return DistributedDiscreteGaussian(10, rho_target_sigma, 40.0, 20.0, 100, sampler_tv_bound=tv)


def test_the_issues_case_is_infinite_with_a_reason_and_the_exact_sampler_serves_it() -> None:
    # ≥ 10 KLS21 events of ρ ≈ 12.5 carrying the fast sampler's TV bound: (1 + e^ε)·TV ≫ δ.
    event = kls21(1.2, 1e-40)
    assert event.rho > 12.5
    fast = ZCDPAccountant().compose(event, count=10)
    certificate = fast.certificate(1e-5)
    assert math.isinf(certificate.epsilon) and math.isfinite(certificate.epsilon_without_tv)
    assert certificate.reason is not None and "exact sampler" in certificate.reason
    exact = ZCDPAccountant().compose(kls21(1.2, 0.0), count=10)
    assert math.isfinite(exact.epsilon(1e-5))
    assert exact.epsilon(1e-5) == pytest.approx(certificate.epsilon_without_tv)
    # The issue's figure: ZCDP(125) alone certifies ε ≈ 198.5 at δ = 1e-5.
    assert ZCDPAccountant().compose(ZCDP(125.0)).epsilon(1e-5) == pytest.approx(198.5, abs=0.1)


def test_a_budget_refusing_an_infinite_certificate_says_why() -> None:
    budget = PrivacyBudget(epsilon=1000.0, delta=1e-5)
    with pytest.raises(BudgetExceededError, match="exact sampler"):
        budget.spend(kls21(1.2, 1e-40), count=10)
    assert budget.ledger == ()


def test_ten_thousand_events_compose_to_their_total() -> None:
    many = ZCDPAccountant().compose(ZCDP(1e-4), count=10_000)
    assert many.rho == pytest.approx(1.0, rel=1e-12)
    assert many.epsilon(1e-6) == pytest.approx(
        ZCDPAccountant().compose(ZCDP(1.0)).epsilon(1e-6), rel=1e-9
    )


events = st.one_of(
    st.floats(1e-4, 5.0).map(ZCDP),
    st.tuples(st.floats(0.5, 50.0), st.integers(1, 64)).map(
        lambda x: DistributedDiscreteGaussian(8, x[0], 2.0 * math.sqrt(x[1]), 2.0, x[1])
    ),
)


@settings(max_examples=60, deadline=None)
@given(st.lists(events, min_size=1, max_size=6), events)
def test_a_heterogeneous_history_never_certifies_less_after_one_more_event(
    history: list[ZCDP | DistributedDiscreteGaussian], extra: ZCDP | DistributedDiscreteGaussian
) -> None:
    accountant = ZCDPAccountant()
    for event in history:
        accountant.compose(event)
    before = accountant.epsilon(1e-5)
    after = accountant.copy().compose(extra).epsilon(1e-5)
    assert after >= before * (1 - 1e-9)
    # Never worse than the simple conversion of the total ρ.
    rho = accountant.rho
    assert before <= rho + 2 * math.sqrt(rho * math.log(1e5)) + 1e-9


def test_a_whole_history_exports_to_googles_accountant_and_agrees() -> None:
    dp_accounting = pytest.importorskip("dp_accounting", reason="pip install 'secagg-dp[dp]'")
    from dp_accounting.rdp import RdpAccountant  # noqa: PLC0415

    ours = (
        ZCDPAccountant()
        .compose(ZCDP(0.05), count=40)
        .compose(DistributedDiscreteGaussian(20, 3.0, 8.0, 4.0, 16), count=7)
    )
    event = ours.to_dp_accounting()
    assert isinstance(event, dp_accounting.ComposedDpEvent)
    theirs = RdpAccountant().compose(event).get_epsilon(1e-6)
    # Both convert the same Rényi curve; Google's grid of orders is coarser, never tighter.
    assert ours.epsilon(1e-6) <= theirs * (1 + 1e-6)
    assert theirs == pytest.approx(ours.epsilon(1e-6), rel=0.02)
    with pytest.raises(ValueError, match="nothing"):
        ZCDPAccountant().as_event()


def _converted(rho: float, delta: float) -> float:
    return ZCDPAccountant().compose(ZCDP(rho)).epsilon(delta)


@settings(max_examples=30, deadline=None)
@given(
    epsilon=st.floats(1e-3, 50.0),
    delta_log10=st.floats(-12.0, -2.0),
)
def test_rho_for_epsilon_is_the_largest_rho_within_the_target(
    epsilon: float, delta_log10: float
) -> None:
    # The inverse of the accountant's own conversion: within it, and 1e-8 more is not.
    delta = 10.0**delta_log10
    rho = rho_for_epsilon(epsilon, delta)
    assert rho > 0 and _converted(rho, delta) <= epsilon
    assert _converted(rho * (1 + 1e-8), delta) > epsilon


def test_rho_for_epsilon_serves_any_target_where_a_tiny_rho_costs_nothing() -> None:
    # At δ = 1e-5 a ρ small enough converts to ε = 0, so even ε = 1e-20 is served.
    rho = rho_for_epsilon(1e-20, 1e-5)
    assert rho > 0 and _converted(rho, 1e-5) <= 1e-20


def test_rho_for_an_unreachable_epsilon_is_refused_not_searched_forever() -> None:
    # ε = 1e-10 at δ = 1e-20: no ρ > 0 converts to it, and the bisection, driven to ρ = 0,
    # used to halve its interval into the subnormals and then loop without end.
    from dpquantile import rho_for_epsilon  # noqa: PLC0415

    with pytest.raises(ValueError, match="no ρ > 0 gives ε ≤ 1e-10 at δ = 1e-20"):
        rho_for_epsilon(1e-10, 1e-20)
    # Reachable targets are still inverted (ρ = 0.551 at (5, 1e-5); a tiny ρ where ε = 0
    # is valid at δ = 1e-5).
    assert round(rho_for_epsilon(5.0, 1e-5), 4) == 0.551
    assert 0.0 < rho_for_epsilon(1e-20, 1e-5) < 1e-9
