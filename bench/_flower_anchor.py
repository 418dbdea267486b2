"""Anchor timings: Flower 1.42's own SecAgg+ code on the secagg-dp benchmark workloads.

Every figure here comes from calling the functions of the installed ``flwr`` package
(``flwr==1.42.0``, the ``bench`` extra); nothing of Flower is copied or re-implemented.
The glue written here only builds inputs, calls Flower in the order its client mod
(``flwr.client.mod.secure_aggregation.secaggplus_mod``) and its server workflow
(``flwr.server.workflow.secure_aggregation.secaggplus_workflow``) call it, and times.

Functions (each returns a plain dict with ``median_s`` and ``runs`` plus context):

* :func:`client_mask_per_neighbour` -- one pairwise mask on the client.
* :func:`client_quantise` -- ``quantize`` of one float vector.
* :func:`shamir_share` / :func:`shamir_reconstruct` -- Flower's Shamir (pycryptodome).
* :func:`server_unmask` -- ``SecAggPlusWorkflow.unmask_stage`` itself, after a real
  in-process round (workflow stages + ``secaggplus_mod`` on every client).
* :func:`key_sharing_complete_graph` -- setup + share_keys for SecAgg (complete graph).
* :func:`bytes_per_entry` -- upload size of a masked vector.
* :func:`flower_defects` -- reproductions of known weaknesses.
* :func:`available` / :func:`flower_version`.

Flower is imported lazily: importing this module never fails, ``available()`` is False
when ``flwr`` is missing, and the timing functions then raise ``RuntimeError``.

Run alone: ``python3 bench/_flower_anchor.py --quick``.
"""

from __future__ import annotations

import argparse
import copy
import functools
import gc
import importlib
import importlib.metadata
import json
import os
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from types import SimpleNamespace
from typing import Any

import numpy as np

from audits.flower import FlowerRound, load_flower

PINNED_VERSION = "1.42.0"
# Defaults of SecAggPlusWorkflow.__init__ in Flower 1.42 (forwarded to the client mod).
MOD_RANGE = 4294967296  # modulus_range, 2**32
TARGET_RANGE = 4194304  # quantization_range, 2**22
CLIPPING_RANGE = 8.0  # clipping_range
MAX_WEIGHT = 1000.0  # max_weight

# --------------------------------------------------------------------------- plumbing


@functools.cache
def _flwr() -> SimpleNamespace:
    """Flower's modules, as the audits' adapter imports them (cached; raises if flwr is missing)."""
    return load_flower()


def available() -> bool:
    """True when Flower's SecAgg+ modules import; never raises."""
    try:
        _flwr()
    except Exception:
        return False
    return True


def flower_version() -> str | None:
    """Installed flwr version, or None when it is not installed."""
    try:
        return importlib.metadata.version("flwr")
    except Exception:
        return None


def _require() -> SimpleNamespace:
    try:
        return _flwr()
    except Exception as exc:
        raise RuntimeError(
            f"Flower anchor not installed (pip install flwr=={PINNED_VERSION})"
        ) from exc


def _timed(fn: Callable[[], object]) -> float:
    gc.collect()
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def _summary(runs: Sequence[float], **context: Any) -> dict[str, Any]:
    out: dict[str, Any] = {
        "median_s": statistics.median(runs),
        "runs": [float(r) for r in runs],
        "repeats": len(runs),
    }
    out.update(context)
    out["flower_version"] = flower_version()
    return out


def _slope(xs: Sequence[float], ys: Sequence[float]) -> tuple[float, float]:
    """Least-squares slope and intercept of ys on xs."""
    b, a = np.polyfit(np.asarray(xs, dtype=float), np.asarray(ys, dtype=float), 1)
    return float(b), float(a)


def _weight_factor(num_examples: int, max_weight: float, target_range: int) -> int:
    # The integer weight the mod prepends to the vector (one extra entry); its value
    # does not change any timing.
    return round(num_examples / max_weight * target_range)


def _quantised_upload(
    f: SimpleNamespace, x: np.ndarray, num_examples: int = 100
) -> list[np.ndarray]:
    """[weight, quantize(x)] as the mod builds it before masking (via Flower's calls)."""
    q = f.quant.quantize([x], CLIPPING_RANGE, TARGET_RANGE)
    return list(f.arith.factor_combine(_weight_factor(num_examples, MAX_WEIGHT, TARGET_RANGE), q))


# --------------------------------------------------------------------- 1. client mask


def client_mask_per_neighbour(
    d: int = 10**6,
    neighbours: Sequence[int] = (1, 4, 14),
    repeats: int = 5,
    mod_range: int = MOD_RANGE,
    seed: int = 0,
) -> dict[str, Any]:
    """Client cost of one pairwise mask at dimension d, as Flower's mod pays it.

    Timed per neighbour count m (the mod's ``_collect_masked_vectors`` after quantising):
    ``pseudo_rand_gen(rd_seed)`` + ``parameters_addition`` (self mask), then m times
    ``generate_shared_key(bytes_to_private_key(sk1), bytes_to_public_key(pk1_v))`` +
    ``pseudo_rand_gen(shared_key, mod_range, dims)`` + ``parameters_addition`` or
    ``parameters_subtraction``, then ``parameters_mod``. The vector is the mod's
    ``[weight] + quantize(x)`` (dims ``[(1,), (d,)]``). Per-neighbour cost = least-squares
    slope over m (runs = the slope of each repeat); components are timed alone too.
    """
    f = _require()
    rng = np.random.default_rng(seed)
    x = rng.uniform(-1.0, 1.0, d).astype(np.float32)
    vec0 = _quantised_upload(f, x)
    dims = f.arith.get_parameters_shape(vec0)
    m_max = max(neighbours)
    sk1, _ = f.asym.generate_key_pairs()
    sk1_bytes = f.asym.private_key_to_bytes(sk1)
    pks = [f.asym.public_key_to_bytes(f.asym.generate_key_pairs()[1]) for _ in range(m_max)]
    own = 1000
    nids = [own - 1 - j // 2 if j % 2 == 0 else own + 1 + j // 2 for j in range(m_max)]
    rd_seed = os.urandom(32)

    def masked(m: int) -> list[np.ndarray]:
        vec = f.arith.parameters_addition(vec0, f.utils.pseudo_rand_gen(rd_seed, mod_range, dims))
        for j in range(m):
            key = f.sym.generate_shared_key(
                f.asym.bytes_to_private_key(sk1_bytes), f.asym.bytes_to_public_key(pks[j])
            )
            mask = f.utils.pseudo_rand_gen(key, mod_range, dims)
            if own > nids[j]:
                vec = f.arith.parameters_addition(vec, mask)
            else:
                vec = f.arith.parameters_subtraction(vec, mask)
        return list(f.arith.parameters_mod(vec, mod_range))

    masked(1)  # warm-up
    per_m: dict[int, list[float]] = {m: [] for m in neighbours}
    slopes: list[float] = []
    for _ in range(repeats):
        row = [_timed(lambda m=m: masked(m)) for m in neighbours]
        for m, t in zip(neighbours, row, strict=True):
            per_m[m].append(t)
        if len(set(neighbours)) > 1:
            slopes.append(_slope(neighbours, row)[0])
    medians = {m: statistics.median(v) for m, v in per_m.items()}
    slope_med, intercept = (
        _slope(list(medians), list(medians.values()))
        if len(medians) > 1
        else (medians[m_max] / m_max, 0.0)
    )

    key = f.sym.generate_shared_key(
        f.asym.bytes_to_private_key(sk1_bytes), f.asym.bytes_to_public_key(pks[0])
    )
    mask = f.utils.pseudo_rand_gen(key, mod_range, dims)
    comp = {
        "prg_pseudo_rand_gen_s": [
            _timed(lambda: f.utils.pseudo_rand_gen(key, mod_range, dims)) for _ in range(repeats)
        ],
        "shared_key_with_pem_parse_s": [
            _timed(
                lambda: f.sym.generate_shared_key(
                    f.asym.bytes_to_private_key(sk1_bytes), f.asym.bytes_to_public_key(pks[0])
                )
            )
            for _ in range(repeats)
        ],
        "add_parameters_addition_s": [
            _timed(lambda: f.arith.parameters_addition(vec0, mask)) for _ in range(repeats)
        ],
        "mod_parameters_mod_s": [
            _timed(lambda: f.arith.parameters_mod(mask, mod_range)) for _ in range(repeats)
        ],
    }
    runs = slopes or [medians[m_max] / m_max]
    return _summary(
        runs,
        what="slope over m of the mod's masking loop (ECDH P-384+HKDF, RandomState PRG, int64 add)",
        per_neighbour_ms=statistics.median(runs) * 1e3,
        per_neighbour_ms_slope_of_medians=slope_med * 1e3,
        per_neighbour_ms_total_over_m=medians[m_max] / m_max * 1e3,
        fixed_ms_self_mask_and_mod=intercept * 1e3,
        total_median_s_by_neighbours={str(m): v for m, v in medians.items()},
        components_median_s={k: statistics.median(v) for k, v in comp.items()},
        d=d,
        neighbours=list(neighbours),
        mod_range=mod_range,
        dtype=str(mask[1].dtype),
    )


# ------------------------------------------------------------------ 2. client quantise


def client_quantise(
    d: int = 10**6,
    repeats: int = 5,
    clipping_range: float = CLIPPING_RANGE,
    target_range: int = TARGET_RANGE,
    dtype: str = "float32",
    seed: int = 0,
) -> dict[str, Any]:
    """``quantize([x], clipping_range, target_range)`` on one float vector of length d.

    Also reported: the mod's whole pre-masking step (``parameters_multiply`` by the
    weight ratio, ``quantize``, ``factor_combine``).
    """
    f = _require()
    x = np.random.default_rng(seed).uniform(-1.0, 1.0, d).astype(dtype)
    f.quant.quantize([x], clipping_range, target_range)  # warm-up
    runs = [
        _timed(lambda: f.quant.quantize([x], clipping_range, target_range)) for _ in range(repeats)
    ]
    q_ratio = _weight_factor(100, MAX_WEIGHT, target_range)
    dq_ratio = q_ratio / target_range

    def pre_mask() -> object:
        scaled = f.arith.parameters_multiply([x], dq_ratio)
        return f.arith.factor_combine(
            q_ratio, f.quant.quantize(scaled, clipping_range, target_range)
        )

    full = [_timed(pre_mask) for _ in range(repeats)]
    out_dtype = f.quant.quantize([x[:4]], clipping_range, target_range)[0].dtype
    return _summary(
        runs,
        what="flwr quantize (clip, affine map, stochastic rounding with np.random.rand)",
        with_weighting_median_s=statistics.median(full),
        d=d,
        input_dtype=dtype,
        output_dtype=str(out_dtype),
        clipping_range=clipping_range,
        target_range=target_range,
    )


# ----------------------------------------------------------------------- 3. Shamir


def shamir_share(n: int = 100, t: int = 51, repeats: int = 3) -> dict[str, Any]:
    """One client's ``create_shares`` of its two secrets, as ``_share_keys`` does.

    ``create_shares(os.urandom(32), t, n)`` (self-mask seed) and
    ``create_shares(private_key_to_bytes(sk1), t, n)`` (PEM/PKCS8 P-384 key).
    """
    f = _require()
    sk1, _ = f.asym.generate_key_pairs()
    sk1_bytes = f.asym.private_key_to_bytes(sk1)
    seed_runs: list[float] = []
    sk_runs: list[float] = []
    for _ in range(repeats):
        rd_seed = os.urandom(32)
        seed_runs.append(_timed(lambda s=rd_seed: f.shamir.create_shares(s, t, n)))
        sk_runs.append(_timed(lambda: f.shamir.create_shares(sk1_bytes, t, n)))
    runs = [a + b for a, b in zip(seed_runs, sk_runs, strict=True)]
    return _summary(
        runs,
        what="create_shares(seed32B) + create_shares(sk1 PEM) for n parties",
        seed_median_s=statistics.median(seed_runs),
        private_key_median_s=statistics.median(sk_runs),
        n=n,
        t=t,
        seed_bytes=32,
        private_key_bytes=len(sk1_bytes),
        chunks_seed=(32 // 16) + 1,
        chunks_private_key=(len(sk1_bytes) // 16) + 1,
    )


def shamir_reconstruct(
    t: int = 51,
    repeats: int = 3,
    n: int = 100,
    secret: str = "seed",
    shares_used: int | None = None,
) -> dict[str, Any]:
    """``combine_shares`` of ``shares_used`` (default t) shares of one secret.

    ``secret="seed"``: a 32-byte value (3 padded 16-byte chunks, like the self-mask seed);
    ``secret="private_key"``: a PEM P-384 private key (Flower shares ``sk1`` this way; 20
    chunks). Note Flower's server passes *all* shares it collected, not just t.
    """
    f = _require()
    if secret == "seed":
        value = os.urandom(32)
    elif secret == "private_key":
        value = f.asym.private_key_to_bytes(f.asym.generate_key_pairs()[0])
    else:
        raise ValueError("secret must be 'seed' or 'private_key'")
    m = t if shares_used is None else shares_used
    shares = f.shamir.create_shares(value, t, max(n, m))
    used = shares[:m]
    if f.shamir.combine_shares(used) != value:
        raise AssertionError("Flower's combine_shares did not return the secret")
    runs = [_timed(lambda: f.shamir.combine_shares(used)) for _ in range(repeats)]
    return _summary(
        runs,
        what=f"combine_shares of {m} shares of a {len(value)}-byte secret",
        t=t,
        shares_used=m,
        secret=secret,
        secret_bytes=len(value),
        chunks=(len(value) // 16) + 1,
    )


# ------------------------------------------------------------ in-process Flower round


class _FlowerRound(FlowerRound):
    """The audits' in-process Flower SecAgg+ round (:class:`audits.flower.FlowerRound`, the one
    driver of Flower's workflow in this project) with a benchmark's books: per-stage wall and
    server-only seconds, the time of our ``train`` inside the mod, and a snapshot after
    collect_masked_vectors so that ``unmask`` can be timed repeatedly. ``dropped`` nodes never
    answer collect_masked_vectors (unmask recovers their pairwise masks from ``sk1`` shares).
    """

    def __init__(
        self,
        n: int,
        num_shares: float,
        threshold: float,
        d: int,
        dropped: int = 0,
        seed: int = 0,
        workflow_kwargs: dict[str, Any] | None = None,
    ) -> None:
        f = _require()
        drop = np.random.default_rng([seed, 1]).choice(n, size=dropped, replace=False)
        stage = f.consts.Stage.COLLECT_MASKED_VECTORS
        self.train_seconds: dict[int, float] = {}
        super().__init__(
            f,
            n=n,
            threshold=threshold,
            d=d,
            seed=seed,
            silent_at={stage: {int(i) for i in drop}},
            num_shares=num_shares,
            **(workflow_kwargs or {}),
        )
        self.d, self.seed = d, seed
        self.dropped = {self.node_ids[int(i)] for i in drop}
        self.ctx = self.context
        self.stage_seconds: dict[str, float] = {}
        self.stage_server_seconds: dict[str, float] = {}
        self._snap: dict[str, Any] = {}

    def _train(self, message: Any, context: Any) -> Any:
        start = time.perf_counter()
        reply = super()._train(message, context)
        self.train_seconds[context.node_id] = time.perf_counter() - start
        return reply

    def run_stage(self, name: str) -> bool:
        grid_before = self.grid.seconds
        start = time.perf_counter()
        ok = self.stage(name)
        total = time.perf_counter() - start
        self.stage_seconds[name] = total
        self.stage_server_seconds[name] = total - (self.grid.seconds - grid_before)
        return ok

    def prepare_unmask(self) -> None:
        """Run setup, share_keys, collect_masked_vectors; snapshot for repeated unmask."""
        for name in ("setup", "share_keys", "collect_masked_vectors"):
            if not self.run_stage(name):
                raise RuntimeError(f"Flower workflow stopped at stage {name}")
        st = self.state
        key = self.f.consts.RECORD_KEY_STATE
        self._snap = {
            "active": set(st.active_node_ids),
            "neighbours": {k: set(v) for k, v in st.nid_to_neighbours.items()},
            "aggregate": list(st.aggregate_ndarrays),
            "legacy": list(st.legacy_results),
            "failures": list(st.failures),
            "clients": {
                nid: copy.deepcopy(c.state.config_records[key]) for nid, c in self.contexts.items()
            },
        }

    def restore(self) -> None:
        st, s = self.state, self._snap
        st.active_node_ids = set(s["active"])
        st.nid_to_neighbours = {k: set(v) for k, v in s["neighbours"].items()}
        st.aggregate_ndarrays = list(s["aggregate"])
        st.legacy_results = list(s["legacy"])
        st.failures = list(s["failures"])
        key = self.f.consts.RECORD_KEY_STATE
        for nid, rec in s["clients"].items():
            self.contexts[nid].state.config_records[key] = copy.deepcopy(rec)

    def unmask(self) -> tuple[float, float]:
        """One ``unmask_stage`` from the snapshot: (stage seconds, server-only seconds)."""
        self.restore()
        gc.collect()
        if not self.run_stage("unmask"):
            raise RuntimeError("Flower unmask_stage returned False")
        return self.stage_seconds["unmask"], self.stage_server_seconds["unmask"]

    def max_abs_error(self) -> float:
        """Distance between Flower's aggregate and the true weighted mean of survivors."""
        aggregate = self.aggregate()
        if aggregate is None:
            return float("inf")
        survivors = [nid for nid in self.node_ids if nid not in self.dropped]
        return float(np.max(np.abs(aggregate - self.expected(survivors))))


def _instrumented_unmask(rnd: _FlowerRound) -> dict[str, Any]:
    """One extra unmask with Flower's functions wrapped (in the workflow module) by timers."""
    wf_mod = rnd.f.workflow
    names = {
        "combine_shares": "shamir_combine",
        "pseudo_rand_gen": "prg",
        "generate_shared_key": "ecdh_hkdf",
        "bytes_to_private_key": "pem_parse",
        "bytes_to_public_key": "pem_parse",
        "parameters_addition": "add_sub_mod",
        "parameters_subtraction": "add_sub_mod",
        "parameters_mod": "add_sub_mod",
        "dequantize": "dequantize",
    }
    acc: dict[str, float] = {v: 0.0 for v in names.values()}
    combines: list[tuple[int, int, float]] = []  # (shares, share bytes, seconds)
    originals = {name: getattr(wf_mod, name) for name in names}

    def wrap(name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
        def inner(*args: Any, **kwargs: Any) -> Any:
            t0 = time.perf_counter()
            out = fn(*args, **kwargs)
            dt = time.perf_counter() - t0
            acc[names[name]] += dt
            if name == "combine_shares":
                combines.append((len(args[0]), len(args[0][0]), dt))
            return out

        return inner

    try:
        for name, fn in originals.items():
            setattr(wf_mod, name, wrap(name, fn))
        total, server = rnd.unmask()
    finally:
        for name, fn in originals.items():
            setattr(wf_mod, name, fn)
    seed_c = [c for c in combines if c[1] <= 4 + 48]
    key_c = [c for c in combines if c[1] > 4 + 48]
    return {
        "stage_s": total,
        "server_s": server,
        "seconds_by_call": acc,
        "other_s": server - sum(acc.values()),
        "combines_seed": len(seed_c),
        "combines_private_key": len(key_c),
        "combine_seed_s": sum(c[2] for c in seed_c),
        "combine_private_key_s": sum(c[2] for c in key_c),
        "shares_per_combine_mean": (statistics.mean(c[0] for c in combines) if combines else 0.0),
    }


# ---------------------------------------------------------------- 4. server unmask


def server_unmask(
    n: int = 100,
    k: int = 14,
    dropped_fraction: float = 0.1,
    d: int = 10**6,
    repeats: int = 3,
    threshold: int | None = None,
    seed: int = 0,
    breakdown: bool = True,
) -> dict[str, Any]:
    """``SecAggPlusWorkflow.unmask_stage`` at n clients, k neighbours, d entries.

    A full round is run first with Flower's own code (workflow ``setup_stage``,
    ``share_keys_stage``, ``collect_masked_vectors_stage``; ``secaggplus_mod`` on all n
    clients through protobuf serde); ``round(n * dropped_fraction)`` clients never answer
    collect_masked_vectors. Then ``unmask_stage`` is timed ``repeats`` times from a
    snapshot. Flower's unmask: each survivor returns its shares; the server runs
    ``combine_shares`` per sampled node (survivors: self-mask seed; dropped: PEM ``sk1``),
    ``pseudo_rand_gen`` per survivor, ``bytes_to_private_key`` + ``generate_shared_key`` +
    ``pseudo_rand_gen`` per (dropped, neighbour) pair, subtract/add, ``parameters_mod``,
    ``dequantize``. ``median_s`` is server-only time (the stage minus time inside the
    loopback grid: serde and the clients' ``_unmask``); ``stage_median_s`` includes it.

    k = neighbours of a client; Flower's ring puts ``num_shares = k + 1`` nodes (itself
    included) in each neighbourhood. threshold defaults to ``(k + 1) // 2 + 1``.
    """
    num_shares = k + 1
    t = threshold if threshold is not None else num_shares // 2 + 1
    dropped = round(n * dropped_fraction)
    t_build = time.perf_counter()
    rnd = _FlowerRound(n=n, num_shares=num_shares, threshold=t, d=d, dropped=dropped, seed=seed)
    rnd.prepare_unmask()
    build_s = time.perf_counter() - t_build
    stage_runs: list[float] = []
    server_runs: list[float] = []
    for _ in range(repeats):
        total, server = rnd.unmask()
        stage_runs.append(total)
        server_runs.append(server)
    err = rnd.max_abs_error()
    detail = _instrumented_unmask(rnd) if breakdown else None
    cstage = rnd.f.consts.Stage.COLLECT_MASKED_VECTORS
    collect = [  # the mod's own time: minus our train() that it calls
        secs - rnd.train_seconds.get(nid, 0.0)
        for secs, nid in zip(
            rnd.grid.client_seconds.get(cstage, []),
            rnd.grid.client_nodes.get(cstage, []),
            strict=True,
        )
    ]
    return _summary(
        server_runs,
        what="SecAggPlusWorkflow.unmask_stage, server-side time (faithful full round)",
        stage_median_s=statistics.median(stage_runs),
        stage_runs=stage_runs,
        correct=bool(err < 1e-3),
        max_abs_error_vs_weighted_mean=err,
        breakdown=detail,
        n=n,
        k=k,
        num_shares=num_shares,
        threshold=t,
        dropped=dropped,
        survivors=n - dropped,
        d=d,
        build_s=build_s,
        stage_seconds_first_round=dict(rnd.stage_seconds),
        stage_server_seconds_first_round=dict(rnd.stage_server_seconds),
        client_collect_stage_median_s=statistics.median(collect) if collect else None,
        flower_log=rnd.warnings,
        upload_bytes_per_client_median=(
            statistics.median(rnd.grid.bytes_up[rnd.f.consts.Stage.COLLECT_MASKED_VECTORS])
        ),
    )


# ------------------------------------------------------ 5. key sharing, complete graph


def key_sharing_complete_graph(
    n: int = 100,
    threshold: int | None = None,
    quick: bool = False,
    n_sample: int = 5,
    repeats: int = 1,
    seed: int = 0,
) -> dict[str, Any]:
    """Flower's client cost of SecAgg key sharing on the complete graph (num_shares=1.0).

    Runs ``SecAggPlusWorkflow(num_shares=1.0)`` ``setup_stage`` and ``share_keys_stage``
    with ``secaggplus_mod`` on the clients. Per client: setup = two P-384
    ``generate_key_pairs`` + PEM serialisation; share_keys = ``os.urandom(32)``,
    ``create_shares`` of the seed and of ``sk1`` (t of n), and for each of the other n-1:
    ``bytes_to_private_key``/``bytes_to_public_key``, ``generate_shared_key`` (ECDH+HKDF),
    ``share_keys_plaintext_concat``, Fernet ``encrypt``. Client time excludes serde.
    (The pairwise-mask ECDH with ``sk1`` happens later, in collect_masked_vectors.)

    One run = total client time summed over all n clients (sequential CPU time); each
    repeat is a fresh round. ``quick=True``: only ``n_sample`` clients run share_keys
    (each still for all n parties) and the share_keys total is their median times n
    (linear extrapolation, flagged ``extrapolated``); setup is always run by all n.
    """
    t = threshold if threshold is not None else n // 2 + 1
    runs: list[float] = []
    setup_all: list[float] = []
    share_all: list[float] = []
    relay: list[float] = []
    wall: list[float] = []
    for r in range(repeats):
        rnd = _FlowerRound(n=n, num_shares=1.0, threshold=t, d=1, seed=seed + r)
        stage = rnd.f.consts.Stage
        if quick:
            # The others never answer share_keys (the stage then reports too few nodes).
            rnd.grid.silent[stage.SHARE_KEYS] = set(rnd.node_ids[n_sample:])
        t0 = time.perf_counter()
        rnd.run_stage("setup")
        rnd.run_stage("share_keys")
        wall.append(time.perf_counter() - t0)
        setup = rnd.grid.client_seconds[stage.SETUP]
        share = rnd.grid.client_seconds[stage.SHARE_KEYS]
        runs.append(sum(setup) + (statistics.median(share) * n if quick else sum(share)))
        setup_all += setup
        share_all += share
        relay.append(rnd.stage_server_seconds["share_keys"])
    return _summary(
        runs,
        what="sum over clients of secaggplus_mod setup + share_keys (complete graph)",
        extrapolated=quick,
        clients_timed_share_keys=len(share_all),
        per_client_setup_median_s=statistics.median(setup_all),
        per_client_share_keys_median_s=statistics.median(share_all),
        per_client_share_keys_runs=share_all,
        server_relay_median_s=statistics.median(relay),
        wall_median_s=statistics.median(wall),
        n=n,
        threshold=t,
        num_shares=n,
    )


# ------------------------------------------------------------------ 6. bytes per entry


def bytes_per_entry(d: int = 10**6, mod_range: int = MOD_RANGE, seed: int = 0) -> dict[str, Any]:
    """Upload size per entry of a masked vector, as the mod serialises it.

    The vector is built with Flower's calls (quantize, factor_combine, pseudo_rand_gen,
    parameters_addition, parameters_mod); the mod uploads ``[ndarray_to_bytes(a) ...]``
    (``np.save`` format) in a ConfigRecord; ``ndarrays_to_parameters`` gives the same bytes.
    The protobuf size of the reply RecordDict is reported too.
    """
    f = _require()
    x = np.random.default_rng(seed).uniform(-1.0, 1.0, d).astype(np.float32)
    vec = _quantised_upload(f, x)
    dims = f.arith.get_parameters_shape(vec)
    vec = f.arith.parameters_addition(vec, f.utils.pseudo_rand_gen(os.urandom(32), mod_range, dims))
    vec = f.arith.parameters_mod(vec, mod_range)
    tensors = [f.common.ndarray_to_bytes(a) for a in vec]
    npy = sum(len(b) for b in tensors)
    params = f.common.ndarrays_to_parameters(vec)
    record = f.app.RecordDict(
        {
            f.consts.RECORD_KEY_CONFIGS: f.app.ConfigRecord(
                {f.consts.Key.MASKED_PARAMETERS: tensors}, False
            )
        }
    )
    proto = f.serde.recorddict_to_proto(record).ByteSize()
    return {
        "bytes_per_entry": npy / d,
        "proto_bytes_per_entry": proto / d,
        "npy_bytes": npy,
        "parameters_bytes": sum(len(b) for b in params.tensors),
        "proto_bytes": proto,
        "dtype": str(vec[1].dtype),
        "d": d,
        "mod_range": mod_range,
        "flower_version": flower_version(),
    }


# ------------------------------------------------------------------- 7. defects


def flower_defects(seed: int = 0) -> dict[str, Any]:
    """Reproduce weaknesses of Flower 1.42's SecAgg+ with its own functions."""
    f = _require()
    out: dict[str, Any] = {}

    # (a) pseudo_rand_gen folds any seed to 32 bits: distinct seeds, identical masks.
    s1 = bytearray(os.urandom(32))
    s2 = bytearray(s1)
    delta = os.urandom(4)
    for i in range(4):  # flip the same bits in words 0 and 1: the XOR fold is unchanged
        s2[i] ^= delta[i]
        s2[4 + i] ^= delta[i]
    m1 = f.utils.pseudo_rand_gen(bytes(s1), MOD_RANGE, [(1000,)])[0]
    m2 = f.utils.pseudo_rand_gen(bytes(s2), MOD_RANGE, [(1000,)])[0]
    out["distinct_seeds_same_mask"] = bool(s1 != s2 and np.array_equal(m1, m2))

    # (b) pairwise seeds are folds of a base64 *text* key: every byte < 0x80, so the
    # 32-bit seed has its 4 top bits clear (at most 2**28 pairwise masks).
    keys = []
    for _ in range(50):
        a, _pa = f.asym.generate_key_pairs()
        _b, pb = f.asym.generate_key_pairs()
        keys.append(f.sym.generate_shared_key(a, pb))
    out["pairwise_key_bytes_all_ascii"] = all(max(k) < 0x80 for k in keys)
    out["pairwise_key_len"] = len(keys[0])

    # (c) randint(0, M - 1) excludes M - 1: masks are not uniform mod M.
    small = f.utils.pseudo_rand_gen(os.urandom(32), 4, [(100_000,)])[0]
    out["mask_values_mod_4"] = sorted(int(v) for v in np.unique(small))
    out["mask_never_m_minus_1"] = 3 not in out["mask_values_mod_4"]

    # (d) no disjointness check in the client's unmask: a server naming a neighbour both
    # active and dropped receives both of its shares, and recovers both secrets.
    rnd = _FlowerRound(n=5, num_shares=1.0, threshold=3, d=8, seed=seed)
    rnd.prepare_unmask()
    rnd.restore()
    victim = rnd.node_ids[0]
    consts = f.consts
    b_shares: list[bytes] = []
    sk_shares: list[bytes] = []
    for nid in rnd.node_ids[1:]:
        cfg = f.app.ConfigRecord(
            {
                consts.Key.STAGE: consts.Stage.UNMASK,
                consts.Key.ACTIVE_NODE_ID_LIST: list(rnd.node_ids),
                consts.Key.DEAD_NODE_ID_LIST: [victim],
            }
        )
        msg = f.app.Message(
            content=f.app.RecordDict({consts.RECORD_KEY_CONFIGS: cfg}),
            dst_node_id=nid,
            message_type=f.msgtype.MessageType.TRAIN,
            group_id="1",
        )
        reply = rnd.grid.send_and_receive([msg])[0]
        res = reply.content.config_records[consts.RECORD_KEY_CONFIGS]
        pairs = [
            (o, s)
            for o, s in zip(res[consts.Key.NODE_ID_LIST], res[consts.Key.SHARE_LIST], strict=True)
            if o == victim
        ]
        b_shares.append(pairs[0][1])
        sk_shares.append(pairs[-1][1])
        out.setdefault("shares_for_victim_per_reply", len(pairs))
    vstate = rnd.contexts[victim].state.config_records[consts.RECORD_KEY_STATE]
    out["victim_seed_recovered"] = f.shamir.combine_shares(b_shares) == vstate["rd_seed"]
    out["victim_sk1_recovered"] = f.shamir.combine_shares(sk_shares) == vstate["sk1"]
    out["no_disjointness_check"] = bool(
        out["shares_for_victim_per_reply"] == 2
        and out["victim_seed_recovered"]
        and out["victim_sk1_recovered"]
    )

    # (e) nothing keeps n * Q below M on the complete-graph (float num_shares) path: with
    # M / Q = 8, twenty clients (each entry about Q/2) wrap the sum; the round still
    # succeeds and returns a wrong average. Four clients, same M and Q, are fine.
    small_ranges = {"quantization_range": 2**13, "modulus_range": 2**16}
    errs: dict[int, float] = {}
    logged: dict[int, list[str]] = {}
    for clients in (4, 20):
        wrap = _FlowerRound(
            n=clients,
            num_shares=1.0,
            threshold=clients // 2 + 1,
            d=64,
            seed=seed,
            workflow_kwargs=small_ranges,
        )
        wrap.prepare_unmask()
        wrap.unmask()  # raises if Flower reports a failure
        errs[clients] = wrap.max_abs_error()
        logged[clients] = wrap.warnings
    out["wrap_max_abs_error_n4_n20"] = [errs[4], errs[20]]
    out["wrap_flower_warnings_n20"] = logged[20]
    out["sum_wraps_silently"] = bool(errs[4] < 0.05 < 1.0 < errs[20] and not logged[20])
    out["flower_version"] = flower_version()
    return out


# --------------------------------------------------------------------------- main


def _fmt_s(x: float) -> str:
    if x < 1e-3:
        return f"{x * 1e6:.0f} us"
    if x < 1.0:
        return f"{x * 1e3:.2f} ms"
    return f"{x:.2f} s"


def run_all(quick: bool = False, d: int = 10**6, n: int = 100) -> dict[str, Any]:
    """Every anchor figure with small repeats (quick) or the default repeats."""
    rep = 3 if quick else 5
    res: dict[str, Any] = {"flower_version": flower_version()}
    steps: list[tuple[str, Callable[[], dict[str, Any]]]] = [
        ("client_mask_per_neighbour", lambda: client_mask_per_neighbour(d=d, repeats=rep)),
        ("client_quantise", lambda: client_quantise(d=d, repeats=rep)),
        ("shamir_share", lambda: shamir_share(n=n, t=n // 2 + 1, repeats=min(rep, 3))),
        ("shamir_reconstruct", lambda: shamir_reconstruct(t=n // 2 + 1, repeats=min(rep, 3))),
        (
            "server_unmask",
            lambda: server_unmask(n=n, k=14, dropped_fraction=0.1, d=d, repeats=1 if quick else 3),
        ),
        ("key_sharing_complete_graph", lambda: key_sharing_complete_graph(n=n, quick=quick)),
        ("bytes_per_entry", lambda: bytes_per_entry(d=d)),
        ("flower_defects", flower_defects),
    ]
    for name, fn in steps:
        t0 = time.perf_counter()
        res[name] = fn()
        res[name]["elapsed_s"] = time.perf_counter() - t0
        print(f"  [{name}: {res[name]['elapsed_s']:.1f} s]", file=sys.stderr, flush=True)
    return res


def _print_table(res: dict[str, Any], d: int, n: int) -> None:
    cm, cq = res["client_mask_per_neighbour"], res["client_quantise"]
    sh, sr = res["shamir_share"], res["shamir_reconstruct"]
    su, ks = res["server_unmask"], res["key_sharing_complete_graph"]
    bp, df = res["bytes_per_entry"], res["flower_defects"]
    rows = [
        (f"client mask, per neighbour (d={d:.0e})", _fmt_s(cm["median_s"]), "2.2-3.7 ms"),
        (
            "  of which PRG pseudo_rand_gen",
            _fmt_s(cm["components_median_s"]["prg_pseudo_rand_gen_s"]),
            "",
        ),
        (
            "  of which ECDH+HKDF (+PEM parse)",
            _fmt_s(cm["components_median_s"]["shared_key_with_pem_parse_s"]),
            "",
        ),
        (f"client quantise (d={d:.0e})", _fmt_s(cq["median_s"]), "16-25 ms"),
        (f"Shamir share seed+sk1, n={sh['n']} t={sh['t']}", _fmt_s(sh["median_s"]), ""),
        (f"Shamir reconstruct 32 B, t={sr['t']}", _fmt_s(sr["median_s"]), "~1.5 s"),
        (
            f"server unmask n={su['n']} k={su['k']} drop={su['dropped']} (server)",
            _fmt_s(su["median_s"]),
            "2-6 s",
        ),
        ("  whole unmask_stage incl. loopback", _fmt_s(su["stage_median_s"]), ""),
        (
            f"key sharing complete n={ks['n']}" + (" (extrapolated)" if ks["extrapolated"] else ""),
            _fmt_s(ks["median_s"]),
            "~130 s",
        ),
        ("upload bytes/entry (npy)", f"{bp['bytes_per_entry']:.3f}", "8"),
    ]
    print(f"Flower {res['flower_version']} SecAgg+ anchor (medians, one run)")
    print(f"{'quantity':<52}{'measured':>14}   reference")
    for name, val, ref in rows:
        print(f"{name:<52}{val:>14}   {ref}")
    print(
        f"unmask correct: {su['correct']} (max abs err {su['max_abs_error_vs_weighted_mean']:.2e})"
    )
    if su.get("breakdown"):
        b = su["breakdown"]
        parts = ", ".join(f"{k} {v:.2f}s" for k, v in b["seconds_by_call"].items())
        print(f"unmask breakdown: {parts}, other {b['other_s']:.2f}s")
        print(
            f"  combines: {b['combines_seed']} seeds {b['combine_seed_s']:.2f}s, "
            f"{b['combines_private_key']} PEM keys {b['combine_private_key_s']:.2f}s, "
            f"{b['shares_per_combine_mean']:.1f} shares each"
        )
    print(
        "defects: "
        + ", ".join(
            f"{k}={df[k]}"
            for k in (
                "distinct_seeds_same_mask",
                "pairwise_key_bytes_all_ascii",
                "mask_never_m_minus_1",
                "no_disjointness_check",
                "sum_wraps_silently",
            )
        )
    )


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    p.add_argument("--quick", action="store_true", help="small repeats, extrapolated key sharing")
    p.add_argument("--d", type=int, default=10**6)
    p.add_argument("--n", type=int, default=100)
    p.add_argument("--json", help="also write every returned dict to this file")
    a = p.parse_args(argv)
    if not available():
        print("anchor not installed (pip install flwr==1.42.0)")
        return 0
    t0 = time.perf_counter()
    res = run_all(quick=a.quick, d=a.d, n=a.n)
    res["total_elapsed_s"] = time.perf_counter() - t0
    _print_table(res, a.d, a.n)
    print(f"total {res['total_elapsed_s']:.0f} s")
    if a.json:
        with open(a.json, "w", encoding="utf-8") as fh:
            json.dump(res, fh, indent=1, default=str)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
