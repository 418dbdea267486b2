"""``secagg-dp sum``: simulate a secure-sum round (or a session of several sums) and check it
against the plaintext sum."""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Sequence
from typing import Any

import numpy as np
from numpy.typing import NDArray

from protocols.cli.arguments import HelpFormatter, examples, fraction, positive_int, seed
from protocols.cli.errors import CommandError
from protocols.cli.progress import ProgressBar
from secagg import LazyInputs, Phase, Ring, Session, ThreatModel, TooFewSurvivorsError
from secagg.graph_parameters import secagg_plus_parameters

__all__ = ["SyntheticInputs", "register", "run"]


class SyntheticInputs(LazyInputs):
    """n uniform ring vectors, each generated on demand from (seed, index): O(d) memory.

    Examples
    --------
    >>> inputs = SyntheticInputs(3, 4, bits=8, seed=1)
    >>> len(inputs), inputs[2].tolist() == inputs[2].tolist(), int(inputs[0].max()) < 256
    (3, True, True)
    """

    def __init__(self, clients: int, dimension: int, *, bits: int, seed: int) -> None:
        super().__init__(clients, dimension)
        self.clients, self.bits, self.seed = clients, bits, seed

    def row(self, index: int) -> NDArray[np.uint64]:
        rng = np.random.default_rng([self.seed, index])
        high = np.iinfo(np.uint64).max if self.bits == 64 else (1 << self.bits) - 1
        return rng.integers(0, high, size=self.dimension, dtype=np.uint64, endpoint=True)


def register(subparsers: Any) -> None:
    """Add the ``sum`` subcommand."""
    parser = subparsers.add_parser(
        "sum",
        formatter_class=HelpFormatter,
        epilog=examples(
            "secagg-dp sum --clients 100 --dim 100000 --dropout 0.1 --neighbors auto",
            "secagg-dp sum --clients 100 --dim 10000 --neighbors 14 --sums 5",
            "secagg-dp sum --clients 20 --dim 1000 --threat-model semi-honest --json",
        ),
        help="simulate a secure sum (SecAgg / SecAgg+) with dropouts",
        description=(
            "Run the real client and server state machines in memory on random inputs, print "
            "per-phase timings and bytes on the wire, and check the result against the "
            "plaintext sum of the surviving clients."
        ),
    )
    parser.add_argument("--clients", type=positive_int, default=100, help="number of clients n")
    parser.add_argument("--dim", type=positive_int, default=1000, help="vector dimension d")
    parser.add_argument(
        "--dropout", type=fraction, default=0.1, help="fraction of clients that drop out"
    )
    parser.add_argument(
        "--dropout-phase",
        choices=[*(p.value for p in Phase), "mixed"],
        default="masked_input",
        help="phase before which they vanish ('mixed': each at a random phase of the mode)",
    )
    parser.add_argument(
        "--threat-model",
        choices=[m.value for m in ThreatModel],
        default=ThreatModel.MALICIOUS.value,
        help="malicious (signed keys, consistency check; default) or semi-honest",
    )
    parser.add_argument(
        "--neighbors",
        default=None,
        help="SecAgg+ degree k (even), or 'auto' to choose k and t for the dropout rate; "
        "default: complete graph (SecAgg)",
    )
    parser.add_argument("--threshold", type=positive_int, default=None, help="Shamir threshold t")
    parser.add_argument("--bits", type=int, default=32, help="modulus bits b (M = 2^b)")
    parser.add_argument(
        "--sums",
        type=positive_int,
        default=1,
        help="run a session of this many sums over one key setup (secagg.Session; the "
        "dropouts happen in the first, each further sum gets new inputs and iterate)",
    )
    parser.add_argument("--seed", type=seed, default=0, help="seed for inputs and randomness")
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    parser.add_argument("--quiet", action="store_true", help="no progress bar or table")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Execute ``secagg-dp sum``; exit 0 when the secure total equals the plaintext total."""
    n, d = args.clients, args.dim
    if not 1 <= args.bits <= 64:
        raise CommandError(f"--bits must lie in [1, 64]; got {args.bits}")
    neighbors, threshold = args.neighbors, args.threshold
    if neighbors == "auto":
        params = secagg_plus_parameters(max(n, 2), dropout_rate=args.dropout)
        neighbors = None if params.complete_graph else params.degree
        threshold = threshold or params.threshold
    elif neighbors is not None:
        try:
            neighbors = int(neighbors)
        except ValueError:
            message = f"--neighbors takes an even integer or 'auto'; got {neighbors!r}"
            raise CommandError(message) from None
    phase_names = [p.value for p in Phase.of(ThreatModel(args.threat_model))]
    if args.dropout_phase not in (*phase_names, "mixed"):
        raise CommandError(f"the {args.threat_model} mode has no {args.dropout_phase} phase")
    rng = np.random.default_rng(args.seed)
    dropped = rng.choice(n, size=round(args.dropout * n), replace=False).tolist()
    if args.dropout_phase == "mixed":
        picks = rng.choice(len(phase_names), size=len(dropped)).tolist()
        dropouts = {
            p: [i for i, k in zip(dropped, picks, strict=True) if phase_names[k] == p]
            for p in phase_names
        }
    else:
        dropouts = {args.dropout_phase: dropped}
    inputs = SyntheticInputs(n, d, bits=args.bits, seed=args.seed)
    bar = ProgressBar()
    if args.quiet or args.json:
        bar.enabled = False
    start = time.perf_counter()
    if args.sums > 255:
        raise CommandError(f"--sums must lie in [1, 255]; got {args.sums}")
    try:
        session = Session(
            n,
            d,
            iterations=args.sums,
            modulus_bits=args.bits,
            threshold=threshold,
            neighbors=neighbors,
            seed=args.seed,
            progress=bar.update,
            threat_model=args.threat_model,
        )
        result = session.sum(inputs, dropouts=dropouts)
    except TooFewSurvivorsError as exc:
        bar.close()
        print(f"round aborted cleanly: {exc}")
        return 3
    finally:
        bar.close()
    elapsed = time.perf_counter() - start
    ring = Ring(args.bits)

    def matches(total: NDArray[Any], survivors: Sequence[int], data: SyntheticInputs) -> bool:
        expected = ring.zeros(d)
        for i in survivors:
            np.add(expected, data[i].astype(ring.dtype), out=expected)
        ring.normalize(expected)
        return bool(np.array_equal(expected, total))

    correct = matches(result.total, result.survivors, inputs)
    later: list[dict[str, Any]] = []
    for r in range(2, args.sums + 1):
        data = SyntheticInputs(n, d, bits=args.bits, seed=args.seed + r - 1)
        began = time.perf_counter()
        try:
            further = session.sum(data, iterate=b"sum %d" % r)
        except TooFewSurvivorsError as exc:
            print(f"session aborted cleanly in sum {r}: {exc}")
            return 3
        ok = matches(further.total, further.survivors, data)
        correct = correct and ok
        later.append(
            {
                "sum": r,
                "seconds": time.perf_counter() - began,
                "survivors": len(further.survivors),
                "upload_bytes_per_client": sum(further.upload_bytes.values())
                / max(1, len(further.survivors)),
                "equals_plaintext_sum": ok,
            }
        )
    # Clients that sent each phase's message: everyone not gone by then (for per-client means).
    remaining, participants = n, {}
    for p in phase_names:
        remaining -= len(dropouts.get(p, []))
        participants[p] = max(1, remaining)
    report = {
        "clients": n,
        "dimension": d,
        "modulus_bits": args.bits,
        "graph": "complete (SecAgg)"
        if result.neighbors is None
        else f"Harary k={result.neighbors}",
        "threshold": result.threshold,
        "threat_model": result.threat_model,
        "max_colluding": result.max_colluding,
        "signatures": result.signatures,
        "signature_verifications": result.signature_verifications,
        "survivors": len(result.survivors),
        "dropped": len(result.dropped),
        "seconds": elapsed,
        "client_seconds_per_client": {
            p: result.client_seconds[p] / participants[p] for p in phase_names
        },
        "server_seconds": result.server_seconds,
        "transport_seconds": result.transport_seconds,
        "upload_bytes_per_client": {
            p: result.upload_bytes[p] / participants[p] for p in phase_names
        },
        "download_bytes_per_client": {
            p: result.download_bytes[p] / participants[p] for p in phase_names
        },
        "equals_plaintext_sum": correct,
        "seed": args.seed,
        "further_sums": later,
    }
    if args.json:
        print(json.dumps(report, indent=1))
    elif not args.quiet:
        print(
            f"secure sum: n={n} d={d} M=2^{args.bits} {report['graph']} t={result.threshold} "
            f"seed={args.seed}: {len(result.survivors)} survivors, {len(result.dropped)} dropped"
        )
        if result.threat_model == ThreatModel.MALICIOUS.value:
            print(
                f"threat model: malicious server colluding with up to c={result.max_colluding} "
                f"clients; {result.signatures} signatures made, "
                f"{result.signature_verifications} verified"
            )
        else:
            print("threat model: semi-honest server (no protection if it deviates)")
        print(
            f"{'phase':18s} {'client/each':>12s} {'server':>10s} {'up/client':>12s} "
            f"{'down/client':>12s}"
        )
        for p in phase_names:
            print(
                f"{p:18s} {report['client_seconds_per_client'][p] * 1e3:9.2f} ms "
                f"{result.server_seconds[p] * 1e3:7.1f} ms "
                f"{_human_bytes(report['upload_bytes_per_client'][p]):>12s} "
                f"{_human_bytes(report['download_bytes_per_client'][p]):>12s}"
            )
        if later:
            print(f"session: {args.sums} sums over one key setup (the table above is sum 1)")
            header = ("sum", "seconds", "survivors", "up/client", "exact")
            print("{:>4s} {:>9s} {:>10s} {:>12s} {:>6s}".format(*header))
            for row in later:
                print(
                    f"{row['sum']:4d} {row['seconds']:9.3f} {row['survivors']:10d} "
                    f"{_human_bytes(row['upload_bytes_per_client']):>12s} "
                    f"{'yes' if row['equals_plaintext_sum'] else 'NO':>6s}"
                )
        print(
            f"total {elapsed:.2f} s (sum 1); equals the plaintext sum of the survivors: "
            f"{'yes' if correct else 'NO'}"
        )
    return 0 if correct else 1


def _human_bytes(count: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if count < 1024 or unit == "GiB":
            return f"{count:.0f} {unit}" if unit == "B" else f"{count:.1f} {unit}"
        count /= 1024
    return f"{count:.1f} GiB"
