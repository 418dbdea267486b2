"""Session benchmark: what a further secure sum costs once the session's keys are set up.

Usage::

    python bench/session_bench.py            # 5 interleaved repeats, ≈ 4 min
    python bench/session_bench.py --quick    # 2 repeats

Two tables, each in both threat models (the malicious mode is the default):

1. **A further sum in a session against a fresh round** (n = 100, SecAgg+ k = 14, d = 10^4, 32-bit
   ring, no dropouts): a fresh round is :func:`secagg.secure_sum` (its own key setup); a further
   sum is sum r ≥ 2 of a :class:`secagg.Session` of R = 5 sums. Also the session's first sum (setup
   for all R sums) and the whole session against R fresh rounds.
2. **The geometric median over SecAgg+** (n = 100, k = 14, 5 secure averages, d = 10^5, 64-bit
   ring): in one session (the default), as one fresh round per average (``session_sums=1``, the
   per-sum path), and on the plain path with the same quantisation (``secure=False,
   quantize=True``), which is the anchor.

Everything runs in this process, so process CPU time is the figure (the machine is shared); wall
times are in the JSON. Medians of interleaved repeats. Never asserts on time.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

for _variable in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_variable, "1")

import numpy as np  # noqa: E402

from protocols.aggregation import AverageSettings, geometric_median  # noqa: E402
from secagg import Session, secure_sum  # noqa: E402

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results" / "session_bench.json"
N, K, D_SUM, D_MEDIAN, R = 100, 14, 10_000, 100_000, 5
MODES = ("malicious", "semi-honest")


def cpu_and_wall(run: Callable[[], object]) -> tuple[float, float]:
    start, start_cpu = time.perf_counter(), time.process_time()
    run()
    return time.process_time() - start_cpu, time.perf_counter() - start


def sums(mode: str, repeats: int) -> dict[str, Any]:
    """Fresh rounds against the sums of a session, interleaved."""
    rng = np.random.default_rng(0)
    inputs = rng.integers(0, 2**32, size=(N, D_SUM), dtype=np.uint64).astype(np.uint32)
    fresh: list[float] = []
    first: list[float] = []
    further: list[float] = []
    whole: list[float] = []
    walls: dict[str, list[float]] = {"fresh": [], "first": [], "further": []}
    for repeat in range(repeats):
        cpu, wall = cpu_and_wall(
            lambda seed=repeat: secure_sum(inputs, neighbors=K, seed=seed, threat_model=mode)
        )
        fresh.append(cpu)
        walls["fresh"].append(wall)
        session = Session(N, D_SUM, iterations=R, neighbors=K, seed=repeat, threat_model=mode)
        total = 0.0
        for r in range(1, R + 1):
            cpu, wall = cpu_and_wall(
                lambda r=r, session=session: session.sum(inputs, iterate=b"iterate %d" % r)
            )
            total += cpu
            (first if r == 1 else further).append(cpu)
            walls["first" if r == 1 else "further"].append(wall)
        whole.append(total)
    fresh_cpu = float(np.median(fresh))
    further_cpu = float(np.median(further))
    return {
        "threat_model": mode,
        "fresh_cpu_seconds": fresh_cpu,
        "session_first_sum_cpu_seconds": float(np.median(first)),
        "session_further_sum_cpu_seconds": further_cpu,
        "further_over_fresh": further_cpu / fresh_cpu,
        "session_of_R_over_R_fresh": float(np.median(whole)) / (R * fresh_cpu),
        "runs_cpu": {"fresh": fresh, "first": first, "further": further, "whole": whole},
        "runs_wall": walls,
    }


def medians(mode: str, repeats: int) -> dict[str, Any]:
    """The geometric median in one session, per sum, and on the plain quantised path."""
    rng = np.random.default_rng(1)
    points = rng.standard_normal((N, D_MEDIAN))
    points[:20] += 30.0  # 20 % outliers: Weiszfeld keeps working for all 4 steps
    settings = AverageSettings(bits=64, clip=400.0, neighbors=K, threat_model=mode)
    plain_settings = AverageSettings(
        bits=64, clip=400.0, neighbors=K, threat_model=mode, quantize=True
    )

    def run(**kwargs: Any) -> Any:
        return geometric_median(points, max_iterations=4, ftol=0.0, seed=3, **kwargs)

    cells: dict[str, Callable[[], Any]] = {
        "session": lambda: run(settings=settings),
        "per_sum": lambda: run(settings=settings, session_sums=1),
        "plain": lambda: run(settings=plain_settings, secure=False),
    }
    cpu: dict[str, list[float]] = {name: [] for name in cells}
    for repeat in range(repeats):
        order = list(cells) if repeat % 2 == 0 else list(reversed(cells))
        for name in order:
            cpu[name].append(cpu_and_wall(cells[name])[0])
    check = {name: run_cell() for name, run_cell in cells.items()}
    averages = check["session"].num_secure_averages
    gap = float(np.abs(check["session"].median - check["plain"].median).max())
    med = {name: float(np.median(values)) for name, values in cpu.items()}
    return {
        "threat_model": mode,
        "secure_averages": averages,
        "session_cpu_seconds": med["session"],
        "per_sum_cpu_seconds": med["per_sum"],
        "plain_cpu_seconds": med["plain"],
        "session_over_plain": med["session"] / med["plain"],
        "per_sum_over_plain": med["per_sum"] / med["plain"],
        "max_median_difference_session_vs_plain": gap,
        "runs_cpu": cpu,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="2 repeats")
    parser.add_argument("--repeats", type=int, default=None)
    parser.add_argument("--output", type=Path, default=RESULTS)
    args = parser.parse_args(argv)
    repeats = args.repeats or (2 if args.quick else 5)
    sum_rows = []
    for mode in MODES:
        sum_rows.append(sums(mode, repeats))
        print(f"  sums, {mode}: done", flush=True)
    median_rows = []
    for mode in MODES:
        median_rows.append(medians(mode, max(1, repeats - 2)))
        print(f"  geometric median, {mode}: done", flush=True)

    print(
        f"\n1. a further sum in a session vs a fresh round: n={N}, SecAgg+ k={K}, d={D_SUM}, "
        f"R={R}; median process CPU s of {repeats} repeats"
    )
    header = (
        f"{'threat model':<13s} {'fresh':>8s} {'sum 1':>8s} {'sum ≥2':>8s} {'≥2/fresh':>9s} "
        f"{'R sums/R fresh':>15s} {'goal':>10s}"
    )
    print(header)
    print("-" * len(header))
    for row in sum_rows:
        ok = "✔" if row["further_over_fresh"] <= 0.3 else "✘"
        print(
            f"{row['threat_model']:<13s} {row['fresh_cpu_seconds']:>7.3f}s "
            f"{row['session_first_sum_cpu_seconds']:>7.3f}s "
            f"{row['session_further_sum_cpu_seconds']:>7.3f}s {row['further_over_fresh']:>8.2f}x "
            f"{row['session_of_R_over_R_fresh']:>14.2f}x {'≤ 0.3× ' + ok:>10s}"
        )
    print(
        f"\n2. geometric median over SecAgg+: n={N}, k={K}, d={D_MEDIAN}, 5 secure averages, "
        "64-bit ring; anchor: the plain path with the same quantisation; median CPU s"
    )
    header = (
        f"{'threat model':<13s} {'plain':>8s} {'session':>8s} {'per-sum':>8s} "
        f"{'session/plain':>13s} {'per-sum/plain':>13s} {'max |Δ|':>9s} {'goal':>8s}"
    )
    print(header)
    print("-" * len(header))
    for row in median_rows:
        ok = "✔" if row["session_over_plain"] <= 4.0 else "✘"
        print(
            f"{row['threat_model']:<13s} {row['plain_cpu_seconds']:>7.2f}s "
            f"{row['session_cpu_seconds']:>7.2f}s {row['per_sum_cpu_seconds']:>7.2f}s "
            f"{row['session_over_plain']:>12.2f}x {row['per_sum_over_plain']:>12.2f}x "
            f"{row['max_median_difference_session_vs_plain']:>9.1e} {'≤ 4× ' + ok:>8s}"
        )
    record = {
        "command": "python bench/session_bench.py" + (" --quick" if args.quick else ""),
        "date": time.strftime("%Y-%m-%d %H:%M:%S"),
        "machine": {
            "python": platform.python_version(),
            "machine": platform.machine(),
            "numpy": np.__version__,
            "load_average": os.getloadavg(),
        },
        "sums": sum_rows,
        "geometric_median": median_rows,
    }
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(json.dumps(record, indent=1))
    print(f"\nwrote {args.output}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
