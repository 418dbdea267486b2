"""Audit 8: the mask layer refuses accumulators of another shape or dtype with TypeError and
serves an unpickled one — and a layer that lets a 0-d accumulator through, or refuses an equal
dtype object that is not NumPy's canonical one, is caught."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import secagg.masks as masks
from audits.ours import OurTarget
from audits.targets import refusal_findings


def _findings() -> list[str]:
    return refusal_findings(OurTarget().mask_prg())[1]


def test_our_mask_layer_refuses_and_serves_as_documented() -> None:
    assert _findings() == []


def test_a_0d_accumulator_let_through_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    # Held-out 13's survivor `accumulator.ndim > 1`: a 0-d array passed the shape check and
    # failed later with IndexError.
    real = masks.add_masks

    def lax(accumulator: Any, ring: Any, **keys: Any) -> None:
        if np.ndim(accumulator) == 0:
            raise IndexError("too many indices for array: array is 0-dimensional")
        real(accumulator, ring, **keys)

    monkeypatch.setattr(masks, "add_masks", lax)
    found = _findings()
    assert any("0 dimensions" in f and "IndexError" in f for f in found), found


def test_an_unpickled_accumulator_refused_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    # Held-out 13's survivor `accumulator.dtype is not ring.dtype`.
    real = masks.add_masks

    def strict(accumulator: Any, ring: Any, **keys: Any) -> None:
        if accumulator.dtype is not ring.dtype:
            raise TypeError(f"accumulator must be a 1-D {ring.dtype} array")
        real(accumulator, ring, **keys)

    monkeypatch.setattr(masks, "add_masks", strict)
    found = _findings()
    assert any("unpickled" in f and "not served" in f for f in found), found
