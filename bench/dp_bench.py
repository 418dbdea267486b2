"""DP noise benchmark: our exact and fast discrete Gaussian samplers and exact discrete Laplace,
side by side with OpenDP's discrete Gaussian in the same run, plus accountant throughput.

Usage::

    python bench/dp_bench.py            # everything (OpenDP anchor included if installed)
    python bench/dp_bench.py --quick    # fewer and smaller repeats

Prints a table and writes ``bench/results/dp_bench.json``. Sampler figures are samples per second
on one core, medians over repeats (each repeat draws a fresh batch from a seeded
``secagg.KeystreamRandom``; the fast sampler's one-off table construction is reported apart).
OpenDP's figure is its ``make_gaussian`` on ``vector_domain(atom_domain(T=int))`` (the CKS20 exact
sampler in Rust, OS randomness), called from Python on a list. The machines are shared and noisy:
compare the ratios of one run. Never asserts on time.
"""

from __future__ import annotations

import argparse
import functools
import importlib
import json
import platform
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

import dpquantile._fast_sampler as fast_module
from dpquantile import (
    DiscreteGaussian,
    DistributedDiscreteGaussian,
    ExactDiscreteGaussian,
    ExactDiscreteLaplace,
    FastDiscreteGaussian,
    ZCDPAccountant,
)
from secagg.randomness import KeystreamRandom

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results" / "dp_bench.json"
SIGMAS = (1.0, 10.0, 1e3, 1e5)


def median_rate(draw: Callable[[], object], count: int, repeats: int) -> tuple[float, list[float]]:
    """Median of ``count / seconds`` over ``repeats`` calls (after one warm-up call)."""
    draw()
    rates = []
    for _ in range(repeats):
        start = time.perf_counter()
        draw()
        rates.append(count / (time.perf_counter() - start))
    return float(np.median(rates)), rates


def opendp_sampler(sigma: float) -> tuple[Callable[[list[int]], Any], str] | None:
    """OpenDP's integer discrete Gaussian as a vector measurement, or None if not installed."""
    try:
        dp = importlib.import_module("opendp.prelude")
    except ImportError:
        return None
    dp.enable_features("contrib")
    measurement = dp.m.make_gaussian(
        dp.vector_domain(dp.atom_domain(T=int)), dp.l2_distance(T=int), scale=sigma
    )
    return measurement, str(getattr(dp, "__version__", "unknown"))


def samplers(sigmas: tuple[float, ...], quick: bool) -> dict[str, Any]:
    reps = 3 if quick else 7
    n_exact = 50_000 if quick else 200_000
    n_fast = 1 << (20 if quick else 22)
    n_opendp = 20_000 if quick else 100_000
    rows: dict[str, Any] = {}
    for sigma in sigmas:
        row: dict[str, Any] = {}
        stream = KeystreamRandom(seed=int(sigma), label=b"bench")
        exact = ExactDiscreteGaussian(sigma)
        row["exact"], row["exact_runs"] = median_rate(
            functools.partial(exact.sample, n_exact, rng=stream), n_exact, reps
        )
        fast_module._direct_plan.cache_clear()
        fast_module._block_plan.cache_clear()
        start = time.perf_counter()
        fast = FastDiscreteGaussian(sigma)
        row["fast_table_seconds"] = time.perf_counter() - start
        row["fast"], row["fast_runs"] = median_rate(
            functools.partial(fast.sample, n_fast, rng=stream), n_fast, reps
        )
        row["fast_tv_bound"] = fast.tv_bound
        laplace = ExactDiscreteLaplace(sigma)
        row["laplace_exact"], row["laplace_runs"] = median_rate(
            functools.partial(laplace.sample, n_exact, rng=stream), n_exact, reps
        )
        anchor = opendp_sampler(sigma)
        if anchor is not None:
            measurement, version = anchor
            zeros = [0] * n_opendp
            row["opendp"], row["opendp_runs"] = median_rate(
                functools.partial(measurement, zeros), n_opendp, max(3, reps // 2)
            )
            row["opendp_version"] = version
            row["exact_vs_opendp"] = row["exact"] / row["opendp"]
            row["fast_vs_opendp"] = row["fast"] / row["opendp"]
        row["sizes"] = {"exact": n_exact, "fast": n_fast, "opendp": n_opendp}
        rows[f"{sigma:g}"] = row
        print(f"  [sigma={sigma:g} done]", file=sys.stderr, flush=True)
    return rows


def accountant(quick: bool) -> dict[str, Any]:
    """Calls per second for a 1000-round history: build it (1000 compose calls) and convert."""
    reps = 5 if quick else 15
    rounds = 1000
    gaussian = DiscreteGaussian(sigma=1.0, l2_sensitivity=0.1, dimension=10**6)
    distributed = DistributedDiscreteGaussian.from_model_units(
        num_clients=100, local_sigma=0.1, l2_clip=1.0, granularity=1e-3, dimension=2**16
    )
    varying = [DiscreteGaussian(sigma=1.0 + k / rounds, l2_sensitivity=0.1) for k in range(rounds)]

    def build_and_convert(
        events: list[DiscreteGaussian] | None,
        same: DiscreteGaussian | DistributedDiscreteGaussian | None,
    ) -> None:
        history = ZCDPAccountant()
        if events is not None:
            for event in events:
                history.compose(event)
        else:
            assert same is not None
            for _ in range(rounds):
                history.compose(same)
        history.epsilon(1e-5)

    def convert_only(history: ZCDPAccountant) -> Callable[[], None]:
        def call() -> None:
            history._cache.clear()  # measure the conversion itself, not the cache
            history.epsilon(1e-5)

        return call

    prebuilt = ZCDPAccountant().compose(distributed, count=rounds)
    result = {
        "history_rounds": rounds,
        "same_gaussian_history_per_s": median_rate(
            lambda: build_and_convert(None, gaussian), 1, reps
        )[0],
        "distinct_gaussian_history_per_s": median_rate(
            lambda: build_and_convert(varying, None), 1, reps
        )[0],
        "kls21_history_per_s": median_rate(lambda: build_and_convert(None, distributed), 1, reps)[
            0
        ],
        "epsilon_call_per_s_kls21_1000_rounds": median_rate(convert_only(prebuilt), 1, reps)[0],
    }
    try:
        dp_event = importlib.import_module("dp_accounting.dp_event")
        rdp = importlib.import_module("dp_accounting.rdp")
    except ImportError:
        result["dp_accounting"] = "not installed (pip install '.[dp]')"
        return result

    def google() -> None:
        history = rdp.RdpAccountant()
        for _ in range(rounds):
            history.compose(dp_event.ZCDpEvent(gaussian.rho))
        history.get_epsilon(1e-5)

    result["dp_accounting_same_history_per_s"] = median_rate(google, 1, reps)[0]
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer and smaller repeats")
    parser.add_argument("--output", type=Path, default=RESULTS)
    args = parser.parse_args(argv)

    rows = samplers(SIGMAS, args.quick)
    accounts = accountant(args.quick)

    print(
        f"\n{'samples/s (median)':22s} {'sigma=1':>11s} {'sigma=10':>11s} {'sigma=1e3':>11s} "
        f"{'sigma=1e5':>11s}"
    )
    labels = [
        ("exact DG (CKS20)", "exact"),
        ("fast DG (tables)", "fast"),
        ("exact DLap (CKS20)", "laplace_exact"),
        ("OpenDP make_gaussian", "opendp"),
        ("exact / OpenDP", "exact_vs_opendp"),
        ("fast / OpenDP", "fast_vs_opendp"),
    ]
    for label, key in labels:
        cells = []
        for sigma in SIGMAS:
            value = rows[f"{sigma:g}"].get(key)
            if value is None:
                cells.append(f"{'-':>11s}")
            elif key.endswith("opendp") and key != "opendp":
                cells.append(f"{value:>10.1f}x")
            else:
                cells.append(f"{value:>11.3g}")
        print(f"{label:22s} " + " ".join(cells))
    tables = ", ".join(
        f"{s:g}: {rows[f'{s:g}']['fast_table_seconds'] * 1e3:.0f} ms" for s in SIGMAS
    )
    print(f"fast-table construction (once per sigma, cached): {tables}")
    print(
        f"fast-sampler TV bound per draw: {rows['1']['fast_tv_bound']:.2g} (sigma < 64), "
        f"{rows[f'{SIGMAS[-1]:g}']['fast_tv_bound']:.2g} (sigma >= 64)"
    )
    print("\naccountant, 1000-round history (compose x1000 + epsilon), per second:")
    print(f"  same DG event          {accounts['same_gaussian_history_per_s']:>10.1f}")
    print(f"  1000 distinct DG events{accounts['distinct_gaussian_history_per_s']:>10.1f}")
    print(f"  KLS21 distributed      {accounts['kls21_history_per_s']:>10.1f}")
    print(f"  epsilon() alone (KLS21){accounts['epsilon_call_per_s_kls21_1000_rounds']:>10.1f}")
    if "dp_accounting_same_history_per_s" in accounts:
        google = accounts["dp_accounting_same_history_per_s"]
        print(f"  dp_accounting RDP (same DG history, its order grid) {google:.1f}")

    args.output.parent.mkdir(parents=True, exist_ok=True)
    record = {
        "command": "python bench/dp_bench.py" + (" --quick" if args.quick else ""),
        "date": time.strftime("%Y-%m-%d %H:%M:%S"),
        "machine": {
            "python": platform.python_version(),
            "machine": platform.machine(),
            "numpy": np.__version__,
        },
        "samplers": rows,
        "accountant": accounts,
    }
    args.output.write_text(json.dumps(record, indent=1, default=str))
    print(f"\nwrote {args.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
