"""The ten audits as one suite: names, tiers, and a runner that never lets one audit crash
the rest (an audit that raises is recorded as a FAIL naming the exception)."""

from __future__ import annotations

import logging
import signal
import threading
import time
import traceback
import warnings
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from audits.attacks import audit_attacks
from audits.canary_audit import audit_canaries
from audits.privacy_audits import audit_accountant, audit_dropout_noise, audit_epsilon_lower_bound
from audits.protocol_audits import audit_secure_sum, audit_shamir_masks_graph
from audits.records import AuditResult, Tier, Verdict, check_tier
from audits.sampler_audits import audit_sampler_exactness, audit_sampler_fit, audit_sampler_timing
from audits.targets import AuditTarget
from secagg.errors import InsecureSettingsWarning

__all__ = [
    "AUDITS",
    "FAST_TIME_LIMIT",
    "AuditSpec",
    "AuditTimeLimitExceeded",
    "Progress",
    "audit_by_number",
    "run_audits",
]

logger = logging.getLogger(__name__)

Progress = Callable[[str, int, int], None]


@dataclass(frozen=True)
class AuditSpec:
    """One audit: its number (issue 7), name, and function ``(target, *, tier, seed, ...)``.

    Examples
    --------
    >>> AUDITS[0].number, AUDITS[0].name
    (1, 'sampler-fit')
    """

    number: int
    name: str
    function: Callable[..., AuditResult]


AUDITS: tuple[AuditSpec, ...] = (
    AuditSpec(1, "sampler-fit", audit_sampler_fit),
    AuditSpec(2, "sampler-exactness", audit_sampler_exactness),
    AuditSpec(3, "sampler-timing", audit_sampler_timing),
    AuditSpec(4, "accountant", audit_accountant),
    AuditSpec(5, "epsilon-lower-bound", audit_epsilon_lower_bound),
    AuditSpec(6, "dropout-noise", audit_dropout_noise),
    AuditSpec(7, "secure-sum", audit_secure_sum),
    AuditSpec(8, "shamir-masks-graph", audit_shamir_masks_graph),
    AuditSpec(9, "one-run-canaries", audit_canaries),
    AuditSpec(10, "attacks", audit_attacks),
)


def audit_by_number(number: int) -> AuditSpec:
    """The audit with this number.

    Examples
    --------
    >>> audit_by_number(4).name
    'accountant'
    """
    for spec in AUDITS:
        if spec.number == number:
            return spec
    raise KeyError(f"no audit {number}; audits are 1–{len(AUDITS)}")


_OUR_PACKAGES = frozenset({"secagg", "dpquantile", "protocols", "audits"})


def raised_in(exc: BaseException) -> str:
    """The module of this project where ``exc`` was raised: its innermost frame in
    ``secagg``, ``dpquantile``, ``protocols`` or ``audits`` (a NumPy or SciPy error is placed
    in our caller), or ``""`` when none of its frames is ours. It tells an implementation that
    raised on an audit's input (``secagg.…``) from an audit tripping on what it got back
    (``audits.…``).

    Examples
    --------
    >>> from secagg.graph_parameters import count_from_rate
    >>> try:
    ...     count_from_rate(10, 1.5)
    ... except ValueError as error:
    ...     raised_in(error)
    'secagg.graph_parameters'
    """
    found = ""
    tb = exc.__traceback__
    while tb is not None:
        module = str(tb.tb_frame.f_globals.get("__name__", ""))
        if module.partition(".")[0] in _OUR_PACKAGES:
            found = module
        tb = tb.tb_next
    return found


def _crashed(
    spec: AuditSpec, target: AuditTarget, exc: BaseException, seconds: float
) -> AuditResult:
    trace = traceback.format_exception_only(type(exc), exc)[-1].strip()
    return AuditResult(
        audit=spec.number,
        name=spec.name,
        target=target.name,
        statistic="the audit could not complete",
        value=None,
        threshold="the implementation must not raise",
        samples=0,
        verdict=Verdict.FAIL,
        error_rate=0.0,
        findings=(f"raised {trace[:300]}",),
        details={"exception": trace, "raised_in": raised_in(exc)},
        seconds=seconds,
    )


#: CPU-time budget of one fast-tier audit, in seconds, as ``secagg-dp-audit`` applies it:
#: several times the heaviest audit on our code (audit 5 ≈ 10 s on an idle CI-class machine;
#: audit 4 measured up to ≈ 13 s of CPU on a loaded one) and far more than any audit needs on the
#: Flower and OpenFL targets (≤ 8 s), so only a hang or a gross slowdown reaches it. CPU time,
#: not wall time: a machine loaded by other work does not bring an audit nearer it.
FAST_TIME_LIMIT = 60.0


class AuditTimeLimitExceeded(BaseException):
    """Raised inside an audit when its time budget runs out.

    A :class:`BaseException` so that an audit's own ``except Exception`` (which records a
    refusal) never swallows it.

    Examples
    --------
    >>> isinstance(AuditTimeLimitExceeded(60.0), Exception)
    False
    """


@contextmanager
def _time_budget(seconds: float | None) -> Iterator[None]:
    """Interrupt the body after ``seconds`` of the process's CPU time (``ITIMER_PROF`` and
    ``SIGPROF``; only in the main thread of a POSIX process — elsewhere, and for ``None`` or 0,
    no limit). A busy loop reaches it; a thread blocked forever without spinning does not. Code
    inside one long C call is interrupted when that call returns."""
    if (
        not seconds
        or not hasattr(signal, "setitimer")
        or threading.current_thread() is not threading.main_thread()
    ):
        yield
        return

    def _expired(signum: int, frame: object) -> None:
        raise AuditTimeLimitExceeded(seconds)

    previous = signal.signal(signal.SIGPROF, _expired)
    signal.setitimer(signal.ITIMER_PROF, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_PROF, 0.0)
        signal.signal(signal.SIGPROF, previous)


def _over_budget(
    spec: AuditSpec, target: AuditTarget, limit: float, cpu: float, seconds: float
) -> AuditResult:
    return AuditResult(
        audit=spec.number,
        name=spec.name,
        target=target.name,
        statistic="CPU seconds of the audit",
        value=round(cpu, 3),
        threshold=f"finishes within {limit:g} s of CPU time (the budget of one audit)",
        samples=0,
        verdict=Verdict.FAIL,
        error_rate=0.0,
        findings=(
            f"did not finish within {limit:g} s of CPU time: the implementation hangs or runs "
            "far slower than it should on the audit's small inputs",
        ),
        details={"time_limit": limit},
        seconds=seconds,
    )


def run_audits(
    target: AuditTarget,
    *,
    tier: Tier = "fast",
    seed: int = 0,
    only: Sequence[int] | None = None,
    options: Mapping[int, Mapping[str, Any]] | None = None,
    progress: Progress | None = None,
    time_limit: float | None = None,
) -> list[AuditResult]:
    """Run the audits (all, or ``only`` those numbers, in that order) against ``target``.

    Parameters
    ----------
    target
        The implementation (:class:`audits.ours.OurTarget`, :class:`audits.flower.FlowerTarget`).
    tier
        ``"fast"`` (CI, ≤ 2 minutes) or ``"deep"``.
    seed
        Seed of every statistical stream (recorded in each result's inputs).
    only
        Audit numbers to run.
    options
        Extra keyword arguments per audit number (e.g. ``{5: {"releases": 300}}``).
    progress
        Callback ``(label, done, total)``.
    time_limit
        Seconds of CPU time allowed to each audit (``None``: no limit). An audit still running
        then is stopped and recorded as a FAIL (``details["time_limit"]``): a target that hangs
        on small valid inputs is a finding, as one that raises is. Enforced with ``SIGPROF`` in
        the main thread of a POSIX process only.

    Examples
    --------
    >>> from audits.ours import OurTarget
    >>> [r.verdict.value for r in run_audits(OurTarget(), only=[4, 8])]
    ['pass', 'pass']
    """
    tier = check_tier(tier)
    specs = list(AUDITS) if only is None else [audit_by_number(n) for n in only]
    results: list[AuditResult] = []
    for done, spec in enumerate(specs):
        if progress is not None:
            progress(spec.name, done, len(specs))
        start, cpu_start = time.perf_counter(), time.process_time()
        kwargs = dict((options or {}).get(spec.number, {}))
        try:
            # Audits drive the library at deliberately small settings (t = 1, tiny rounds): the
            # warnings meant for a user's own settings would only be noise here.
            with warnings.catch_warnings(), _time_budget(time_limit):
                warnings.simplefilter("ignore", InsecureSettingsWarning)
                result = spec.function(target, tier=tier, seed=seed, **kwargs)
        except AuditTimeLimitExceeded:
            logger.debug("audit %s over its time budget", spec.name)
            assert time_limit is not None  # only a budget raises it
            used = time.process_time() - cpu_start
            result = _over_budget(spec, target, time_limit, used, time.perf_counter() - start)
        except Exception as exc:  # an implementation that raises is a finding, not a crash
            logger.debug("audit %s raised", spec.name, exc_info=True)
            result = _crashed(spec, target, exc, time.perf_counter() - start)
        results.append(result)
    if progress is not None:
        progress("done", len(specs), len(specs))
    return results
