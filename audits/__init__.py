"""Statistical and property-based audits of the toolkit, with planted-bug mutants.

Nine audits (issue 7), each a function ``audit_*(target, *, tier="fast", seed=0)`` returning an
:class:`AuditResult` that names its statistic, threshold, sample count, verdict and error rate:

1. :func:`audit_sampler_fit` — χ² with tail bins, variance, log-slope and symmetry tests;
2. :func:`audit_sampler_exactness` — integer outputs, known answers, no floating point (traced);
3. :func:`audit_sampler_timing` — time against |x| (reported; fails only if constant time is
   claimed);
4. :func:`audit_accountant` — claimed ε(δ) against exact composed discrete Gaussian profiles;
5. :func:`audit_epsilon_lower_bound` — Clopper–Pearson and trade-off-fit ε lower bounds, τ;
6. :func:`audit_dropout_noise` — noise variance under dropout against what was charged;
7. :func:`audit_secure_sum` — Hypothesis state machine and black-box round checks;
8. :func:`audit_shamir_masks_graph` — Shamir secrecy, mask uniformity and binding, SecAgg+
   parameters;
9. :func:`audit_canaries` — one-run canary audit of a DP trainer (Steinke, Nasr, Jagielski 2023).

An audit examines a target through the adapter interface :class:`AuditTarget`
(:class:`OurTarget` for this toolkit, :class:`audits.flower.FlowerTarget` for Flower's SecAgg+).
:func:`run_self_check` runs every audit on the real code and against every planted bug in
:mod:`audits.mutants`; :func:`run_false_alarm_check` repeats the real-code run over many seeds.
The command line is ``secagg-dp-audit`` (:func:`audits.cli.main`).

Examples
--------
>>> from audits import OurTarget, run_audits
>>> [result.verdict.value for result in run_audits(OurTarget(), only=[4])]
['pass']
"""

from __future__ import annotations

from audits.canary_audit import audit_canaries, run_canary_training
from audits.float_trace import FloatTrace, trace_floats
from audits.mutants import MUTANTS, Mutant, mutant_by_name
from audits.ours import OurTarget
from audits.privacy_audits import (
    REFERENCE_DELTA,
    TAU_REQUIRED,
    audit_accountant,
    audit_dropout_noise,
    audit_epsilon_lower_bound,
)
from audits.protocol_audits import audit_secure_sum, audit_shamir_masks_graph, secure_sum_machine
from audits.records import FAMILY_ALPHA, AuditResult, Tier, Verdict
from audits.sampler_audits import (
    audit_sampler_exactness,
    audit_sampler_fit,
    audit_sampler_timing,
    discrete_gaussian_law,
    mechanism_sigmas,
)
from audits.selfcheck import (
    FalseAlarmReport,
    MutantOutcome,
    SelfCheckReport,
    run_false_alarm_check,
    run_self_check,
)
from audits.suite import AUDITS, AuditSpec, run_audits
from audits.targets import AuditTarget, KnownAnswer, OverflowProbe

__all__ = [
    "AUDITS",
    "FAMILY_ALPHA",
    "MUTANTS",
    "REFERENCE_DELTA",
    "TAU_REQUIRED",
    "AuditResult",
    "AuditSpec",
    "AuditTarget",
    "FalseAlarmReport",
    "FloatTrace",
    "KnownAnswer",
    "Mutant",
    "MutantOutcome",
    "OurTarget",
    "OverflowProbe",
    "SelfCheckReport",
    "Tier",
    "Verdict",
    "audit_accountant",
    "audit_canaries",
    "audit_dropout_noise",
    "audit_epsilon_lower_bound",
    "audit_sampler_exactness",
    "audit_sampler_fit",
    "audit_sampler_timing",
    "audit_secure_sum",
    "audit_shamir_masks_graph",
    "discrete_gaussian_law",
    "mechanism_sigmas",
    "mutant_by_name",
    "run_audits",
    "run_canary_training",
    "run_false_alarm_check",
    "run_self_check",
    "secure_sum_machine",
    "trace_floats",
]
