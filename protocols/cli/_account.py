"""``secagg-dp account``: privacy of T rounds of (distributed) discrete Gaussian noise.

Prints ρ, ε by the tight conversion and by the simple one, each with the formula and its source.
"""

from __future__ import annotations

import argparse
import math
from typing import Any

from dpquantile import FastDiscreteGaussian
from dpquantile.accounting import (
    DiscreteGaussian,
    DistributedDiscreteGaussian,
    MechanismEvent,
    ZCDPAccountant,
    kls21_sensitivities,
)
from protocols.cli.arguments import (
    HelpFormatter,
    examples,
    positive_float,
    positive_int,
    probability,
)
from protocols.cli.errors import CommandError

__all__ = ["register", "run"]


def register(subparsers: Any) -> None:
    """Add the ``account`` subcommand to ``subparsers``.

    Examples
    --------
    >>> parser = argparse.ArgumentParser(prog="secagg-dp")
    >>> register(parser.add_subparsers(dest="command"))
    >>> args = parser.parse_args(
    ...     ["account", "--sigma", "2", "--sensitivity", "1", "--rounds", "100", "--delta", "1e-5"])
    >>> args.func(args)  # doctest: +ELLIPSIS
    history  100 x DiscreteGaussian(sigma=2.0, ...)
    rho              = 12.500000 ...
    0
    """
    parser = subparsers.add_parser(
        "account",
        formatter_class=HelpFormatter,
        epilog=examples(
            "secagg-dp account --sigma 2 --sensitivity 1 --rounds 100 --delta 1e-5",
            "secagg-dp account --sigma 0.1 --sensitivity 1 --granularity 1e-3 --clients 100 "
            "--dim 65536 --rounds 100 --delta 1e-5",
        ),
        help="privacy (rho, epsilon) of T rounds of discrete Gaussian noise",
        description=(
            "Compose T releases of discrete Gaussian noise (central, or distributed over n "
            "clients as in KLS21) and print rho and epsilon with the formula and source of each."
        ),
    )
    parser.add_argument(
        "--sigma",
        type=positive_float,
        required=True,
        help="noise sigma per release (per client with --clients); grid units "
        "unless --granularity is given",
    )
    parser.add_argument(
        "--sensitivity",
        type=positive_float,
        required=True,
        help="L2 sensitivity (with --granularity: the L2 clipping norm c)",
    )
    parser.add_argument(
        "--clients",
        type=positive_int,
        default=None,
        help="number n of clients each adding noise (KLS21); needs --dim",
    )
    parser.add_argument(
        "--dim", type=positive_int, default=None, help="dimension d of each release"
    )
    parser.add_argument("--rounds", type=positive_int, required=True, help="number T of releases")
    parser.add_argument("--delta", type=probability, required=True, help="target delta in (0, 1)")
    parser.add_argument(
        "--l1-sensitivity",
        type=positive_float,
        default=None,
        help="L1 sensitivity for --clients (default Δ₂·min(√d, Δ₂), KLS21)",
    )
    parser.add_argument(
        "--granularity",
        type=positive_float,
        default=None,
        help="grid step gamma: sigma and sensitivity are then in model units and "
        "the sum is scaled by 1/gamma with conditional randomized rounding "
        "(KLS21); needs --dim",
    )
    parser.add_argument(
        "--beta",
        type=probability,
        default=math.exp(-0.5),
        help="conditional-rounding beta for --granularity (default exp(-0.5))",
    )
    parser.add_argument(
        "--sampler",
        choices=("exact", "fast"),
        default="exact",
        help="noise sampler: 'fast' adds its total-variation bound to delta",
    )
    parser.set_defaults(func=run)


def _event(args: argparse.Namespace) -> MechanismEvent:
    """Build the per-round event; raises ValueError with a message for inconsistent options."""
    if args.clients is not None and args.dim is None:
        raise ValueError("--clients needs --dim (the KLS21 bound depends on the dimension)")
    if args.granularity is not None and args.dim is None:
        raise ValueError("--granularity needs --dim (rounding inflates the sensitivity by ~√d)")
    if args.l1_sensitivity is not None and args.clients is None:
        raise ValueError(
            "--l1-sensitivity applies to the distributed bound: it needs --clients (a central "
            "discrete Gaussian's guarantee depends on Δ₂ only)"
        )
    if args.granularity is None and args.beta != math.exp(-0.5):
        raise ValueError("--beta is conditional rounding's: it needs --granularity")
    dimension = args.dim if args.dim is not None else 1
    sigma = args.sigma
    l2 = args.sensitivity
    l1 = args.l1_sensitivity
    if args.granularity is not None:
        l1_rounded, l2 = kls21_sensitivities(
            args.sensitivity, args.granularity, dimension, beta=args.beta
        )
        sigma = args.sigma / args.granularity
        l1 = l1 if l1 is not None else l1_rounded
    tv = FastDiscreteGaussian(sigma).tv_bound * dimension if args.sampler == "fast" else 0.0
    if args.clients is None:
        return DiscreteGaussian(
            sigma=sigma, l2_sensitivity=l2, dimension=dimension, sampler_tv_bound=tv
        )
    if l1 is None:
        l1 = l2 * min(math.sqrt(dimension), l2)  # KLS21 Thm. 1: ‖v‖₁ ≤ min(√d‖v‖₂, ‖v‖₂²)
    return DistributedDiscreteGaussian(
        num_clients=args.clients,
        sigma=sigma,
        l1_sensitivity=l1,
        l2_sensitivity=l2,
        dimension=dimension,
        sampler_tv_bound=tv * args.clients,
    )


def run(args: argparse.Namespace) -> int:
    """Print the accounting for ``args``; return 0 (inconsistent options raise
    :class:`~protocols.cli.errors.CommandError`: exit status 2).

    Examples
    --------
    >>> ns = argparse.Namespace(sigma=1.0, sensitivity=1.0, clients=None, dim=None, rounds=1,
    ...                         delta=1e-5, l1_sensitivity=None, granularity=None,
    ...                         beta=math.exp(-0.5), sampler="exact")
    >>> run(ns)  # doctest: +ELLIPSIS
    history  1 x DiscreteGaussian(sigma=1.0, ...)
    ...
    epsilon (exact)  = 4.430238 ...
    0
    """
    try:
        event = _event(args)
    except ValueError as error:
        raise CommandError(str(error)) from None
    accountant = ZCDPAccountant().compose(event, count=args.rounds)
    delta = args.delta
    rho = accountant.rho
    tight = accountant.epsilon_renyi(delta)
    simple = accountant.epsilon_simple(delta)
    reported = accountant.epsilon(delta)
    alpha = accountant.optimal_order(delta)
    print(f"history  {args.rounds} x {event!r}")
    if isinstance(event, DistributedDiscreteGaussian):
        rho_formula = (
            "T·min{Δ₂²/(2nσ²)+τd, ½(Δ₂²/(nσ²)+2Δ₁τ/(√nσ)+τ²d), ½(Δ₂/(√nσ)+τ√d)²}, "
            f"τ = {event.tau:.3g} (KLS21 Thm. 1; ρ adds, BS16 Lemma 2.3)"
        )
    else:
        rho_formula = "T·Δ₂²/(2σ²) (CKS20 Thm. 4/14; ρ adds, BS16 Lemma 2.3)"
    print(f"rho              = {rho:.6f}   {rho_formula}")
    print(
        f"epsilon (tight)  = {tight:.6f}   min over real α>1 of D_α + (log(1/δ) + (α−1)·log(1−1/α) "
        f"− log α)/(α−1), at α = {alpha:.4f} (CKS20 Cor. 13)"
    )
    print(f"epsilon (simple) = {simple:.6f}   ρ + 2·√(ρ·log(1/δ)) (BS16 Prop. 1.3)")
    if reported < tight:
        print(
            f"epsilon (exact)  = {reported:.6f}   δ = P[X > εσ²/Δ − Δ/2] − e^ε·P[X > εσ²/Δ + Δ/2] "
            "for one scalar release (CKS20 Thm. 7)"
        )
    if accountant.sampler_tv_bound > 0:
        print(
            f"sampler TV η     = {accountant.sampler_tv_bound:.3g}   included above as "
            "δ_total = δ(ε) + (1 + e^ε)·η (fast_sampler_proof.md §5)"
        )
    print(f"delta            = {delta:g}")
    return 0
