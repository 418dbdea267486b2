"""Audit 6's release paths: secure and simulated releases agree, the secure one runs the
protocol, the estimate is post-processing of the release, and a shortfall refusal refuses —
each planted in an adapter that wraps the real DP quantile."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

import numpy as np
import pytest

import protocols.aggregation.encoding as encoding
from audits import OurTarget, Verdict, audit_dropout_noise
from audits.ours import _QuantileDropout, _SecureAverageDropout
from audits.targets import PathRelease, ReleasePaths
from protocols.aggregation._quantization import plan_quantization
from secagg import HeadroomError, Quantizer


def test_our_aggregates_offer_both_paths_and_pass() -> None:
    aggregates = OurTarget().dropout_noise()
    assert all(isinstance(a, ReleasePaths) for a in aggregates)
    result = audit_dropout_noise(OurTarget(), dropped_fractions=(0.0,))
    assert result.verdict is Verdict.PASS, result.findings
    rows = {row["aggregate"]: row for row in result.details["release_paths"]}
    assert rows["DP quantile"]["refuses_shortfall"]
    assert not rows["secure average"]["refuses_shortfall"]
    assert all(row["problems"] == 0 and row["dropped_sets"] == 4 for row in rows.values())


def test_the_secure_path_really_runs_the_protocol() -> None:
    release = _QuantileDropout().release([3], 5, secure=True, refuse_shortfall=False)
    simulated = _QuantileDropout().release([3], 5, secure=False, refuse_shortfall=False)
    assert release.protocol_steps is not None and release.protocol_steps > 10
    assert simulated.protocol_steps == 0
    np.testing.assert_array_equal(release.released, simulated.released)
    assert release.estimate == release.recomputed


class _Planted(_QuantileDropout):
    """The real DP quantile with one defect of the kind the held-out mutants showed."""

    def __init__(self, defect: str) -> None:
        self.defect = defect

    def release(
        self, dropped: Sequence[int], seed: int, *, secure: bool, refuse_shortfall: bool
    ) -> PathRelease:
        if self.defect == "inverted refusal" and not secure:
            # quantile.py's simulated path refusing a full round and releasing a short one
            refuse_shortfall = refuse_shortfall and not dropped
        real = super().release(dropped, seed, secure=secure, refuse_shortfall=refuse_shortfall)
        if self.defect == "skips the protocol" and secure:
            return dataclasses.replace(real, protocol_steps=0)
        if self.defect == "estimate from shifted counts" and real.estimate is not None:
            return dataclasses.replace(real, estimate=real.estimate * 0.9)
        if self.defect == "secure path differs" and secure:
            released = real.released.copy()
            released[-1] += 1
            return dataclasses.replace(real, released=released)
        if self.defect == "shortfall warning inverted":
            # The held-out survivor (seed 8) `if event.rho <= rho:`: it warns on full rounds.
            return dataclasses.replace(real, warned=not dropped)
        if self.defect == "dropped as a ratio":
            # The held-out survivor (seed 5) `dropped=n / survivors`: a float that is 1.0 when
            # nobody dropped.
            assert isinstance(real.survivors, int)
            return dataclasses.replace(real, dropped=self.num_clients / real.survivors)
        return real


@pytest.mark.parametrize(
    ("defect", "words"),
    [
        ("dropped as a ratio", "reports dropped"),
        ("shortfall warning inverted", "privacy shortfall although every client survived"),
        ("inverted refusal", "refuse"),
        ("skips the protocol", "never ran the secure-sum protocol"),
        ("estimate from shifted counts", "post-processing"),
        ("secure path differs", "differ in 1 of"),
    ],
)
def test_each_planted_path_defect_fails(defect: str, words: str) -> None:
    class Target(OurTarget):
        def dropout_noise(self) -> Sequence[Any]:
            return (_SecureAverageDropout(), _Planted(defect))

    result = audit_dropout_noise(Target(), dropped_fractions=(0.0,))
    assert result.verdict is Verdict.FAIL
    assert any(words in finding for finding in result.findings), result.findings
    rows = {row["aggregate"]: row for row in result.details["release_paths"]}
    assert rows["secure average"]["problems"] == 0
    assert rows["DP quantile"]["problems"] >= 1


def test_who_was_summed_and_who_was_gone_are_reported_as_they_were() -> None:
    from audits.privacy_audits import _reported_problem  # noqa: PLC0415

    quantile = _QuantileDropout().release([2, 7], 1, secure=False, refuse_shortfall=False)
    average = _SecureAverageDropout().release([2, 7], 1, secure=False, refuse_shortfall=False)
    assert (quantile.survivors, quantile.dropped) == (8, 2)
    assert average.dropped == (2, 7) and average.survivors == (0, 1, 3, 4, 5, 6, 8, 9)
    for release in (quantile, average):
        assert _reported_problem("x", 10, [2, 7], release) is None
        assert "reports survivors" in str(_reported_problem("x", 10, [2], release))
    ratio = dataclasses.replace(quantile, dropped=1.25)
    assert "reports dropped 1.25" in str(_reported_problem("x", 10, [2, 7], ratio))
    ids_off = dataclasses.replace(average, dropped=(2, 8))
    assert "reports dropped (2, 8)" in str(_reported_problem("x", 10, [2, 7], ids_off))


def test_a_shortfall_is_warned_of_exactly_when_someone_dropped() -> None:
    for aggregate in (_QuantileDropout(), _SecureAverageDropout()):
        for secure in (False, True):
            warned = [
                aggregate.release(gone, 3, secure=secure, refuse_shortfall=False).warned
                for gone in ([], [4])
            ]
            assert warned == [False, True], (aggregate.name, secure)


def test_an_aggregate_without_paths_is_left_to_the_variance_test() -> None:
    class NoiseOnly:
        name = "noise only"
        num_clients = 10

        def noise(self, dropped: Sequence[int], seed: int) -> tuple[Any, float]:
            return np.random.default_rng(seed).normal(0.0, 1.0, 50), 1.0

    class Target(OurTarget):
        def dropout_noise(self) -> Sequence[Any]:
            return (NoiseOnly(),)

    result = audit_dropout_noise(Target(), dropped_fractions=(0.0,))
    assert result.details["release_paths"] == []
    assert result.verdict is Verdict.PASS


# ----------------------------------------------------------------- audit 7: the grid rule


def _replanned(monkeypatch: pytest.MonkeyPatch, factor: float, *, rotated_only: bool) -> None:
    """Every secure average's grid scale multiplied by ``factor`` (coarser below 1, wrapping
    above 1), as a planner bug would."""
    real = plan_quantization

    def planned(*args: Any) -> Any:
        plan = real(*args)
        if rotated_only and not plan.rotate:
            return plan
        quantizer = Quantizer(clip=plan.quantizer.clip, scale=plan.quantizer.scale * factor)
        return dataclasses.replace(plan, quantizer=quantizer)

    monkeypatch.setattr(encoding, "plan_quantization", planned)


def test_our_grid_follows_its_documented_rule() -> None:
    assert OurTarget().secure_sum().grid_rule(0) is None  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("factor", "rotated_only", "words"),
    [
        (0.5, False, "coarser than the documented finest"),  # the worst-case clip swapped
        (0.3, True, "rotate=True: its grid"),  # rotation's flattened candidate lost
        (1.001, False, "it can wrap"),
        (1.001, True, "it can wrap"),
    ],
)
def test_a_planted_grid_defect_fails(
    monkeypatch: pytest.MonkeyPatch, factor: float, rotated_only: bool, words: str
) -> None:
    _replanned(monkeypatch, factor, rotated_only=rotated_only)
    problem = OurTarget().secure_sum().grid_rule(0)  # type: ignore[union-attr]
    assert problem is not None and words in problem, problem


def test_a_grid_defect_only_at_clips_other_than_one_fails(monkeypatch: pytest.MonkeyPatch) -> None:
    # The seed-6 survivor `_MAX_SCALED ** clip`: identical at clip 1 (every grid case had it),
    # a coarser grid below 1 and an OverflowError far above.
    real = plan_quantization

    def planned(*args: Any) -> Any:
        plan = real(*args)
        if args[2] == 1.0:  # the coordinate magnitude B·c: 1 at clip 1 (B = 1 throughout)
            return plan
        quantizer = Quantizer(clip=plan.quantizer.clip, scale=plan.quantizer.scale * 0.25)
        return dataclasses.replace(plan, quantizer=quantizer)

    monkeypatch.setattr(encoding, "plan_quantization", planned)
    problem = OurTarget().secure_sum().grid_rule(0)  # type: ignore[union-attr]
    assert problem is not None and "clip 0.5" in problem and "coarser" in problem, problem


def test_a_grid_past_float64_s_resolution_on_a_wide_ring_fails(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Held-out 11's survivor `_MAX_SCALED = float(2** 53)`: on rings of 56 bits and more the
    # plan asked the quantiser for clip·scale up to 2^53, which it refuses; no grid case was
    # wider than 48 bits.
    import protocols.aggregation._quantization as quantization  # noqa: PLC0415

    plan_quantization.cache_clear()
    monkeypatch.setattr(quantization, "_MAX_SCALED", float(2**53))
    try:
        problem = OurTarget().secure_sum().grid_rule(0)  # type: ignore[union-attr]
    finally:
        plan_quantization.cache_clear()
    assert problem is not None and "56-bit ring" in problem and "2^52" in problem, problem


def test_a_grid_coarser_only_on_wide_rings_fails(monkeypatch: pytest.MonkeyPatch) -> None:
    real = plan_quantization

    def planned(*args: Any) -> Any:
        plan = real(*args)
        if args[4] < 56:  # the ring's bits
            return plan
        quantizer = Quantizer(clip=plan.quantizer.clip, scale=plan.quantizer.scale * 0.5)
        return dataclasses.replace(plan, quantizer=quantizer)

    monkeypatch.setattr(encoding, "plan_quantization", planned)
    problem = OurTarget().secure_sum().grid_rule(0)  # type: ignore[union-attr]
    assert problem is not None and "56-bit ring" in problem and "coarser" in problem, problem


@pytest.mark.parametrize("noisy", [False, True])
def test_a_plan_stating_another_noise_bound_fails(
    monkeypatch: pytest.MonkeyPatch, noisy: bool
) -> None:
    # Held-out 10's survivor: the noise-free plan stated a noise bound of 1 grid unit, not 0.
    real = plan_quantization

    def planned(*args: Any) -> Any:
        plan = real(*args)
        if (plan.mechanism is not None) != noisy:
            return plan
        return dataclasses.replace(plan, noise_bound=plan.noise_bound + 1)

    monkeypatch.setattr(encoding, "plan_quantization", planned)
    problem = OurTarget().secure_sum().grid_rule(0)  # type: ignore[union-attr]
    assert problem is not None and "states a noise bound of" in problem, problem
    assert ("(it has no noise)" in problem) != noisy


def test_our_average_is_equivariant_in_the_clip() -> None:
    assert OurTarget().secure_sum().clip_equivariance(0) is None  # type: ignore[union-attr]


@pytest.mark.parametrize("broken", ["coarser", "refused"])
def test_an_average_that_depends_on_the_clip_s_units_fails(
    monkeypatch: pytest.MonkeyPatch, broken: str
) -> None:
    # Held-out 10's survivor `s_min = min(1.0 + magnitude, s_max)`: with noise, a clip of 10^10
    # on a 24-bit ring was refused (the coarsest grid taken as 10^10 steps per clip), though
    # the same problem at clip 1 is served; and seed 6's `_MAX_SCALED ** clip`, a coarser grid.
    real = plan_quantization

    def planned(*args: Any) -> Any:
        plan = real(*args)
        if args[2] == 1.0:  # the coordinate magnitude B·c: 1 at clip 1 (B = 1 throughout)
            return plan
        if broken == "refused":
            raise HeadroomError("no room", required_bits=64)
        quantizer = Quantizer(clip=plan.quantizer.clip, scale=plan.quantizer.scale * 0.5)
        return dataclasses.replace(plan, quantizer=quantizer)

    monkeypatch.setattr(encoding, "plan_quantization", planned)
    problem = OurTarget().secure_sum().clip_equivariance(0)  # type: ignore[union-attr]
    words = "refused at clip 0.5" if broken == "refused" else "at clip 0.5 the average moved"
    assert problem is not None and words in problem, problem
