"""Seconds per round on Flower's deployment engine: our secure average against Flower's SecAgg+.

Real processes on 127.0.0.1 (``examples/flower_app/deploy.py``): one ``flower-superlink``,
``--nodes`` ``flower-supernode`` processes, ``flwr run`` of the example app with a model of
``--dimension`` values (the app's ``model-size``: its linear model plus a payload block that
each node's training moves). Every cell is its own deployment, the same app, nodes and task:

* **flower-secagg+** — Flower 1.42's own ``SecAggPlusWorkflow`` (``aggregation =
  "flower-secagg+"``; semi-honest server; 4 message rounds per training round; the grid's own
  ``send_and_receive``).
* **ours, setup every round** — the app as it was: one secure sum with its own key setup per
  round, ``send_and_receive`` (``session-rounds = 1``, ``poll-interval = 0``).
* **ours, session** — one :class:`secagg.integrations.flower.GridSession` for the whole run:
  the key setup once, then per round masked input, (consistency check,) unmask; the ServerApp
  asks for replies every 0.1 s (the defaults).

Both threat models of ours: malicious (signed keys, the consistency check) and semi-honest.
Every cell runs with the same ``FLWR_SUPEREXEC_TASK_POLL_INTERVAL`` (``--task-poll``, 0.1 s;
Flower's default is 1 s), an operator setting of Flower's runtime that serves both sides.
Complete graph, a majority threshold, no dropouts. A round's time is the ServerApp's wall time
from its first message to the new model; "first" is round 1 (ours: it includes the key
setup), "median" the median of rounds 2..R, "per round" the whole run's rounds averaged.
Never asserts on time. Prints a table and writes ``bench/results/flower_deployment_bench.json``.

What a round costs on this engine is Flower's runtime, not arithmetic: a SuperNode asks the
SuperLink for work every 3 s when idle, and starts a new ``flwr-clientapp`` process for every
message (≈ 2 s of Python start-up and imports); ``Grid.send_and_receive`` looks for replies
every 3 s. So a message round costs ≈ 5–10 s whatever its payload, and the win is in the number
of message rounds and in how soon the server looks.

* **ours, geometric median (4 averages)** — ``SecureStrategy("geometric_median")`` with three
  Weiszfeld steps: one session per training round, its 4 secure averages 5 + 3·3 message rounds.

    pip install "secagg-dp[flower]"
    python bench/flower_deployment_bench.py                 # 4 nodes, d = 1e5, 4 rounds
    python bench/flower_deployment_bench.py --quick         # 3 rounds, Flower + ours (session)
    python bench/flower_deployment_bench.py --rounds 3 --cells "ours, session" \
        "ours, geometric median (4 averages)"               # a GM round against a FedAvg round
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
APP_DIR = ROOT / "examples" / "flower_app"
RESULTS = Path(__file__).resolve().parent / "results" / "flower_deployment_bench.json"

# name → (extra run config, threat model shown, message rounds per training round)
CELLS: dict[str, tuple[str, str, str]] = {
    "flower-secagg+": ("aggregation='flower-secagg+' poll-interval=0", "semi-honest", "4"),
    "ours, setup every round": (
        "session-rounds=1 poll-interval=0 threat-model='malicious'",
        "malicious",
        "5",
    ),
    "ours, session": ("threat-model='malicious'", "malicious", "3 (+2 once)"),
    "ours, session (semi-honest)": ("threat-model='semi-honest'", "semi-honest", "2 (+2 once)"),
    # SecureStrategy's geometric median: one session per training round, 4 secure averages
    # (the mean and 3 Weiszfeld steps): 5 + 3·3 message rounds.
    "ours, geometric median (4 averages)": (
        "threat-model='malicious' aggregation='geometric_median' max-iterations=3 ftol=0.0",
        "malicious",
        "14",
    ),
}
QUICK = ("flower-secagg+", "ours, session")


def run_cell(
    name: str, nodes: int, dimension: int, rounds: int, task_poll: float | None
) -> dict[str, Any]:
    """One deployment, one ``flwr run``; the round times the ServerApp reported."""
    sys.path.insert(0, str(APP_DIR))
    try:
        import deploy

        extra, threat, messages = CELLS[name]
        started = time.perf_counter()
        with deploy.deployment(nodes, task_poll_interval=task_poll) as current:
            events = deploy.run_app(
                current,
                rounds=rounds,
                nodes=nodes,
                phase_timeout=120.0,
                deadline=300.0 + 90.0 * rounds,
                extra_config=f"model-size={dimension} {extra}",
            )
        total = time.perf_counter() - started
    finally:
        sys.path.remove(str(APP_DIR))
    if events[-1]["event"] != "done":
        raise RuntimeError(f"{name}: the run ended with {events[-1]}")
    seconds = [float(e["seconds"]) for e in events if e["event"] == "round"]
    sizes = {int(e["model_size"]) for e in events if e["event"] == "round"}
    if len(seconds) != rounds or sizes != {dimension}:
        raise RuntimeError(f"{name}: {len(seconds)} rounds of sizes {sizes}")
    return {
        "cell": name,
        "threat_model": threat,
        "message_rounds_per_round": messages,
        "round_seconds": seconds,
        "first_s": seconds[0],
        "median_s": statistics.median(seconds[1:]) if rounds > 1 else seconds[0],
        "per_round_s": sum(seconds) / rounds,
        "deployment_wall_s": total,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=4)
    parser.add_argument("--dimension", type=int, default=100_000)
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--quick", action="store_true", help="3 rounds, two cells")
    parser.add_argument(
        "--task-poll",
        type=float,
        default=0.1,
        help="FLWR_SUPEREXEC_TASK_POLL_INTERVAL for every cell (Flower's default: 1 s; "
        "0: leave the environment's)",
    )
    parser.add_argument("--out", type=Path, default=RESULTS)
    parser.add_argument(
        "--cells",
        nargs="+",
        choices=tuple(CELLS),
        help="run only these cells (the first is the anchor of the last column)",
    )
    args = parser.parse_args(argv)
    rounds = 3 if args.quick else args.rounds
    if rounds < 2:
        parser.error("--rounds must be at least 2 (round 1 is reported apart)")
    names = args.cells or (QUICK if args.quick else tuple(CELLS))
    rows = []
    for name in names:
        print(f"… {name}", file=sys.stderr, flush=True)
        rows.append(run_cell(name, args.nodes, args.dimension, rounds, args.task_poll or None))
    anchor = rows[0]["median_s"]
    print(
        f"\n{args.nodes} SuperNodes, d = {args.dimension}, {rounds} rounds, SuperExec task poll "
        f"{args.task_poll or 'default'} s (seconds per training round, ServerApp wall time)\n"
    )
    header = (
        f"{'cell':36} {'threat':12} {'msgs':>12} {'round 1':>8} {'median':>8} {'mean':>8} "
        f"{'vs first':>10}"
    )
    print(header)
    print("-" * len(header))
    for row in rows:
        row["ratio_to_anchor"] = row["median_s"] / anchor
        print(
            f"{row['cell']:36} {row['threat_model']:12} {row['message_rounds_per_round']:>12} "
            f"{row['first_s']:8.1f} {row['median_s']:8.1f} {row['per_round_s']:8.1f} "
            f"{row['ratio_to_anchor']:9.2f}x"
        )
    args.out.parent.mkdir(parents=True, exist_ok=True)
    payload = {
        "benchmark": "flower_deployment_bench",
        "nodes": args.nodes,
        "dimension": args.dimension,
        "rounds": rounds,
        "superexec_task_poll_s": args.task_poll or None,
        "python": platform.python_version(),
        "machine": platform.machine(),
        "flwr": _flwr_version(),
        "rows": rows,
    }
    args.out.write_text(json.dumps(payload, indent=2) + "\n", encoding="utf-8")
    print(f"\nwrote {args.out}")
    return 0


def _flwr_version() -> str:
    import flwr

    return str(flwr.__version__)


if __name__ == "__main__":
    sys.exit(main())
