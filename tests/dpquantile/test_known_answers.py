"""Known-answer outputs of every sampler from fixed streams (``dpquantile/known_answers.json``).

Any change to how a sampler consumes its stream or maps words to values changes these outputs; if
the change is intended, regenerate with ``python tests/dpquantile/test_known_answers.py`` and
say why in the commit. The statistical tests, not these vectors, show that outputs are correct.
"""

from __future__ import annotations

import hashlib
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from dpquantile import (
    ExactDiscreteGaussian,
    ExactDiscreteLaplace,
    FastDiscreteGaussian,
    IntegerNoiseSampler,
)
from secagg.randomness import KeystreamRandom

# The one home of the samplers' known answers: package data, read by the audits too.
DATA = Path(__file__).resolve().parents[2] / "dpquantile" / "known_answers.json"
COUNT = 24

CASES: list[dict[str, Any]] = [
    {"sampler": "exact_gaussian", "parameter": "0.5", "seed": 1},
    {"sampler": "exact_gaussian", "parameter": "1.0", "seed": 2},
    {"sampler": "exact_gaussian", "parameter": "3.7", "seed": 3},
    {"sampler": "exact_gaussian", "parameter": "100.0", "seed": 4},
    {"sampler": "exact_gaussian", "parameter": "100000.0", "seed": 5},
    {"sampler": "fast_gaussian", "parameter": "0.5", "seed": 6},
    {"sampler": "fast_gaussian", "parameter": "1.0", "seed": 7},
    {"sampler": "fast_gaussian", "parameter": "3.7", "seed": 8},
    {"sampler": "fast_gaussian", "parameter": "100.0", "seed": 9},
    {"sampler": "fast_gaussian", "parameter": "1234.567", "seed": 10},
    {"sampler": "fast_gaussian", "parameter": "100000.0", "seed": 11},
    {"sampler": "exact_laplace", "parameter": "0.5", "seed": 12},
    {"sampler": "exact_laplace", "parameter": "1.0", "seed": 13},
    {"sampler": "exact_laplace", "parameter": "3.3", "seed": 14},
    # Long vectors, stored as a SHA-256 of the little-endian int64 values: every rejection and
    # plan decision of a regime leaves its mark (a 0 is drawn ≈ 50 times at σ = 64.5, where the
    # fast sampler's block path runs; ≈ 900 times at σ = 3.7, its table path).
    {"sampler": "fast_gaussian", "parameter": "3.7", "seed": 15, "count": 8192},
    {"sampler": "fast_gaussian", "parameter": "64.5", "seed": 16, "count": 8192},
    {"sampler": "fast_gaussian", "parameter": "100000.0", "seed": 17, "count": 8192},
    {"sampler": "exact_gaussian", "parameter": "3.7", "seed": 18, "count": 2048},
    # σ² = 9·10^8 < 2^31 but |Y|·t ≈ 2^32: the exact sampler's int64 guard decides the path.
    {"sampler": "exact_gaussian", "parameter": "30000.0", "seed": 19, "count": 8192},
    # Batch sizes: every count above makes the exact sampler's first batch n + n//2 + 8 with
    # bit 3 of n + n//2 clear; 1000 (1500 = 0b10111011100) sets it, so a batch size rewritten
    # as (n + n//2) ^ 8 — equal whenever bit 3 is clear — changes these (held-out 12).
    {"sampler": "exact_gaussian", "parameter": "3.7", "seed": 20, "count": 1000},
    {"sampler": "exact_gaussian", "parameter": "100000.0", "seed": 21, "count": 1000},
    # σ = 121.88 (σ' = 60.94): the block regime's half table has exactly 1024 = 2^10 entries
    # (M = 1023), the one size where its column count is decided by len − 1, not len.
    {"sampler": "fast_gaussian", "parameter": "121.88", "seed": 22, "count": 1000},
]

_FACTORIES: dict[str, Callable[[float], IntegerNoiseSampler]] = {
    "exact_gaussian": ExactDiscreteGaussian,
    "fast_gaussian": FastDiscreteGaussian,
    "exact_laplace": ExactDiscreteLaplace,
}


def _draw(case: dict[str, Any]) -> list[int]:
    sampler = _FACTORIES[case["sampler"]](float(case["parameter"]))
    stream = KeystreamRandom(seed=case["seed"], label=b"dpquantile/known-answers")
    return [int(v) for v in sampler.sample(case.get("count", COUNT), rng=stream)]


def _digest(values: list[int]) -> str:
    return hashlib.sha256(np.asarray(values, dtype="<i8").tobytes()).hexdigest()


def _load() -> list[dict[str, Any]]:
    if not DATA.exists():  # only while regenerating
        return []
    cases: list[dict[str, Any]] = json.loads(DATA.read_text())["cases"]
    return cases


@pytest.mark.parametrize("case", _load(), ids=lambda c: f"{c['sampler']}-{c['parameter']}")
def test_sampler_reproduces_known_answer(case: dict[str, Any]) -> None:
    if "sha256" in case:
        assert _digest(_draw(case)) == case["sha256"]
    else:
        assert _draw(case) == case["values"]


def test_known_answer_file_covers_every_case() -> None:
    stored = {(c["sampler"], c["parameter"], c["seed"]) for c in _load()}
    assert stored == {(c["sampler"], c["parameter"], c["seed"]) for c in CASES}


def test_known_answers_are_not_degenerate() -> None:
    for case in _load():
        if "sha256" in case:
            values = np.array(_draw(case))
            if float(case["parameter"]) < 100:
                assert (values == 0).sum() >= 20, case  # the rejections at 0 are exercised
        else:
            values = np.array(case["values"])
        if float(case["parameter"]) >= 1.0:
            assert len(set(values.tolist())) > 3, case


def _regenerate() -> None:
    cases = [
        dict(case, sha256=_digest(_draw(case)))
        if "count" in case
        else dict(case, values=_draw(case))
        for case in CASES
    ]
    payload: dict[str, Any] = {
        "description": "First outputs of each sampler from KeystreamRandom(seed, "
        "label=b'dpquantile/known-answers'); regenerate with "
        "python tests/dpquantile/test_known_answers.py (also read by audits/ours.py); a case "
        "with a count stores the SHA-256 of its count values as little-endian int64",
        "count": COUNT,
        "cases": cases,
    }
    del payload["cases"]
    lines = ",\n".join("  " + json.dumps(case) for case in cases)
    header = json.dumps(payload, indent=1)[:-2]
    DATA.write_text(f'{header},\n "cases": [\n{lines}\n ]\n}}\n')
    print(f"wrote {len(cases)} cases to {DATA}", file=sys.stderr)


if __name__ == "__main__":
    _regenerate()
