"""The default job's figures with confidence intervals: what DP on the model costs each trainer.

``secagg-dp train`` with no arguments runs FedAvg (``dp="model"``) and Δ-FL (θ = 0.5,
``dp="both"``: model and thresholds) at (ε, δ) = (5, 1e-5) for the whole run on Synthetic-IID
(1 000 users, 100 per round, 20 rounds, local lr 0.5), each beside the same run without DP. This
script repeats that over seeds (data, sampling, SGD) and noise draws (``noise_seed``) for every
trainer with model DP — FedAvg, Δ-FL, RFA (K = 4 Weiszfeld steps), RFA-1, and Fed+'s FedAvg+,
FedProx and FedGeoMed+ (Weiszfeld, K = 10) with the command's settings — on the plain path (the
secure sum's exact integers without the cryptography: identical noise, fast). It prints the mean
per-client error on the 100 unseen users with 95 % intervals (Student t over seeds of the
per-seed mean over draws) and the paired differences: each algorithm's cost of DP (DP − no DP,
same seed), and each DP run against FedAvg with DP.

    python examples/dp_default_job.py                          # FedAvg and Δ-FL, ≈ 3 minutes
    python examples/dp_default_job.py --algorithms all         # every trainer, ≈ 15 minutes
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any

import numpy as np

from protocols.training import TrainerConfig, train
from protocols.training.datasets import synthetic_iid
from protocols.training.evidence import mean_interval
from protocols.training.fedplus import FedPlusConfig, train_fedplus

_TRAINERS = ("fedavg", "deltafl", "rfa", "rfa1")
_FEDPLUS = ("fedavg+", "fedprox", "fedgeomed+", "fedcomed+")
# Under DP: FedGeoMed+ by the Weiszfeld iteration, FedCoMed+ by the paper's alternation.
_METHOD = {"fedcomed+": "moreau"}
_LABELS = {
    "fedavg": "FedAvg",
    "deltafl": "Δ-FL",
    "rfa": "RFA",
    "rfa1": "RFA-1",
    "fedavg+": "FedAvg+",
    "fedprox": "FedProx",
    "fedgeomed+": "FedGeoMed+",
    "fedcomed+": "FedCoMed+",
}


def _error(algorithm: str, seed: int, rounds: int, epsilon: float | None, draw: int) -> float:
    """Mean per-client error of one run (the global model's, for Fed+)."""
    data = _DATA[seed]
    common: dict[str, Any] = {
        "rounds": rounds,
        "clients_per_round": 100,
        "lr": 0.5,
        "secure": False,
        "seed": seed,
        "update_clip": 1.0,
    }
    noise = {} if epsilon is None else {"epsilon": epsilon, "noise_seed": 1000 * (draw + 1) + seed}
    if algorithm in _FEDPLUS:
        config = FedPlusConfig(
            algorithm=algorithm,  # type: ignore[arg-type]
            model="logreg",
            local_steps=10,
            batch_size=32,
            aggregation_method=_METHOD.get(algorithm, "weiszfeld"),  # type: ignore[arg-type]
            **common,
            **noise,
        )
        result = train_fedplus(config, data)
        spent, errors = result.epsilon_spent, result.global_errors.mean
    else:
        scope = None if epsilon is None else ("both" if algorithm == "deltafl" else "model")
        trainer = TrainerConfig(algorithm=algorithm, dp=scope, **common, **noise)  # type: ignore[arg-type]
        outcome = train(data, trainer)
        spent, errors = outcome.epsilon_spent, outcome.errors.mean
    assert epsilon is None or (spent is not None and spent <= epsilon)
    return float(errors)


_DATA: dict[int, Any] = {}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", type=int, default=10)
    parser.add_argument("--draws", type=int, default=3)
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--epsilon", type=float, default=5.0)
    parser.add_argument(
        "--algorithms", default="fedavg,deltafl", help="comma list, or 'all' (every DP trainer)"
    )
    parser.add_argument("--out", type=Path, default=Path("dp_default_job.json"))
    args = parser.parse_args()
    chosen = [*_TRAINERS, *_FEDPLUS] if args.algorithms == "all" else args.algorithms.split(",")
    if "fedavg" not in chosen:
        chosen.insert(0, "fedavg")  # the reference of every paired comparison

    error: dict[str, dict[str, list[float]]] = {a: {"no DP": [], "DP": []} for a in chosen}
    start = time.perf_counter()
    for seed in range(args.seeds):
        _DATA[seed] = synthetic_iid(num_clients=1000, num_test_clients=100, seed=seed)
        for algorithm in chosen:
            error[algorithm]["no DP"].append(_error(algorithm, seed, args.rounds, None, 0))
            draws = [
                _error(algorithm, seed, args.rounds, args.epsilon, draw)
                for draw in range(args.draws)
            ]
            error[algorithm]["DP"].append(float(np.mean(draws)))
        del _DATA[seed]
        print(f"seed {seed + 1}/{args.seeds} ({time.perf_counter() - start:.0f} s)", flush=True)

    def interval(values: np.ndarray) -> str:
        return mean_interval(values).text(3)

    print(
        f"\nSynthetic-IID, 1000 users (100 per round), {args.rounds} rounds, (ε, δ) = "
        f"({args.epsilon:g}, 1e-5) for the run (Δ-FL: model + thresholds); mean per-client error "
        f"on 100 unseen users (Fed+: the global model's), 95 % CI over {args.seeds} seeds × "
        f"{args.draws} noise draws"
    )
    header = (
        f"{'algorithm':<11s} {'no DP':>15s} {'DP':>15s} {'DP − no DP':>15s} {'− FedAvg DP':>15s}"
    )
    print(header)
    print("-" * len(header))
    reference = np.array(error["fedavg"]["DP"])
    for algorithm in chosen:
        plain, private = np.array(error[algorithm]["no DP"]), np.array(error[algorithm]["DP"])
        versus = "—" if algorithm == "fedavg" else interval(private - reference)
        print(
            f"{_LABELS[algorithm]:<11s} {interval(plain):>15s} {interval(private):>15s} "
            f"{interval(private - plain):>15s} {versus:>15s}"
        )
    args.out.write_text(json.dumps({"error": error, **vars(args)}, indent=1, default=str))
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
