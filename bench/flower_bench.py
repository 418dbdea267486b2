"""Time per round of our secure aggregation inside Flower against Flower's own SecAgg+.

The same app on both sides, in Flower's simulation engine (Ray, one machine): ``--nodes`` virtual
SuperNodes, each training returns the same d-dimensional update (a fixed function of its
partition) and 50 examples; the server runs ``--rounds`` rounds of secure weighted averaging.

* **ours** — a Message-API ``ServerApp`` calling ``secagg.integrations.flower.run_secure_sum``;
  clients wrapped by ``secagg_mod`` (X25519, AES-GCM shares, Shamir over 2^31−1, AES-CTR masks,
  bit-packed 32-bit uploads).
* **flower** — Flower 1.42's own: ``DefaultWorkflow(fit_workflow=SecAggPlusWorkflow(...))`` on a
  ``LegacyContext`` with the legacy ``FedAvg`` (its SecAgg+ runs only through the legacy API);
  clients are a ``NumPyClient`` wrapped by ``secaggplus_mod``.

Both use the complete graph (every client shares with every other: ``num_shares = n``) and the
same threshold (a majority), with no dropouts. Each side's time per round is the server's wall
time from sending a round's first message to holding its aggregate, median over ``--rounds``
rounds after one untimed warm-up round (Ray starts its actors lazily); every configuration runs
in its own process. Prints a table and writes ``bench/results/flower_bench.json``. Never
asserts on time; the machine is shared, so compare the two columns of one run.

    pip install "secagg-dp[flower]"      # flwr[simulation]==1.42.0
    python bench/flower_bench.py                  # n = 10, d = 1e3 and 1e5, 2 rounds
    python bench/flower_bench.py --quick          # d = 1e3 only
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

RESULTS = Path(__file__).resolve().parent / "results" / "flower_bench.json"
WEIGHT = 50


def update_of(partition: int, dimension: int) -> np.ndarray:
    """Client ``partition``'s update: fixed, in [-1, 1]."""
    return np.random.default_rng([7, partition]).uniform(-1.0, 1.0, dimension)


def backend() -> dict[str, Any]:
    return {
        "client_resources": {"num_cpus": 1, "num_gpus": 0.0},
        "init_args": {"num_cpus": 2, "include_dashboard": False, "log_to_driver": False},
    }


def run_ours(nodes: int, dimension: int, rounds: int) -> dict[str, Any]:
    from flwr.app import ArrayRecord, Context, Message, MetricRecord, RecordDict
    from flwr.clientapp import ClientApp
    from flwr.serverapp import Grid, ServerApp
    from flwr.simulation import run_simulation

    from secagg.integrations.flower import SumEncoding, run_secure_sum, secagg_mod

    client = ClientApp(mods=[secagg_mod])

    @client.train()
    def train(message: Message, context: Context) -> Message:
        partition = int(context.node_config["partition-id"])
        content = RecordDict(
            {
                "arrays": ArrayRecord([update_of(partition, dimension)]),
                "metrics": MetricRecord({"num-examples": WEIGHT}),
            }
        )
        return Message(content, reply_to=message)

    seconds: list[float] = []
    phases: list[dict[str, float]] = []
    server = ServerApp()

    @server.main()
    def main(grid: Grid, context: Context) -> None:
        while len(list(grid.get_node_ids())) < nodes:
            time.sleep(0.2)
        content = RecordDict({"arrays": ArrayRecord([np.zeros(dimension)])})
        encoding = SumEncoding(clip=8.0, weight_key="num-examples", weight_cap=1000.0)
        for server_round in range(rounds + 1):  # round 0 warms Ray's actors up: not timed
            start = time.perf_counter()
            result = run_secure_sum(
                grid, content, encoding=encoding, timeout=600.0, group_id=str(server_round)
            )
            if server_round > 0:
                seconds.append(time.perf_counter() - start)
                phases.append(result.seconds)
            assert len(result.survivors) == nodes

    run_simulation(server, client, num_supernodes=nodes, backend_config=backend())
    return {"round_seconds": seconds, "phase_seconds": phases}


def run_flower(nodes: int, dimension: int, rounds: int) -> dict[str, Any]:
    from flwr.app import Context
    from flwr.client import NumPyClient
    from flwr.client.mod import secaggplus_mod
    from flwr.clientapp import ClientApp
    from flwr.common import ndarrays_to_parameters
    from flwr.server import LegacyContext, ServerConfig
    from flwr.server.strategy import FedAvg
    from flwr.server.workflow import DefaultWorkflow, SecAggPlusWorkflow
    from flwr.serverapp import Grid, ServerApp
    from flwr.simulation import run_simulation

    class Trainer(NumPyClient):  # type: ignore[misc]
        def __init__(self, partition: int) -> None:
            self.partition = partition

        def fit(self, parameters: Any, config: Any) -> Any:
            return [update_of(self.partition, dimension)], WEIGHT, {}

    def client_fn(context: Context) -> Any:
        return Trainer(int(context.node_config["partition-id"])).to_client()

    client = ClientApp(client_fn=client_fn, mods=[secaggplus_mod])
    seconds: list[float] = []
    server = ServerApp()

    class TimedFedAvg(FedAvg):  # type: ignore[misc]
        """FedAvg that records when each round's fit starts and when its aggregate arrives."""

        started = 0.0

        def configure_fit(self, server_round: int, *args: Any, **kwargs: Any) -> Any:
            self.started = time.perf_counter()
            return super().configure_fit(server_round, *args, **kwargs)

        def aggregate_fit(self, server_round: int, *args: Any, **kwargs: Any) -> Any:
            if server_round > 1:  # round 1 warms Ray's actors up: not timed
                seconds.append(time.perf_counter() - self.started)
            return super().aggregate_fit(server_round, *args, **kwargs)

    @server.main()
    def main(grid: Grid, context: Context) -> None:
        while len(list(grid.get_node_ids())) < nodes:
            time.sleep(0.2)
        strategy = TimedFedAvg(
            fraction_fit=1.0,
            fraction_evaluate=0.0,
            min_fit_clients=nodes,
            min_available_clients=nodes,
            initial_parameters=ndarrays_to_parameters([np.zeros(dimension)]),
        )
        legacy = LegacyContext(
            context=context, config=ServerConfig(num_rounds=rounds + 1), strategy=strategy
        )
        workflow = DefaultWorkflow(
            fit_workflow=SecAggPlusWorkflow(
                num_shares=nodes, reconstruction_threshold=(nodes - 1) // 2 + 1, timeout=600.0
            )
        )
        workflow(grid, legacy)

    run_simulation(server, client, num_supernodes=nodes, backend_config=backend())
    return {"round_seconds": seconds}


def one(side: str, nodes: int, dimension: int, rounds: int) -> dict[str, Any]:
    run = run_ours if side == "ours" else run_flower
    out = run(nodes, dimension, rounds)
    values = out["round_seconds"]
    return {
        "side": side,
        "nodes": nodes,
        "dimension": dimension,
        "rounds": rounds,
        "median_round_s": float(np.median(values)) if values else None,
        **out,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=10)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--dimensions", type=int, nargs="+", default=[1000, 100_000])
    parser.add_argument("--quick", action="store_true", help="d = 1e3 only")
    parser.add_argument("--one", choices=("ours", "flower"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.one:  # a child process: one configuration, JSON on the last line of stdout
        print(json.dumps(one(args.one, args.nodes, args.dimensions[0], args.rounds)))
        return 0
    dimensions = [1000] if args.quick else args.dimensions
    rows = []
    for dimension in dimensions:
        for side in ("ours", "flower"):
            command = [
                sys.executable,
                __file__,
                "--one",
                side,
                "--nodes",
                str(args.nodes),
                "--rounds",
                str(args.rounds),
                "--dimensions",
                str(dimension),
            ]
            done = subprocess.run(
                command, capture_output=True, text=True, timeout=1800, check=False
            )
            lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
            if done.returncode != 0 or not lines:
                print(done.stdout[-2000:], done.stderr[-3000:], file=sys.stderr)
                raise RuntimeError(f"{side} at d={dimension} failed")
            rows.append(json.loads(lines[-1]))
    print(f"\nFlower 1.42 simulation engine, n = {args.nodes} clients, {args.rounds} rounds")
    print(f"{'d':>8}  {'ours s/round':>13}  {'Flower SecAgg+ s/round':>23}  {'ratio':>6}")
    for dimension in dimensions:
        ours = next(r for r in rows if r["dimension"] == dimension and r["side"] == "ours")
        theirs = next(r for r in rows if r["dimension"] == dimension and r["side"] == "flower")
        ratio = theirs["median_round_s"] / ours["median_round_s"]
        print(
            f"{dimension:>8}  {ours['median_round_s']:>13.2f}  "
            f"{theirs['median_round_s']:>23.2f}  {ratio:>5.1f}×"
        )
    import flwr

    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(
        json.dumps(
            {
                "flwr": flwr.__version__,
                "python": platform.python_version(),
                "cpus": os.cpu_count(),
                "rows": rows,
            },
            indent=2,
        ),
        encoding="utf-8",
    )
    print(f"wrote {RESULTS}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
