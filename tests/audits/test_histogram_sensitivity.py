"""Audit 4: the DP histogram's stated sensitivities are held to what one client's move changes
in its released counts (same seed, same noise) — over- and understatement both caught."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from audits.ours import OurTarget
from audits.privacy_audits import _HISTOGRAM_CELLS, _histogram_sensitivity_checks


def test_ours_states_exactly_what_the_encoding_moves() -> None:
    findings: list[str] = []
    rows = _histogram_sensitivity_checks(OurTarget().accountant(), findings)
    assert findings == []
    assert len(rows) == 2 * len(_HISTOGRAM_CELLS)
    for row in rows:
        np.testing.assert_allclose(row["stated"], row["measured"], rtol=1e-12)
    # Replace-one moves one unit per level, twice: Δ₁ = 2sL, Δ₂ = s√(2L) (flat: L = 1).
    tree = next(r for r in rows if r["mechanism"] == "tree" and r["bins"] == 64)
    flat = next(r for r in rows if r["mechanism"] == "flat" and r["bins"] == 64)
    assert tree["measured"][0] ** 2 == pytest.approx(12 * tree["measured"][1] ** 2)  # L = 6
    assert flat["measured"][0] ** 2 == pytest.approx(2 * flat["measured"][1] ** 2)


class _Stating:
    """Our trial, its stated sensitivities multiplied by ``factor`` for one mechanism."""

    histogram_mechanisms = ("tree", "flat")

    def __init__(self, mechanism: str, factor: float) -> None:
        self.mechanism, self.factor = mechanism, factor
        self._real: Any = OurTarget().accountant()

    def histogram_sensitivity_trial(self, mechanism: str, bins: int, branching: int) -> Any:
        trial = self._real.histogram_sensitivity_trial(mechanism, bins, branching)
        (l1, l2), first, last, documented = trial
        if mechanism == self.mechanism:
            l1, l2 = l1 * self.factor, l2 * self.factor
        return (l1, l2), first, last, documented


@pytest.mark.parametrize(
    ("mechanism", "factor", "phrase"),
    [("flat", 6**0.5, "more noise than ρ needs"), ("tree", 0.5, "noise understated")],
)
def test_a_misstated_sensitivity_is_caught(mechanism: str, factor: float, phrase: str) -> None:
    # The held-out survivor (seed 4) charged the flat histogram the tree's √L: Δ₂ × √6 at 64 bins.
    findings: list[str] = []
    _histogram_sensitivity_checks(_Stating(mechanism, factor), findings)
    assert len(findings) == 2 * len(_HISTOGRAM_CELLS)  # Δ₁ and Δ₂ of every tree
    assert all(f"({mechanism}," in f and phrase in f for f in findings)


def test_a_release_that_misplaces_the_counts_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    # The held-out survivor (seed 4): each level's count at offset − node instead of offset +
    # node. One count per level still moves, so the norms match; the coordinates do not.
    from dpquantile import quantile  # noqa: PLC0415

    def row(self: Any, index: int) -> Any:
        vector = self.noise.noise(self.root.spawn(b"noise/%d" % index))
        j = int(self.bin_index[index])
        if self.mechanism == "flat":
            vector[j] += self.scale
            return vector
        offset = 0
        for size in self.tree.level_sizes:
            vector[offset - j // (self.tree.bins // size)] += self.scale
            offset += size
        return vector

    monkeypatch.setattr(quantile._NoisyVectors, "row", row)
    findings: list[str] = []
    _histogram_sensitivity_checks(OurTarget().accountant(), findings)
    assert len(findings) == len(_HISTOGRAM_CELLS)  # every tree; flat untouched
    assert all("(tree," in f and "encodes the data wrongly" in f for f in findings)
