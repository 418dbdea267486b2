"""Superquantile aggregation (Δ-FL): tail weights, θ = 1 ≡ FedAvg, the DP quantile, empty tails."""

from __future__ import annotations

import math

import numpy as np
import pytest

from dpquantile import DistributedDiscreteGaussian
from protocols.aggregation import (
    AverageSettings,
    DiscreteGaussianNoise,
    SecureAverageSession,
    secure_weighted_average,
)
from protocols.aggregation.superquantile import (
    QuantileSettings,
    SuperquantileResult,
    empirical_tail_threshold,
    superquantile_aggregate,
    tail_weights,
)
from secagg import TooFewSurvivorsError


def round_data(m: int = 12, d: int = 6, seed: int = 0) -> tuple[np.ndarray, ...]:
    rng = np.random.default_rng(seed)
    updates = rng.standard_normal((m, d))
    sizes = rng.integers(20, 200, m).astype(np.float64)
    losses = rng.permutation(np.linspace(0.2, 3.0, m))  # distinct losses: no ties
    return updates, sizes, losses


# -- the tail and its weights -------------------------------------------------------------------


def test_tail_weights_by_hand() -> None:
    losses = np.array([0.9, 0.1, 0.5, 0.7, 0.3])
    sizes = np.array([10.0, 20.0, 30.0, 40.0, 50.0])
    # θ = 0.4 of 5 clients: the 2 largest losses (0.9 and 0.7); Q̂ is the 2nd largest.
    assert empirical_tail_threshold(losses, 0.4) == 0.7
    np.testing.assert_array_equal(tail_weights(losses, sizes, 0.7), [10.0, 0, 0, 40.0, 0])
    updates = np.arange(10.0).reshape(5, 2)
    result = superquantile_aggregate(updates, sizes, losses, theta=0.4, secure=False)
    expected = (10.0 * updates[0] + 40.0 * updates[3]) / 50.0
    np.testing.assert_allclose(result.average, expected, rtol=1e-15)
    assert result.tail == (0, 3) and result.threshold == 0.7
    assert result.averages[0].weight_sum == pytest.approx(50.0)
    assert result.events == () and result.quantile is None and result.num_secure_sums == 1


@pytest.mark.parametrize("theta", [0.05, 0.1, 0.25, 0.3, 0.5, 0.7, 0.8, 0.9, 1.0])
@pytest.mark.parametrize("m", [7, 10, 33])
def test_exact_tail_holds_ceil_theta_m_clients(theta: float, m: int) -> None:
    updates, sizes, losses = round_data(m, 3, seed=m)
    result = superquantile_aggregate(updates, sizes, losses, theta=theta, secure=False)
    expected = max(1, math.ceil(round(theta * m, 9)))
    assert result.num_tail_clients == expected
    # Exactly the clients with the largest losses, with their own weights.
    assert set(result.tail) == set(np.argsort(losses)[m - expected :].tolist())
    tail = list(result.tail)
    manual = sizes[tail] @ updates[tail] / sizes[tail].sum()
    np.testing.assert_allclose(result.average, manual, rtol=1e-12, atol=1e-15)


def test_ties_at_the_threshold_all_join_the_tail() -> None:
    losses = np.array([1.0, 2.0, 2.0, 2.0, 0.5])
    result = superquantile_aggregate(np.eye(5), np.ones(5), losses, theta=0.2, secure=False)
    assert result.threshold == 2.0 and result.tail == (1, 2, 3)


# -- θ = 1 is FedAvg, bit for bit --------------------------------------------------------------


@pytest.mark.parametrize("secure", [True, False])
def test_theta_one_is_fedavg_exactly(secure: bool) -> None:
    updates, sizes, losses = round_data()
    settings = AverageSettings(bits=32, clip=10.0)
    result = superquantile_aggregate(
        updates,
        sizes,
        losses,
        theta=1.0,
        settings=settings,
        secure=secure,
        seed=5,
        quantile=QuantileSettings(rho=1.0, upper=4.0),  # never used at θ = 1
    )
    fedavg = secure_weighted_average(updates, sizes, bits=32, clip=10.0, seed=5, secure=secure)
    assert result.average is not None
    assert np.array_equal(result.average, fedavg.average)
    assert result.threshold is None and result.quantile is None and result.events == ()
    assert result.tail == tuple(range(12)) and result.num_secure_sums == 1


# -- secure and plain paths ---------------------------------------------------------------------


def test_secure_and_plain_agree_to_quantisation_error() -> None:
    updates, sizes, losses = round_data(16, 8, seed=3)
    quantile = QuantileSettings(rho=2.0, lower=0.0, upper=4.0, bins=16)
    secure = superquantile_aggregate(updates, sizes, losses, theta=0.5, quantile=quantile, seed=11)
    plain = superquantile_aggregate(
        updates, sizes, losses, theta=0.5, quantile=quantile, seed=11, secure=False
    )
    # The DP quantile adds the identical noise on both paths: same threshold, same tail.
    assert secure.threshold == plain.threshold and secure.tail == plain.tail
    assert secure.average is not None and plain.average is not None
    step = secure.averages[0].quantization_step
    assert step is not None
    # secure_average_notes.md §1 bound (λ = 1/4), with the released weight sum.
    weight_sum = secure.averages[0].weight_sum
    bound = 16 * step * (1 + 4) / (weight_sum - 16 * step * 4 / secure.averages[0].clip)
    assert np.abs(secure.average - plain.average).max() <= bound
    assert secure.quantile is not None and secure.quantile.secure
    assert len(secure.events) == 1 and secure.events[0] is secure.quantile.event
    assert secure.quantile.rho <= 2.0 and secure.num_secure_sums == 2


def test_dp_quantile_tail_is_near_the_exact_one() -> None:
    rng = np.random.default_rng(4)
    losses = rng.uniform(0.0, 2.0, 200)
    result = superquantile_aggregate(
        rng.standard_normal((200, 3)),
        np.ones(200),
        losses,
        theta=0.3,
        quantile=QuantileSettings(rho=8.0, lower=0.0, upper=2.0, bins=32),
        secure=False,
        seed=2,
    )
    # ρ = 8 on 200 clients: the tail's share is 0.3 up to a few clients.
    assert abs(result.num_tail_clients / 200 - 0.3) < 0.05


# -- rejection, failures, empty tails -----------------------------------------------------------


def test_non_finite_losses_and_updates_are_rejected() -> None:
    updates, sizes, losses = round_data(8, 4, seed=1)
    losses[2] = np.nan
    updates[5, 1] = np.inf
    result = superquantile_aggregate(updates, sizes, losses, theta=0.5, secure=False)
    assert result.rejected == (2, 5)
    kept = [i for i in range(8) if i not in (2, 5)]
    threshold = empirical_tail_threshold(losses[kept], 0.5)
    tail = [i for i in kept if losses[i] >= threshold]
    assert result.tail == tuple(tail) and 2 not in result.tail
    assert result.average is not None
    np.testing.assert_allclose(
        result.average, sizes[tail] @ updates[tail] / sizes[tail].sum(), rtol=1e-12
    )


def test_every_tail_client_dropping_out_is_a_reported_failure() -> None:
    updates, sizes, losses = round_data(10, 3, seed=2)
    tail = np.argsort(losses)[-2:]  # θ = 1/5 of 10: the two largest losses
    result = superquantile_aggregate(
        updates,
        sizes,
        losses,
        theta=1 / 5,
        secure=True,
        seed=1,
        dropouts={"masked_input": tail.tolist()},
    )
    assert result.average is None and result.failure is not None
    assert "ZeroWeightSumError" in result.failure and result.averages == ()


def test_too_few_participants_raise() -> None:
    with pytest.raises(TooFewSurvivorsError):
        superquantile_aggregate([[1.0], [np.nan]], [1.0, 1.0], [0.1, 0.2], theta=0.5)


def empty_tail_round(
    policy: str, noise: DiscreteGaussianNoise | None = None
) -> SuperquantileResult:
    # Every loss is 0: the interpolated DP quantile lies inside the first bin, above all of them.
    rng = np.random.default_rng(0)
    return superquantile_aggregate(
        rng.standard_normal((10, 4)),
        np.full(10, 5.0),
        np.zeros(10),
        theta=0.5,
        quantile=QuantileSettings(rho=50.0, lower=0.0, upper=1.0, bins=8),
        settings=AverageSettings(clip=10.0, noise=noise),
        weight_cap=5.0,
        secure=False,
        seed=3,
        empty_tail=policy,  # type: ignore[arg-type]
    )


def test_empty_tail_skip_keeps_the_model_and_pays_one_call() -> None:
    result = empty_tail_round("skip")
    assert result.threshold is not None and result.threshold > 0.0
    assert result.empty_tail and result.fallback == "skip" and result.average is None
    assert result.tail == () and result.num_secure_averages == 1 and result.num_secure_sums == 2
    assert len(result.events) == 1  # the quantile's: its privacy is spent


def test_empty_tail_all_falls_back_to_the_weighted_mean() -> None:
    result = empty_tail_round("all")
    rng = np.random.default_rng(0)
    vectors = rng.standard_normal((10, 4))
    assert result.fallback == "all" and result.average is not None
    np.testing.assert_allclose(result.average, vectors.mean(axis=0), rtol=1e-12)
    assert result.num_secure_averages == 2 and len(result.averages) == 1


def test_empty_tail_with_noise_charges_the_wasted_release() -> None:
    noise = DiscreteGaussianNoise(rho=0.5)
    skipped = empty_tail_round("skip", noise)
    assert len(skipped.events) == 2  # quantile + the noisy zero-weight release
    wasted = skipped.events[1]
    # Planned at ρ = 0.5 for add/remove neighbours; stated for replace-one (the DP quantile's
    # relation) so the round composes: Δ doubles, ρ at most 4 × 0.5.
    assert isinstance(wasted, DistributedDiscreteGaussian) and wasted.relation == "replace_one"
    assert 0.5 < wasted.rho <= 4 * 0.5
    fallen_back = empty_tail_round("all", noise)
    assert len(fallen_back.events) == 3


# -- validation ---------------------------------------------------------------------------------


@pytest.mark.parametrize("theta", [0.0, -0.1, 1.5, float("nan")])
def test_theta_outside_zero_one_is_rejected(theta: float) -> None:
    with pytest.raises(ValueError, match="theta"):
        superquantile_aggregate([[1.0], [2.0]], [1.0, 1.0], [0.1, 0.2], theta=theta)


def test_shape_and_weight_errors() -> None:
    with pytest.raises(ValueError, match="shape"):
        superquantile_aggregate([[1.0], [2.0]], [1.0], [0.1, 0.2], theta=0.5)
    with pytest.raises(ValueError, match="non-negative"):
        superquantile_aggregate([[1.0], [2.0]], [1.0, -1.0], [0.1, 0.2], theta=0.5)
    with pytest.raises(ValueError, match="every weight is zero"):
        superquantile_aggregate([[1.0], [2.0]], [0.0, 0.0], [0.1, 0.2], theta=0.5)
    with pytest.raises(ValueError, match="empty_tail"):
        superquantile_aggregate(
            [[1.0], [2.0]],
            [1.0, 1.0],
            [0.1, 0.2],
            theta=0.5,
            empty_tail="max",  # type: ignore[arg-type]
        )
    with pytest.raises(ValueError, match="power of 2"):
        QuantileSettings(rho=1.0, bins=48)
    with pytest.raises(ValueError, match="positive"):
        QuantileSettings(rho=0.0)


@pytest.mark.parametrize("in_session", [False, True])
@pytest.mark.parametrize("secure", [False, True])
def test_dp_quantile_refuses_to_release_below_its_planned_survivors(
    secure: bool, in_session: bool
) -> None:
    rng = np.random.default_rng(7)
    vectors, losses = rng.standard_normal((10, 3)), rng.random(10)
    quantile = QuantileSettings(rho=0.5, upper=1.0, bins=8, min_survivors=9, neighbors=None)

    def common() -> dict[str, object]:
        session = SecureAverageSession(10, sums=2, secure=secure, seed=2) if in_session else None
        return dict(
            theta=0.5, quantile=quantile, weight_cap=1.0, secure=secure, seed=1, session=session
        )

    # 8 of the 10 send their masked histogram; its noise was planned for 9: nothing is released
    # (as one sum of a session too: the session aborts with nothing unmasked).
    with pytest.raises(TooFewSurvivorsError, match="9"):
        superquantile_aggregate(
            vectors, np.ones(10), losses, dropouts={"masked_input": [0, 1]}, **common()  # type: ignore[arg-type]
        )
    ok = superquantile_aggregate(
        vectors, np.ones(10), losses, dropouts={"masked_input": [0]}, **common()  # type: ignore[arg-type]
    )
    assert ok.events and all(event.rho <= 0.5 for event in ok.events[:1])


# -- one session for the round's sums ------------------------------------------------------------


def _deltafl_round(session: SecureAverageSession | None, secure: bool, **options: object) -> tuple:
    rng = np.random.default_rng(11)
    vectors, losses = rng.standard_normal((12, 4)), rng.uniform(0.0, 1.0, 12)
    losses[5] = np.nan  # rejected before any sum: out of the histogram and the average
    quantile = QuantileSettings(rho=4.0, upper=1.0, bins=8, neighbors=None)
    result = superquantile_aggregate(
        vectors,
        np.ones(12),
        losses,
        theta=0.5,
        quantile=quantile,
        weight_cap=1.0,
        secure=secure,
        seed=3,
        session=session,
        **options,  # type: ignore[arg-type]
    )
    return result, vectors


@pytest.mark.parametrize("secure", [True, False])
def test_the_histogram_and_the_tail_average_share_one_session(secure: bool) -> None:
    # The same release as two separate secure sums (the sums are exact; the histogram's noise
    # comes from the same seeds; the average's rounding is drawn per client index, which the
    # rejected client shifts: equal to the grid), with one key setup: two of the three sums run.
    alone, _ = _deltafl_round(None, secure)
    session = SecureAverageSession(12, sums=3, settings=AverageSettings(), secure=secure, seed=4)
    shared, _ = _deltafl_round(session, secure)
    assert shared.threshold == alone.threshold and shared.tail == alone.tail
    assert shared.survivors == alone.survivors
    np.testing.assert_allclose(shared.average, alone.average, atol=1e-7)
    assert shared.num_secure_sums == alone.num_secure_sums == 2
    assert session.remaining == 1 and 5 not in session.members
    if secure:
        assert session._session is not None and session._session.remaining == 1


def test_a_client_that_leaves_the_histogram_is_out_of_the_tail_average_on_both_paths() -> None:
    # Client 2 sends its masked histogram, then vanishes before unmasking: it is in the
    # histogram's total but not in the session's later sums — on the secure and plain paths.
    drops = {"unmask": [2]}
    results = []
    for secure in (True, False):
        session = SecureAverageSession(12, sums=3, settings=AverageSettings(), secure=secure,
                                       seed=4)
        result, _ = _deltafl_round(session, secure, dropouts=drops)
        results.append(result)
        assert 2 not in result.survivors and 2 not in session.members
    assert results[0].survivors == results[1].survivors
    assert results[0].threshold == results[1].threshold


def test_a_histogram_wider_than_the_sessions_ring_runs_on_its_own() -> None:
    # An 8-bit session cannot hold this histogram's noise: it runs as its own secure sum (no
    # budget spent, nothing drawn before the ring was checked) and the tail average uses the
    # session.
    narrow = AverageSettings(bits=8)  # the histogram needs 9 bits here
    session = SecureAverageSession(12, sums=2, settings=narrow, seed=4)
    result, _ = _deltafl_round(session, True, settings=narrow)
    assert result.quantile is not None and result.average is not None
    assert session._session is not None and session._session.remaining == 1


def test_a_session_of_another_round_is_refused() -> None:
    with pytest.raises(ValueError, match="session has 5 clients"):
        _deltafl_round(SecureAverageSession(5, sums=2), True)
