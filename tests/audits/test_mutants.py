"""Mutants restore the real code on exit, and each is caught by the audits expected to see it."""

from __future__ import annotations

import pytest

import dpquantile.accounting
import dpquantile.quantile
import dpquantile.samplers
import protocols.aggregation.secure_average
import secagg.client
import secagg.masks
import secagg.shamir
from audits.mutants import MUTANTS, Mutant, mutant_by_name
from audits.ours import OurTarget
from audits.selfcheck import _mutant_run

_WATCHED = [
    (dpquantile.samplers.ExactDiscreteGaussian, "__init__"),
    (dpquantile.samplers.ExactDiscreteGaussian, "_draw"),
    (dpquantile.samplers.ExactDiscreteGaussian, "_accept"),
    (dpquantile.accounting.DiscreteGaussian, "renyi_bounds"),
    (dpquantile.accounting.ZCDPAccountant, "_renyi_epsilon"),
    (dpquantile.quantile, "_sensitivities"),
    (dpquantile.quantile, "dp_quantile"),
    (dpquantile.quantile, "check_headroom"),
    (protocols.aggregation.secure_average, "secure_weighted_average"),
    (protocols.aggregation.secure_average, "_client_row"),
    (secagg.shamir, "share"),
    (secagg.masks, "pairwise_mask_key"),
    (secagg.client, "pairwise_mask_key"),
]


def _snapshot() -> list[object]:
    table = dict(secagg.client._TRANSITIONS)
    return [getattr(owner, name) for owner, name in _WATCHED] + [table]


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
