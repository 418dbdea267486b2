"""SecureStrategy: our secure weighted average and secure geometric median (RFA) for Flower users,
over the loopback Grid (fast; no Ray). Each must equal the plain aggregation of the protocols
package up to quantisation."""

from __future__ import annotations

import logging
import math
from typing import Any, cast

import numpy as np
import pytest

pytest.importorskip(
    "flwr", reason="the Flower integration needs flwr (pip install 'secagg-dp[flower]')"
)

from flwr.app import ArrayRecord, ConfigRecord, Context, Message, MetricRecord, RecordDict
from flwr.clientapp import ClientApp
from flwr.serverapp.strategy import FedAvg

from dpquantile import ComposedEvent, FastDiscreteGaussian, HistogramTree, dp_quantile
from protocols.aggregation import (
    WEIGHT_COORDINATE_SCALE,
    AverageSettings,
    DiscreteGaussianNoise,
    geometric_median,
    secure_weighted_average,
)
from protocols.integrations.flower import SecureStrategy, make_protocols_mod
from secagg import generate_identities
from secagg.integrations.flower import RECORD_KEY

DIM = 6


class Apps(dict[int, Any]):
    """Node id → ClientApp, with the trust store of the nodes' identities."""

    trust_store: Any = None


def strategy_apps(
    vectors: dict[int, Any],
    weights: dict[int, float],
    losses: dict[int, float] | None = None,
    *,
    mod_seed: int = 3,
) -> Any:
    """ClientApps whose Mod knows the aggregations' encoders; each node has an identity and
    ``apps.trust_store`` lists them (the loopback grid passes it on as ``grid.trust_store``)."""
    apps = Apps()
    order = sorted(vectors)
    keys, apps.trust_store = generate_identities(range(1, len(order) + 1), seed=mod_seed)
    for node, vector in vectors.items():
        identity = keys[order.index(node) + 1]
        mod = make_protocols_mod(seed=mod_seed, identity=identity, trust_store=apps.trust_store)
        app = ClientApp(mods=[mod])

        def train(
            message: Message, context: Context, vector: Any = vector, node: int = node
        ) -> Message:
            content = RecordDict(
                {
                    "arrays": ArrayRecord([np.asarray(vector, dtype=np.float64)]),
                    "metrics": MetricRecord(
                        {"num-examples": weights[node], "loss": (losses or {}).get(node, 0.0)}
                    ),
                }
            )
            return Message(content, reply_to=message)

        app.train()(train)
        apps[node] = app
    return apps


def test_secure_mean_is_the_weighted_average(loopback_grid: Any) -> None:
    rng = np.random.default_rng(0)
    nodes = list(range(1, 7))
    vectors = {n: rng.uniform(-1, 1, DIM) for n in nodes}
    weights = {n: float(5 * n) for n in nodes}
    grid = loopback_grid(strategy_apps(vectors, weights))
    strategy = SecureStrategy(
        FedAvg(min_available_nodes=6),
        "mean",
        clip=2.0,
        weight_cap=40.0,
        trust_store=grid.trust_store,
    )
    result = strategy.start(grid, ArrayRecord([np.zeros(DIM)]), num_rounds=1)
    beta = np.array([min(weights[n], 40.0) for n in nodes])
    expected = beta @ np.stack([vectors[n] for n in nodes]) / beta.sum()
    np.testing.assert_allclose(result.arrays.to_numpy_ndarrays()[0], expected, atol=1e-6)
    assert len(strategy.history) == 1 and strategy.history[0].sums[0].dropped == {}


def test_secure_geometric_median_resists_outliers(
    loopback_grid: Any, vector_client_app: Any
) -> None:
    rng = np.random.default_rng(1)
    nodes = list(range(1, 9))
    vectors = {n: rng.normal(0.0, 0.1, DIM) + 1.0 for n in nodes}
    vectors[7] = np.full(DIM, -4.0)  # two corrupted clients
    vectors[8] = np.full(DIM, 4.5)
    weights = {n: 10.0 for n in nodes}
    grid = loopback_grid(strategy_apps(vectors, weights), silent={5: "unmask"})
    strategy = SecureStrategy(
        FedAvg(min_available_nodes=8),
        "geometric_median",
        clip=20.0,
        weight_cap=10.0,
        max_iterations=30,
        smoothing=1e-4,
        ftol=1e-8,
        trust_store=grid.trust_store,
    )
    result = strategy.start(grid, ArrayRecord([np.zeros(DIM)]), num_rounds=1)
    median = result.arrays.to_numpy_ndarrays()[0]
    points = np.stack([vectors[n] for n in nodes])
    # One session per round: node 5 drops after its first masked input, is recovered in that
    # call and out of every later one — as the plain path's session emulation has it.
    plain = geometric_median(
        points,
        np.ones(8),
        smoothing=1e-4,
        ftol=1e-8,
        max_iterations=30,
        secure=False,
        dropouts={call: {"unmask": [4]} for call in range(31)},
        session_sums=31,
    )
    np.testing.assert_allclose(median, plain.median, atol=1e-3)
    mean = points.mean(axis=0)
    honest = points[:6].mean(axis=0)
    assert np.linalg.norm(median - honest) < 0.5 * np.linalg.norm(mean - honest)
    summary = strategy.history[0]
    assert len(summary.sums) >= 3 and len(summary.objectives) == len(summary.sums) - 1
    assert summary.objectives[-1] <= summary.objectives[0]


def test_superquantile_averages_the_high_loss_clients(loopback_grid: Any) -> None:
    rng = np.random.default_rng(2)
    nodes = list(range(1, 9))
    vectors = {n: rng.uniform(-1, 1, DIM) for n in nodes}
    weights = {n: float(10 + n) for n in nodes}
    losses = {n: float(n) for n in nodes}  # client n's pre-training loss is n
    grid = loopback_grid(strategy_apps(vectors, weights, losses))
    strategy = SecureStrategy(
        FedAvg(min_available_nodes=8),
        "superquantile",
        clip=5.0,
        weight_cap=20.0,
        theta=0.5,
        trust_store=grid.trust_store,
    )
    result = strategy.start(grid, ArrayRecord([np.zeros(DIM)]), num_rounds=1)
    summary = strategy.history[0]
    assert summary.threshold is not None and 4.0 < summary.threshold <= 5.0
    tail = [5, 6, 7, 8]
    beta = np.array([weights[n] for n in tail])
    expected = beta @ np.stack([vectors[n] for n in tail]) / beta.sum()
    np.testing.assert_allclose(result.arrays.to_numpy_ndarrays()[0], expected, atol=1e-6)
    assert summary.events == () and len(summary.sums) == 2


def test_superquantile_with_a_dp_quantile_records_its_event(loopback_grid: Any) -> None:
    nodes = list(range(1, 9))
    vectors = {n: np.full(DIM, float(n)) for n in nodes}
    grid = loopback_grid(
        strategy_apps(vectors, dict.fromkeys(nodes, 1.0), {n: float(n) for n in nodes})
    )
    strategy = SecureStrategy(
        FedAvg(min_available_nodes=8),
        "superquantile",
        clip=100.0,
        weight_cap=1.0,
        theta=0.5,
        quantile_rho=2.0,
        trust_store=grid.trust_store,
    )
    result = strategy.start(grid, ArrayRecord([np.zeros(DIM)]), num_rounds=1)
    (event,) = strategy.history[0].events
    assert event.num_clients == 8 and event.rho <= 2.0 + 1e-9
    # Whatever the noisy τ, the result is the mean of a non-empty top set of clients.
    average = result.arrays.to_numpy_ndarrays()[0]
    tails = [np.mean([float(n) for n in nodes[k:]]) for k in range(8)]
    assert min(abs(average[0] - t) for t in tails) < 1e-6


def test_the_noisy_mean_is_the_secure_averages_release(loopback_grid: Any) -> None:
    rng = np.random.default_rng(4)
    nodes = list(range(1, 7))
    n, clip = len(nodes), 2.0
    vectors = {node: rng.uniform(-1, 1, DIM) for node in nodes}
    grid = loopback_grid(strategy_apps(vectors, dict.fromkeys(nodes, 10.0)))
    strategy = SecureStrategy(
        FedAvg(min_available_nodes=6),
        "mean",
        clip=clip,
        weight_cap=10.0,
        noise_rho=50.0,
        modulus_bits=64,
        seed=11,  # with the Mods' seed 3: the noise and the rounding are fixed
        trust_store=grid.trust_store,
    )
    result = strategy.start(grid, ArrayRecord([np.zeros(DIM)]), num_rounds=1)
    (event,) = strategy.history[0].events
    assert event.num_clients == n and event.rho == pytest.approx(50.0, rel=1e-3)
    clipped = [v * min(1.0, clip / np.linalg.norm(v)) for v in vectors.values()]
    expected = np.mean(clipped, axis=0)
    error = float(np.abs(result.arrays.to_numpy_ndarrays()[0] - expected).max())
    # The released row sum (row units, d + 1 coordinates) is Σᵢ rᵢ plus each client's
    # rounding error (< 1/s per coordinate) plus Σᵢ Nᵢ/s, Nᵢ ~ N_ℤ(0, σ²) (σ: grid units, s:
    # the grid scale). N_ℤ(0, σ²) is σ²-subgaussian (CKS20, Cor. 9), so P[|Σᵢ Nᵢⱼ| > T] ≤
    # 2·exp(−T²/(2nσ²)); a union bound over the d + 1 coordinates at α = 1e-9 bounds every
    # coordinate's error by e. The row is the secure average's [βw ; λcβ]/(B·c), so the average
    # is c·(Sⱼ + eⱼ)/(n + e_w/λ) with Sⱼ = Σᵢ wᵢⱼ/c, |Sⱼ| ≤ n/c (‖wᵢ‖∞ ≤ 1, every β = B): its
    # error is at most c·e·(n + n/(cλ))/(n·(n − e/λ)).
    alpha, lam = 1e-9, WEIGHT_COORDINATE_SCALE
    scale, sigma = strategy.history[0].sums[0].encoding.scale, event.sigma
    assert scale is not None
    e = (sigma * math.sqrt(2 * n * math.log(2 * (DIM + 1) / alpha)) + n) / scale
    bound = clip * e * (n + n / (clip * lam)) / (n * (n - e / lam))
    assert 0 < error <= bound  # noisy, yet within the bound (which fails with prob. ≤ α)
    # One encoding: the noise is calibrated for the secure average's row [βw ; λcβ] (Δ₂ ∝
    # √(1 + λ²)), so σ in the clients' units, Δ₂ and ρ are secure_weighted_average's for the same
    # clients, clip, cap and bits (the strategy plans on min(b, 52) − 8 bits: each client's noise
    # sits inside its own clip). The former row [βw/(Bc), β/B] had Δ₂ ∝ √2: 1.37× the noise.
    alone = secure_weighted_average(
        np.stack(list(vectors.values())),
        np.full(n, 10.0),
        settings=AverageSettings(clip=clip, bits=52 - 8, noise=DiscreteGaussianNoise(rho=50.0)),
        weight_cap=10.0,
        seed=0,
        secure=False,
    )
    assert alone.event is not None and alone.quantization_step is not None
    strategy_noise = sigma / scale * (10.0 * clip)  # the strategy's rows are in units of B·c
    assert strategy_noise == pytest.approx(alone.event.sigma * alone.quantization_step, rel=1e-9)
    assert event.l2_sensitivity == pytest.approx(alone.event.l2_sensitivity, rel=1e-9)
    assert event.rho == pytest.approx(alone.event.rho, rel=1e-6)  # both bisect σ to ρ


def test_noise_events_carry_the_clients_sampler_tv_bound(loopback_grid: Any) -> None:
    nodes = list(range(1, 9))
    vectors = {n: np.full(DIM, 0.1 * n) for n in nodes}
    grid = loopback_grid(
        strategy_apps(vectors, dict.fromkeys(nodes, 1.0), {n: float(n) for n in nodes})
    )
    strategy = SecureStrategy(
        FedAvg(min_available_nodes=8),
        "superquantile",
        clip=1.0,
        weight_cap=1.0,
        quantile_rho=2.0,
        noise_rho=20.0,
        modulus_bits=64,
        seed=2,
        trust_store=grid.trust_store,
    )
    strategy.start(grid, ArrayRecord([np.zeros(DIM)]), num_rounds=1)
    summary = strategy.history[0]
    histogram, mean = summary.events
    for event, outcome in zip(summary.events, summary.sums, strict=True):
        # Every survivor drew FastDiscreteGaussian(σ) noise for each of the d coordinates.
        per_draw = FastDiscreteGaussian(event.sigma).tv_bound
        survivors = len(outcome.survivors)
        assert event.sampler_tv_bound == pytest.approx(survivors * event.dimension * per_draw)
        assert event.sampler_tv_bound > 0
    assert histogram.dimension == HistogramTree(64, 0.0, 10.0).dimension
    assert mean.dimension == DIM + 1
    # One calibration: the strategy's histogram noise is dp_quantile's for the same ρ and n.
    alone = dp_quantile(
        np.arange(8.0), 0.5, lower=0.0, upper=10.0, bins=64, rho=2.0, seed=0, secure=False
    )
    assert histogram.sigma == alone.sigma and histogram == alone.event


def run_noisy_superquantile(
    loopback_grid: Any, *, mod_seed: int, strategy_seed: int = 7, **options: Any
) -> tuple[Any, SecureStrategy, Any]:
    nodes = list(range(1, 9))
    vectors = {n: np.full(DIM, float(n)) for n in nodes}
    apps = strategy_apps(
        vectors, dict.fromkeys(nodes, 1.0), {n: float(n) for n in nodes}, mod_seed=mod_seed
    )
    grid = loopback_grid(apps, silent=options.pop("silent", None))
    strategy = SecureStrategy(
        FedAvg(min_available_nodes=8),
        "superquantile",
        clip=100.0,
        weight_cap=1.0,
        quantile_rho=0.5,
        noise_rho=10.0,
        modulus_bits=64,
        seed=strategy_seed,
        **options,
        trust_store=grid.trust_store,
    )
    result = strategy.start(grid, ArrayRecord([np.zeros(DIM)]), num_rounds=1)
    return result.arrays.to_numpy_ndarrays()[0], strategy, grid


def test_seeded_noisy_rounds_are_reproducible(loopback_grid: Any) -> None:
    first, one, _ = run_noisy_superquantile(loopback_grid, mod_seed=5)
    second, two, _ = run_noisy_superquantile(loopback_grid, mod_seed=5)
    np.testing.assert_array_equal(first, second)
    assert one.history[0].threshold == two.history[0].threshold
    for a, b in zip(one.history[0].sums, two.history[0].sums, strict=True):
        np.testing.assert_array_equal(a.ring_total, b.ring_total)
    # The clients' seed, not the server's, fixes their noise: another one moves the sums.
    _, three, _ = run_noisy_superquantile(loopback_grid, mod_seed=6)
    assert not np.array_equal(
        one.history[0].sums[1].ring_total, three.history[0].sums[1].ring_total
    )


def test_fewer_survivors_than_planned_is_recorded_and_warned(
    loopback_grid: Any, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING, logger="protocols.integrations.flower"):
        _, strategy, _ = run_noisy_superquantile(
            loopback_grid, mod_seed=5, silent={8: "masked_input"}
        )
    summary = strategy.history[0]
    histogram, mean = summary.events
    # The noise was planned for 8 clients; 7 added theirs, so the histogram is less private.
    assert histogram.num_clients == 7 and histogram.rho > 0.5
    assert "only 7 of the 8 planned clients" in caplog.text and "the loss histogram" in caplog.text
    # The average's noise is planned for the 7 clients invited to it: on target, no warning.
    # Its target is add/remove; the round states it for replace-one neighbours, as the
    # histogram's (Δ doubles: ρ ≤ 4·10), so that the round's events compose.
    assert mean.num_clients == 7 and 10.0 < mean.rho <= 4 * 10.0
    assert histogram.neighbouring == mean.neighbouring == "replace_one"
    assert ComposedEvent(summary.events).relation == "replace_one"
    assert "secure average" not in caplog.text
    assert not summary.refused


def test_refuse_shortfall_withholds_the_unmask_phase(loopback_grid: Any) -> None:
    arrays, strategy, grid = run_noisy_superquantile(
        loopback_grid, mod_seed=5, silent={8: "masked_input"}, refuse_shortfall=True
    )
    summary = strategy.history[0]
    assert summary.refused and summary.sums == () and summary.events == ()
    assert summary.threshold is None
    np.testing.assert_array_equal(arrays, np.zeros(DIM))  # no Δ-FL step this round
    sums = [m for m in grid.sent if RECORD_KEY in m.content.config_records]  # not evaluation
    stages = [str(m.content.config_records[RECORD_KEY]["stage"]) for m in sums]
    assert "masked_input" in stages and "unmask" not in stages  # nothing was unmasked
    assert {m.metadata.group_id for m in sums} == {"1.0"}  # no τ went out


def test_refuse_shortfall_releases_a_full_round(loopback_grid: Any) -> None:
    full, strategy, _ = run_noisy_superquantile(loopback_grid, mod_seed=5, refuse_shortfall=True)
    plain, _, _ = run_noisy_superquantile(loopback_grid, mod_seed=5)
    assert not strategy.history[0].refused and len(strategy.history[0].sums) == 2
    np.testing.assert_array_equal(full, plain)


def test_refuse_shortfall_of_a_noisy_mean(loopback_grid: Any) -> None:
    nodes = list(range(1, 7))
    vectors = {n: np.full(DIM, 0.1 * n) for n in nodes}
    grid = loopback_grid(
        strategy_apps(vectors, dict.fromkeys(nodes, 1.0)), silent={3: "masked_input"}
    )
    strategy = SecureStrategy(
        FedAvg(min_available_nodes=6),
        "mean",
        clip=1.0,
        weight_cap=1.0,
        noise_rho=10.0,
        modulus_bits=64,
        refuse_shortfall=True,
        trust_store=grid.trust_store,
    )
    result = strategy.start(grid, ArrayRecord([np.ones(DIM)]), num_rounds=2)
    assert [s.refused for s in strategy.history] == [True, True]
    np.testing.assert_array_equal(result.arrays.to_numpy_ndarrays()[0], np.ones(DIM))


class PerNodeContent:
    """A strategy whose configure_train gives each node its own arrays."""

    def configure_train(
        self, server_round: int, arrays: ArrayRecord, config: ConfigRecord, grid: Any
    ) -> list[Message]:
        return [
            Message(
                RecordDict({"arrays": ArrayRecord([np.full(DIM, float(node))]), "config": config}),
                dst_node_id=node,
                message_type="train",
            )
            for node in grid.get_node_ids()
        ]


def test_different_contents_per_node_are_refused(loopback_grid: Any) -> None:
    nodes = [1, 2, 3]
    grid = loopback_grid(
        strategy_apps({n: np.zeros(DIM) for n in nodes}, dict.fromkeys(nodes, 1.0))
    )
    strategy = SecureStrategy(
        cast(Any, PerNodeContent()), "mean", clip=1.0, weight_cap=1.0, trust_store=grid.trust_store
    )
    with pytest.raises(ValueError, match="different contents for different nodes"):
        strategy.start(grid, ArrayRecord([np.zeros(DIM)]), num_rounds=1)
    assert grid.sent == []


@pytest.mark.parametrize(
    ("option", "value", "match"),
    [
        ("theta", 0.0, "theta must be a number in \\(0, 1\\]"),
        ("theta", 1.5, "theta must be a number in \\(0, 1\\]"),
        ("theta", math.nan, "theta must be a number in"),
        ("clip", 0.0, "clip must be positive"),
        ("clip", -1.0, "clip must be positive"),
        ("clip", math.nan, "clip must be positive \\(a finite number"),
        ("weight_cap", 0.0, "weight_cap must be positive"),
        ("weight_cap", math.nan, "weight_cap must be positive \\(a finite number"),
        ("bins", 48, "bins must be a power of the branching factor 2"),
        ("bins", 1, "bins must be an integer >= 2"),
        ("branching", 1, "branching must be an integer >= 2"),
        ("loss_range", (1.0, 1.0), "loss_range must have lower < upper"),
        ("loss_range", (2.0, 1.0), "loss_range must have lower < upper"),
        ("loss_range", (0.0, math.inf), "loss_range\\[1\\] must be finite"),
        ("loss_range", (math.nan, 1.0), "loss_range\\[0\\] must be finite"),
        ("loss_range", (0.0,), "loss_range must be a pair"),
        ("quantile_rho", 0.0, "quantile_rho must be positive"),
        ("quantile_rho", -1.0, "quantile_rho must be positive"),
        ("quantile_rho", math.nan, "quantile_rho must be positive \\(a finite number"),
        ("noise_rho", 0.0, "noise_rho must be positive"),
        ("noise_rho", math.inf, "noise_rho must be positive \\(a finite number"),
        ("phase_timeout", 0.0, "phase_timeout must be positive"),
        ("smoothing", 0.0, "smoothing must be positive"),
        ("ftol", -1.0, "ftol must be non-negative"),
        ("max_iterations", 0, "max_iterations must be an integer >= 1"),
        ("seed", -1, "seed must lie in"),
    ],
)
def test_bad_parameters_are_value_errors(option: str, value: Any, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        SecureStrategy(None, "superquantile", **{option: value})


def test_parameters_are_normalised() -> None:
    strategy = SecureStrategy(None, "superquantile", theta=1, clip=2, loss_range=(0, 5))
    assert strategy.theta == 1.0 and strategy.clip == 2.0 and strategy.loss_range == (0.0, 5.0)


@pytest.mark.parametrize(
    "wrapper",
    ["DifferentialPrivacyServerSideFixedClipping", "DifferentialPrivacyClientSideFixedClipping"],
)
def test_flowers_dp_wrappers_are_refused_not_silently_stripped(wrapper: str) -> None:
    # Their noise is added in aggregate_train, which SecureStrategy replaces by the secure sum:
    # accepting them would return the noiseless mean under a DP name.
    import flwr.serverapp.strategy as flower_strategies  # noqa: PLC0415

    dp_class = getattr(flower_strategies, wrapper)
    dp_strategy = dp_class(FedAvg(), noise_multiplier=1.0, clipping_norm=1.0, num_sampled_clients=4)
    with pytest.raises(TypeError, match="noise_rho"):
        SecureStrategy(strategy=dp_strategy, threat_model="semi-honest")
    SecureStrategy(strategy=FedAvg(), threat_model="semi-honest", noise_rho=0.5)  # the way


def test_a_round_with_fewer_nodes_than_min_nodes_runs_no_secure_sum(
    loopback_grid: Any, caplog: pytest.LogCaptureFixture
) -> None:
    # Two sampled nodes: each would learn the other's input from the sum. The round is skipped.
    rng = np.random.default_rng(3)
    vectors = {n: rng.uniform(-1, 1, DIM) for n in (1, 2)}
    grid = loopback_grid(strategy_apps(vectors, {1: 1.0, 2: 1.0}))
    strategy = SecureStrategy(
        FedAvg(min_available_nodes=2, min_train_nodes=2), "mean", trust_store=grid.trust_store
    )
    with caplog.at_level(logging.WARNING):
        result = strategy.start(grid, ArrayRecord([np.zeros(DIM)]), num_rounds=1)
    assert strategy.history[0].sums == () and strategy.history[0].skipped is not None
    assert "min_nodes=3" in caplog.text
    np.testing.assert_array_equal(result.arrays.to_numpy_ndarrays()[0], np.zeros(DIM))
    with pytest.raises(ValueError, match="min_nodes"):
        SecureStrategy(strategy=None, min_nodes=2)


def test_a_run_budget_pays_every_noisy_release_and_ends_the_run_when_spent(
    loopback_grid: Any,
) -> None:
    from dpquantile import ZCDP, PrivacyBudget, ZCDPAccountant  # noqa: PLC0415

    rng = np.random.default_rng(5)
    nodes = list(range(1, 5))
    vectors = {node: rng.uniform(-1, 1, DIM) for node in nodes}
    grid = loopback_grid(strategy_apps(vectors, dict.fromkeys(nodes, 1.0)))
    # Two releases of ρ ≤ 1 fit in what ρ = 2.5 certifies, a third (ρ ≈ 3) does not.
    limit = ZCDPAccountant().compose(ZCDP(2.5)).epsilon(1e-5)
    budget = PrivacyBudget(epsilon=limit, delta=1e-5)
    strategy = SecureStrategy(
        FedAvg(min_available_nodes=4),
        "mean",
        clip=2.0,
        weight_cap=1.0,
        noise_rho=1.0,
        modulus_bits=64,
        budget=budget,
        trust_store=grid.trust_store,
        threat_model="malicious",
    )
    assert strategy.refuse_shortfall  # a paid release is never delivered below its plan
    strategy.start(grid, ArrayRecord([np.zeros(DIM)]), num_rounds=3)
    assert len(budget.ledger) == 2 and budget.spent() <= limit
    assert [len(r.sums) for r in strategy.history] == [1, 1, 0]
    assert strategy.history[2].skipped is not None and "budget" in strategy.history[2].skipped
    with pytest.raises(ValueError, match="no DP"):
        SecureStrategy(strategy=None, budget=PrivacyBudget(rho=1.0))
    with pytest.raises(ValueError, match="replace_one"):
        SecureStrategy(
            strategy=None,
            aggregation="superquantile",
            quantile_rho=1.0,
            noise_rho=1.0,
            budget=PrivacyBudget(rho=1.0),
        )


def full_model_apps(updates: dict[int, np.ndarray], seed: int) -> Apps:
    """Client apps that reply, as Flower clients do, with a full model: the one sent + update."""
    nodes = sorted(updates)
    keys, trust_store = generate_identities(range(1, len(nodes) + 1), seed=seed)
    apps = Apps()
    apps.trust_store = trust_store
    for position, node in enumerate(nodes):
        mod = make_protocols_mod(seed=seed, identity=keys[position + 1], trust_store=trust_store)
        app = ClientApp(mods=[mod])

        def train(message: Message, context: Context, node: int = node) -> Message:
            sent = next(iter(message.content.array_records.values())).to_numpy_ndarrays()[0]
            content = RecordDict(
                {
                    "arrays": ArrayRecord([sent + updates[node]]),
                    "metrics": MetricRecord({"num-examples": 1.0, "loss": 0.0}),
                }
            )
            return Message(content, reply_to=message)

        app.train()(train)
        apps[node] = app
    return apps


def test_clients_replying_full_models_have_their_update_clipped_not_their_model(
    loopback_grid: Any,
) -> None:
    # Flower clients reply with the trained model. The secure aggregations clip and aggregate
    # the update (reply − the global model sent), and apply the aggregate to the global model:
    # a large model far from zero is not clipped to ‖·‖ ≤ clip.
    rng = np.random.default_rng(6)
    nodes = list(range(1, 6))
    updates = {node: rng.uniform(-0.5, 0.5, DIM) for node in nodes}
    apps = full_model_apps(updates, seed=3)
    trust_store = apps.trust_store
    grid = loopback_grid(apps)
    start = np.full(DIM, 50.0)  # ‖model‖ ≈ 122, far above the clip
    strategy = SecureStrategy(
        FedAvg(min_available_nodes=5),
        "geometric_median",
        clip=10.0,
        weight_cap=1.0,
        weight_key="",
        trust_store=trust_store,
        max_iterations=3,
        ftol=0.0,
        modulus_bits=64,  # Weiszfeld weights reach α/ν: 32 bits leave ~1e-3 errors
    )
    result = strategy.start(grid, ArrayRecord([start]), num_rounds=1)
    assert len(strategy.history[0].sums) == 4 and len(strategy.history[0].sums[0].survivors) == 5
    expected = (
        start
        + geometric_median(
            np.stack([updates[n] for n in nodes]),
            secure=False,
            max_iterations=3,
            ftol=0.0,
            settings=AverageSettings(bits=64, clip=10.0),
        ).median
    )
    np.testing.assert_allclose(result.arrays.to_numpy_ndarrays()[0], expected, atol=1e-4)


def test_the_plain_mean_clips_the_update_not_the_model(loopback_grid: Any) -> None:
    # The plain mean used to clip each coordinate of the replied model to ±clip: a model of
    # 50s came back as 10s. Now it averages the L2-clipped updates and applies them.
    rng = np.random.default_rng(8)
    nodes = list(range(1, 6))
    updates = {node: rng.uniform(-0.5, 0.5, DIM) for node in nodes}
    apps = full_model_apps(updates, seed=4)
    trust_store = apps.trust_store
    grid = loopback_grid(apps)
    start = np.full(DIM, 50.0)
    strategy = SecureStrategy(
        FedAvg(min_available_nodes=5), "mean", clip=10.0, weight_cap=1.0, trust_store=trust_store
    )
    result = strategy.start(grid, ArrayRecord([start]), num_rounds=1)
    expected = start + np.mean([updates[n] for n in nodes], axis=0)
    np.testing.assert_allclose(result.arrays.to_numpy_ndarrays()[0], expected, atol=1e-5)


def test_federated_evaluation_is_the_wrapped_strategys_own(loopback_grid: Any) -> None:
    # Flower's FedAvg evaluates the new global model on the nodes after every round; the
    # SecureStrategy passes that through (configure_evaluate → replies → aggregate_evaluate).
    rng = np.random.default_rng(8)
    nodes = list(range(1, 5))
    apps = strategy_apps({n: rng.uniform(-1, 1, DIM) for n in nodes}, dict.fromkeys(nodes, 1.0))
    evaluated: list[int] = []
    for node, app in apps.items():

        def evaluate(message: Message, context: Context, node: int = node) -> Message:
            evaluated.append(node)
            metrics = MetricRecord({"eval_loss": float(node), "num-examples": 1.0})
            return Message(RecordDict({"metrics": metrics}), reply_to=message)

        app.evaluate()(evaluate)
    grid = loopback_grid(apps)
    strategy = SecureStrategy(
        FedAvg(min_available_nodes=4),
        "mean",
        clip=2.0,
        weight_cap=1.0,
        trust_store=grid.trust_store,
    )
    result = strategy.start(grid, ArrayRecord([np.zeros(DIM)]), num_rounds=2, timeout=30.0)
    assert sorted(evaluated) == sorted(nodes * 2)
    assert set(result.evaluate_metrics_clientapp) == {1, 2}
    assert result.evaluate_metrics_clientapp[1]["eval_loss"] == pytest.approx(2.5)


def test_a_node_silent_in_one_round_is_left_out_of_the_next(loopback_grid: Any) -> None:
    # Node 5 vanished before advertising its keys in round 1; round 2 does not invite it (its
    # phases would each wait for the timeout), and both rounds still run their secure sum.
    rng = np.random.default_rng(9)
    nodes = list(range(1, 6))
    grid = loopback_grid(
        strategy_apps({n: rng.uniform(-1, 1, DIM) for n in nodes}, dict.fromkeys(nodes, 1.0)),
        silent={5: "advertise_keys"},
    )
    strategy = SecureStrategy(
        FedAvg(min_available_nodes=5, fraction_evaluate=0.0),
        "mean",
        clip=2.0,
        weight_cap=1.0,
        trust_store=grid.trust_store,
    )
    strategy.start(grid, ArrayRecord([np.zeros(DIM)]), num_rounds=2)
    first, second = (summary.sums[0] for summary in strategy.history)
    assert first.dropped == {5: "advertise_keys"} and 5 not in first.survivors
    invited_in_round_2 = {m.metadata.dst_node_id for m in grid.sent if m.metadata.group_id == "2"}
    assert 5 not in invited_in_round_2 and second.dropped == {}


def test_secure_strategy_is_a_flower_strategy() -> None:
    from flwr.serverapp.strategy import Strategy  # noqa: PLC0415

    strategy = SecureStrategy(FedAvg(), "mean", threat_model="semi-honest")
    assert isinstance(strategy, Strategy)
    with pytest.raises(NotImplementedError, match="secure sum"):
        strategy.aggregate_train(1, [])
    strategy.summary()
