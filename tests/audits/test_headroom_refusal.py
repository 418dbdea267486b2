"""Audit 7: a ring with no room for the clients is refused with a HeadroomError naming the
smallest sufficient bits — and a refusal that names none, or too many, is caught."""

from __future__ import annotations

from typing import Any

import pytest

from audits.ours import OurTarget
from dpquantile import quantile
from protocols.aggregation import _quantization


def _problem() -> str | None:
    probe: Any = OurTarget().secure_sum()
    result: str | None = probe.headroom_refusal(0)
    return result


@pytest.mark.filterwarnings("ignore::UserWarning")
def test_ours_names_the_smallest_sufficient_bits() -> None:
    assert _problem() is None


@pytest.mark.filterwarnings("ignore::UserWarning")
def test_a_refusal_that_names_more_bits_than_needed_is_caught(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    real = _quantization.required_bits
    monkeypatch.setattr(_quantization, "required_bits", lambda *a, **k: real(*a, **k) + 1)
    _quantization.plan_quantization.cache_clear()
    problem = _problem()
    _quantization.plan_quantization.cache_clear()
    assert problem is not None and "suffice" in problem


@pytest.mark.filterwarnings("ignore::UserWarning")
def test_a_refusal_without_the_bits_it_needs_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    real = _quantization.plan_quantization

    def vague(*args: Any, **kwargs: Any) -> Any:
        try:
            return real(*args, **kwargs)
        except ValueError as error:
            raise ValueError(str(error)) from None  # the same words, no required_bits

    from protocols.aggregation import encoding  # noqa: PLC0415 (where the average plans)

    monkeypatch.setattr(encoding, "plan_quantization", vague)
    problem = _problem()
    assert problem is not None and "without naming the bits" in problem


def test_our_quantile_releases_the_same_on_the_widest_rings() -> None:
    probe: Any = OurTarget().secure_sum()
    outcome = probe.overflow_probe(0)
    assert outcome.refused or outcome.max_abs_error <= outcome.tolerance, outcome


@pytest.mark.parametrize("broken", ["raises", "reduces"])
def test_a_quantile_failing_on_a_64_bit_ring_is_caught(
    monkeypatch: pytest.MonkeyPatch, broken: str
) -> None:
    # Held-out 10's survivor `bits == 63`: a 64-bit ring's counts went through the centred
    # reduction, whose 2^63 offset overflows int64 (OverflowError) — the simulated path only.
    real = quantile._centered_modulo

    def centred(total: Any, bits: int) -> Any:
        if bits < 64:
            return real(total, bits)
        if broken == "raises":
            raise OverflowError("Python int too large to convert to C long")
        return real(total, 4)  # a reduction on too small a ring

    monkeypatch.setattr(quantile, "_centered_modulo", centred)
    outcome = OurTarget().secure_sum().overflow_probe(0)  # type: ignore[union-attr]
    assert not outcome.refused and outcome.max_abs_error > outcome.tolerance
    assert "(simulated) with modulus_bits = 64" in outcome.note
    assert ("OverflowError" in outcome.note) == (broken == "raises")
