"""Mutants restore the real code on exit, and each is caught by the audits expected to see it."""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any

import pytest

import audits.mutants._catalogue as catalogue
import dpquantile._fast_sampler
import dpquantile.accounting
import dpquantile.quantile
import dpquantile.samplers
import protocols.aggregation.secure_average
import secagg.client
import secagg.masks
import secagg.ring
import secagg.server
import secagg.shamir
from audits import AuditResult, Verdict, run_audits
from audits.mutants import MUTANTS, Mutant, mutant_by_name
from audits.ours import OurTarget
from audits.selfcheck import MutantOutcome, SelfCheckReport, _mutant_run
from audits.suite import AUDITS
from audits.targets import SamplerUnderTest

# Each of these is patched by some mutant; the recorded list below must cover them (so the
# recording cannot silently watch nothing).
_MUST_WATCH = [
    (dpquantile.samplers.ExactDiscreteGaussian, "__init__"),
    (dpquantile.samplers.ExactDiscreteGaussian, "_draw"),
    (dpquantile.samplers.ExactDiscreteGaussian, "_accept"),
    (dpquantile._fast_sampler.FastDiscreteGaussian, "__init__"),
    (dpquantile._fast_sampler.FastDiscreteGaussian, "_draw"),
    (dpquantile.accounting.DiscreteGaussian, "renyi_bounds"),
    (dpquantile.accounting.DistributedDiscreteGaussian, "renyi_bounds"),
    (dpquantile.accounting.ZCDPAccountant, "_renyi_epsilon"),
    (vars(dpquantile.quantile), "histogram_sensitivities"),
    (vars(dpquantile.quantile), "dp_quantile"),
    (vars(dpquantile.quantile), "check_headroom"),
    (vars(protocols.aggregation.secure_average), "secure_weighted_average"),
    (vars(protocols.aggregation.secure_average), "_client_row"),
    (vars(secagg.shamir), "share"),
    (vars(secagg.masks), "pairwise_mask_key"),
    (vars(secagg.client), "pairwise_mask_key"),
    (vars(secagg.server), "pairwise_mask_key"),
    (vars(secagg.ring), "check_headroom"),
    (secagg.client.Client, "__init__"),
]


def _key(owner: Any, name: Any) -> tuple[int, Any]:
    return id(owner), name


@functools.cache
def _watched() -> tuple[tuple[Any, Any], ...]:
    """Every (owner, name) some mutant patches, recorded from the mutants' own injections."""
    replaced: list[tuple[Any, Any]] = []
    real = catalogue._patched

    def recording(*replacements: tuple[Any, Any, Any]) -> Any:
        replaced.extend((owner, name) for owner, name, _ in replacements)
        return real(*replacements)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(catalogue, "_patched", recording)
        for mutant in MUTANTS:
            count = len(replaced)
            with mutant.inject():
                pass
            assert len(replaced) > count, f"{mutant.name} patched nothing through _patched"
    unique = {_key(owner, name): (owner, name) for owner, name in replaced}
    return tuple(unique.values())


def _value(owner: Any, name: Any) -> object:
    return owner[name] if isinstance(owner, dict) else vars(owner)[name]


def _snapshot() -> list[object]:
    return [_value(owner, name) for owner, name in _watched()]


def test_the_watched_list_is_what_the_mutants_patch() -> None:
    watched = {_key(owner, name) for owner, name in _watched()}
    missing = [name for owner, name in _MUST_WATCH if _key(owner, name) not in watched]
    assert not missing
    assert _key(secagg.client._TRANSITIONS, (
        secagg.client.ClientState.AWAITING_UNMASK_REQUEST, secagg.UnmaskRequest
    )) in watched  # fmt: skip


@pytest.mark.parametrize("mutant", MUTANTS, ids=lambda m: m.name)
def test_mutant_changes_something_and_restores_everything(mutant: Mutant) -> None:
    before = _snapshot()
    with mutant.inject():
        during = _snapshot()
    assert _snapshot() == before
    assert during != before


def test_mutant_restores_even_when_the_body_raises() -> None:
    before = _snapshot()
    with pytest.raises(RuntimeError), mutant_by_name("rho_quarter").inject():
        raise RuntimeError("inside")
    assert _snapshot() == before


@pytest.mark.parametrize(
    "name",
    # The float mutant has its own test below; 5 and 7 run in the self-check (slow here).
    [
        m.name
        for m in MUTANTS
        if m.expected_audits[0] not in (5, 7) and m.name != "float_in_exact_sampler"
    ],
)
def test_cheap_mutants_are_caught_by_their_first_expected_audit(name: str) -> None:
    outcome = _mutant_run(mutant_by_name(name), tier="fast", seed=3, matrix=False)
    assert outcome.caught, outcome


def test_float_mutant_is_bit_identical_and_caught_only_by_the_trace() -> None:
    sampler = OurTarget().samplers()[0]
    honest = sampler.prepare(3.7)(200, 9)
    mutant = mutant_by_name("float_in_exact_sampler")
    with mutant.inject():
        assert (sampler.prepare(3.7)(200, 9) == honest).all()
    outcome = _mutant_run(mutant, tier="fast", seed=0, matrix=False)
    assert outcome.caught_by == (2,)
    assert all("float" in f for f in outcome.findings[2])


class _NoSamplers(OurTarget):
    """Our code without its samplers: audits 1–3 have nothing to examine."""

    name = "no-samplers"

    def samplers(self) -> Sequence[SamplerUnderTest]:
        return ()


def _passing_real() -> list[AuditResult]:
    return [
        AuditResult(spec.number, spec.name, "ours", "s", 0.0, "t", 1,
                    Verdict.REPORT if spec.number == 3 else Verdict.PASS, 0.0)
        for spec in AUDITS
    ]  # fmt: skip


def test_a_target_lacking_a_capability_fails_the_self_check() -> None:
    caught = MutantOutcome("m", "a bug", (4,), (4,), {4: ("claimed ε < exact",)}, 0.0)
    assert SelfCheckReport(real=_passing_real(), mutants=[caught]).passed  # the control
    # On the real code: audits 1–3 are n/a, nothing fails, and yet the self-check must not pass.
    real = run_audits(_NoSamplers(), only=[1, 2, 3])
    assert {r.verdict for r in real} == {Verdict.NOT_APPLICABLE}
    report = SelfCheckReport(real=real + _passing_real()[3:], mutants=[caught])
    assert not report.false_alarms and report.catch_rate == 1.0 and not report.passed
    assert len(report.gaps) == 3
    assert not SelfCheckReport(real=_passing_real()[1:], mutants=[caught]).passed
    # Against a mutant: the audit expected to see it is n/a (a catch elsewhere does not excuse it).
    outcome = _mutant_run(
        mutant_by_name("float_in_exact_sampler"),
        tier="fast",
        seed=0,
        matrix=False,
        target_factory=_NoSamplers,
    )
    assert outcome.not_applicable == (2,) and not outcome.caught
    excused = MutantOutcome("m", "a bug", (2, 1), (1,), {1: ("x",)}, 0.0, not_applicable=(2,))
    report = SelfCheckReport(real=_passing_real(), mutants=[excused])
    assert report.catch_rate == 1.0 and not report.passed
    assert report.gaps == ["audit 2 expected to see mutant m was n/a"]
