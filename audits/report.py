"""Outputs of an audit run: the console table, JSON, a Markdown report and plots."""

from __future__ import annotations

import importlib
import json
import logging
import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from audits.attacks import outcome_table
from audits.records import AuditResult
from audits.selfcheck import SelfCheckReport
from audits.statistics import gaussian_trade_off

__all__ = [
    "PLOTS_UNAVAILABLE",
    "format_catch_table",
    "format_table",
    "plots_available",
    "write_outputs",
    "write_plots",
]

#: What the command line says when it cannot draw.
PLOTS_UNAVAILABLE = "plots skipped: matplotlib is not installed (pip install 'secagg-dp[plot]')"


def plots_available() -> bool:
    """Whether matplotlib can be imported.

    Examples
    --------
    >>> isinstance(plots_available(), bool)
    True
    """
    try:
        importlib.import_module("matplotlib")
    except ImportError:
        return False
    return True


logger = logging.getLogger(__name__)

_COLUMNS = (
    "audit",
    "statistic",
    "value",
    "threshold",
    "samples",
    "verdict",
    "error rate",
    "τ",
    "seconds",
    "detects (95 % power)",
)


def _number(value: float | None) -> str:
    if value is None:
        return "—"
    if isinstance(value, float) and (math.isnan(value) or math.isinf(value)):
        return str(value)
    if value == 0 or 1e-3 <= abs(value) < 1e5:
        return f"{value:.4g}"
    return f"{value:.3g}"


def _rows(results: Sequence[AuditResult]) -> list[tuple[str, ...]]:
    return [
        (
            f"{r.audit} {r.name}",
            r.statistic,
            _number(r.value),
            r.threshold,
            str(r.samples),
            r.verdict.value.upper(),
            "—" if r.error_rate is None else f"{r.error_rate:g}",
            _number(r.tau),
            f"{r.seconds:.1f}",
            r.power or "—",
        )
        for r in results
    ]


def format_table(results: Sequence[AuditResult], *, width: int = 60) -> str:
    """A text table: audit, statistic, value, threshold, samples, verdict, error rate, τ, seconds.

    Long statistic and threshold texts are cut to ``width`` characters (the JSON keeps them).

    Examples
    --------
    >>> from audits.records import Verdict
    >>> result = AuditResult(4, "accountant", "ours", "claimed/exact", 1.12, "≤ 1.15", 96,
    ...                      Verdict.PASS, 0.0)
    >>> print(format_table([result]).splitlines()[2].split("|")[5].strip())
    PASS
    """
    rows = [
        tuple(cell if len(cell) <= width else cell[: width - 1] + "…" for cell in row)
        for row in _rows(results)
    ]
    widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(_COLUMNS)]
    line = " | ".join(h.ljust(w) for h, w in zip(_COLUMNS, widths, strict=True))
    rule = "-+-".join("-" * w for w in widths)
    body = [" | ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)) for row in rows]
    findings = [f"  {r.audit} {r.name}: {finding}" for r in results for finding in r.findings[:4]]
    text = "\n".join([line, rule, *body])
    if findings:
        text += "\nfindings:\n" + "\n".join(findings)
    return text


def format_catch_table(report: SelfCheckReport) -> str:
    """The self-check's table: mutant, audits run, audits that caught it, first finding.

    Examples
    --------
    >>> print(format_catch_table(SelfCheckReport(real=[], mutants=[])).splitlines()[2])
    catch rate: 0/0 = 100 %; false alarms on the real code: 0; not audited: 10
    """
    lines = [f"{'mutant':<36} | {'ran':<17} | {'caught by':<17} | first finding"]
    lines.append("-" * 120)
    for outcome in report.mutants:
        first = next(iter(outcome.findings.values()), ("NOT CAUGHT",))[0]
        ran = ",".join(map(str, outcome.ran))
        caught_by = ",".join(map(str, outcome.caught_by)) or "—"
        lines.append(f"{outcome.name:<36} | {ran:<17} | {caught_by:<17} | {first[:70]}")
    caught = sum(o.caught for o in report.mutants)
    lines.append(
        f"catch rate: {caught}/{len(report.mutants)} = {100 * report.catch_rate:.0f} %; "
        f"false alarms on the real code: {len(report.false_alarms)}; "
        f"not audited: {len(report.gaps)}"
    )
    lines.extend(f"  {gap}" for gap in report.gaps)
    return "\n".join(lines)


def _cell(value: object) -> str:
    r"""A Markdown table cell: ``|`` escaped and line breaks folded (they would split the row).

    Examples
    --------
    >>> print(_cell("|x| > 3"))
    \|x\| > 3
    """
    return str(value).replace("|", "\\|").replace("\n", " ")


def _markdown(
    results: Sequence[AuditResult], meta: Mapping[str, Any], report: SelfCheckReport | None
) -> str:
    lines = [f"# secagg-dp audit report — target `{meta.get('target')}`", ""]
    lines.append(
        f"Tier **{meta.get('tier')}**, seed {meta.get('seed')}, "
        f"{meta.get('seconds', 0):.1f} s. Every FAIL verdict has the error rate shown "
        "(family-wise α per audit; 0 for deterministic checks)."
    )
    lines += [
        "",
        "| audit | statistic | value | threshold | samples | verdict | error rate | τ | "
        "detects (95 % power) |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in results:
        lines.append(
            f"| {r.audit} {_cell(r.name)} | {_cell(r.statistic)} | {_number(r.value)} | "
            f"{_cell(r.threshold)} | {_cell(r.samples)} | **{r.verdict.value.upper()}** | "
            f"{'—' if r.error_rate is None else f'{r.error_rate:g}'} | {_number(r.tau)} | "
            f"{_cell(r.power or '—')} |"
        )
    failing = [r for r in results if r.findings]
    if failing:
        lines += ["", "## Findings", ""]
        for r in failing:
            lines += [f"- **{r.audit} {r.name}**: " + "; ".join(r.findings[:6])]
    for r in results:
        if r.audit == 5 and r.details.get("mechanisms"):
            lines += [
                "",
                "## Audit 5: ε lower bounds (δ = 1e-10)",
                "",
                "| mechanism | claimed ε | ε_CP | ε_fit | τ_CP | τ_fit | releases |",
                "|---|---|---|---|---|---|---|",
            ]
            for m in r.details["mechanisms"]:
                lines.append(
                    f"| {_cell(m['mechanism'])} | {m['claimed_epsilon']:.3f} | "
                    f"{m['cp_epsilon_lower']:.3f} | {m['fit_epsilon_lower']:.3f} | "
                    f"{m['tau_cp']:.3f} | {m['tau_fit']:.3f} | {m['releases_per_neighbour']} |"
                )
            lines += ["", f"Reference configuration: {r.details.get('reference')}."]
        if r.audit == 10 and r.details.get("outcomes"):
            lines += [
                "",
                "## Audit 10: attacks (decided by reconstructing an honest input, or the total)",
                "",
                outcome_table(r.details["outcomes"]),
            ]
    defects = meta.get("defects")
    if defects:
        lines += [
            "",
            "## Known defects of this implementation: what this run observed",
            "",
            "| defect | status | audit | evidence |",
            "|---|---|---|---|",
        ]
        lines += [
            f"| {_cell(d['defect'])} | **{_cell(d['status'])}** | {_cell(d['audit'])} | "
            f"{_cell(d['evidence'])} |"
            for d in defects
        ]
    if report is not None:
        lines += ["", "## Self-check", "", "```", format_catch_table(report), "```"]
    lines.append("")
    return "\n".join(lines)


def write_plots(results: Sequence[AuditResult], directory: Path) -> list[str]:
    """Sampler pmf against the exact pmf, and trade-off curves with the empirical points.

    Returns the files written, or an empty list (with a logged message) without matplotlib.

    Examples
    --------
    >>> import tempfile
    >>> with tempfile.TemporaryDirectory() as folder:
    ...     write_plots([], Path(folder))
    []
    """
    try:
        matplotlib = importlib.import_module("matplotlib")
        matplotlib.use("Agg")
        pyplot = importlib.import_module("matplotlib.pyplot")
    except ImportError:
        logger.warning(PLOTS_UNAVAILABLE)
        return []
    written: list[str] = []
    for r in results:
        if r.audit == 1 and r.details.get("plot_pmf"):
            plot = r.details["plot_pmf"]
            figure, axis = pyplot.subplots(figsize=(6, 3.5))
            axis.bar(plot["support"], plot["empirical"], width=0.8, alpha=0.5, label="sampled")
            axis.plot(plot["support"], plot["exact"], "k.-", label="exact pmf")
            axis.set_title(f"{plot['sampler']} sampler, σ = {plot['sigma']}")
            axis.set_xlabel("x")
            axis.set_ylabel("P[X = x]")
            axis.legend()
            path = directory / "sampler_pmf.png"
            figure.tight_layout()
            figure.savefig(path, dpi=120)
            pyplot.close(figure)
            written.append(str(path))
        if r.audit == 5 and r.details.get("mechanisms"):
            figure, axes = pyplot.subplots(
                1, len(r.details["mechanisms"]), figsize=(5 * len(r.details["mechanisms"]), 4)
            )
            axes = np.atleast_1d(axes)
            grid = np.logspace(-7, 0, 600)
            for axis, m in zip(axes, r.details["mechanisms"], strict=True):
                points = m["trade_off_points"]
                # A rate of 0 is drawn at 1/(2n) (open marker): log axes cannot show 0.
                floor = 0.5 / max(int(m["test_releases_per_neighbour"]), 1)
                fpr, fnr = np.asarray(points["fpr"]), np.asarray(points["fnr"])
                seen = (fpr > 0) & (fnr > 0)
                axis.plot(fpr[seen], fnr[seen], "o", ms=3, label="empirical (test split)")
                if not seen.all():
                    axis.plot(
                        np.maximum(fpr[~seen], floor),
                        np.maximum(fnr[~seen], floor),
                        "o",
                        ms=4,
                        mfc="none",
                        label="empirical, a rate 0 (at 1/2n)",
                    )
                axis.plot(grid, gaussian_trade_off(grid, m["fit_mu_hat"]), label="fitted G_μ̂")
                axis.plot(
                    grid,
                    gaussian_trade_off(grid, m["fit_mu_lower"]),
                    "--",
                    label="lower-bound G_μL",
                )
                axis.plot(
                    grid,
                    gaussian_trade_off(grid, m["mu_claimed_equivalent"]),
                    ":",
                    label="claimed ε(δ) as G_μ",
                )
                axis.set_xscale("log")
                axis.set_yscale("log")
                low = min(1e-4, floor / 2)
                axis.set_xlim(low, 1)
                axis.set_ylim(low, 1)
                axis.set_title(m["mechanism"])
                axis.set_xlabel("false positive rate α")
                axis.set_ylabel("false negative rate β")
                axis.legend(fontsize=7)
            path = directory / "trade_off.png"
            figure.tight_layout()
            figure.savefig(path, dpi=120)
            pyplot.close(figure)
            written.append(str(path))
    return written


def write_outputs(
    results: Sequence[AuditResult],
    directory: Path,
    meta: Mapping[str, Any],
    *,
    self_check: SelfCheckReport | None = None,
    plots: bool = True,
) -> list[str]:
    """Write ``audit.json``, ``audit.md`` and the plots into ``directory``; return the paths.

    Examples
    --------
    >>> import tempfile
    >>> from audits.records import Verdict
    >>> result = AuditResult(4, "accountant", "ours", "claimed/exact", 1.12, "≤ 1.15", 96,
    ...                      Verdict.PASS, 0.0)
    >>> with tempfile.TemporaryDirectory() as folder:
    ...     [Path(p).name for p in write_outputs([result], Path(folder), {}, plots=False)]
    ['audit.json', 'audit.md']
    """
    directory.mkdir(parents=True, exist_ok=True)
    payload: dict[str, Any] = {"meta": dict(meta), "results": [r.to_dict() for r in results]}
    if self_check is not None:
        payload["self_check"] = {
            "catch_rate": self_check.catch_rate,
            "false_alarms": [r.name for r in self_check.false_alarms],
            "gaps": self_check.gaps,
            "passed": self_check.passed,
            "matrix": self_check.matrix,
            "mutants": [
                {
                    "name": m.name,
                    "description": m.description,
                    "ran": list(m.ran),
                    "caught_by": list(m.caught_by),
                    "not_applicable": list(m.not_applicable),
                    "findings": {str(k): list(v) for k, v in m.findings.items()},
                    "seconds": round(m.seconds, 3),
                }
                for m in self_check.mutants
            ],
        }
    json_path = directory / "audit.json"
    json_path.write_text(json.dumps(payload, indent=1, ensure_ascii=False) + "\n")
    markdown_path = directory / "audit.md"
    markdown_path.write_text(_markdown(results, meta, self_check))
    written = [str(json_path), str(markdown_path)]
    if plots:
        written += write_plots(results, directory)
    return written
