"""Audit 4's export check: an event whose noise carries a sampler TV is never handed to another
accountant as exact noise by default."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from audits.ours import OurTarget
from audits.privacy_audits import _tv_export_checks


def test_every_export_of_ours_refuses_a_sampler_tv_by_default() -> None:
    import importlib.util  # noqa: PLC0415

    findings: list[str] = []
    outcome = _tv_export_checks(OurTarget().accountant(), findings)
    assert not findings and len(outcome) == 5
    # Single events refuse before importing dp_accounting; composed ones need it to get there.
    assert outcome["DiscreteGaussian"].startswith("refused")
    assert outcome["DistributedDiscreteGaussian"].startswith("refused")
    installed = importlib.util.find_spec("dp_accounting") is not None
    allowed = ("refused",) if installed else ("refused", "n/a: export library missing")
    assert all(v.startswith(allowed) for v in outcome.values()), outcome


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
