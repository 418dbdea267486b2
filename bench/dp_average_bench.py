"""What model DP costs per secure average: the distributed discrete Gaussian (KLS21 flattening,
conditional rounding, noise) against the noiseless average, on the same ring, in one run.

Usage::

    python bench/dp_average_bench.py            # n = 100, d = 10^4 and 10^5, 3 repeats per cell
    python bench/dp_average_bench.py --quick    # d = 10^4 only, 1 repeat

Each cell is one ``secure_weighted_average`` over the secure sum (malicious mode, complete graph)
of n unit-norm updates; the noisy cells spend ρ = 0.01 (add/remove) per average. Reported: median
seconds, the ratio to the noiseless 32-bit average of the same d (the anchor: no external
implementation of KLS21's secure aggregation is installable here), and the bytes each client
uploads per model coordinate (padding included). Prints a table and writes
``bench/results/dp_average_bench.json``. Never asserts on time.
"""

from __future__ import annotations

import argparse
import json
import math
import platform
import time
from pathlib import Path
from typing import Any

import numpy as np

from protocols.aggregation import AverageSettings, DiscreteGaussianNoise, secure_weighted_average

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results" / "dp_average_bench.json"


def cell(n: int, d: int, settings: AverageSettings, repeats: int) -> dict[str, Any]:
    """Median seconds of ``repeats`` secure averages, and the upload per model coordinate."""
    rng = np.random.default_rng(0)
    vectors = rng.standard_normal((n, d))
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    seconds, upload = [], 0
    for repeat in range(repeats):
        start = time.perf_counter()
        result = secure_weighted_average(
            vectors, np.ones(n), settings=settings, weight_cap=1.0, seed=repeat
        )
        seconds.append(time.perf_counter() - start)
        assert result.secure_sum is not None
        upload = int(result.secure_sum.upload_bytes["masked_input"]) // n
    return {"seconds": float(np.median(seconds)), "runs": seconds, "upload_per_coord": upload / d}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="d = 10^4 only, one repeat")
    parser.add_argument("--clients", type=int, default=100)
    parser.add_argument("--output", type=Path, default=RESULTS)
    args = parser.parse_args(argv)
    repeats = 1 if args.quick else 3
    dims = (10_000,) if args.quick else (10_000, 100_000)
    noise = DiscreteGaussianNoise(rho=0.01)
    kls21 = {"rotate": True, "rounding_beta": math.exp(-0.5)}
    variants: dict[str, AverageSettings] = {
        "noiseless, 32 bits": AverageSettings(bits=32, clip=1.0),
        "DDG, 32 bits, unrotated": AverageSettings(bits=32, clip=1.0, noise=noise),
        "DDG + KLS21, 32 bits": AverageSettings(bits=32, clip=1.0, noise=noise, **kls21),
        "DDG + KLS21, 16 bits": AverageSettings(bits=16, clip=1.0, noise=noise, **kls21),
    }
    rows: list[dict[str, Any]] = []
    print(f"n = {args.clients} clients, malicious mode, median of {repeats}")
    print(f"{'d':>8s}  {'variant':<26s} {'seconds':>8s} {'× noiseless':>12s} {'B/coord up':>11s}")
    for d in dims:
        anchor = None
        for name, settings in variants.items():
            measured = cell(args.clients, d, settings, repeats)
            anchor = measured["seconds"] if anchor is None else anchor
            ratio = measured["seconds"] / anchor
            rows.append({"d": d, "variant": name, "ratio_to_noiseless": ratio, **measured})
            print(
                f"{d:>8d}  {name:<26s} {measured['seconds']:>8.3f} {ratio:>11.2f}× "
                f"{measured['upload_per_coord']:>11.2f}",
                flush=True,
            )
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(
        json.dumps(
            {
                "date": time.strftime("%Y-%m-%d %H:%M:%S"),
                "python": platform.python_version(),
                "clients": args.clients,
                "repeats": repeats,
                "rows": rows,
            },
            indent=1,
        )
    )
    print(f"wrote {args.output}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
