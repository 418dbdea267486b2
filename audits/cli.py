"""``secagg-dp-audit``: run the audits against our code or Flower's, or run the self-check.

    secagg-dp-audit [--tier fast|deep] [--target ours|flower|openfl] [--out DIR] [--self-check]
                    [--matrix] [--false-alarms N] [--seed N] [--only 1,4,8] [--no-plots]

Prints a table (audit, statistic, value, threshold, samples, verdict, τ), writes ``audit.json``,
``audit.md`` and plots into ``--out`` (default ``audit-report``), and exits 1 when an audit
fails (with ``--self-check``: when the real code fails an audit or a mutant goes uncaught;
with ``--false-alarms N``: when any audit fails on the real code at any of the seeds
``--seed`` … ``--seed + N − 1``, written to ``false_alarms.json``).
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from audits.attacks import outcome_table
from audits.records import AuditResult, Verdict
from audits.report import (
    PLOTS_UNAVAILABLE,
    format_catch_table,
    format_table,
    plots_available,
    write_outputs,
)
from audits.selfcheck import run_false_alarm_check, run_self_check
from audits.suite import AUDITS, FAST_TIME_LIMIT, run_audits
from audits.targets import AuditTarget
from protocols.cli import package_version
from protocols.cli.arguments import (
    HelpFormatter,
    examples,
    integer_list,
    nonnegative_float,
    nonnegative_int,
)
from protocols.cli.arguments import seed as seed_argument
from protocols.cli.errors import run_guarded
from protocols.cli.progress import ProgressBar

__all__ = ["build_parser", "main", "make_target"]

logger = logging.getLogger(__name__)


def make_target(name: str) -> AuditTarget:
    """The adapter for ``ours``, ``flower`` or ``openfl`` (the last two imported here, lazily).

    Examples
    --------
    >>> make_target("ours").name
    'ours'
    """
    if name == "ours":
        from audits.ours import OurTarget  # noqa: PLC0415

        return OurTarget()
    if name == "flower":
        from audits.flower import FlowerTarget  # noqa: PLC0415

        return FlowerTarget()
    if name == "openfl":
        from audits.openfl import OpenFLTarget  # noqa: PLC0415

        return OpenFLTarget()
    raise ValueError(f"unknown target {name!r}: use 'ours', 'flower' or 'openfl'")


def build_parser() -> argparse.ArgumentParser:
    """The argument parser.

    Examples
    --------
    >>> build_parser().parse_args(["--tier", "deep"]).tier
    'deep'
    """
    parser = argparse.ArgumentParser(
        prog="secagg-dp-audit",
        description="Statistical and property-based audits of secure aggregation and DP.",
        formatter_class=HelpFormatter,
        epilog=examples(
            "secagg-dp-audit --only 1,4 --out audit-report",
            "secagg-dp-audit --self-check --no-plots",
            "secagg-dp-audit --target flower --tier deep",
            "secagg-dp-audit --target openfl --no-plots",
        ),
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {package_version()}")
    parser.add_argument("--tier", choices=("fast", "deep"), default="fast")
    parser.add_argument("--target", choices=("ours", "flower", "openfl"), default="ours")
    parser.add_argument("--out", type=Path, default=Path("audit-report"))
    parser.add_argument("--seed", type=seed_argument, default=0)
    parser.add_argument(
        "--self-check",
        action="store_true",
        help="run every audit on the real code and against every planted-bug mutant",
    )
    parser.add_argument(
        "--matrix",
        action="store_true",
        help="with --self-check: run every audit against every mutant (slow)",
    )
    parser.add_argument(
        "--false-alarms",
        type=nonnegative_int,
        default=0,
        metavar="N",
        help="run the audits on the real code at N seeds and count the failures",
    )
    parser.add_argument(
        "--only",
        type=integer_list(range(1, len(AUDITS) + 1)),
        default=None,
        help="comma-separated audit numbers",
    )
    parser.add_argument("--no-plots", action="store_true")
    parser.add_argument(
        "--time-limit",
        type=nonnegative_float,
        default=None,
        metavar="SECONDS",
        help=(
            "CPU-time budget of each audit; one still running then FAILs (a hang is a finding). "
            f"Default: {FAST_TIME_LIMIT:g} s in the fast tier, none in the deep tier; 0: none"
        ),
    )
    parser.add_argument(
        "--progress",
        action="store_true",
        help="draw the progress bar even when stderr is not a terminal",
    )
    return parser


def _print_results(results: Sequence[AuditResult]) -> None:
    print(format_table(results))
    for r in results:
        if r.audit == 10 and r.details.get("outcomes"):
            print("\nattacks (audit 10):\n" + outcome_table(r.details["outcomes"]))


def _false_alarms(args: argparse.Namespace, only: list[int] | None, bar: ProgressBar) -> int:
    seeds = list(range(args.seed, args.seed + args.false_alarms))
    report = run_false_alarm_check(seeds, tier=args.tier, only=only, progress=bar.update)
    bar.close()
    names = list(next(iter(report.verdicts.values())))
    print("seed  | " + " | ".join(names))
    for seed in seeds:
        print(f"{seed:<5} | " + " | ".join(report.verdicts[seed][n] for n in names))
    for seed, failed in report.failures.items():
        for name, findings in failed.items():
            print(f"  seed {seed}, {name}: {'; '.join(findings[:2])}")
    print(
        f"false alarms: {report.false_alarms} in {len(seeds)} seeds × {len(names)} audits "
        f"({args.tier} tier, {report.seconds:.0f} s)"
    )
    args.out.mkdir(parents=True, exist_ok=True)
    path = args.out / "false_alarms.json"
    payload = {
        "tier": report.tier,
        "seeds": seeds,
        "seconds": round(report.seconds, 1),
        "false_alarms": report.false_alarms,
        "verdicts": {str(k): v for k, v in report.verdicts.items()},
        "failures": {
            str(k): {n: list(f) for n, f in v.items()} for k, v in report.failures.items()
        },
    }
    path.write_text(json.dumps(payload, indent=1, ensure_ascii=False) + "\n")
    print(f"wrote {path}")
    return 1 if report.false_alarms else 0


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``secagg-dp-audit``; returns the exit status.

    Examples
    --------
    >>> import tempfile
    >>> with tempfile.TemporaryDirectory() as folder:
    ...     status = main(["--only", "4", "--out", folder, "--no-plots"])  # doctest: +ELLIPSIS
    audit ...
    >>> status
    0
    """
    args = build_parser().parse_args(argv)
    return run_guarded("secagg-dp-audit", lambda: _run(args))


def _time_limit(args: argparse.Namespace) -> float | None:
    """Each audit's CPU-time budget: ``--time-limit`` (0: none), else the tier's default."""
    if args.time_limit is not None:
        return args.time_limit or None
    return FAST_TIME_LIMIT if args.tier == "fast" else None


def _run(args: argparse.Namespace) -> int:
    """The audit command proper (errors are turned into one line by :func:`main`)."""
    if not args.no_plots and not args.false_alarms and not plots_available():
        print(PLOTS_UNAVAILABLE, file=sys.stderr)
        args.no_plots = True
    if args.matrix and not args.self_check:
        print("--matrix needs --self-check", file=sys.stderr)
        return 2
    bar = ProgressBar(force=args.progress)
    start = time.perf_counter()
    meta: dict[str, Any] = {
        "tier": args.tier,
        "seed": args.seed,
        "target": args.target,
        "time_limit": _time_limit(args),
    }
    if args.self_check:
        if args.target != "ours":
            print("--self-check plants bugs in this toolkit: use --target ours", file=sys.stderr)
            return 2
        report = run_self_check(
            tier=args.tier, seed=args.seed, matrix=args.matrix, progress=bar.update
        )
        bar.close()
        meta["seconds"] = time.perf_counter() - start
        _print_results(report.real)
        print()
        print(format_catch_table(report))
        written = write_outputs(
            report.real, args.out, meta, self_check=report, plots=not args.no_plots
        )
        print(f"wrote {', '.join(written)}")
        return 0 if report.passed else 1
    only: list[int] | None = args.only
    if args.false_alarms:
        if args.target != "ours" or args.self_check:
            print("--false-alarms audits this toolkit alone: use --target ours", file=sys.stderr)
            return 2
        return _false_alarms(args, only, bar)
    try:
        target = make_target(args.target)
    except ImportError as exc:
        print(f"cannot audit {args.target}: {exc}", file=sys.stderr)
        return 2
    meta["describe"] = dict(target.describe())
    results = run_audits(
        target,
        tier=args.tier,
        seed=args.seed,
        only=only,
        progress=bar.update,
        time_limit=_time_limit(args),
    )
    bar.close()
    meta["seconds"] = time.perf_counter() - start
    _print_results(results)
    if args.target in ("flower", "openfl"):
        if args.target == "flower":
            from audits.flower import known_defects  # noqa: PLC0415

            meta["defects"] = known_defects(results)
        else:
            from audits.openfl import known_defects as openfl_defects  # noqa: PLC0415

            meta["defects"] = openfl_defects(results, target.leaks(args.seed))  # type: ignore[attr-defined]
        print()
        for row in meta["defects"]:
            print(f"{row['status']:>12}  (audit {row['audit']})  {row['defect']}")
    written = write_outputs(results, args.out, meta, plots=not args.no_plots)
    print(f"wrote {', '.join(written)}")
    return 1 if any(r.verdict is Verdict.FAIL for r in results) else 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
