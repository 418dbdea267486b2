"""Audit 7: a ring with no room for the clients is refused with a HeadroomError naming the
smallest sufficient bits — and a refusal that names none, or too many, is caught."""

from __future__ import annotations

from typing import Any

import pytest

from audits.ours import OurTarget
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
