"""The accountant against published numbers, its properties, its events and the budget."""

from __future__ import annotations

import dataclasses
import importlib
import json
import math
from fractions import Fraction
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import optimize

from dpquantile import (
    ZCDP,
    BudgetExceededError,
    ComposedEvent,
    DiscreteGaussian,
    DiscreteLaplace,
    DistributedDiscreteGaussian,
    FastDiscreteGaussian,
    PrivacyBudget,
    SelfComposedEvent,
    ZCDPAccountant,
    add_discrete_gaussian_noise,
    kls21_sensitivities,
)
from secagg.randomness import KeystreamRandom

REFERENCE: dict[str, Any] = json.loads(
    (Path(__file__).with_name("data") / "accountant_reference.json").read_text()
)
DELTA = REFERENCE["delta"]
PRINTED = 5e-5  # the reference values are printed to 4 decimals


def optimal_epsilon_pure_zcdp(rho: float, delta: float) -> float:
    """CKS20 Cor. 13 for pure ρ-zCDP, minimised analytically (independent of the accountant).

    f(α) = αρ + (L + (α−1)log(1−1/α) − log α)/(α−1), L = log(1/δ), has derivative
    f'(α) = ρ − (L − log α)/(α−1)², increasing on (1, e^L): f is convex there and its minimum is
    the unique root of ρ(α−1)² = L − log α.
    """
    log_inv = math.log(1 / delta)
    alpha = optimize.brentq(
        lambda a: rho * (a - 1) ** 2 - (log_inv - math.log(a)), 1 + 1e-15, math.exp(log_inv),
        xtol=1e-15, rtol=1e-15,
    )
    epsilon: float = alpha * rho + (
        log_inv + (alpha - 1) * math.log1p(-1 / alpha) - math.log(alpha)
    ) / (alpha - 1)
    return epsilon


# -- published numbers ---------------------------------------------------------------------------


@pytest.mark.parametrize("row", REFERENCE["gaussian_compositions"],
                         ids=lambda r: f"z{r['noise_multiplier']}-T{r['rounds']}")
def test_zcdp_route_reproduces_the_reference_table(row: dict[str, float]) -> None:
    rho = row["rounds"] / (2 * row["noise_multiplier"] ** 2)
    accountant = ZCDPAccountant().compose(ZCDP(1 / (2 * row["noise_multiplier"] ** 2)),
                                          count=int(row["rounds"]))
    assert accountant.rho == pytest.approx(rho, rel=1e-15) and accountant.rho >= rho
    epsilon = accountant.epsilon(DELTA)
    assert epsilon == pytest.approx(row["zcdp_cks20_cor13"], abs=PRINTED)
    # 1e-6 relative (in fact ~1e-12) against the analytic optimum over real α.
    assert epsilon == pytest.approx(optimal_epsilon_pure_zcdp(rho, DELTA), rel=1e-9)
    assert epsilon >= optimal_epsilon_pure_zcdp(rho, DELTA) * (1 - 1e-14)
    assert accountant.epsilon_simple(DELTA) == pytest.approx(row["simple"], abs=PRINTED)
    assert accountant.epsilon_simple(DELTA) > epsilon > row["exact_balle_wang"]


@pytest.mark.parametrize("row", REFERENCE["single_discrete_gaussian_exact"],
                         ids=lambda r: f"sigma{r['sigma']}")
def test_single_release_uses_the_exact_curve(row: dict[str, float]) -> None:
    accountant = ZCDPAccountant().compose(DiscreteGaussian(row["sigma"], row["sensitivity"]))
    epsilon = accountant.epsilon(DELTA)
    assert epsilon == pytest.approx(row["epsilon"], abs=PRINTED)
    assert accountant.delta(epsilon) <= DELTA
    assert accountant.delta(epsilon * (1 - 1e-6)) > DELTA  # tight: not a loose upper bound
    assert epsilon < accountant.epsilon_renyi(DELTA) < accountant.epsilon_simple(DELTA)


def _distributed_event() -> DistributedDiscreteGaussian:
    spec = REFERENCE["distributed"]
    return DistributedDiscreteGaussian.from_model_units(
        num_clients=spec["num_clients"], local_sigma=spec["local_sigma"],
        l2_clip=spec["l2_clip"], granularity=spec["granularity"],
        dimension=spec["dimension"], beta=spec["beta"],
    )


def test_distributed_reference_beats_integer_orders() -> None:
    spec = REFERENCE["distributed"]
    accountant = ZCDPAccountant().compose(_distributed_event(), count=spec["rounds"])
    epsilon = accountant.epsilon(DELTA)
    assert epsilon <= spec["must_not_exceed"]
    assert epsilon == pytest.approx(spec["zcdp_fractional_orders"], abs=0.005)
    # The same curve restricted to integer orders 2..256 gives Google's figure.
    orders = np.arange(2, 257, dtype=np.float64)
    integer = min(
        accountant.renyi_divergence(a)
        + (math.log(1 / DELTA) + (a - 1) * math.log1p(-1 / a) - math.log(a)) / (a - 1)
        for a in orders
    )
    assert integer == pytest.approx(spec["google_integer_orders"], abs=0.005)


def test_kls21_sensitivities() -> None:
    l1, l2 = kls21_sensitivities(1.0, 1e-3, 2**16)
    # Rounded up by a relative 2^-40 per step (accounting._round_up), never down.
    assert l2**2 >= 1e6 + 2**16 / 4 + 1.0 * (1000 + 128)
    assert l2**2 == pytest.approx(1e6 + 2**16 / 4 + 1.0 * (1000 + 128), rel=1e-11)
    assert l1 == pytest.approx(l2 * 256, rel=1e-11)
    plain = kls21_sensitivities(1.0, 1e-3, 2**16, beta=None)[1]
    assert plain == pytest.approx(1256.0)
    assert kls21_sensitivities(1.0, 1.0, 4)[0] == pytest.approx(
        kls21_sensitivities(1.0, 1.0, 4)[1] ** 2)  # Δ₁ ≤ Δ₂² binds when Δ₂ < √d


# -- properties --------------------------------------------------------------------------------

rhos = st.floats(min_value=1e-4, max_value=1e3, allow_nan=False)
deltas = st.floats(min_value=1e-12, max_value=0.5, allow_nan=False)
gaussian_events = st.builds(
    DiscreteGaussian,
    sigma=st.floats(min_value=0.5, max_value=50.0),
    l2_sensitivity=st.sampled_from([1.0, 2.0, 3.0]),
)
events = st.one_of(st.builds(ZCDP, rho=st.floats(min_value=0.0, max_value=2.0)), gaussian_events)


@given(rho=rhos, d1=deltas, d2=deltas)
@settings(max_examples=60, deadline=None)
def test_epsilon_decreases_in_delta(rho: float, d1: float, d2: float) -> None:
    low, high = sorted((d1, d2))
    accountant = ZCDPAccountant().compose(ZCDP(rho))
    assert accountant.epsilon(low) >= accountant.epsilon(high)


@given(batch=st.lists(st.tuples(events, st.integers(0, 50)), min_size=1, max_size=6))
@settings(max_examples=60, deadline=None)
def test_rho_adds_under_composition(batch: list[tuple[Any, int]]) -> None:
    accountant = ZCDPAccountant()
    for event, count in batch:
        accountant.compose(event, count)
    exact = sum((count * Fraction(event.rho) for event, count in batch), Fraction(0))
    assert Fraction(accountant.rho) >= exact
    assert accountant.rho == pytest.approx(float(exact), rel=1e-15, abs=1e-300)
    reverse = ZCDPAccountant()
    for event, count in reversed(batch):
        reverse.compose(event, count)
    assert reverse.rho == accountant.rho
    assert reverse.epsilon(1e-6) == pytest.approx(accountant.epsilon(1e-6), rel=1e-12)


@given(event=gaussian_events, delta=st.floats(min_value=1e-10, max_value=1e-2))
@settings(max_examples=40, deadline=None)
def test_never_below_the_exact_epsilon(event: DiscreteGaussian, delta: float) -> None:
    accountant = ZCDPAccountant().compose(event)
    exact = accountant.epsilon(delta)
    assert accountant.delta(exact) <= delta * (1 + 1e-12)
    assert exact <= accountant.epsilon_renyi(delta) <= accountant.epsilon_simple(delta)


@pytest.mark.parametrize(
    ("sigma", "delta"),
    # Small exact ε, where brentq's absolute tolerance is many ulps: before 2026-12-07 the step
    # up from its root ran out and ε fell back to the Rényi bound (0.144 and 0.0233 here).
    [(3.0, 0.1326920092316644), (20.0, 0.018169727314971323), (7.5, 0.0527187)],
)
def test_a_small_exact_epsilon_is_the_smallest_one_certified(sigma: float, delta: float) -> None:
    accountant = ZCDPAccountant().compose(DiscreteGaussian(sigma=sigma, l2_sensitivity=1.0))
    epsilon = accountant.epsilon(delta)
    assert epsilon < 0.01 < accountant.epsilon_renyi(delta)
    assert accountant.delta(epsilon) <= delta
    assert accountant.delta(epsilon * (1 - 1e-6)) > delta  # nothing certified much below it


@given(rho=rhos, delta=deltas)
@settings(max_examples=40, deadline=None)
def test_delta_inverts_epsilon(rho: float, delta: float) -> None:
    accountant = ZCDPAccountant().compose(ZCDP(rho))
    epsilon = accountant.epsilon(delta)
    assert accountant.delta(epsilon) <= delta * (1 + 1e-9)
    if epsilon > 1e-3:
        assert accountant.delta(epsilon * (1 - 1e-4)) > delta


@given(
    limit=st.floats(min_value=0.5, max_value=20.0),
    spends=st.lists(st.tuples(events, st.integers(1, 5)), min_size=1, max_size=12),
)
@settings(max_examples=40, deadline=None)
def test_budget_is_never_exceeded(limit: float, spends: list[tuple[Any, int]]) -> None:
    budget = PrivacyBudget(epsilon=limit, delta=1e-6)
    for event, count in spends:
        before = budget.history
        try:
            budget.spend(event, count)
        except BudgetExceededError as error:
            assert budget.history == before
            assert error.would_spend > limit
        assert budget.spent() <= limit


@given(limit=st.floats(min_value=0.1, max_value=5.0),
       spends=st.lists(st.floats(min_value=0.0, max_value=2.0), min_size=1, max_size=20))
@settings(max_examples=40, deadline=None)
def test_rho_budget_is_never_exceeded(limit: float, spends: list[float]) -> None:
    budget = PrivacyBudget(rho=limit)
    for rho in spends:
        if budget.would_exceed(ZCDP(rho)):
            with pytest.raises(BudgetExceededError):
                budget.spend(ZCDP(rho))
        else:
            budget.spend(ZCDP(rho))
        assert budget.spent() <= limit


# -- events --------------------------------------------------------------------------------------


@pytest.mark.parametrize("bad", [0.0, -1.0, math.nan, math.inf])
def test_event_sigma_is_validated(bad: float) -> None:
    with pytest.raises(ValueError, match="sigma must be"):
        DiscreteGaussian(sigma=bad, l2_sensitivity=1.0)
    with pytest.raises(ValueError, match="sigma must be"):
        DistributedDiscreteGaussian(10, bad, 1.0, 1.0, 4)


def test_event_fields_are_validated() -> None:
    with pytest.raises(ValueError, match=">= 0"):
        DiscreteGaussian(1.0, -1.0)
    with pytest.raises(ValueError, match="dimension"):
        DiscreteGaussian(1.0, 1.0, dimension=0)
    with pytest.raises(ValueError, match=r"\[0, 1\)"):
        DiscreteGaussian(1.0, 1.0, sampler_tv_bound=1.0)
    with pytest.raises(ValueError, match="1/2"):
        DistributedDiscreteGaussian(10, 0.49, 1.0, 1.0, 4)
    with pytest.raises(ValueError, match="l1_sensitivity must be >="):
        DistributedDiscreteGaussian(10, 1.0, 0.5, 1.0, 4)
    with pytest.raises(ValueError, match="num_clients"):
        DistributedDiscreteGaussian(0, 1.0, 1.0, 1.0, 4)
    with pytest.raises(ValueError, match="rho"):
        ZCDP(-0.1)
    with pytest.raises(ValueError, match="scale"):
        DiscreteLaplace(0.0, 1.0)
    with pytest.raises(TypeError):
        DiscreteGaussian(True, 1.0)
    with pytest.raises(ValueError, match="count"):
        SelfComposedEvent(ZCDP(0.1), -1)
    with pytest.raises(TypeError):
        ComposedEvent((ZCDP(0.1), "event"))  # type: ignore[arg-type]


@pytest.mark.parametrize("bad", [0.0, 1.0, -0.5, 2.0, math.nan])
def test_delta_outside_the_open_interval_is_a_value_error(bad: float) -> None:
    with pytest.raises(ValueError, match=r"\(0, 1\)"):
        ZCDPAccountant().compose(ZCDP(1.0)).epsilon(bad)
    with pytest.raises(ValueError, match=r"\(0, 1\)"):
        PrivacyBudget(epsilon=1.0, delta=bad)


def test_events_are_immutable_and_hashable() -> None:
    event = DiscreteGaussian(2.0, 1.0)
    with pytest.raises(dataclasses.FrozenInstanceError):
        event.sigma = 3.0  # type: ignore[misc]
    assert hash(event) == hash(DiscreteGaussian(2.0, 1.0))
    accountant = ZCDPAccountant().compose(event).compose(DiscreteGaussian(2.0, 1.0))
    assert accountant.history == ((event, 2),)


def test_composed_and_repeated_events_flatten() -> None:
    nested = ComposedEvent((ZCDP(0.25), SelfComposedEvent(ComposedEvent((ZCDP(0.5),)), 3)))
    assert nested.rho == 1.75
    accountant = ZCDPAccountant().compose(nested, count=2)
    assert accountant.rho == 3.5
    assert dict(accountant.history) == {ZCDP(0.25): 2, ZCDP(0.5): 6}


def test_empty_history_is_free() -> None:
    accountant = ZCDPAccountant()
    assert accountant.rho == 0.0
    assert accountant.epsilon(1e-5) == 0.0
    assert accountant.delta(0.0) == 0.0


def test_distributed_bound_takes_the_best_line() -> None:
    event = DistributedDiscreteGaussian(4, 0.6, 4.0, 2.0, 1000)
    assert event.tau > 1e-3  # small σ: τ matters
    lines = event.renyi_bounds()
    for alpha in (1.5, 4.0, 32.0):
        expected = min(xi + alpha * rho for xi, rho in lines)
        assert ZCDPAccountant().compose(event).renyi_divergence(alpha) == pytest.approx(expected)
    assert event.rho == pytest.approx(min(xi + rho for xi, rho in lines))


def test_discrete_laplace_is_pure_dp() -> None:
    accountant = ZCDPAccountant().compose(DiscreteLaplace(scale=2.0, l1_sensitivity=1.0))
    assert accountant.delta(0.5) == 0.0
    assert accountant.epsilon(1e-9) <= 0.5
    twice = ZCDPAccountant().compose(DiscreteLaplace(2.0, 1.0), count=2)
    # Two ε₀ = 0.5 releases compose to pure 1-DP (up to the Rényi conversion's slack), and half
    # that ε does not cover both: an accountant that failed to compose would certify it.
    assert twice.delta(1.0) <= 1e-9
    assert twice.delta(0.5) > 0.1
    assert twice.epsilon(1e-5) <= 1.0 + 1e-12


def test_sampler_tv_enters_delta() -> None:
    eta = 1e-9
    plain = ZCDPAccountant().compose(DiscreteGaussian(3.0, 1.0, dimension=4), count=2)
    noisy = ZCDPAccountant().compose(
        DiscreteGaussian(3.0, 1.0, dimension=4, sampler_tv_bound=eta), count=2)
    assert noisy.sampler_tv_bound == pytest.approx(2 * eta)
    epsilon = 2.0
    assert noisy.delta(epsilon) == pytest.approx(plain.delta(epsilon) + (1 + math.e**2) * 2 * eta)
    assert noisy.epsilon(1e-5) > plain.epsilon(1e-5)
    assert noisy.delta(noisy.epsilon(1e-5)) <= 1e-5
    hopeless = ZCDPAccountant().compose(DiscreteGaussian(3.0, 1.0, sampler_tv_bound=1e-5))
    assert hopeless.epsilon(1e-5) == math.inf


def test_fast_sampler_tv_is_negligible_at_moderate_epsilon() -> None:
    event = FastDiscreteGaussian(100.0).event(1.0, dimension=10**6)
    plain = ZCDPAccountant().compose(DiscreteGaussian(100.0, 1.0, dimension=10**6), count=1000)
    fast = ZCDPAccountant().compose(event, count=1000)
    assert plain.epsilon(1e-5) <= fast.epsilon(1e-5) <= plain.epsilon(1e-5) * (1 + 1e-10)


# -- budget --------------------------------------------------------------------------------------


def test_budget_refuses_and_keeps_the_ledger() -> None:
    budget = PrivacyBudget(epsilon=5.0, delta=1e-5)
    budget.spend(DiscreteGaussian(1.0, 1.0))
    before = budget.history
    with pytest.raises(BudgetExceededError) as caught:
        budget.spend(DiscreteGaussian(1.0, 1.0))
    assert budget.history == before
    assert caught.value.limit == 5.0 and caught.value.would_spend > 5.0
    assert budget.spent() == pytest.approx(4.4302, abs=5e-5)


def test_budget_constructor_is_validated() -> None:
    with pytest.raises(ValueError, match="both"):
        PrivacyBudget(epsilon=1.0)
    with pytest.raises(ValueError, match="not both"):
        PrivacyBudget(epsilon=1.0, delta=1e-5, rho=1.0)
    with pytest.raises(ValueError, match="rho"):
        PrivacyBudget(rho=0.0)
    with pytest.raises(ValueError, match="total-variation"):
        PrivacyBudget(rho=1.0).spend(DiscreteGaussian(1.0, 1.0, sampler_tv_bound=1e-50))


def test_release_spends_before_any_noise_is_drawn() -> None:
    class Spy:
        served = 0

        def fill(self, out: Any) -> None:
            Spy.served += 1
            KeystreamRandom(seed=1).fill(out)

        def random_bytes(self, n: int) -> bytes:
            Spy.served += 1
            return KeystreamRandom(seed=1).random_bytes(n)

    budget = PrivacyBudget(epsilon=1.0, delta=1e-5)
    for exact in (False, True):
        with pytest.raises(BudgetExceededError):
            add_discrete_gaussian_noise(np.zeros(8, dtype=np.int64), sigma=1.0,
                                        l2_sensitivity=1.0, rng=Spy(), budget=budget, exact=exact)
        assert Spy.served == 0 and budget.history == ()
    release = add_discrete_gaussian_noise(np.zeros(8, dtype=np.int64), sigma=10.0,
                                          l2_sensitivity=1.0, rng=Spy(), budget=budget)
    assert Spy.served > 0 and release.event.rho == 0.005 and budget.history == ((release.event, 1),)
    assert release.values.shape == (8,) and release.event.sampler_tv_bound > 0
    with pytest.raises(TypeError, match="integer"):
        add_discrete_gaussian_noise(np.zeros(3), sigma=1.0, l2_sensitivity=1.0)


# -- dp_accounting interop -----------------------------------------------------------------------


def test_to_dp_accounting_equivalents() -> None:
    dp_accounting = pytest.importorskip("dp_accounting")
    dp_event = dp_accounting.dp_event
    assert ZCDP(0.5).to_dp_accounting() == dp_event.ZCDpEvent(rho=0.5)
    assert DiscreteGaussian(1.0, 1.0).to_dp_accounting() == dp_event.ZCDpEvent(rho=0.5)
    repeated = SelfComposedEvent(DiscreteGaussian(2.0, 1.0), 100).to_dp_accounting()
    assert repeated == dp_event.SelfComposedDpEvent(dp_event.ZCDpEvent(rho=0.125), 100)
    assert isinstance(ComposedEvent((ZCDP(0.1),)).to_dp_accounting(), dp_event.ComposedDpEvent)
    assert DiscreteLaplace(2.0, 1.0).to_dp_accounting() == dp_event.DiscreteLaplaceDpEvent(0.5, 1)
    distributed = _distributed_event().to_dp_accounting()
    assert distributed.rho == pytest.approx(_distributed_event().rho)
    theirs = dp_accounting.rdp.RdpAccountant()
    theirs.compose(repeated)
    # The same ρ through the Rényi route agrees with Google's RDP accountant to 1 %;
    ours = ZCDPAccountant().compose(ZCDP(0.125), count=100).epsilon(1e-5)
    assert ours <= theirs.get_epsilon(1e-5) <= ours * 1.01
    # the 100 scalar releases themselves are composed exactly, tighter still.
    exact = ZCDPAccountant().compose(DiscreteGaussian(2.0, 1.0), count=100).epsilon(1e-5)
    assert exact < ours


def test_to_dp_accounting_refuses_silent_tv() -> None:
    pytest.importorskip("dp_accounting")
    event = FastDiscreteGaussian(5.0).event(1.0)
    with pytest.raises(ValueError, match="total-variation"):
        event.to_dp_accounting()
    assert event.to_dp_accounting(ignore_sampler_tv=True).rho == event.rho


def test_to_dp_accounting_names_the_extra_when_missing(monkeypatch: pytest.MonkeyPatch) -> None:
    real = importlib.import_module

    def missing(name: str, *args: Any) -> Any:
        if name.startswith("dp_accounting"):
            raise ImportError("No module named 'dp_accounting'")
        return real(name, *args)

    monkeypatch.setattr(importlib, "import_module", missing)
    with pytest.raises(ImportError, match=r"pip install 'secagg-dp\[dp\]'"):
        ZCDP(0.5).to_dp_accounting()


def _brute_delta(sigma: float, sensitivity: int, rounds: int, epsilon: float) -> float:
    """δ(ε) of T scalar DG releases, summed over every outcome (independent of the accountant)."""
    reach = int(20 * sigma) + 3
    x = np.arange(-reach, reach + 1)
    p = np.exp(-(x * x) / (2 * sigma**2))
    p /= p.sum()
    # The loss of one release at outcome x (P = N_Z(0), Q = N_Z(Δ)): ((x − Δ)² − x²)/(2σ²).
    loss = ((x - sensitivity) ** 2 - x**2) / (2 * sigma**2)
    joint_p, joint_loss = p, loss
    for _ in range(rounds - 1):
        joint_p = np.outer(joint_p, p).ravel()
        joint_loss = np.add.outer(joint_loss, loss).ravel()
    gain = np.clip(-np.expm1(np.minimum(epsilon - joint_loss, 700.0)), 0.0, None)
    return float(np.sum(joint_p * gain))


@pytest.mark.parametrize(
    ("sigma", "sensitivity", "rounds", "delta"),
    [(0.8, 1, 2, 1e-3), (1.0, 1, 3, 1e-5), (1.5, 2, 2, 1e-6), (0.6, 1, 4, 1e-2)],
)
def test_composed_scalar_gaussians_are_exact_and_never_understated(
    sigma: float, sensitivity: int, rounds: int, delta: float
) -> None:
    event = DiscreteGaussian(sigma=sigma, l2_sensitivity=float(sensitivity))
    accountant = ZCDPAccountant().compose(event, count=rounds)
    claimed = accountant.epsilon(delta)
    assert _brute_delta(sigma, sensitivity, rounds, claimed) <= delta  # never understated
    assert _brute_delta(sigma, sensitivity, rounds, claimed * (1 - 1e-6)) > delta  # and tight
    # δ(ε) agrees with the brute force, overstated only by the sums' error margin (~1e-8).
    brute = _brute_delta(sigma, sensitivity, rounds, claimed)
    assert brute <= accountant.delta(claimed) <= brute * (1 + 1e-6)
