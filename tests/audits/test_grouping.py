"""Audit 4's grouping check: the same T releases composed in groups (nested self-compositions, a
composition of parts) give the flat claim's ε — and a composition that loses releases when
nested is caught."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from audits.ours import OurTarget
from audits.privacy_audits import _grouping_checks, _groupings, audit_accountant


def test_groupings_cover_nested_factors_and_parts() -> None:
    assert _groupings(1) == []
    assert _groupings(7) == [("parts", (6, 1))]
    assert _groupings(64) == [("nested", (2, 32)), ("nested", (8, 8)), ("parts", (63, 1))]


def test_our_accountant_is_associative_on_the_grid() -> None:
    result = audit_accountant(OurTarget())
    rows = result.details["grouping_rows"]
    assert result.verdict.value == "pass" and len(rows) == 270
    assert {r["grouping"].split(" ")[0] for r in rows} == {"nested", "parts"}


def test_a_nested_composition_that_or_s_its_counts_is_caught(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from dpquantile import accounting  # noqa: PLC0415

    def leaves(self: Any) -> Iterator[tuple[Any, int]]:
        for leaf, count in self.event.leaves():
            yield leaf, count | self.count  # 2 | 2 = 2 releases where 4 ran

    monkeypatch.setattr(accounting.SelfComposedEvent, "leaves", leaves)
    rows = [
        {"sigma": 1.0, "sensitivity": 1.0, "rounds": 4, "delta": 1e-5, "exact": 9.9373,
         "claimed": 9.95},
    ]
    findings: list[str] = []
    _grouping_checks(OurTarget().accountant(), rows, findings)
    assert findings and "as nested (2, 2)" in findings[0] and "privacy understated" in findings[0]


def test_an_accountant_without_groupings_is_not_asked() -> None:
    assert _grouping_checks(object(), [{"rounds": 4}], []) == []
