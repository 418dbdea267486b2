"""Training-round benchmark: one round of FedAvg, Δ-FL and RFA over the secure sum against the
plain path in the same run, 100 clients per round, models of d ≈ 10^4 and d ≈ 10^5 parameters.

Usage::

    python bench/protocols_bench.py            # 5 interleaved repeats per cell, ≈ 5 min
    python bench/protocols_bench.py --quick    # 1 repeat per cell

A round is :meth:`protocols.training.FederatedTrainer.run_round`: every one of the 100 clients
evaluates its loss and runs τ = 10 local SGD steps (batch 32) of a one-hidden-layer MLP on 64
image-like examples (784 inputs, 10 classes; hidden width 12 → d = 9 550, 128 → d = 101 770), the
updates go through the aggregation, the model is updated. The secure path runs the real SecAgg+
state machines in memory (graph degree and threshold from ``secagg_plus_parameters(100)``; 32-bit
ring for FedAvg and Δ-FL, 64-bit for RFA), the plain path is numpy (RFA: the vectorised Weiszfeld).
Both paths see the same clients and seeds; their parameters after the timed rounds are compared.

Reported per cell: the median round time on each path (interleaved repeats, one BLAS thread), in
wall time and in process CPU time (everything runs in this process, so CPU time is the robust
figure on a shared, loaded machine), the ratios secure/plain, the secure averages per round R, the
CPU ratio per secure average (ratio / R, how the issue states RFA's goal) and the secure path's
extra seconds per secure average. Compare within one run. Never asserts on time.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import time
from pathlib import Path
from typing import Any

# One BLAS thread for both paths (set before numpy loads): the machine is shared and has 2 cores.
for _variable in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_variable, "1")

import numpy as np  # noqa: E402

from protocols.training import ClientData, FederatedDataset  # noqa: E402
from protocols.training.trainer_config import TrainerConfig  # noqa: E402
from protocols.training.trainers import FederatedTrainer  # noqa: E402

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results" / "protocols_bench.json"
CLIENTS = 100
EXAMPLES = 64
FEATURES = 784
CLASSES = 10
HIDDEN = {"1e4": 12, "1e5": 128}
# (label, algorithm, extra config): Δ-FL with the exact and with the DP quantile.
ALGORITHMS: tuple[tuple[str, str, dict[str, Any]], ...] = (
    ("FedAvg", "fedavg", {}),
    ("Δ-FL θ=0.5", "deltafl", {"theta": 0.5}),
    ("Δ-FL θ=0.5, DP quantile", "deltafl", {"theta": 0.5, "epsilon": 5.0}),
    ("RFA (3 Weiszfeld steps)", "rfa", {"rfa_max_iterations": 3, "rfa_ftol": 0.0}),
    ("RFA-1", "rfa1", {}),
)
GOALS = {"fedavg": "≤ 2×", "rfa": "≤ 2× per secure avg"}


def image_clients(seed: int) -> FederatedDataset:
    """100 clients of 64 random 'images' (pixels in [0, 1], float32) with random labels."""
    rng = np.random.default_rng(seed)
    clients = []
    for k in range(CLIENTS):
        X = rng.random((EXAMPLES + 8, FEATURES), dtype=np.float32)
        y = rng.integers(0, CLASSES, EXAMPLES + 8)
        clients.append(ClientData(k, X[:EXAMPLES], y[:EXAMPLES], X[EXAMPLES:], y[EXAMPLES:]))
    return FederatedDataset(
        "bench-images", tuple(clients), (), num_features=FEATURES, num_classes=CLASSES, seed=seed
    )


def cell(
    data: FederatedDataset, hidden: int, algorithm: str, extra: dict[str, Any], repeats: int
) -> dict[str, Any]:
    """Interleaved secure/plain rounds of one algorithm; medians and the parameter gap."""
    config = TrainerConfig(
        algorithm=algorithm,  # type: ignore[arg-type]
        rounds=repeats,
        clients_per_round=CLIENTS,
        local_steps=10,
        batch_size=32,
        lr=0.05,
        model="mlp",
        hidden=hidden,
        seed=0,
        **extra,
    )
    trainers = {
        "secure": FederatedTrainer(data, config),
        "plain": FederatedTrainer(data, config.with_changes(secure=False)),
    }
    times: dict[str, list[float]] = {"secure": [], "plain": []}
    cpu: dict[str, list[float]] = {"secure": [], "plain": []}
    averages = []
    for index in range(repeats):
        for path in ("plain", "secure") if index % 2 else ("secure", "plain"):
            start, start_cpu = time.perf_counter(), time.process_time()
            record = trainers[path].run_round(index)
            times[path].append(time.perf_counter() - start)
            cpu[path].append(time.process_time() - start_cpu)
            if path == "secure":
                averages.append(record.secure_averages)
            if record.skipped:
                raise RuntimeError(f"{algorithm} round {index} skipped: {record.skip_reason}")
    secure, plain = float(np.median(times["secure"])), float(np.median(times["plain"]))
    secure_cpu, plain_cpu = float(np.median(cpu["secure"])), float(np.median(cpu["plain"]))
    per_round = float(np.mean(averages))
    ratio = secure / plain
    cpu_ratio = secure_cpu / plain_cpu
    gap = trainers["secure"].model.get_parameters() - trainers["plain"].model.get_parameters()
    return {
        "d": trainers["plain"].model.num_parameters,
        "algorithm": algorithm,
        "secure_seconds": secure,
        "plain_seconds": plain,
        "secure_runs": times["secure"],
        "plain_runs": times["plain"],
        "ratio": ratio,
        "secure_cpu_seconds": secure_cpu,
        "plain_cpu_seconds": plain_cpu,
        "secure_cpu_runs": cpu["secure"],
        "plain_cpu_runs": cpu["plain"],
        "cpu_ratio": cpu_ratio,
        "cpu_ratio_per_secure_average": cpu_ratio / per_round,
        "secure_averages_per_round": per_round,
        "ratio_per_secure_average": ratio / per_round,
        "extra_seconds_per_secure_average": (secure - plain) / per_round,
        "max_parameter_difference": float(np.abs(gap).max()),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="one repeat per cell")
    parser.add_argument("--repeats", type=int, default=None, help="rounds per path (default 5)")
    parser.add_argument("--output", type=Path, default=RESULTS)
    parser.add_argument(
        "--only",
        nargs="+",
        choices=sorted({a for _, a, _ in ALGORITHMS}),
        default=None,
        help="run only these algorithms",
    )
    args = parser.parse_args(argv)
    repeats = args.repeats or (1 if args.quick else 5)
    data = image_clients(0)
    rows = []
    for size, hidden in HIDDEN.items():
        for label, algorithm, extra in ALGORITHMS:
            if args.only and algorithm not in args.only:
                continue
            row = {"size": size, "label": label, **cell(data, hidden, algorithm, extra, repeats)}
            rows.append(row)
            print(
                f"  d={row['d']:>6d} {label:<26s} secure {row['secure_seconds']:6.2f}s "
                f"plain {row['plain_seconds']:6.2f}s ratio {row['ratio']:5.2f} "
                f"(CPU {row['secure_cpu_seconds']:.2f}s / {row['plain_cpu_seconds']:.2f}s "
                f"= {row['cpu_ratio']:.2f})",
                flush=True,
            )

    print(
        f"\none training round, {CLIENTS} clients × {EXAMPLES} examples, τ = 10 steps of 32, "
        f"MLP 784→h→10; medians of {repeats} interleaved round(s) per path; BLAS threads = "
        f"{os.environ.get('OPENBLAS_NUM_THREADS')}"
    )
    header = (
        f"{'d':>7s} {'algorithm':<26s} {'plain':>8s} {'secure':>8s} {'ratio':>6s} "
        f"{'cpu ratio':>9s} {'avgs/rd':>7s} {'cpu r/avg':>9s} {'+s/avg':>7s} {'max |Δw|':>9s} "
        f"{'goal':>20s}"
    )
    print(header)
    print("-" * len(header))
    for row in rows:
        print(
            f"{row['d']:>7d} {row['label']:<26s} {row['plain_seconds']:>7.2f}s "
            f"{row['secure_seconds']:>7.2f}s {row['ratio']:>5.2f}x {row['cpu_ratio']:>8.2f}x "
            f"{row['secure_averages_per_round']:>7.1f} "
            f"{row['cpu_ratio_per_secure_average']:>8.2f}x "
            f"{row['extra_seconds_per_secure_average']:>6.2f}s "
            f"{row['max_parameter_difference']:>9.1e} {GOALS.get(row['algorithm'], '—'):>20s}"
        )
    print(
        "plain, secure: median wall time of a round; ratio = secure/plain wall time; cpu ratio = "
        "the same with process CPU time (robust on a shared machine; the secure path runs in "
        "this process); cpu r/avg = cpu ratio ÷ secure averages per round; +s/avg = (secure − "
        "plain wall) ÷ secure averages per round"
    )

    args.output.parent.mkdir(parents=True, exist_ok=True)
    record = {
        "command": "python bench/protocols_bench.py"
        + (" --quick" if args.quick else "")
        + (" --only " + " ".join(args.only) if args.only else ""),
        "date": time.strftime("%Y-%m-%d %H:%M:%S"),
        "machine": {
            "python": platform.python_version(),
            "machine": platform.machine(),
            "numpy": np.__version__,
            "blas_threads": os.environ.get("OPENBLAS_NUM_THREADS"),
            "load_average": os.getloadavg(),
        },
        "setup": {
            "clients": CLIENTS,
            "examples_per_client": EXAMPLES,
            "local_steps": 10,
            "batch_size": 32,
            "model": "MLP 784→h→10",
            "repeats": repeats,
        },
        "rows": rows,
    }
    args.output.write_text(json.dumps(record, indent=1, default=str))
    print(f"\nwrote {args.output}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
