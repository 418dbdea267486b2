"""The float tracer sees every way a float can reach an integer sampler, and nothing else."""

from __future__ import annotations

import math
import sys

import numpy as np
import pytest

from audits.float_trace import trace_floats
from audits.ours import OurTarget

MODULES = ("tests.audits", "test_float_trace")


def _integer_only() -> int:
    values = np.arange(10, dtype=np.int64)
    return int((values * values // 3).sum()) + math.isqrt(99)


def _float_constant() -> int:
    return int(np.arange(4).sum() * 1.5)


def _true_division() -> int:
    return int(np.arange(4).sum() // 1) + 3 // 2 + int(7 / 7)


def _numpy_random() -> int:
    return int(np.random.default_rng(0).integers(0, 10))


def _inline_normal() -> int:
    return int(np.rint(np.random.default_rng(0).standard_normal(3)).astype(np.int64).sum())


def _math_exp() -> int:
    return int(math.exp(1))


def test_integer_code_is_clean() -> None:
    assert trace_floats(_integer_only, modules=MODULES).findings == []


@pytest.mark.parametrize(
    ("function", "check"),
    [
        (_float_constant, "bytecode"),
        (_true_division, "bytecode"),
        (_numpy_random, "bytecode"),
        (_inline_normal, "bytecode"),
        (_math_exp, "C call"),
    ],
)
def test_each_route_of_a_float_is_caught(function: object, check: str) -> None:
    trace = trace_floats(function, modules=MODULES)  # type: ignore[arg-type]
    assert check in {finding.check for finding in trace.findings}, trace.findings


def test_float_only_on_numpys_value_stack_is_still_caught() -> None:
    # np.rint(normal) never binds a float to a name: the bytecode and C-call checks see it.
    trace = trace_floats(_inline_normal, modules=MODULES)
    assert any("standard_normal" in f.what or "rint" in f.what for f in trace.findings)


@pytest.mark.parametrize("sigma", [0.5, 3.7, 100.0, 100_000.0])
def test_real_samplers_have_no_float_on_their_sampling_path(sigma: float) -> None:
    for sampler in OurTarget().samplers():
        draw = sampler.prepare(sigma)
        trace = trace_floats(lambda d=draw: d(300, 5), modules=sampler.sampling_modules)
        assert trace.findings == [], (sampler.name, [str(f) for f in trace.findings[:3]])
        assert trace.lines_seen > 50  # the trace did watch the sampler run


def test_tracer_restores_previous_hooks() -> None:
    before = (sys.gettrace(), sys.getprofile())
    trace_floats(_integer_only, modules=MODULES)
    assert (sys.gettrace(), sys.getprofile()) == before
