"""The typed verdict every audit returns, and the tier an audit runs at."""

from __future__ import annotations

import enum
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np

__all__ = ["FAMILY_ALPHA", "AuditResult", "Tier", "Verdict", "check_tier", "not_applicable"]

#: Family-wise false-alarm rate of every FAIL verdict (per audit, Bonferroni inside it).
FAMILY_ALPHA = 1e-6

Tier = Literal["fast", "deep"]


def check_tier(tier: str) -> Tier:
    """Validate a tier name.

    Examples
    --------
    >>> check_tier("fast")
    'fast'
    """
    if tier == "fast":
        return "fast"
    if tier == "deep":
        return "deep"
    raise ValueError(f"tier must be 'fast' or 'deep'; got {tier!r}")


class Verdict(enum.Enum):
    """The outcome of one audit.

    ``PASS`` and ``FAIL`` are decisions; ``REPORT`` is a measurement with no claim to hold it to
    (the timing channel of a sampler that claims no constant-time mode); ``NOT_APPLICABLE`` means
    the target offers nothing this audit can examine.

    Examples
    --------
    >>> Verdict.PASS.value
    'pass'
    """

    PASS = "pass"
    FAIL = "fail"
    REPORT = "report"
    NOT_APPLICABLE = "n/a"


def _plain(value: Any) -> Any:
    """JSON-friendly copy of nested details (numpy scalars, tuples, non-finite floats)."""
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple | np.ndarray):
        return [_plain(v) for v in value]
    if isinstance(value, bool | np.bool_) or value is None or isinstance(value, str):
        return None if value is None else (value if isinstance(value, str) else bool(value))
    if isinstance(value, int | np.integer):
        return int(value)
    if isinstance(value, float | np.floating):
        number = float(value)
        return number if math.isfinite(number) else str(number)
    return str(value)


@dataclass(frozen=True)
class AuditResult:
    """One audit's verdict with the statistic it rests on.

    Attributes
    ----------
    audit
        The audit's number (1–9 from issue 7; 10: the attack family).
    name
        Short name (``sampler-fit``, ``accountant``, ...).
    target
        Which implementation was audited.
    statistic
        What was computed, in words (names the test).
    value
        The statistic's value (``None`` when not applicable).
    threshold
        The decision rule, in words.
    samples
        How many samples (draws, releases, grid points, examples) the statistic rests on.
    verdict
        :class:`Verdict`.
    error_rate
        Upper bound on the probability of a FAIL on a correct implementation (0 for exact,
        deterministic checks; ``None`` for a report).
    tau
        Tightness ε_lower / ε_claimed where it applies.
    findings
        One line per failed check (empty when everything passed).
    details
        Everything else worth keeping (JSON-friendly).
    seconds
        Wall time.
    power
        The smallest defect this run would have caught with ≥ 95 % probability (computed from its
        sample size where the test's law allows, :mod:`audits.power`), or what kind of check it is.

    Examples
    --------
    >>> result = AuditResult(4, "accountant", "ours", "max claimed/exact", 1.1, "≤ 1.15", 12,
    ...                      Verdict.PASS, 0.0)
    >>> result.passed, result.to_dict()["verdict"]
    (True, 'pass')
    """

    audit: int
    name: str
    target: str
    statistic: str
    value: float | None
    threshold: str
    samples: int
    verdict: Verdict
    error_rate: float | None
    tau: float | None = None
    findings: tuple[str, ...] = ()
    details: Mapping[str, Any] = field(default_factory=dict)
    seconds: float = 0.0
    power: str = ""

    @property
    def passed(self) -> bool:
        """True unless the verdict is FAIL."""
        return self.verdict is not Verdict.FAIL

    def to_dict(self) -> dict[str, Any]:
        """A JSON-serialisable dictionary."""
        return {
            "audit": self.audit,
            "name": self.name,
            "target": self.target,
            "statistic": self.statistic,
            "value": _plain(self.value),
            "threshold": self.threshold,
            "samples": self.samples,
            "verdict": self.verdict.value,
            "error_rate": self.error_rate,
            "tau": _plain(self.tau),
            "findings": list(self.findings),
            "details": _plain(self.details),
            "seconds": round(self.seconds, 3),
            "power": self.power,
        }


def not_applicable(audit: int, name: str, target: str, reason: str) -> AuditResult:
    """The record of an audit the target offers nothing for.

    Examples
    --------
    >>> not_applicable(4, "accountant", "flower", "no accountant").verdict
    <Verdict.NOT_APPLICABLE: 'n/a'>
    """
    return AuditResult(
        audit,
        name,
        target,
        reason,
        None,
        "—",
        0,
        Verdict.NOT_APPLICABLE,
        None,
        details={"reason": reason},
    )
