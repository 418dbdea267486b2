"""Audit 4's export check: an event whose noise carries a sampler TV is never handed to another
accountant as exact noise by default."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from audits.ours import OurTarget
from audits.privacy_audits import _tv_export_checks


def test_every_export_of_ours_refuses_a_sampler_tv_by_default() -> None:
    findings: list[str] = []
    outcome = _tv_export_checks(OurTarget().accountant(), findings)
    assert not findings and len(outcome) == 5
    # Every event, composed or not, refuses before it needs dp_accounting: the refusal is the
    # same whether or not the `dp` extra is installed (the README's bare tier has it not).
    assert all(v.startswith("refused with TV") for v in outcome.values()), outcome


def test_an_export_that_drops_the_tv_silently_is_caught() -> None:
    class DropsTV:
        def sampler_tv_exports(self, tv: float) -> tuple[tuple[str, Callable[[], Any]], ...]:
            return (("drops", lambda: ("exported", tv)),)

    findings: list[str] = []
    assert _tv_export_checks(DropsTV(), findings) == {"drops": "exported with TV"}
    assert len(findings) == 1 and "exported as exact noise" in findings[0]


def test_an_export_that_refuses_exact_noise_too_is_caught() -> None:
    class RefusesAll:
        def sampler_tv_exports(self, tv: float) -> tuple[tuple[str, Callable[[], Any]], ...]:
            def export() -> None:
                raise ValueError("no")

            return (("refuses", export),)

    findings: list[str] = []
    _tv_export_checks(RefusesAll(), findings)
    assert len(findings) == 1 and "exact noise refused export" in findings[0]
    assert _tv_export_checks(object(), []) == {}  # not offered: not asked
