"""Iterative secure aggregates: the sans-I/O driver, the in-memory loop, transcript and privacy."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dpquantile import ComposedEvent, DistributedDiscreteGaussian, ZCDPAccountant
from protocols.aggregation import (
    AverageSettings,
    CallPlan,
    Contributions,
    DiscreteGaussianNoise,
    IterativeRule,
    IterativeSecureAggregate,
    IterativeState,
    SecureAverageSession,
    ServerView,
    WeiszfeldRule,
    clip_rows,
    run_iterative_aggregate,
    secure_weighted_average,
)
from secagg import LocalProtocolError, TooFewSurvivorsError


class TrimmedMean:
    """A toy rule: call 0 is the mean; call r ≥ 1 down-weights clients far from the last release."""

    def __init__(self, calls: int) -> None:
        self.calls = calls

    def plan(self, transcript: tuple[ServerView, ...]) -> CallPlan | None:
        if len(transcript) == self.calls:
            return None
        previous = transcript[-1] if transcript else None
        return CallPlan(len(transcript), weight_cap=1.0, previous=previous)

    def contributions(self, plan: CallPlan, vectors: np.ndarray) -> Contributions:
        if plan.previous is None:
            return Contributions(np.ones(len(vectors)))
        distance = np.linalg.norm(vectors - plan.previous.average, axis=1)
        return Contributions(1.0 / (1.0 + distance))


def view(average: list[float], weight_sum: float = 1.0) -> ServerView:
    return ServerView(np.array(average), weight_sum, np.zeros(0), (0, 1), (), 1.0, None)


def test_rule_protocol_is_runtime_checkable() -> None:
    assert isinstance(TrimmedMean(2), IterativeRule)
    assert isinstance(WeiszfeldRule(np.ones(3), clip=1.0), IterativeRule)
    with pytest.raises(TypeError, match="IterativeRule"):
        IterativeSecureAggregate(object())  # type: ignore[arg-type]


# -- the driver as a state machine ----------------------------------------------------------------


def test_driver_walks_through_its_states() -> None:
    driver = IterativeSecureAggregate(TrimmedMean(2))
    assert driver.state is IterativeState.IDLE and driver.termination is None
    plan = driver.start()
    assert plan is not None and plan.index == 0 and driver.state is IterativeState.AWAITING_RELEASE
    plan = driver.receive(view([1.0]))
    assert plan is not None and plan.index == 1 and plan.previous is not None
    assert driver.receive(view([2.0])) is None
    assert driver.state is IterativeState.COMPLETED and driver.termination == "rule"
    assert driver.num_secure_averages == 2 and [v.average[0] for v in driver.transcript] == [1, 2]
    assert [p.index for p in driver.plans] == [0, 1]


def test_max_calls_stops_the_driver() -> None:
    driver = IterativeSecureAggregate(TrimmedMean(10), max_calls=1)
    driver.start()
    assert driver.receive(view([0.0])) is None and driver.termination == "max_calls"


@pytest.mark.parametrize(
    "misuse",
    [
        lambda d: d.receive(view([0.0])),  # nothing pending
        lambda d: (d.start(), d.start()),  # started twice
        lambda d: d.abort("no call pending"),
    ],
)
def test_misuse_aborts_and_every_later_call_raises(misuse: object) -> None:
    driver = IterativeSecureAggregate(TrimmedMean(3))
    with pytest.raises(LocalProtocolError):
        misuse(driver)  # type: ignore[operator]
    assert driver.state is IterativeState.ABORTED and driver.termination == "aborted"
    with pytest.raises(LocalProtocolError):
        driver.start()
    with pytest.raises(LocalProtocolError):
        driver.receive(view([0.0]))


def test_wrong_release_type_and_wrong_plan_index_abort() -> None:
    driver = IterativeSecureAggregate(TrimmedMean(3))
    driver.start()
    with pytest.raises(TypeError, match="ServerView"):
        driver.receive([1.0])  # type: ignore[arg-type]
    assert driver.state is IterativeState.ABORTED

    class Skipper(TrimmedMean):
        def plan(self, transcript: tuple[ServerView, ...]) -> CallPlan | None:
            return CallPlan(len(transcript) + 1, previous=view([0.0]))

    with pytest.raises(LocalProtocolError, match="planned call 1"):
        IterativeSecureAggregate(Skipper(3)).start()


def test_call_plan_validation() -> None:
    with pytest.raises(ValueError, match="first call"):
        CallPlan(1)
    with pytest.raises(ValueError, match="first call"):
        CallPlan(0, previous=view([0.0]))
    with pytest.raises(ValueError, match="positive"):
        CallPlan(0, weight_cap=0.0)
    plan = CallPlan(0, parameters={"nu": 1})
    with pytest.raises(TypeError):
        plan.parameters["nu"] = 2.0  # type: ignore[index]
    with pytest.raises(ValueError, match="shape"):
        Contributions(np.ones(3), np.ones((2, 1)))


# -- the in-memory loop ---------------------------------------------------------------------------


def test_transcript_records_what_the_server_saw() -> None:
    points = np.array([[0.0, 0.0], [1.0, 0.0], [0.0, 1.0], [9.0, 9.0]])
    result = run_iterative_aggregate(TrimmedMean(3), points, seed=4)
    assert result.num_secure_averages == 3 and result.termination == "rule"
    assert len(result.transcript) == len(result.plans) == len(result.results) == 3
    for seen, full in zip(result.transcript, result.results, strict=True):
        assert np.array_equal(seen.average, full.average) and seen.weight_sum == full.weight_sum
        assert seen.survivors == (0, 1, 2, 3) and seen.event is None
    assert result.plans[1].previous is result.transcript[0]
    assert np.array_equal(result.aggregate, result.transcript[-1].average)
    assert result.max_true_effective_weight <= result.max_certified_effective_weight


def test_secure_and_plain_loops_agree() -> None:
    rng = np.random.default_rng(1)
    points = rng.standard_normal((8, 6))
    secure = run_iterative_aggregate(TrimmedMean(3), points, seed=2)
    quantised = run_iterative_aggregate(
        TrimmedMean(3), points, seed=2, secure=False, settings=AverageSettings(quantize=True)
    )
    exact = run_iterative_aggregate(TrimmedMean(3), points, secure=False)
    assert np.array_equal(secure.aggregate, quantised.aggregate)  # same integers, same seed
    assert np.abs(secure.aggregate - exact.aggregate).max() < 1e-6
    assert exact.results[0].quantization_step is None


def test_each_call_uses_its_own_dropouts_and_a_failure_aborts() -> None:
    points = np.arange(12.0).reshape(6, 2)
    result = run_iterative_aggregate(
        TrimmedMean(2), points, seed=0, dropouts={1: {"masked_input": [5]}}
    )
    assert result.transcript[0].survivors == (0, 1, 2, 3, 4, 5)
    assert result.transcript[1].dropped == (5,)
    with pytest.raises(TooFewSurvivorsError):
        run_iterative_aggregate(
            TrimmedMean(2), points, seed=0, dropouts={1: {"masked_input": [0, 1, 2]}}
        )


def test_noise_events_compose_over_calls() -> None:
    points = np.random.default_rng(3).standard_normal((6, 4))
    noisy = AverageSettings(clip=5.0, noise=DiscreteGaussianNoise(rho=50.0))
    result = run_iterative_aggregate(TrimmedMean(3), points, settings=noisy, seed=1, secure=False)
    assert isinstance(result.event, ComposedEvent)
    leaves = list(result.event.leaves())
    assert len(leaves) == 3 and all(isinstance(e, DistributedDiscreteGaussian) for e, _ in leaves)
    assert ZCDPAccountant().compose(result.event).rho == pytest.approx(150.0, rel=1e-6)


def test_rule_returning_the_wrong_number_of_weights() -> None:
    class Broken(TrimmedMean):
        def contributions(self, plan: CallPlan, vectors: np.ndarray) -> Contributions:
            return Contributions(np.ones(2))

    with pytest.raises(ValueError, match="2"):
        run_iterative_aggregate(Broken(1), np.ones((3, 2)), secure=False)


def test_clip_rows_leaves_the_input_untouched() -> None:
    original = np.array([[3.0, 4.0], [0.0, 0.1]])
    clipped, clip = clip_rows(original, 1.0)
    assert original[0, 0] == 3.0 and clip == 1.0
    np.testing.assert_allclose(np.linalg.norm(clipped, axis=1), [1.0, 0.1])
    same, largest = clip_rows(original, None)
    assert same is original and largest == 5.0


# -- client-side locality (RFA Definition 1: βᵢ depends on the release and wᵢ only) ---------------


@settings(max_examples=30, deadline=None)
@given(seed=st.integers(0, 2**32), victim=st.integers(0, 5))
def test_weiszfeld_weights_are_client_local(seed: int, victim: int) -> None:
    rng = np.random.default_rng(seed)
    points = rng.standard_normal((6, 4))
    rule = WeiszfeldRule(rng.uniform(0.5, 1.5, 6), clip=10.0)
    previous = secure_weighted_average(points, np.ones(6), secure=False).server_view()
    plan = CallPlan(1, weight_cap=1.0, previous=previous, parameters={"smoothing": 1e-6})
    before = rule.contributions(plan, points)
    perturbed = points.copy()
    perturbed[victim] += rng.standard_normal(4) * 100
    after = rule.contributions(plan, perturbed)
    others = [i for i in range(6) if i != victim]
    assert np.array_equal(before.weights[others], after.weights[others])
    assert before.extras is not None and after.extras is not None
    assert np.array_equal(before.extras[others], after.extras[others])


# -- one session per aggregate -------------------------------------------------------------------


def test_the_calls_of_an_aggregate_share_one_session_and_bind_each_plan() -> None:
    points = np.random.default_rng(3).standard_normal((7, 4))
    result = run_iterative_aggregate(TrimmedMean(3), points, seed=4)
    sums = [r.secure_sum for r in result.results]
    assert all(s is not None for s in sums)
    assert [s.iteration for s in sums if s] == [1, 2, 3]  # one setup, three sums
    setup = {"advertise_keys", "share_keys"}
    assert all(not any(s.upload_bytes[p] for p in setup) for s in sums[1:] if s)
    # session_sums=1 is the per-sum path: every call a full round of its own.
    single = run_iterative_aggregate(TrimmedMean(3), points, seed=4, session_sums=1)
    assert [r.secure_sum.iteration for r in single.results if r.secure_sum] == [1, 1, 1]
    assert np.abs(single.aggregate - result.aggregate).max() < 1e-6
    # The iterate of each sum is its plan's encoding: plans differ, so do the iterates.
    encoded = [plan.encode() for plan in result.plans]
    assert len(set(encoded)) == 3


@pytest.mark.parametrize("threat_model", ["malicious", "semi-honest"])
@pytest.mark.parametrize(
    ("dropouts", "out_after"),
    [
        ({0: {"unmask": [5]}}, {5}),  # counted in call 0, then out of the session
        ({0: {"masked_input": [2]}, 1: {"unmask": [6]}}, {2, 6}),
        ({1: {"share_keys": [3]}}, {3}),  # a key phase after setup: gone before masking
    ],
)
def test_secure_and_plain_sessions_exclude_the_same_clients(
    threat_model: str, dropouts: dict[int, dict[str, list[int]]], out_after: set[int]
) -> None:
    points = np.random.default_rng(5).standard_normal((8, 3))
    settings_ = AverageSettings(clip=5.0, threat_model=threat_model, quantize=True)
    secure = run_iterative_aggregate(
        TrimmedMean(3), points, seed=6, dropouts=dropouts, settings=settings_
    )
    plain = run_iterative_aggregate(
        TrimmedMean(3), points, seed=6, dropouts=dropouts, settings=settings_, secure=False
    )
    for a, b in zip(secure.transcript, plain.transcript, strict=True):
        assert a.survivors == b.survivors
    assert np.array_equal(secure.aggregate, plain.aggregate)  # same integers, same seed
    assert set(range(8)) - set(secure.transcript[-1].survivors) == out_after


def test_a_client_rejected_at_setup_never_joins_and_one_rejected_later_is_excluded() -> None:
    # Non-finite input at the first average: the client advertises no keys (as on the per-sum
    # path, so the malicious quorum counts only the others); later it is gone before masking.
    points = np.random.default_rng(7).standard_normal((6, 2))
    nan_first = points.copy()
    nan_first[4, 0] = np.nan
    result = run_iterative_aggregate(TrimmedMean(2), nan_first, seed=8)
    assert [v.survivors for v in result.transcript] == [(0, 1, 2, 3, 5)] * 2
    plain = run_iterative_aggregate(TrimmedMean(2), nan_first, seed=8, secure=False)
    assert [v.survivors for v in plain.transcript] == [(0, 1, 2, 3, 5)] * 2


@pytest.mark.parametrize("secure", [True, False])
def test_an_average_session_runs_averages_of_different_shapes_and_settings(secure: bool) -> None:
    # One key setup for a one-entry count (its own clip, a public denominator) and then a
    # three-entry average; a client dropped in the count is out of the average, on both paths.
    rng = np.random.default_rng(3)
    points = rng.uniform(-1.0, 1.0, size=(6, 3))
    session = SecureAverageSession(6, sums=2, settings=AverageSettings(clip=2.0), seed=4,
                                   secure=secure)
    counting = AverageSettings(clip=1.0, denominator="survivors", denominator_share=1.0)
    below = (points[:, 0] < 0.0).astype(float)[:, None]
    count = session.average(below, np.ones(6), weight_cap=1.0, settings=counting, seed=1,
                            dropouts={"masked_input": [2]})
    mean = session.average(points, np.ones(6), weight_cap=1.0, seed=2, iterate=b"after count")
    keep = [0, 1, 3, 4, 5]
    assert count.survivors == mean.survivors == tuple(keep)
    np.testing.assert_allclose(count.average, below[keep].mean(axis=0), atol=1e-6)
    np.testing.assert_allclose(mean.average, points[keep].mean(axis=0), atol=1e-6)
    assert session.remaining == 0 and session.dimension == 4
    if secure:  # both sums ran in the one secagg session: sum 2 of 2
        assert session._session is not None and session._session.remaining == 0


def test_an_average_session_refuses_misuse() -> None:
    session = SecureAverageSession(4, sums=1, settings=AverageSettings(clip=1.0), seed=0)
    with pytest.raises(TypeError, match="iterate must be bytes"):
        session.average(np.ones((4, 2)), np.ones(4), iterate="centre")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="session has 4 clients"):
        session.average(np.ones((5, 2)), np.ones(5))
    session.average(np.ones((4, 2)), np.ones(4), weight_cap=1.0)
    with pytest.raises(LocalProtocolError, match="all its 1 averages"):
        session.average(np.ones((4, 2)), np.ones(4))
    two = SecureAverageSession(4, sums=2, settings=AverageSettings(clip=1.0), seed=0)
    two.average(np.ones((4, 2)), np.ones(4), weight_cap=1.0)
    with pytest.raises(ValueError, match="what its key setup fixed: bits, threat_model"):
        settings = AverageSettings(clip=1.0, bits=16, threat_model="semi-honest")
        two.average(np.ones((4, 3)), np.ones(4), weight_cap=1.0, settings=settings)
    with pytest.raises(ValueError, match="sums must lie"):
        SecureAverageSession(4, sums=256)
