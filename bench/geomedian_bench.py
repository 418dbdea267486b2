"""Geometric-median benchmark: our plain numpy smoothed Weiszfeld against the PyPI package
``geom-median`` in the same run, and the Weiszfeld steps / secure averages needed for 1e-6 relative
objective accuracy at 0, 10, 20 and 45 % outliers.

Usage::

    pip install geom-median                    # GPL-3 anchor: benchmark only, never a dependency
    python bench/geomedian_bench.py            # n = 100, d = 1e5 and 1e6
    python bench/geomedian_bench.py --quick    # d = 1e5 only, fewer repeats

Prints a table and writes ``bench/results/geomedian_bench.json``. Speed: both implementations run
the same number of smoothed Weiszfeld steps (ν = 1e-6) from the weighted mean on the same points
(inliers N(0, I), 45 % of the clients in a far cluster, so neither stops early), one BLAS thread;
figures are medians over interleaved repeats, and the ratio is only meaningful within one run (the
machine is shared and noisy). The package is imported lazily here and nowhere else. Never asserts on
time.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.metadata
import json
import os
import platform
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

# One BLAS thread for both sides (set before numpy loads): the machine is shared and has 2 cores.
for _variable in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_variable, "1")

import numpy as np  # noqa: E402

from protocols.aggregation import (  # noqa: E402
    AverageSettings,
    geometric_median,
    geometric_median_objective,
)

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results" / "geomedian_bench.json"
CLIENTS = 100
SMOOTHING = 1e-6
FRACTIONS = (0.0, 0.1, 0.2, 0.45)


def outlier_points(n: int, d: int, fraction: float, seed: int) -> np.ndarray:
    """Inliers N(0, I_d); ``fraction`` of the clients in a cluster at distance 10·√d."""
    rng = np.random.default_rng(seed)
    points = rng.standard_normal((n, d))
    count = round(fraction * n)
    if count:
        direction = rng.standard_normal(d)
        direction /= np.linalg.norm(direction)
        points[:count] = 10 * np.sqrt(d) * direction + rng.standard_normal((count, d))
    return points


def median_seconds(run: Callable[[], object], repeats: int) -> tuple[float, list[float]]:
    """Median wall time over ``repeats`` calls, after one warm-up call."""
    run()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        run()
        times.append(time.perf_counter() - start)
    return float(np.median(times)), times


def anchor() -> tuple[Callable[..., Any], str] | None:
    """The geom-median package's numpy entry point, or None if it is not installed."""
    try:
        module = importlib.import_module("geom_median.numpy")
    except ImportError:
        return None
    return module.compute_geometric_median, importlib.metadata.version("geom-median")


def speed(d: int, steps: int, repeats: int, seed: int) -> dict[str, Any]:
    """Both implementations, same points, same number of steps, runs interleaved."""
    # 45 % outliers: no run reaches an exactly stationary objective (an early stop) in 10 steps.
    points = outlier_points(CLIENTS, d, 0.45, seed)

    def ours() -> Any:
        return geometric_median(
            points, secure=False, ftol=0.0, max_iterations=steps, smoothing=SMOOTHING
        )

    def ours_to_tolerance() -> Any:
        return geometric_median(points, secure=False, ftol=1e-6, smoothing=SMOOTHING)

    def ours_direct() -> Any:
        return geometric_median(
            points,
            secure=False,
            ftol=0.0,
            max_iterations=steps,
            smoothing=SMOOTHING,
            solver="direct",
        )

    ours_result, tolerance_result = ours(), ours_to_tolerance()
    row: dict[str, Any] = {"n": CLIENTS, "d": d, "outlier_fraction": 0.45}
    found = anchor()
    runs: dict[str, Callable[[], Any]] = {
        "ours": ours,
        "ours_direct": ours_direct,
        "ours_ftol": ours_to_tolerance,
    }
    if found is not None:
        compute, version = found
        row["geom_median_version"] = version
        runs["theirs"] = lambda: compute(points, eps=SMOOTHING, maxiter=steps, ftol=0.0)
        runs["theirs_ftol"] = lambda: compute(points, eps=SMOOTHING, maxiter=100, ftol=1e-6)
    times: dict[str, list[float]] = {name: [] for name in runs}
    for _ in range(repeats):  # interleaved, so that load changes hit both sides alike
        for name, run in runs.items():
            start = time.perf_counter()
            run()
            times[name].append(time.perf_counter() - start)
    medians = {name: float(np.median(values)) for name, values in times.items()}
    row.update(
        ours_steps=ours_result.iterations,
        ours_seconds=medians["ours"],
        ours_times=times["ours"],
        ours_ms_per_step=1e3 * medians["ours"] / ours_result.iterations,
        ours_direct_seconds=medians["ours_direct"],
        ours_direct_ms_per_step=1e3 * medians["ours_direct"] / ours_result.iterations,
        ours_ftol_steps=tolerance_result.iterations,
        ours_ftol_seconds=medians["ours_ftol"],
    )
    if found is not None:
        theirs_result = runs["theirs"]()
        theirs_tolerance = runs["theirs_ftol"]()
        theirs_steps = len(theirs_result.logs) - 1
        row.update(
            theirs_steps=theirs_steps,
            theirs_seconds=medians["theirs"],
            theirs_times=times["theirs"],
            theirs_ms_per_step=1e3 * medians["theirs"] / theirs_steps,
            ratio=medians["theirs"] / medians["ours"],
            ratio_direct=medians["theirs"] / medians["ours_direct"],
            max_abs_difference=float(np.abs(theirs_result.median - ours_result.median).max()),
            theirs_ftol_steps=len(theirs_tolerance.logs) - 1,
            theirs_ftol_seconds=medians["theirs_ftol"],
            ratio_ftol=medians["theirs_ftol"] / medians["ours_ftol"],
        )
    return row


def iterations(d: int, seed: int) -> list[dict[str, Any]]:
    """Steps to 1e-6 relative accuracy (plain trajectory), confirmed on the secure path."""
    rows = []
    for fraction in FRACTIONS:
        points = outlier_points(CLIENTS, d, fraction, seed)
        reference = geometric_median(
            points, secure=False, ftol=1e-15, max_iterations=2000, smoothing=1e-12
        )
        assert reference.objective is not None
        best = min(reference.objective, *reference.objective_history)
        trajectory = geometric_median(
            points, secure=False, ftol=0.0, max_iterations=60, smoothing=SMOOTHING
        )
        assert trajectory.objective is not None
        values = [*trajectory.objective_history, trajectory.objective]
        gaps = [(value - best) / best for value in values]
        steps = next(k for k, gap in enumerate(gaps) if gap <= 1e-6)
        stopping = geometric_median(points, secure=False, ftol=1e-6, smoothing=SMOOTHING)
        # The same number of steps over SecAgg+ (k = 14, 64-bit ring) on the same points.
        start = time.perf_counter()
        secure = geometric_median(
            points,
            ftol=0.0,
            max_iterations=steps,
            smoothing=SMOOTHING,
            settings=AverageSettings(bits=64, neighbors=14),
            seed=seed,
        )
        secure_seconds = time.perf_counter() - start
        secure_gap = (geometric_median_objective(points, secure.median) - best) / best
        rows.append(
            {
                "outlier_fraction": fraction,
                "steps_to_1e-6": steps,
                "secure_averages_to_1e-6": steps + 1,
                "gaps": gaps[: steps + 2],
                "ftol_rule_steps": stopping.iterations,
                "ftol_rule_secure_averages": stopping.num_secure_averages,
                "secure_averages_run": secure.num_secure_averages,
                "secure_gap_after_same_steps": secure_gap,
                "secure_seconds": secure_seconds,
                "secure_seconds_per_average": secure_seconds / secure.num_secure_averages,
            }
        )
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="d = 1e5 only, fewer repeats")
    parser.add_argument("--steps", type=int, default=10, help="Weiszfeld steps in the speed runs")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--output", type=Path, default=RESULTS)
    args = parser.parse_args(argv)

    dims = (100_000,) if args.quick else (100_000, 1_000_000)
    speeds = [
        speed(d, args.steps, (3 if args.quick else 5) if d <= 100_000 else 3, args.seed)
        for d in dims
    ]
    if anchor() is None:
        print("geom-median is not installed (pip install geom-median): anchor skipped")
    elif any(row["ours_steps"] != row["theirs_steps"] for row in speeds):
        print("note: the two sides ran different numbers of steps; compare the per-step columns")
    print(
        f"\nspeed: n = {CLIENTS}, {args.steps} smoothed Weiszfeld steps from the mean "
        f"(nu = {SMOOTHING:g}), 45 % far outliers, medians of interleaved runs, "
        f"BLAS threads = {os.environ.get('OPENBLAS_NUM_THREADS')}"
    )
    print(
        f"{'d':>9s} {'ours':>9s} {'geom-median':>12s} {'ratio':>7s} {'ours/step':>10s} "
        f"{'theirs/step':>12s} {'max |diff|':>11s} | {'direct':>8s} {'ratio':>6s} | own ftol "
        f"1e-6 rule: {'ours':>8s} {'theirs':>8s} {'ratio':>6s}"
    )
    for row in speeds:
        if "ratio" in row:
            print(
                f"{row['d']:>9d} {row['ours_seconds']:>8.3f}s {row['theirs_seconds']:>11.3f}s "
                f"{row['ratio']:>6.1f}x {row['ours_ms_per_step']:>8.1f}ms "
                f"{row['theirs_ms_per_step']:>10.1f}ms {row['max_abs_difference']:>11.1e} | "
                f"{row['ours_direct_seconds']:>7.3f}s {row['ratio_direct']:>5.1f}x | "
                f"{row['ours_ftol_seconds']:>7.3f}s {row['theirs_ftol_seconds']:>7.3f}s "
                f"{row['ratio_ftol']:>5.1f}x  ({row['ours_ftol_steps']} vs "
                f"{row['theirs_ftol_steps']} steps)"
            )
        else:
            print(f"{row['d']:>9d} {row['ours_seconds']:>8.3f}s {'-':>12s}")
    print(
        "ours = solver 'auto' (the n×n Gram matrix, then O(n²) per step); direct = two passes "
        "over the points per step"
    )

    iteration_d = 10_000 if args.quick else 100_000
    rows = iterations(iteration_d, args.seed)
    print(
        f"\nsteps to 1e-6 relative objective accuracy (n = {CLIENTS}, d = {iteration_d}, far "
        "cluster of outliers; secure check on the same points: SecAgg+ k = 14, 64-bit ring)"
    )
    print(
        f"{'outliers':>9s} {'steps':>6s} {'secure avgs':>12s} {'ftol-rule avgs':>15s} "
        f"{'secure gap':>11s} {'s/secure avg':>13s}"
    )
    for row in rows:
        print(
            f"{row['outlier_fraction']:>8.0%} {row['steps_to_1e-6']:>6d} "
            f"{row['secure_averages_to_1e-6']:>12d} {row['ftol_rule_secure_averages']:>15d} "
            f"{row['secure_gap_after_same_steps']:>11.1e} "
            f"{row['secure_seconds_per_average']:>12.2f}s"
        )

    args.output.parent.mkdir(parents=True, exist_ok=True)
    record = {
        "command": "python bench/geomedian_bench.py" + (" --quick" if args.quick else ""),
        "date": time.strftime("%Y-%m-%d %H:%M:%S"),
        "machine": {
            "python": platform.python_version(),
            "machine": platform.machine(),
            "numpy": np.__version__,
            "blas_threads": os.environ.get("OPENBLAS_NUM_THREADS"),
        },
        "speed": speeds,
        "iterations": rows,
    }
    args.output.write_text(json.dumps(record, indent=1, default=str))
    print(f"\nwrote {args.output}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
