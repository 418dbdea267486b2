"""The example Flower app in Flower's simulation engine (Ray): 20 clients, dropouts mid-round.

One simulation (2 rounds, ≈ 30 s, most of it Ray's start-up) is shared by the tests. Its rounds
must equal our in-memory runner ``secagg.secure_sum`` on the same quantised inputs and the same
dropouts — bit for bit in the ring — and the plain weighted average up to quantisation. Two
smaller ones: three rounds as one session (one key setup), and Flower's own SecAgg+ workflow
on the same task (the anchor of ``bench/flower_deployment_bench.py``).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

pytest.importorskip("flwr", reason="the Flower tests need flwr (pip install 'secagg-dp[flower]')")
pytest.importorskip("ray", reason="Flower's simulation engine needs ray (flwr[simulation])")

from secagg import Quantizer, secure_sum
from secagg.integrations.flower import _client_random, dropout_phases

pytestmark = pytest.mark.filterwarnings("ignore::FutureWarning")

APP_DIR = Path(__file__).resolve().parents[2] / "examples" / "flower_app"
NODES = 20
ROUNDS = 2
MOD_SEED = 9
# Partition → the phase at which it vanishes (an error reply), in every round.
DROP_PLAN = {3: "advertise_keys", 7: "share_keys", 11: "masked_input", 15: "unmask"}


@pytest.fixture(scope="module")
def simulation() -> Any:
    sys.path.insert(0, str(APP_DIR))
    try:
        from flwr.simulation import run_simulation  # noqa: PLC0415
        from secagg_app.client_app import make_client_app  # noqa: PLC0415
        from secagg_app.server_app import RunRecord, Settings, make_server_app  # noqa: PLC0415
        from secagg_app.task import local_train  # noqa: PLC0415

        record = RunRecord()
        # One key setup per round, so the drop plan hits every phase of every round.
        settings = Settings(rounds=ROUNDS, min_nodes=NODES, seed=5, timeout=60.0, session_rounds=1)
        run_simulation(
            make_server_app(settings, record),
            make_client_app(drop_plan=DROP_PLAN, seed=MOD_SEED),
            num_supernodes=NODES,
            backend_config={
                "client_resources": {"num_cpus": 1, "num_gpus": 0.0},
                "init_args": {"num_cpus": 2, "include_dashboard": False},
            },
        )
        yield record, settings, local_train
    finally:
        sys.path.remove(str(APP_DIR))
        for name in [m for m in sys.modules if m == "secagg_app" or m.startswith("secagg_app.")]:
            del sys.modules[name]


def client_ids(partitions: dict[int, int]) -> dict[int, int]:
    """Node → client id: the app's identities give partition p the id p + 1."""
    return {node: p + 1 for node, p in partitions.items()}


def client_inputs(result: Any, model: Any, partitions: dict[int, int], local_train: Any) -> Any:
    """Every node's quantised reply, as its secure-sum Mod computed it (client-id order)."""
    quantizer = Quantizer(result.encoding.clip, result.encoding.scale)
    rows, plain = [], {}
    for node, u in sorted(client_ids(partitions).items(), key=lambda item: item[1]):
        new_model, examples = local_train(model, partitions[node], 0)
        flat = np.concatenate([a.ravel() for a in new_model])
        plain[node] = (flat, examples)
        rng = _client_random(MOD_SEED, result.config, u).spawn(b"quantize")
        encoded = result.encoding.encode(flat, examples)
        rows.append(quantizer.to_ring(encoded, result.config.ring, rng=rng))
    return rows, plain


def test_every_round_completes_with_the_planned_dropouts(simulation: Any) -> None:
    record, _, _ = simulation
    assert len(record.results) == ROUNDS and sorted(record.partitions.values()) == list(
        range(NODES)
    )
    node_of = {p: node for node, p in record.partitions.items()}
    for result in record.results:
        assert result.dropped == {node_of[p]: phase for p, phase in DROP_PLAN.items()}
        # The unmask dropout had already sent its masked input: it is summed.
        assert len(result.survivors) == NODES - 3 and node_of[15] in result.survivors


def test_rounds_equal_the_in_memory_runner(simulation: Any) -> None:
    record, _, local_train = simulation
    # One model before each round plus the final one: no round may go unchecked.
    assert len(record.results) == ROUNDS and len(record.models) == ROUNDS + 1
    for model, result in zip(record.models[:-1], record.results, strict=True):
        rows, _ = client_inputs(result, model, record.partitions, local_train)
        reference = secure_sum(
            rows,
            modulus_bits=result.config.modulus_bits,
            threshold=result.config.threshold,
            neighbors=result.config.neighbors,
            dropouts=dropout_phases(result, client_ids(record.partitions)),
            seed=0,
        )
        np.testing.assert_array_equal(reference.total, result.ring_total)


def test_rounds_are_the_weighted_average_up_to_quantisation(simulation: Any) -> None:
    record, settings, local_train = simulation
    assert len(record.results) == ROUNDS and len(record.models) == ROUNDS + 1
    for model, result, following in zip(
        record.models[:-1], record.results, record.models[1:], strict=True
    ):
        _, plain = client_inputs(result, model, record.partitions, local_train)
        beta = {n: min(plain[n][1], settings.weight_cap) / settings.weight_cap for n in plain}
        expected = sum(
            beta[n] * np.clip(plain[n][0], -settings.clip, settings.clip) for n in result.survivors
        ) / sum(beta[n] for n in result.survivors)
        step = len(result.survivors) / result.encoding.scale
        np.testing.assert_allclose(result.average, expected, atol=10 * step)
        np.testing.assert_allclose(np.concatenate([a.ravel() for a in following]), result.average)
    assert record.losses[-1] < record.losses[0]


def _simulate(settings: Any, nodes: int, drop_plan: dict[int, str] | None = None) -> Any:
    """Run the app in simulation with ``settings``; (record, local_train)."""
    sys.path.insert(0, str(APP_DIR))
    try:
        from flwr.simulation import run_simulation  # noqa: PLC0415
        from secagg_app.client_app import make_client_app  # noqa: PLC0415
        from secagg_app.server_app import RunRecord, make_server_app  # noqa: PLC0415
        from secagg_app.task import local_train  # noqa: PLC0415

        record = RunRecord()
        run_simulation(
            make_server_app(settings, record),
            make_client_app(drop_plan=drop_plan or {}, seed=MOD_SEED),
            num_supernodes=nodes,
            backend_config={
                "client_resources": {"num_cpus": 1, "num_gpus": 0.0},
                "init_args": {"num_cpus": 2, "include_dashboard": False},
            },
        )
        return record, local_train
    finally:
        sys.path.remove(str(APP_DIR))
        for name in [m for m in sys.modules if m == "secagg_app" or m.startswith("secagg_app.")]:
            del sys.modules[name]


def _weighted_average(model: Any, partitions: list[int], local_train: Any, cap: float) -> Any:
    replies = [local_train(model, p, 0) for p in partitions]
    beta = np.array([min(examples, cap) / cap for _, examples in replies])
    flats = np.stack([np.concatenate([a.ravel() for a in m]) for m, _ in replies])
    return beta @ flats / beta.sum()


def test_session_rounds_share_one_key_setup_and_keep_a_dropout_out() -> None:
    sys.path.insert(0, str(APP_DIR))
    try:
        from secagg_app.server_app import Settings  # noqa: PLC0415
    finally:
        sys.path.remove(str(APP_DIR))
    nodes, rounds = 6, 3
    settings = Settings(rounds=rounds, min_nodes=nodes, seed=3, timeout=60.0, threshold=3)
    record, local_train = _simulate(settings, nodes, {4: "masked_input"})
    node_of = {p: node for node, p in record.partitions.items()}
    assert [r.iteration for r in record.results] == [1, 2, 3]  # one setup, three sums
    assert record.results[0].dropped == {node_of[4]: "masked_input"}
    assert [r.excluded for r in record.results] == [(), (node_of[4],), (node_of[4],)]
    kept = [p for p in range(nodes) if p != 4]
    for model, result in zip(record.models[:-1], record.results, strict=True):
        assert sorted(record.partitions[n] for n in result.survivors) == kept
        expected = _weighted_average(model, kept, local_train, settings.weight_cap)
        step = len(kept) / result.encoding.scale
        np.testing.assert_allclose(result.average, expected, atol=10 * step)
    assert record.losses[-1] < record.losses[0]


def test_flower_secaggplus_anchor_averages_the_same_task() -> None:
    sys.path.insert(0, str(APP_DIR))
    try:
        from secagg_app.server_app import FLOWER_SECAGG_PLUS, Settings  # noqa: PLC0415
    finally:
        sys.path.remove(str(APP_DIR))
    nodes = 4
    settings = Settings(rounds=2, min_nodes=nodes, timeout=60.0, aggregation=FLOWER_SECAGG_PLUS)
    record, local_train = _simulate(settings, nodes)
    assert len(record.models) == 3 and len(record.round_seconds) == 2
    for model, following in zip(record.models[:-1], record.models[1:], strict=True):
        replies = [local_train(model, p, 0) for p in range(nodes)]
        # Flower's SecAgg+ weighs by num_examples (all below its max_weight of 1000).
        weights = np.array([examples for _, examples in replies], dtype=float)
        flats = np.stack([np.concatenate([a.ravel() for a in m]) for m, _ in replies])
        expected = weights @ flats / weights.sum()
        got = np.concatenate([a.ravel() for a in following])
        # Its quantisation: 2^22 levels over [−8, 8], the weights folded in before it.
        np.testing.assert_allclose(got, expected, atol=1e-3)
    assert record.losses[-1] < record.losses[0]
