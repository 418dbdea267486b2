"""Audits 4, 7 and 8 ask every parameter that would void a guarantee to be refused with a clear
error: ours refuses all of them, and a lenient or crashing validation is caught."""

from __future__ import annotations

import math
from typing import Any

import pytest

from audits.ours import OurTarget
from audits.targets import refusal_findings


@pytest.mark.filterwarnings("ignore::UserWarning")
def test_ours_refuses_every_listed_parameter() -> None:
    target = OurTarget()
    assert refusal_findings(target.accountant()) == (46, [])
    assert refusal_findings(target.graph_parameters()) == (18, [])
    assert refusal_findings(target.secure_sum()) == (11, [])


def test_a_tv_of_one_accepted_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    from dpquantile import accounting  # noqa: PLC0415

    real = accounting.DiscreteGaussian.__post_init__

    def lenient(self: Any) -> None:  # a TV of exactly 1 let through
        if self.sampler_tv_bound == 1.0:
            object.__setattr__(self, "sampler_tv_bound", 0.5)
        real(self)
        if self.sampler_tv_bound == 0.5:
            object.__setattr__(self, "sampler_tv_bound", 1.0)

    monkeypatch.setattr(accounting.DiscreteGaussian, "__post_init__", lenient)
    _, findings = refusal_findings(OurTarget().accountant())
    assert findings == [
        "DiscreteGaussian(sampler_tv_bound=1.0) accepted (returned a DiscreteGaussian)"
    ]


def test_a_refusal_by_an_unclear_error_is_a_finding() -> None:
    class Crashes:
        def invalid_parameters(self) -> tuple[tuple[str, Any], ...]:
            return (("log(0)", lambda: math.log(0)), ("1/0", lambda: 1 / 0))

    count, findings = refusal_findings(Crashes())
    # math.log(0) raises ValueError (clear); 1/0 a ZeroDivisionError (not a refusal by contract).
    assert count == 2 and len(findings) == 1 and "ZeroDivisionError" in findings[0]
    assert refusal_findings(object()) == (0, [])
