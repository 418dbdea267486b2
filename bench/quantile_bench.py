"""Accuracy and speed of the distributed DP quantile (``dpquantile.dp_quantile``).

Usage::

    python bench/quantile_bench.py            # ≥ 50 seeds per cell, plot + JSON (≈ 10 min)
    python bench/quantile_bench.py --quick    # 10 seeds, small grid
    python bench/quantile_bench.py --no-secure-timing

Accuracy: median over seeds of the rank error |F(estimate) − q| and the absolute error, versus
ε (the paper's: ½ε²-zCDP) for n ∈ {128, 512, 10^3, 10^4}, b ∈ {32, 64, 1024}, χ²(3) and uniform
values, for the paper's tree (dyadic CDF), tree + least-squares consistency, and the flat
histogram. The release is simulated with the same law as ``dp_quantile(secure=False)``: every
coordinate gets the sum of n independent N_ℤ(0, σ²) draws, drawn in one vectorised call; the
same estimator (``HistogramTree.estimate``) reads it. A cross-check runs ``dp_quantile`` itself
on part of the grid. Speed: the real secure sum at n = 10^3 and 10^4 on one core.

Writes ``bench/results/quantile_bench.json`` and a plot (``--plot``, default
``bench/figures/quantile_rank_error.png``). Never asserts on time.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Iterator
from itertools import product
from pathlib import Path
from typing import Any

import numpy as np

from dpquantile import (
    HistogramTree,
    dp_quantile,
    quantile_noise_sigma,
    quantile_scale,
    sample_discrete_gaussian,
)
from secagg import KeystreamRandom

HERE = Path(__file__).resolve().parent
# (mechanism, scaled counts, consistency): the paper's estimator (counts of 1, dyadic CDF), then
# ours with scaled counts (``quantile_scale``): dyadic, least-squares consistent, and flat.
MECHANISMS = (
    ("tree", False, False),
    ("tree", True, False),
    ("tree", True, True),
    ("flat", True, False),
)
LABELS = {
    ("tree", False, False): "tree (paper)",
    ("tree", True, False): "tree, scaled",
    ("tree", True, True): "tree + consistency",
    ("flat", True, False): "flat",
}
RANGES = {"chi2": (0.0, 16.0), "uniform": (0.0, 1.0)}
Q = 0.9


def draw_values(distribution: str, n: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng([seed, n, 0 if distribution == "chi2" else 1])
    return rng.chisquare(3, size=n) if distribution == "chi2" else rng.random(n)


def errors(values: np.ndarray, estimate: float) -> tuple[float, float]:
    true_quantile = float(np.quantile(values, Q, method="inverted_cdf"))
    return abs(float(np.mean(values <= estimate)) - Q), abs(estimate - true_quantile)


def simulated_errors(
    values: np.ndarray, distribution: str, bins: int, epsilon: float, seed: int
) -> Iterator[tuple[tuple[str, bool, bool], float, float]]:
    lower, upper = RANGES[distribution]
    tree = HistogramTree(bins, lower, upper)
    n = values.size
    rho = epsilon**2 / 2
    stream = KeystreamRandom(seed, label=b"bench/quantile")
    for mechanism, scaled in (("tree", False), ("tree", True), ("flat", True)):
        shape = {"num_clients": n, "bins": bins, "mechanism": mechanism}
        scale = quantile_scale(rho, **shape) if scaled else 1  # type: ignore[arg-type]
        sigma = quantile_noise_sigma(rho, scale=scale, **shape)  # type: ignore[arg-type]
        released = scale * tree.counts(values, flat=mechanism == "flat")
        noise_stream = stream.spawn(f"{mechanism}/{scaled}".encode())
        for start in range(0, n, 1000):  # n clients' noise, summed in blocks to bound memory
            block = sample_discrete_gaussian(
                sigma, (min(1000, n - start), released.size), rng=noise_stream
            )
            released = released + block.sum(axis=0)
        for consistency in (False, True) if (mechanism, scaled) == ("tree", True) else (False,):
            estimate, _ = tree.estimate(
                released / scale, float(n), Q, mechanism=mechanism, consistency=consistency
            )
            yield (mechanism, scaled, consistency), *errors(values, estimate)


def accuracy(grid: dict[str, Any], seeds: int) -> dict[str, Any]:
    cells: dict[str, Any] = {}
    for distribution, n, bins, epsilon in product(
        grid["distributions"], grid["clients"], grid["bins"], grid["epsilons"]
    ):
        rank: dict[tuple[str, bool, bool], list[float]] = {m: [] for m in MECHANISMS}
        absolute: dict[tuple[str, bool, bool], list[float]] = {m: [] for m in MECHANISMS}
        for seed in range(seeds):
            values = draw_values(distribution, n, seed)
            for mechanism, rank_error, abs_error in simulated_errors(
                values, distribution, bins, epsilon, seed
            ):
                rank[mechanism].append(rank_error)
                absolute[mechanism].append(abs_error)
        key = f"{distribution}/n={n}/b={bins}/eps={epsilon}"
        cells[key] = {
            LABELS[m]: {
                "median_rank_error": float(np.median(rank[m])),
                "median_absolute_error": float(np.median(absolute[m])),
            }
            for m in MECHANISMS
        }
        print(
            f"  {key}: "
            + ", ".join(
                f"{LABELS[m]} {cells[key][LABELS[m]]['median_rank_error']:.4f}" for m in MECHANISMS
            ),
            file=sys.stderr,
            flush=True,
        )
    return cells


def cross_check(seeds: int) -> dict[str, Any]:
    """dp_quantile itself (plain path, per-client noise streams) against the simulation."""
    out = {}
    for distribution, n, bins, epsilon in (("chi2", 128, 32, 1.0), ("uniform", 512, 64, 1.0)):
        lower, upper = RANGES[distribution]
        real, simulated = [], []
        for seed in range(seeds):
            values = draw_values(distribution, n, seed)
            result = dp_quantile(
                values,
                Q,
                lower=lower,
                upper=upper,
                bins=bins,
                rho=epsilon**2 / 2,
                seed=seed,
                secure=False,
            )
            real.append(errors(values, result.estimate)[0])
            simulated.extend(
                r
                for m, r, _ in simulated_errors(values, distribution, bins, epsilon, seed)
                if m == ("tree", True, True)
            )
        out[f"{distribution}/n={n}/b={bins}/eps={epsilon}"] = {
            "dp_quantile_median_rank_error": float(np.median(real)),
            "simulation_median_rank_error": float(np.median(simulated)),
        }
    return out


def secure_timing(sizes: tuple[int, ...]) -> dict[str, Any]:
    out = {}
    for n in sizes:
        values = draw_values("chi2", n, 0)
        start = time.perf_counter()
        result = dp_quantile(values, Q, lower=0.0, upper=16.0, bins=64, rho=0.5, seed=0)
        out[str(n)] = {
            "seconds": time.perf_counter() - start,
            "estimate": result.estimate,
            "modulus_bits": result.modulus_bits,
        }
        print(
            f"  [secure dp_quantile n={n}: {out[str(n)]['seconds']:.1f} s]",
            file=sys.stderr,
            flush=True,
        )
    return out


def plot(cells: dict[str, Any], grid: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = [(d, b) for d in grid["distributions"] for b in grid["bins"]]
    fig, axes = plt.subplots(
        len(rows),
        len(grid["clients"]),
        figsize=(3.2 * len(grid["clients"]), 2.6 * len(rows)),
        sharex=True,
        squeeze=False,
    )
    for (r, (distribution, bins)), (c, n) in product(enumerate(rows), enumerate(grid["clients"])):
        ax = axes[r][c]
        for mechanism in MECHANISMS:
            label = LABELS[mechanism]
            ys = [
                cells[f"{distribution}/n={n}/b={bins}/eps={e}"][label]["median_rank_error"]
                for e in grid["epsilons"]
            ]
            ax.plot(grid["epsilons"], ys, marker="o", label=label)
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xticks(grid["epsilons"], [f"{e:g}" for e in grid["epsilons"]])
        ax.minorticks_off()
        ax.set_title(f"{distribution}, n={n}, b={bins}", fontsize=9)
        if c == 0:
            ax.set_ylabel("median rank error")
        if r == len(rows) - 1:
            ax.set_xlabel("ε (½ε²-zCDP)")
    axes[0][0].legend(fontsize=7)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=90)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--seeds", type=int, default=None)
    parser.add_argument("--no-secure-timing", action="store_true")
    parser.add_argument("--plot", type=Path, default=HERE / "figures" / "quantile_rank_error.png")
    parser.add_argument("--output", type=Path, default=HERE / "results" / "quantile_bench.json")
    args = parser.parse_args(argv)
    grid = {
        "distributions": ["chi2", "uniform"],
        "clients": [128, 512] if args.quick else [128, 512, 1000, 10_000],
        "bins": [32, 64] if args.quick else [32, 64, 1024],
        "epsilons": [0.5, 1.0, 2.0, 5.0],
    }
    seeds = args.seeds or (10 if args.quick else 50)
    start = time.perf_counter()
    cells = accuracy(grid, seeds)
    check = cross_check(100 if not args.quick else 20)
    timing = (
        {} if args.no_secure_timing else secure_timing((1000,) if args.quick else (1000, 10_000))
    )

    print(
        f"\nmedian rank error |F(estimate) − {Q}| over {seeds} seeds "
        "(columns ε; ½ε²-zCDP per quantile)"
    )
    for distribution, n, bins in product(grid["distributions"], grid["clients"], grid["bins"]):
        print(f"{distribution:8s} n={n:<6d} b={bins:<5d}", end="")
        for mechanism in MECHANISMS:
            label = LABELS[mechanism]
            values = [
                cells[f"{distribution}/n={n}/b={bins}/eps={e}"][label]["median_rank_error"]
                for e in grid["epsilons"]
            ]
            print(f" | {label[:12]:12s} " + " ".join(f"{v:.4f}" for v in values), end="")
        print()
    improvements: dict[str, dict[str, float]] = {}
    for versus in ("tree (paper)", "tree, scaled"):
        print(f"\ntree + consistency versus {versus} (median rank error, negative = better):")
        changes = {}
        for key, cell in cells.items():
            base = cell[versus]["median_rank_error"]
            ours = cell["tree + consistency"]["median_rank_error"]
            changes[key] = (ours - base) / base if base > 0 else 0.0
        improvements[versus] = changes
        for bins in grid["bins"]:
            ratios = [v for k, v in changes.items() if f"/b={bins}/" in k]
            print(
                f"  b={bins}: median change {np.median(ratios):+.1%}, "
                f"worst {max(ratios):+.1%}, best {min(ratios):+.1%}"
            )
    flat_wins = [
        k
        for k, cell in cells.items()
        if cell["flat"]["median_rank_error"] < cell["tree + consistency"]["median_rank_error"]
    ]
    print(
        f"\nflat beats tree + consistency in {len(flat_wins)} of {len(cells)} cells: "
        + (", ".join(flat_wins[:12]) + (" …" if len(flat_wins) > 12 else ""))
    )
    print("\ncross-check, dp_quantile itself vs the simulation (median rank error):")
    for key, value in check.items():
        print(
            f"  {key}: {value['dp_quantile_median_rank_error']:.4f} vs "
            f"{value['simulation_median_rank_error']:.4f}"
        )
    for n, value in timing.items():
        print(f"secure dp_quantile, n={n}, b=64: {value['seconds']:.1f} s (one core)")
    try:
        plot(cells, grid, args.plot)
        print(f"wrote {args.plot}")
    except ImportError:
        print("matplotlib not installed: no plot (pip install 'secagg-dp[plot]')")
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(
        json.dumps(
            {
                "command": "python bench/quantile_bench.py" + (" --quick" if args.quick else ""),
                "date": time.strftime("%Y-%m-%d %H:%M:%S"),
                "seeds": seeds,
                "q": Q,
                "grid": grid,
                "cells": cells,
                "consistency_change": improvements,
                "flat_wins": flat_wins,
                "cross_check": check,
                "secure_timing": timing,
                "seconds": time.perf_counter() - start,
            },
            indent=1,
        )
    )
    print(f"wrote {args.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
