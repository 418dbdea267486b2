"""``secagg-dp quantile``: a distributed DP quantile on a built-in synthetic distribution."""

from __future__ import annotations

import argparse
import json
import time
from typing import Any

import numpy as np

from dpquantile import ZCDPAccountant, dp_quantile, rho_for_epsilon
from protocols.cli.arguments import HelpFormatter, examples, positive_float, probability, seed
from protocols.cli.errors import CommandError
from protocols.cli.progress import ProgressBar
from secagg import TooFewSurvivorsError

__all__ = ["register", "run"]

# Built-in distributions and their default histogram ranges (the Δ-FL paper's two setups).
_DISTRIBUTIONS = {"chi2": (0.0, 16.0), "uniform": (0.0, 1.0)}


def register(subparsers: Any) -> None:
    """Add the ``quantile`` subcommand."""
    parser = subparsers.add_parser(
        "quantile",
        formatter_class=HelpFormatter,
        epilog=examples(
            "secagg-dp quantile --clients 512 --q 0.9 --epsilon 1 --bins 64",
            "secagg-dp quantile --clients 100 --rho 0.25 --no-secure --json",
        ),
        help="distributed DP quantile by hierarchical histogram over the secure sum",
        description=(
            "Each simulated client holds one value from a built-in distribution; the q-quantile "
            "is estimated from a noisy hierarchical histogram (distributed discrete Gaussian) "
            "summed with the secure-sum protocol. --epsilon is the release's (ε, δ)-DP at --delta, "
            "converted to the largest zCDP ρ that certifies it; --rho sets ρ directly."
        ),
    )
    parser.add_argument("--clients", type=int, default=512, help="number of clients n")
    parser.add_argument("--q", type=probability, default=0.9, help="quantile level in (0, 1)")
    budget = parser.add_mutually_exclusive_group()
    budget.add_argument(
        "--epsilon", type=positive_float, default=1.0, help="privacy: (ε, δ)-DP at --delta"
    )
    budget.add_argument(
        "--rho", type=positive_float, default=None, help="privacy: ρ-zCDP (instead of --epsilon)"
    )
    parser.add_argument("--bins", type=int, default=64, help="histogram bins (a power of 2)")
    parser.add_argument("--mechanism", choices=["tree", "flat"], default="tree")
    parser.add_argument(
        "--no-consistency",
        action="store_true",
        help="read the tree through dyadic partitions as the paper does (no least squares)",
    )
    parser.add_argument("--distribution", choices=sorted(_DISTRIBUTIONS), default="chi2")
    parser.add_argument(
        "--secure",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="run the real secure sum (default) or only add the identical noise",
    )
    parser.add_argument(
        "--delta", type=probability, default=1e-5, help="δ of the (ε, δ)-DP guarantee"
    )
    parser.add_argument("--seed", type=seed, default=0)
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Execute ``secagg-dp quantile``."""
    rng = np.random.default_rng(args.seed)
    n = args.clients
    if n < 2:
        raise CommandError(f"--clients must be at least 2; got {n}")
    values = rng.chisquare(3, size=n) if args.distribution == "chi2" else rng.random(n)
    lower, upper = _DISTRIBUTIONS[args.distribution]
    rho = args.rho if args.rho is not None else rho_for_epsilon(args.epsilon, args.delta)
    bar = ProgressBar()
    if args.json:
        bar.enabled = False
    start = time.perf_counter()
    try:
        result = dp_quantile(
            values,
            args.q,
            lower=lower,
            upper=upper,
            bins=args.bins,
            rho=rho,
            mechanism=args.mechanism,
            consistency=not args.no_consistency,
            secure=args.secure,
            seed=args.seed,
            progress=bar.update,
        )
    except TooFewSurvivorsError as exc:
        print(f"round aborted cleanly: {exc}")
        return 3
    finally:
        bar.close()
    elapsed = time.perf_counter() - start
    true_quantile = float(np.quantile(values, args.q, method="inverted_cdf"))
    rank = float(np.mean(values <= result.estimate))
    epsilon_dp = ZCDPAccountant().compose(result.event).epsilon(args.delta)
    report = {
        "clients": n,
        "distribution": args.distribution,
        "q": args.q,
        "estimate": result.estimate,
        "true_quantile": true_quantile,
        "rank_error": abs(rank - args.q),
        "absolute_error": abs(result.estimate - true_quantile),
        "rho": result.rho,
        "epsilon_dp": epsilon_dp,
        "delta": args.delta,
        "sigma_per_client": result.sigma,
        "mechanism": result.mechanism + (" + consistency" if result.consistency else ""),
        "bins": result.bins,
        "modulus_bits": result.modulus_bits,
        "secure": result.secure,
        "seconds": elapsed,
        "seed": args.seed,
    }
    if args.json:
        print(json.dumps(report, indent=1))
        return 0
    path = "secure sum" if result.secure else "plain sum, identical noise, no cryptography"
    print(
        f"{args.q}-quantile of {n} clients' {args.distribution} values, b={result.bins} "
        f"{report['mechanism']}, {path}, seed {args.seed}"
    )
    print(f"  estimate       {result.estimate:.4f}")
    print(f"  true quantile  {true_quantile:.4f}   (absolute error {report['absolute_error']:.4f})")
    print(f"  rank error     {report['rank_error']:.4f}   (F(estimate) = {rank:.4f})")
    print(
        f"  privacy        ρ = {result.rho:.4g} zCDP, ({epsilon_dp:.3f}, {args.delta:g})-DP; "
        f"σ = {result.sigma:.3f} per client, "
        f"M = 2^{result.modulus_bits}"
    )
    print(f"  time           {elapsed:.2f} s")
    return 0
