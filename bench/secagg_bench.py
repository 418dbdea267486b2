"""Secure-sum benchmark: our SecAgg / SecAgg+ side by side with Flower 1.42's, in one run.

Usage::

    python bench/secagg_bench.py            # everything, Flower anchor included if installed
    python bench/secagg_bench.py --quick    # fewer repeats, Flower's key sharing extrapolated
    python bench/secagg_bench.py --no-anchor

Prints a table and writes ``bench/results/secagg_bench.json``. Figures are medians over repeats;
the machines are shared and noisy, so compare the ratios of one run. Never asserts on time.
"""

from __future__ import annotations

import argparse
import json
import platform
import resource
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import cryptography
import numpy as np

from secagg import (
    Client,
    KeystreamRandom,
    Quantizer,
    Ring,
    SecAggConfig,
    Server,
    secure_sum,
    shamir,
)
from secagg.graph_parameters import secagg_plus_parameters
from secagg.masks import add_mask

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import _flower_anchor as flower  # noqa: E402

RESULTS = HERE / "results" / "secagg_bench.json"


def median_time(fn: Callable[[], object], repeats: int) -> tuple[float, list[float]]:
    """Median wall time of ``fn`` over ``repeats`` calls (one warm-up call first)."""
    fn()
    runs = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        runs.append(time.perf_counter() - start)
    return float(np.median(runs)), runs


def client_masking(d: int, degrees: tuple[int, ...], repeats: int) -> dict[str, Any]:
    """One real client's masked-input step (decrypt shares, agree keys, expand and add masks),
    timed at several neighbour counts; the per-neighbour cost is the least-squares slope."""
    vector = np.arange(d, dtype=np.uint32)
    medians = []
    for k in degrees:
        n = k + 1
        # The masking step is the same in both threat models (signatures come before and after).
        config = SecAggConfig(
            dimension=d,
            threshold=max(1, k // 2),
            round_nonce=b"secagg-dp bench!",
            threat_model="semi-honest",
        )
        runs = []
        for rep in range(repeats + 1):
            root = KeystreamRandom(seed=rep)
            clients = {
                u: Client(config, u, random_source=root.spawn(b"%d" % u)) for u in range(1, n + 1)
            }
            clients[1].set_input(vector)
            server = Server(config, clients)
            directory = [r for c in clients.values() for m in c.start() for r in server.receive(m)]
            shares = [r for m in directory for r in clients[m.peer].receive(m)]
            forwarded = [r for m in shares for r in server.receive(m)]
            mine = next(m for m in forwarded if m.peer == 1)
            start = time.perf_counter()
            clients[1].receive(mine)
            if rep:  # the first run is a warm-up
                runs.append(time.perf_counter() - start)
        medians.append(float(np.median(runs)))
    slope, intercept = np.polyfit(np.array(degrees, dtype=float), np.array(medians), 1)
    ring = Ring(32)
    accumulator = ring.zeros(d)
    prg, _ = median_time(lambda: add_mask(accumulator, b"k" * 16, ring), max(repeats, 9))
    return {
        "per_neighbour_s": float(slope),
        "fixed_s": float(intercept),
        "degrees": list(degrees),
        "median_s": medians,
        "prg_and_add_only_s": prg,
    }


def quantise(d: int, repeats: int) -> dict[str, Any]:
    x = np.random.default_rng(0).standard_normal(d)
    quantizer = Quantizer(clip=4.0, scale=2.0**20)
    source = KeystreamRandom(seed=1)
    ring = Ring(32)
    med, runs = median_time(lambda: quantizer.to_ring(x, ring, rng=source), max(repeats, 9))
    return {"median_s": med, "runs": runs}


def shamir_costs(n: int, t: int, repeats: int) -> dict[str, Any]:
    source = KeystreamRandom(seed=2)
    secrets = np.concatenate(
        [shamir.split_secret(source.random_bytes(32)), shamir.split_secret(source.random_bytes(32))]
    )
    points = list(range(2, n + 1))  # the client's n − 1 neighbours
    share_med, _ = median_time(lambda: shamir.share(secrets, points, t, source), max(repeats, 9))
    shares = shamir.share(secrets[:9], points, t, source)
    holders = points[:t]

    def uncached() -> None:
        shamir.lagrange_coefficients.cache_clear()
        shamir.join_secret(shamir.reconstruct(holders, shares[:t]), 32)

    rec_med, _ = median_time(uncached, max(repeats, 9))
    cached_med, _ = median_time(
        lambda: shamir.join_secret(shamir.reconstruct(holders, shares[:t]), 32), max(repeats, 9)
    )
    return {
        "share_both_secrets_s": share_med,
        "reconstruct_uncached_s": rec_med,
        "reconstruct_cached_s": cached_med,
    }


def server_unmask(n: int, k: int, dropped: float, d: int, repeats: int) -> dict[str, Any]:
    """Server time in the unmask phase of a real round (dropouts after share_keys)."""
    base = np.arange(d, dtype=np.uint32)
    drop = list(range(0, n, round(1 / dropped)))[: round(n * dropped)]
    runs, totals = [], []
    for rep in range(repeats):
        start = time.perf_counter()
        result = secure_sum(
            [base] * n, neighbors=k, dropouts={"masked_input": drop}, seed=rep, threshold=k // 2 + 1
        )
        totals.append(time.perf_counter() - start)
        runs.append(result.server_seconds["unmask"])
        expected = (base.astype(np.uint64) * (n - len(drop))) % 2**32
        assert np.array_equal(result.total, expected)
    return {
        "median_s": float(np.median(runs)),
        "runs": runs,
        "round_s": totals,
        "dropped": len(drop),
    }


def end_to_end(
    n: int,
    d: int,
    neighbors: int | None,
    dropout: float,
    threshold: int | None,
    repeats: int,
    threat_model: str = "malicious",
) -> dict[str, Any]:
    """Whole simulated round in a fresh process: wall time, and the peak resident memory it adds
    (Linux: VmHWM after resetting it, minus VmRSS before; the inputs share one vector)."""
    code = f"""
import json, time
import numpy as np
from secagg import secure_sum

def status(field):
    with open("/proc/self/status") as handle:
        return next(int(line.split()[1]) for line in handle if line.startswith(field))

n, d = {n}, {d}
base = np.arange(d, dtype=np.uint32)
inputs = [base] * n  # one shared vector: the caller's input costs O(d), not O(n d)
rng = np.random.default_rng(0)
drop = rng.choice(n, round(n * {dropout}), replace=False).tolist()
with open("/proc/self/clear_refs", "w") as handle:
    handle.write("5")  # reset the high-water mark: VmHWM then measures this round only
before = status("VmRSS")
start = time.perf_counter()
result = secure_sum(inputs, neighbors={neighbors}, threshold={threshold},
                    dropouts={{"masked_input": drop}}, seed=0, threat_model="{threat_model}")
elapsed = time.perf_counter() - start
after = status("VmHWM")
ok = bool(np.array_equal(result.total, (base.astype(np.uint64) * len(result.survivors)) % 2**32))
print(json.dumps({{"seconds": elapsed, "peak_rss_growth_bytes": (after - before) * 1024,
                  "correct": ok, "client_seconds": result.client_seconds,
                  "server_seconds": result.server_seconds,
                  "upload_bytes": result.upload_bytes, "survivors": len(result.survivors)}}))
"""
    runs = []
    for _ in range(repeats):
        out = subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, check=True
        )
        runs.append(json.loads(out.stdout.strip().splitlines()[-1]))
    seconds = [r["seconds"] for r in runs]
    return {
        "median_s": float(np.median(seconds)),
        "runs_s": seconds,
        "peak_rss_growth_bytes": max(r["peak_rss_growth_bytes"] for r in runs),
        "n_times_d_times_4_bytes": n * d * 4,
        "correct": all(r["correct"] for r in runs),
        "last": runs[-1],
    }


def _count_operations(run: Callable[[], object]) -> dict[str, int]:
    """Run ``run`` once with the expensive primitives wrapped, and count each: X25519 exchanges,
    X25519 key parsing (a scalar multiplication), mask expansions, Ed25519 signs and verifies."""
    import secagg.client as client_module
    import secagg.server as server_module
    from secagg import identity, keys, masks

    counts = dict.fromkeys(("x25519", "x25519_keys", "masks", "sign", "verify"), 0)
    agree, parse = keys.KeyPair.agree, keys.KeyPair.from_private_bytes.__func__
    add, sign, verify = masks.add_masks, identity.IdentityKey.sign, identity.TrustStore.verify
    assert callable(add)

    def counted_agree(self: Any, *a: Any, **k: Any) -> bytes:
        counts["x25519"] += 1
        return agree(self, *a, **k)

    def counted_parse(cls: Any, private: bytes) -> Any:
        counts["x25519_keys"] += 1
        return parse(cls, private)

    def counted_masks(
        accumulator: Any, ring: Any, *, add: Any = (), subtract: Any = (), real: Any = add
    ) -> None:
        counts["masks"] += len(add) + len(subtract)
        real(accumulator, ring, add=add, subtract=subtract)

    def counted_sign(self: Any, message: bytes) -> bytes:
        counts["sign"] += 1
        return sign(self, message)

    def counted_verify(self: Any, *a: Any) -> bool:
        counts["verify"] += 1
        return verify(self, *a)

    patches = [
        (keys.KeyPair, "agree", counted_agree),
        (keys.KeyPair, "from_private_bytes", classmethod(counted_parse)),
        (client_module, "add_masks", counted_masks),
        (server_module, "add_masks", counted_masks),
        (identity.IdentityKey, "sign", counted_sign),
        (identity.TrustStore, "verify", counted_verify),
    ]
    saved = [(owner, name, owner.__dict__[name]) for owner, name, _ in patches]
    try:
        for owner, name, value in patches:
            setattr(owner, name, value)
        run()
    finally:
        for owner, name, value in saved:
            setattr(owner, name, value)
    return counts


def _unit_costs(d: int, repeats: int) -> dict[str, float]:
    """Median seconds of one of each counted primitive, in this process."""
    from cryptography.hazmat.primitives.asymmetric.x25519 import (
        X25519PrivateKey,
        X25519PublicKey,
    )

    from secagg.identity import IdentityKey, TrustStore

    peer = X25519PrivateKey.generate().public_key().public_bytes_raw()
    private = X25519PrivateKey.generate()
    identity = IdentityKey.from_private_bytes(bytes(range(32)))
    store = TrustStore({1: identity.public})
    message = bytes(127)
    signature = identity.sign(message)
    ring = Ring(32)
    accumulator = ring.zeros(d)

    def per_call(fn: Callable[[], object], calls: int) -> float:
        def batch() -> None:
            for _ in range(calls):
                fn()

        return median_time(batch, repeats)[0] / calls

    return {
        "x25519": per_call(lambda: private.exchange(X25519PublicKey.from_public_bytes(peer)), 500),
        "x25519_keys": per_call(lambda: X25519PrivateKey.from_private_bytes(bytes(32)), 500),
        "masks": per_call(lambda: add_mask(accumulator, b"k" * 16, ring), max(1, 10**7 // d)),
        "sign": per_call(lambda: identity.sign(message), 500),
        "verify": per_call(lambda: store.verify(1, message, signature), 500),
    }


def threat_model_costs(
    n: int, k: int | None, d: int, dropped: float, repeats: int
) -> dict[str, Any]:
    """One round in each threat model, same inputs and dropouts (a fraction vanishing before the
    masked input), against the floor of what it must compute: its X25519 operations and mask
    expansions (and, malicious, its Ed25519 signatures and verifications), each counted in an
    instrumented run and costed at its median unit time measured in the same process."""
    base = np.arange(d, dtype=np.uint32)
    drop = list(range(0, n, round(1 / dropped)))[: round(n * dropped)] if dropped else []
    threshold = None if k is None else k // 2 + 1
    units = _unit_costs(d, repeats)
    out: dict[str, Any] = {"n": n, "k": k, "d": d, "dropped": len(drop), "units_s": units}
    for model in ("semi-honest", "malicious"):

        def run(seed: int = 0, model: str = model) -> Any:
            return secure_sum(
                [base] * n,
                neighbors=k,
                threshold=threshold,
                dropouts={"masked_input": drop} if drop else None,
                seed=seed,
                threat_model=model,
            )

        counts = _count_operations(run)
        runs = []
        for rep in range(repeats):
            start = time.perf_counter()
            result = run(rep)
            runs.append(time.perf_counter() - start)
        expected = (base.astype(np.uint64) * (n - len(drop))) % 2**32
        assert np.array_equal(result.total, expected)
        floor = {name: counts[name] * units[name] for name in counts}
        out[model] = {
            "median_s": float(np.median(runs)),
            "runs_s": runs,
            "counts": counts,
            "floor_s": floor,
            "x25519_and_mask_floor_s": floor["x25519"] + floor["x25519_keys"] + floor["masks"],
            "ed25519_floor_s": floor["sign"] + floor["verify"],
        }
    semi, mal = out["semi-honest"], out["malicious"]
    out["semi_over_floor"] = semi["median_s"] / semi["x25519_and_mask_floor_s"]
    out["malicious_over_floor"] = mal["median_s"] / (
        mal["x25519_and_mask_floor_s"] + mal["ed25519_floor_s"]
    )
    out["malicious_extra_over_ed25519_floor"] = (mal["median_s"] - semi["median_s"]) / mal[
        "ed25519_floor_s"
    ]
    out["malicious_over_semi"] = mal["median_s"] / semi["median_s"]
    return out


def wire_bytes(d: int) -> dict[str, Any]:
    out = {}
    for bits in (32, 20, 64):
        result = secure_sum([np.zeros(d, dtype=np.int64)] * 3, modulus_bits=bits, seed=0)
        per_client = result.upload_bytes["masked_input"] / 3
        out[str(bits)] = {
            "bytes_per_client": per_client,
            "bytes_per_entry": per_client / d,
            "constant_bytes": per_client - Ring(bits).packed_size(d),
        }
    return out


def fmt_seconds(value: float | None) -> str:
    if value is None:
        return "—"
    if value < 1e-3:
        return f"{value * 1e6:.0f} µs"
    if value < 1:
        return f"{value * 1e3:.2f} ms"
    return f"{value:.2f} s"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer repeats")
    parser.add_argument("--no-anchor", action="store_true", help="skip Flower")
    parser.add_argument("--output", type=Path, default=RESULTS)
    parser.add_argument(
        "--only",
        choices=["threat-models"],
        default=None,
        help="run one section (threat-models: malicious vs semi-honest against their floors)",
    )
    args = parser.parse_args(argv)
    if args.only == "threat-models":
        return threat_models_main(args)
    reps = 3 if args.quick else 7
    d6, d5 = 10**6, 10**5

    def step(name: str, fn: Callable[[], dict[str, Any]]) -> dict[str, Any]:
        start = time.perf_counter()
        value = fn()
        print(f"  [{name}: {time.perf_counter() - start:.1f} s]", file=sys.stderr, flush=True)
        return value

    plus = secagg_plus_parameters(1000, dropout_rate=0.1, corruption_rate=0.05)
    ours = {
        "client_masking": step("client masking", lambda: client_masking(d6, (1, 4, 14), reps)),
        "quantise": step("quantise", lambda: quantise(d6, reps)),
        "shamir": step("shamir", lambda: shamir_costs(100, 51, reps)),
        "server_unmask": step(
            "server unmask", lambda: server_unmask(100, 14, 0.1, d6, 2 if args.quick else 3)
        ),
        "complete_n100_d1e5": step(
            "complete graph n=100",
            lambda: end_to_end(100, d5, None, 0.0, None, 1 if args.quick else 3),
        ),
        "secaggplus_n1000_d1e5": step(
            "SecAgg+ n=1000",
            lambda: end_to_end(1000, d5, plus.degree, 0.1, plus.threshold, 1),
        ),
        "secaggplus_n1000_d1e5_semi_honest": step(
            "SecAgg+ n=1000 semi-honest",
            lambda: end_to_end(
                1000, d5, plus.degree, 0.1, plus.threshold, 1, threat_model="semi-honest"
            ),
        ),
        "wire": step("wire bytes", lambda: wire_bytes(d5)),
        "secaggplus_parameters": {"degree": plus.degree, "threshold": plus.threshold},
    }
    anchor: dict[str, Any] = {}
    if args.no_anchor or not flower.available():
        anchor_note = "skipped" if args.no_anchor else "flwr not installed (pip install '.[bench]')"
    else:
        anchor_note = f"flwr {flower.flower_version()}"
        arep = 3 if args.quick else 5
        anchor = {
            "client_mask_per_neighbour": step(
                "flower masking", lambda: flower.client_mask_per_neighbour(d=d6, repeats=arep)
            ),
            "client_quantise": step(
                "flower quantise", lambda: flower.client_quantise(d=d6, repeats=arep)
            ),
            "shamir_share": step("flower shamir share", lambda: flower.shamir_share(100, 51, 3)),
            "shamir_reconstruct": step(
                "flower shamir reconstruct", lambda: flower.shamir_reconstruct(t=51, repeats=3)
            ),
            "server_unmask": step(
                "flower server unmask",
                lambda: flower.server_unmask(
                    n=100,
                    k=14,
                    dropped_fraction=0.1,
                    d=d6,
                    repeats=1 if args.quick else 3,
                    threshold=8,
                    breakdown=False,
                ),
            ),
            "key_sharing_complete_graph": step(
                "flower key sharing",
                lambda: flower.key_sharing_complete_graph(n=100, quick=True),
            ),
            "bytes_per_entry": step("flower bytes", lambda: flower.bytes_per_entry(d=d5)),
        }

    def a(name: str, key: str = "median_s") -> float | None:
        return anchor[name][key] if name in anchor else None

    rows: list[tuple[str, float | None, float | None, str, bool | None]] = []

    def row(
        label: str, value: float, anchor_value: float | None, target: str, meets: bool | None
    ) -> None:
        rows.append((label, value, anchor_value, target, meets))

    masking = ours["client_masking"]
    row(
        "client mask, per neighbour (d=1e6)",
        masking["per_neighbour_s"],
        a("client_mask_per_neighbour"),
        "≤ 1.0 ms",
        masking["per_neighbour_s"] <= 1e-3,
    )
    row("  PRG + add alone (d=1e6)", masking["prg_and_add_only_s"], None, "floor ≈ 0.8 ms", None)
    row(
        "quantise to Z_2^32 (d=1e6)",
        ours["quantise"]["median_s"],
        a("client_quantise"),
        "≤ 5 ms",
        ours["quantise"]["median_s"] <= 5e-3,
    )
    sh = ours["shamir"]
    row(
        "Shamir: shares of both secrets, n=100 t=51",
        sh["share_both_secrets_s"],
        a("shamir_share"),
        "≤ 5 ms",
        sh["share_both_secrets_s"] <= 5e-3,
    )
    row(
        "Shamir: reconstruct 32 B, t=51 (uncached)",
        sh["reconstruct_uncached_s"],
        a("shamir_reconstruct"),
        "≤ 5 ms",
        sh["reconstruct_uncached_s"] <= 5e-3,
    )
    unmask = ours["server_unmask"]["median_s"]
    row(
        "server unmask n=100 k=14 10% dropped d=1e6",
        unmask,
        a("server_unmask"),
        "≤ 0.3 s",
        unmask <= 0.3,
    )
    complete = ours["complete_n100_d1e5"]
    flower_keys = anchor.get("key_sharing_complete_graph", {}).get("median_s")
    row(
        "complete graph n=100 d=1e5, whole round",
        complete["median_s"],
        flower_keys,
        "≤ 10 s (Flower: key sharing only)",
        complete["median_s"] <= 10,
    )
    big = ours["secaggplus_n1000_d1e5"]
    row(
        f"SecAgg+ n=1000 d=1e5 10% drop (k={plus.degree}, t={plus.threshold}), malicious",
        big["median_s"],
        None,
        "— (quorum: ≈ n/2 verifications per client)",
        None,
    )
    semi_big = ours["secaggplus_n1000_d1e5_semi_honest"]
    row(
        "  the same, semi-honest",
        semi_big["median_s"],
        None,
        "≤ 30 s",
        semi_big["median_s"] <= 30,
    )
    wire32 = ours["wire"]["32"]["bytes_per_entry"]
    flower_bpe = (
        anchor["bytes_per_entry"]["bytes_per_entry"] if "bytes_per_entry" in anchor else None
    )

    print()
    print(
        f"secagg-dp secure sum vs Flower ({anchor_note}); cryptography {cryptography.__version__}, "
        f"numpy {np.__version__}, {platform.machine()}"
    )
    print(f"{'workload':48s} {'ours':>10s} {'Flower':>10s} {'Flower/ours':>11s}  target")
    for label, value, anchor_value, target, meets in rows:
        ratio = f"{anchor_value / value:.1f}×" if anchor_value else "—"
        mark = "" if meets is None else ("  ok" if meets else "  MISSED")
        print(
            f"{label:48s} {fmt_seconds(value):>10s} {fmt_seconds(anchor_value):>10s} "
            f"{ratio:>11s}  {target}{mark}"
        )
    print(
        f"{'masked input, bytes per entry (b=32)':48s} {wire32:>10.4f} "
        f"{(flower_bpe or float('nan')):>10.4f} {'':>11s}  ⌈log₂M⌉/8 + constant"
    )
    for bits in ("20", "64"):
        w = ours["wire"][bits]
        print(
            f"{'  b=' + bits:48s} {w['bytes_per_entry']:>10.4f} {'':>10s} {'':>11s}  "
            f"constant {w['constant_bytes']:.0f} B"
        )
    growth = big["peak_rss_growth_bytes"]
    print(
        f"{'SecAgg+ n=1000 peak RSS growth':48s} {growth / 2**20:>8.0f} MiB "
        f"{'':>10s} {'':>11s}  well under n·d·4 = {big['n_times_d_times_4_bytes'] / 2**20:.0f} MiB"
    )

    args.output.parent.mkdir(parents=True, exist_ok=True)
    record = {
        "command": "python bench/secagg_bench.py" + (" --quick" if args.quick else ""),
        "date": time.strftime("%Y-%m-%d %H:%M:%S"),
        "machine": {
            "python": platform.python_version(),
            "machine": platform.machine(),
            "cryptography": cryptography.__version__,
            "numpy": np.__version__,
            "maxrss_unit": "KiB",
            "self_maxrss": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss,
        },
        "ours": ours,
        "anchor": {"note": anchor_note, **anchor},
    }
    args.output.write_text(json.dumps(record, indent=1, default=str))
    print(f"\nwrote {args.output}")
    return 0


def threat_models_main(args: argparse.Namespace) -> int:
    """The threat-model section alone: SecAgg+ n = 100, k = 14 at d = 10^5 and 10^6, and the
    complete graph at d = 10^5, each in both modes, 10 % vanishing before the masked input."""
    reps = 2 if args.quick else 3
    cases = [(100, 14, 10**5), (100, 14, 10**6), (100, None, 10**5)]
    results = []
    for n, k, d in cases:
        start = time.perf_counter()
        results.append(threat_model_costs(n, k, d, 0.1, reps))
        print(f"  [n={n} k={k} d={d}: {time.perf_counter() - start:.1f} s]", file=sys.stderr)
    print()
    print(
        f"threat models, 10 % vanishing before the masked input; cryptography "
        f"{cryptography.__version__}, numpy {np.__version__}, {platform.machine()}"
    )
    header = (
        f"{'round':26s} {'semi':>8s} {'floor':>8s} {'semi/fl':>8s} {'malic.':>8s} "
        f"{'+Ed floor':>9s} {'extra/Ed':>8s} {'mal/semi':>8s}  signs  verifies"
    )
    print(header)
    for r in results:
        graph = "complete" if r["k"] is None else f"SecAgg+ k={r['k']}"
        semi, mal = r["semi-honest"], r["malicious"]
        label = f"n={r['n']} {graph} d={r['d']:.0e}"
        print(
            f"{label:26s} {fmt_seconds(semi['median_s']):>8s} "
            f"{fmt_seconds(semi['x25519_and_mask_floor_s']):>8s} {r['semi_over_floor']:>7.2f}× "
            f"{fmt_seconds(mal['median_s']):>8s} {fmt_seconds(mal['ed25519_floor_s']):>9s} "
            f"{r['malicious_extra_over_ed25519_floor']:>7.2f}× {r['malicious_over_semi']:>7.2f}×"
            f"  {mal['counts']['sign']:5d}  {mal['counts']['verify']:8d}"
        )
    units = results[0]["units_s"]
    print(
        "unit costs: "
        + ", ".join(f"{name} {fmt_seconds(value)}" for name, value in units.items())
        + " (masks at d=1e5)"
    )
    print(
        "goals: semi/floor ≤ 1.4× (SecAgg+ d=1e5); malicious extra ≤ 1.2× its Ed25519 floor; "
        "malicious/semi ≤ 1.3× at d=1e6"
    )
    path = args.output.with_name("secagg_threat_models.json")
    path.parent.mkdir(parents=True, exist_ok=True)
    record = {
        "command": "python bench/secagg_bench.py --only threat-models"
        + (" --quick" if args.quick else ""),
        "date": time.strftime("%Y-%m-%d %H:%M:%S"),
        "machine": {
            "python": platform.python_version(),
            "machine": platform.machine(),
            "cryptography": cryptography.__version__,
            "numpy": np.__version__,
        },
        "cases": results,
    }
    path.write_text(json.dumps(record, indent=1, default=str))
    print(f"\nwrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
