"""The self-check: every audit passes on the real code, and every mutant is caught.

Passing means auditing: every audit must run and PASS on the real code (the timing audit 3,
report-only by design, may REPORT), and an audit expected to see a mutant must not be ``n/a``.

In the fast mode each mutant runs the audits expected to see it, cheapest first, and stops at
the first that catches it (enough to prove the audits bite, and fast enough for CI); with
``matrix=True`` every audit runs against every mutant, which fills the whole catch table.
Against mutants, audit 5 uses 300 releases per neighbour and no power requirement: a
violation, not tightness, is what it hunts there.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from audits.mutants import MUTANTS, Mutant
from audits.ours import OurTarget
from audits.records import AuditResult, Tier, Verdict, check_tier
from audits.suite import AUDITS, Progress, run_audits
from audits.targets import AuditTarget

__all__ = [
    "FalseAlarmReport",
    "MutantOutcome",
    "SelfCheckReport",
    "run_false_alarm_check",
    "run_self_check",
]

logger = logging.getLogger(__name__)

#: Rough cost order of the audits in the fast tier (cheapest first) for mutant runs.
_COST_ORDER = (8, 4, 2, 10, 1, 6, 9, 7, 3, 5)
_MUTANT_OPTIONS: dict[int, dict[str, Any]] = {5: {"releases": 300, "require_power": False}}
#: Audits that measure and report rather than decide (audit 3: timing); all others must PASS.
_REPORT_ONLY = frozenset({3})


@dataclass(frozen=True)
class MutantOutcome:
    """Which audits ran against a mutant, which caught it (with their first findings), and
    which of the audits expected to see it were ``n/a`` (the target could not be audited there).

    Examples
    --------
    >>> MutantOutcome("m", "a bug", (4,), (4,), {4: ("claimed ε < exact",)}, 0.1).caught
    True
    """

    name: str
    description: str
    ran: tuple[int, ...]
    caught_by: tuple[int, ...]
    findings: dict[int, tuple[str, ...]]
    seconds: float
    not_applicable: tuple[int, ...] = ()

    @property
    def caught(self) -> bool:
        """Whether at least one audit failed on the mutant."""
        return bool(self.caught_by)


@dataclass(frozen=True)
class SelfCheckReport:
    """Real-code results, one outcome per mutant, and the catch rate.

    Examples
    --------
    >>> report = SelfCheckReport(real=[], mutants=[])
    >>> report.catch_rate, report.passed
    (1.0, False)
    >>> report.gaps[0]
    'audit 1 sampler-fit did not run on the real code'
    """

    real: list[AuditResult]
    mutants: list[MutantOutcome]
    seed: int = 0
    tier: str = "fast"
    matrix: bool = False
    seconds: float = 0.0
    notes: list[str] = field(default_factory=list)

    @property
    def false_alarms(self) -> list[AuditResult]:
        """Audits that failed on the real code."""
        return [r for r in self.real if r.verdict is Verdict.FAIL]

    @property
    def catch_rate(self) -> float:
        """Fraction of mutants caught by at least one audit."""
        if not self.mutants:
            return 1.0
        return sum(m.caught for m in self.mutants) / len(self.mutants)

    @property
    def gaps(self) -> list[str]:
        """What was not audited: a real-code audit missing or neither PASS nor (audit 3) REPORT
        (FAILs are :attr:`false_alarms`), or an audit expected to see a mutant that was n/a."""
        gaps: list[str] = []
        for spec in AUDITS:
            verdicts = [r.verdict for r in self.real if r.audit == spec.number]
            allowed = {Verdict.PASS} | ({Verdict.REPORT} if spec.number in _REPORT_ONLY else set())
            if not verdicts:
                gaps.append(f"audit {spec.number} {spec.name} did not run on the real code")
            gaps.extend(
                f"audit {spec.number} {spec.name} was {verdict.value} on the real code"
                for verdict in verdicts
                if verdict is not Verdict.FAIL and verdict not in allowed
            )
        gaps.extend(
            f"audit {number} expected to see mutant {m.name} was n/a"
            for m in self.mutants
            for number in m.not_applicable
        )
        return gaps

    @property
    def passed(self) -> bool:
        """Every audit ran and passed on the real code, and every mutant was caught by audits
        that could run."""
        return not self.false_alarms and not self.gaps and self.catch_rate == 1.0


def _mutant_run(
    mutant: Mutant,
    *,
    tier: Tier,
    seed: int,
    matrix: bool,
    target_factory: Callable[[], AuditTarget] = OurTarget,
) -> MutantOutcome:
    start = time.perf_counter()
    target = target_factory()
    if matrix:
        order = [spec.number for spec in AUDITS]
    else:
        order = sorted(mutant.expected_audits, key=_COST_ORDER.index)
    ran: list[int] = []
    caught: list[int] = []
    findings: dict[int, tuple[str, ...]] = {}
    not_applicable: list[int] = []
    with mutant.inject():
        for number in order:
            [result] = run_audits(
                target, tier=tier, seed=seed, only=[number], options=_MUTANT_OPTIONS
            )
            ran.append(number)
            if result.verdict is Verdict.NOT_APPLICABLE and number in mutant.expected_audits:
                not_applicable.append(number)
            if result.verdict is Verdict.FAIL:
                caught.append(number)
                findings[number] = result.findings[:3]
                if not matrix:
                    break
    return MutantOutcome(
        mutant.name,
        mutant.description,
        tuple(ran),
        tuple(caught),
        findings,
        time.perf_counter() - start,
        tuple(not_applicable),
    )


def run_self_check(
    *,
    tier: Tier = "fast",
    seed: int = 0,
    matrix: bool = False,
    mutants: Sequence[Mutant] = MUTANTS,
    progress: Progress | None = None,
    target_factory: Callable[[], AuditTarget] = OurTarget,
) -> SelfCheckReport:
    """Run every audit on the real code, then the audits against every mutant.

    ``target_factory`` builds the target (our code; the mutants patch it); tests pass a subclass
    of :class:`audits.ours.OurTarget` without some capability.

    Examples
    --------
    >>> from audits.mutants import mutant_by_name
    >>> report = run_self_check(mutants=[mutant_by_name("rho_quarter")])  # doctest: +SKIP
    >>> report.mutants[0].caught_by  # doctest: +SKIP
    (4,)
    """
    tier = check_tier(tier)
    start = time.perf_counter()
    total = len(AUDITS) + len(mutants)

    def step(label: str, done: int, _total: int) -> None:
        if progress is not None:
            progress(label, min(done, len(AUDITS)), total)

    real = run_audits(target_factory(), tier=tier, seed=seed, progress=step)
    outcomes: list[MutantOutcome] = []
    for index, mutant in enumerate(mutants):
        if progress is not None:
            progress(mutant.name[:15], len(AUDITS) + index, total)
        outcomes.append(
            _mutant_run(mutant, tier=tier, seed=seed, matrix=matrix, target_factory=target_factory)
        )
    if progress is not None:
        progress("done", total, total)
    return SelfCheckReport(
        real=real,
        mutants=outcomes,
        seed=seed,
        tier=tier,
        matrix=matrix,
        seconds=time.perf_counter() - start,
    )


@dataclass(frozen=True)
class FalseAlarmReport:
    """Every audit on the real code at several seeds: which (seed, audit) pairs failed.

    Examples
    --------
    >>> FalseAlarmReport(seeds=(0, 1), tier="fast", failures={}, verdicts={}).false_alarms
    0
    """

    seeds: tuple[int, ...]
    tier: str
    failures: dict[int, dict[str, tuple[str, ...]]]
    verdicts: dict[int, dict[str, str]]
    seconds: float = 0.0

    @property
    def false_alarms(self) -> int:
        """How many (seed, audit) runs failed."""
        return sum(len(by_audit) for by_audit in self.failures.values())


def run_false_alarm_check(
    seeds: Sequence[int],
    *,
    tier: Tier = "fast",
    only: Sequence[int] | None = None,
    progress: Progress | None = None,
) -> FalseAlarmReport:
    """Run the audits on the real code once per seed; every FAIL is a false alarm.

    Examples
    --------
    >>> report = run_false_alarm_check([0, 1], only=[4])
    >>> report.false_alarms, report.verdicts[1]
    (0, {'accountant': 'pass'})
    """
    tier = check_tier(tier)
    start = time.perf_counter()
    failures: dict[int, dict[str, tuple[str, ...]]] = {}
    verdicts: dict[int, dict[str, str]] = {}
    for index, seed in enumerate(seeds):
        if progress is not None:
            progress(f"seed {seed}", index, len(seeds))
        results = run_audits(OurTarget(), tier=tier, seed=seed, only=only)
        verdicts[seed] = {r.name: r.verdict.value for r in results}
        failed = {r.name: r.findings for r in results if r.verdict is Verdict.FAIL}
        if failed:
            failures[seed] = failed
    if progress is not None:
        progress("done", len(seeds), len(seeds))
    return FalseAlarmReport(
        tuple(seeds), tier, failures, verdicts, seconds=time.perf_counter() - start
    )
