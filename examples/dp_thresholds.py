"""Δ-FL's threshold under DP at small cohorts: histogram quantile vs quantile tracking.

Each seed fixes the data, the client sampling and local SGD; each noise draw changes only the
aggregations' randomness (``TrainerConfig.noise_seed``), so every private run is paired with the
exact-quantile run of its seed. Prints the p90 gap to the exact quantile with a 95 % confidence
interval over seeds (Student t on the per-seed mean over draws) and writes the raw figures as JSON.

    python examples/dp_thresholds.py                  # 10 seeds × 3 draws, ≈ 3 minutes here
    python examples/dp_thresholds.py --seeds 3 --draws 1 --rounds 20   # a quick look
    python examples/dp_thresholds.py --dataset mnist-5k   # 30 clients × 100 images (Dirichlet)
    python examples/dp_thresholds.py --every 1 5 10   # fewer threshold releases, each less noisy
    python examples/dp_thresholds.py --readers first isotonic   # the histogram's CDF reader
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np

from protocols.training import TrainerConfig, train
from protocols.training.datasets import load_dataset
from protocols.training.evidence import mean_interval

# 30 training clients either way; the image datasets' per-client errors are on 10 unseen clients.
_DATASETS = {
    "synthetic": {"num_clients": 30, "num_test_clients": 0},
    "mnist-5k": {"num_clients": 30, "num_test_clients": 10},
    "digits": {"num_clients": 30, "num_test_clients": 10},
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", type=int, default=10)
    parser.add_argument("--draws", type=int, default=3)
    parser.add_argument("--rounds", type=int, default=100)
    parser.add_argument("--epsilon", type=float, default=5.0)
    parser.add_argument("--rates", type=float, nargs="+", default=[0.05, 0.2])
    parser.add_argument("--dataset", choices=sorted(_DATASETS), default="synthetic")
    parser.add_argument(
        "--every", type=int, nargs="+", default=[1], help="release the threshold every k rounds"
    )
    parser.add_argument(
        "--readers", nargs="+", default=["first"], help="the histogram's readers of its noisy CDF"
    )
    parser.add_argument("--out", type=Path, default=Path("dp_thresholds.json"))
    args = parser.parse_args()

    methods = [
        (method, rate, every, reader)
        for every in args.every
        for method, rate, reader in [("histogram", None, r) for r in args.readers]
        + [("tracking", r, "first") for r in args.rates]
    ]
    gaps: dict[str, list[float]] = {}
    exact_p90: list[float] = []
    start = time.perf_counter()
    for seed in range(args.seeds):
        data = load_dataset(args.dataset, seed=seed, **_DATASETS[args.dataset])
        base = TrainerConfig(
            algorithm="deltafl",
            theta=0.5,
            rounds=args.rounds,
            clients_per_round=10,
            secure=False,
            seed=seed,
            lr=0.05,
        )
        exact = train(data, base).errors.p90
        exact_p90.append(exact)
        for method, rate, every, reader in methods:
            label = method if rate is None else f"{method} η={rate:g}"
            label += "" if reader == "first" else f" {reader}"
            label += "" if every == 1 else f" every {every}"
            config = base.with_changes(
                epsilon=args.epsilon,
                dp="thresholds",
                threshold_method=method,
                threshold_every=every,
                threshold_reader=reader,
                **({} if rate is None else {"tracking_rate": rate}),
            )
            draws = [
                train(data, config.with_changes(noise_seed=10_000 * (draw + 1) + seed)).errors.p90
                for draw in range(args.draws)
            ]
            gaps.setdefault(label, []).append(float(np.mean(draws)) - exact)
        print(
            f"seed {seed + 1}/{args.seeds} done ({time.perf_counter() - start:.0f} s)", flush=True
        )

    print(
        f"\n{data.name}, θ = 0.5, 10 clients/round, {args.rounds} rounds, ε = "
        f"{args.epsilon:g} on the thresholds; exact-quantile p90 {np.mean(exact_p90):.3f}"
    )
    print(f"{'threshold':<26s} {'p90 − exact p90':>18s}   (95 % CI over {args.seeds} seeds)")
    for label, values in gaps.items():
        print(f"{label:<26s} {mean_interval(values).text(4, signed=True):>20s}")
    args.out.write_text(
        json.dumps({"exact_p90": exact_p90, "gaps": gaps, **vars(args)}, indent=1, default=str)
    )
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
