"""The Flower client Mod and Grid driver over a loopback Grid (fast; no Ray, no network).

Also the REFERENCES §1 defects of Flower's own SecAgg+ that our Mod does not have, one test each
(``test_defect_*``).
"""

from __future__ import annotations

import dataclasses
import time
from typing import Any

import numpy as np
import pytest

pytest.importorskip(
    "flwr", reason="the Flower integration needs flwr (pip install 'secagg-dp[flower]')"
)

from flwr.app import ArrayRecord, ConfigRecord, Context, Message, RecordDict

from secagg import (
    Client,
    HeadroomError,
    LocalProtocolError,
    Quantizer,
    Ring,
    TooFewSurvivorsError,
    secure_sum,
)
from secagg.integrations.flower import (
    RECORD_KEY,
    STATE_KEY,
    GridSession,
    SumEncoding,
    _client_random,
    content_digest,
    dropout_phases,
    exchange_messages,
    run_secure_sum,
)
from secagg.masks import expand_mask, self_mask_key
from secagg.messages import MaskedInput, UnmaskRequest, decode_message, encode_message

DIM = 5


def content(dimension: int = DIM) -> RecordDict:
    return RecordDict({"arrays": ArrayRecord([np.zeros(dimension)])})


def vectors_for(nodes: list[int], seed: int = 0, dimension: int = DIM) -> dict[int, Any]:
    rng = np.random.default_rng(seed)
    return {node: rng.uniform(-2, 2, size=dimension) for node in nodes}


def reference_ring_total(result: Any, vectors: dict[int, Any], weights: dict[int, float]) -> Any:
    """The same round through the in-memory runner: same quantised inputs, same dropouts."""
    quantizer = Quantizer(result.encoding.clip, result.encoding.scale)
    inputs = []
    ids = {node: i for i, node in enumerate(sorted(vectors), 1)}  # the fixture's identities
    for node, u in sorted(ids.items(), key=lambda item: item[1]):
        rng = _client_random(7, result.config, u).spawn(b"quantize")
        encoded = result.encoding.encode(vectors[node], weights.get(node, 1.0))
        inputs.append(quantizer.to_ring(encoded, result.config.ring, rng=rng))
    return secure_sum(
        inputs,
        modulus_bits=result.config.modulus_bits,
        threshold=result.config.threshold,
        neighbors=result.config.neighbors,
        dropouts=dropout_phases(result, ids),
        seed=0,
    )


def test_round_equals_in_memory_runner_with_dropouts(
    loopback_grid: Any, vector_client_app: Any
) -> None:
    nodes = [101, 202, 303, 404, 505, 606, 707]
    vectors = vectors_for(nodes)
    weights = {node: float(10 + i) for i, node in enumerate(nodes)}
    silent = {202: "advertise_keys", 404: "masked_input", 606: "unmask"}
    grid = loopback_grid(vector_client_app(vectors, weights), silent=silent)
    encoding = SumEncoding(clip=1.5, weight_key="num-examples", weight_cap=20.0)
    result = run_secure_sum(
        grid,
        content(),
        encoding=encoding,
        threshold=3,
        timeout=5.0,
        seed=1,
        trust_store=grid.trust_store,
    )

    assert result.dropped == silent
    assert result.survivors == (101, 303, 505, 606, 707)  # 606 dropped after masking: counted
    reference = reference_ring_total(result, vectors, weights)
    assert reference.survivors == tuple(result.client_ids[n] - 1 for n in result.survivors)
    np.testing.assert_array_equal(result.ring_total, reference.total)
    # Decoded: the weighted average of the survivors' clipped vectors, to quantisation error.
    beta = {n: min(weights[n], 20.0) / 20.0 for n in result.survivors}
    expected = sum(beta[n] * np.clip(vectors[n], -1.5, 1.5) for n in beta) / sum(beta.values())
    step = len(beta) / result.encoding.scale / sum(beta.values())
    np.testing.assert_allclose(result.average, expected, atol=4 * step)
    assert result.weight_total == pytest.approx(sum(beta.values()), abs=2 * step)


def test_unweighted_sum_and_secagg_plus(loopback_grid: Any, vector_client_app: Any) -> None:
    nodes = list(range(1, 11))
    vectors = vectors_for(nodes, seed=3)
    grid = loopback_grid(vector_client_app(vectors), silent={4: "share_keys"})
    encoding = SumEncoding(clip=2.0, scale=2.0**16, weight_key=None)
    result = run_secure_sum(
        grid, content(), encoding=encoding, neighbors=4, timeout=5.0, trust_store=grid.trust_store
    )
    assert result.config.neighbors == 4 and result.dropped == {4: "share_keys"}
    expected = sum(vectors[n] for n in nodes if n != 4)
    np.testing.assert_allclose(result.total, expected, atol=10 / 2.0**16)
    assert result.weight_total == 9.0
    # Only the masked input phase carries the model; our payload is bit-packed 32-bit words.
    assert result.upload_bytes["masked_input"] == 9 * (
        len(encode_message(MaskedInput(bytes(32), 1, 32, np.zeros(DIM, dtype=np.uint32))))
    )


def test_invalid_or_impersonating_reply_is_a_dropout_not_an_abort(
    loopback_grid: Any, vector_client_app: Any
) -> None:
    nodes = [1, 2, 3, 4, 5, 6]
    apps = vector_client_app(vectors_for(nodes))
    honest_app = apps[2]

    def garbage(message: Message, context: Context) -> Message:
        reply = honest_app(message, context)
        record = reply.content.config_records[RECORD_KEY]
        if record["stage"] == "share_keys":
            record["payload"] = b"\x01\x02garbage"
        return reply

    impostor = apps[3]

    def impersonate(message: Message, context: Context) -> Message:
        reply = impostor(message, context)
        record = reply.content.config_records[RECORD_KEY]
        if record["stage"] == "masked_input":
            masked = decode_message(bytes(record["payload"]))
            assert isinstance(masked, MaskedInput)
            forged = MaskedInput(masked.session_id, 1, masked.modulus_bits, masked.vector)
            record["payload"] = encode_message(forged)
        return reply

    apps[2], apps[3] = garbage, impersonate
    grid = loopback_grid(apps)
    encoding = SumEncoding(clip=2.0)
    result = run_secure_sum(
        grid, content(), encoding=encoding, threshold=2, timeout=5.0, trust_store=grid.trust_store
    )
    assert result.dropped == {2: "share_keys", 3: "masked_input"}
    assert len(result.faults) == 2 and "claiming to be from client 1" in result.faults[1]


def test_messages_without_our_record_pass_through(
    loopback_grid: Any, vector_client_app: Any
) -> None:
    app = vector_client_app({9: np.ones(DIM)})[9]
    context = Context(run_id=1, node_id=9, node_config={}, state=RecordDict(), run_config={})
    message = Message(content(), dst_node_id=9, message_type="train")
    message.metadata.__dict__["_message_id"] = "m1"
    reply = app(message, context)
    assert not reply.has_error() and RECORD_KEY not in reply.content
    np.testing.assert_array_equal(reply.content["arrays"].to_numpy_ndarrays()[0], np.ones(DIM))


def reply_fields(reply: Message) -> list[bytes]:
    """Every value a reply carries to the server, as bytes (config, metric and array records)."""
    fields: list[bytes] = []
    for config in reply.content.config_records.values():
        for value in config.values():
            for item in value if isinstance(value, list) else [value]:
                fields.append(item if isinstance(item, bytes) else str(item).encode())
    for metrics in reply.content.metric_records.values():
        fields.extend(str(value).encode() for value in metrics.values())
    for arrays in reply.content.array_records.values():
        fields.extend(array.data for array in arrays.values())
    return fields


def test_client_state_lives_in_the_context(loopback_grid: Any, vector_client_app: Any) -> None:
    apps = vector_client_app(vectors_for([1, 2, 3]))
    secrets: dict[str, set[bytes]] = {
        "snapshot": set(),
        "private key": set(),
        "self-mask seed": set(),
        "pair secret": set(),
        "identity key": {key.private_bytes() for key in apps.identities.values()},
    }

    def restore(node: int, snapshot: bytes) -> Client:
        return Client.restore(
            snapshot, identity=apps.identities[node], trust_store=apps.trust_store
        )

    def spy(app: Any) -> Any:
        """The node's app; after each message, read the secrets its Context now holds."""

        def call(message: Message, context: Context) -> Message:
            reply = app(message, context)
            snapshot = bytes(context.state.config_records[STATE_KEY]["client"])
            client = restore(context.node_id, snapshot)
            secrets["snapshot"].add(snapshot)
            for pair in (client._encryption_keys, client._mask_key):
                if pair is not None:
                    secrets["private key"].add(pair.private)
            secrets["pair secret"].update(client._pair_secrets.values())
            secrets["self-mask seed"].update(seed for seed in client._self_mask_seeds if any(seed))
            return reply

        return call

    grid = loopback_grid({node: spy(app) for node, app in apps.items()})
    run_secure_sum(
        grid, content(), encoding=SumEncoding(clip=2.0), timeout=5.0, trust_store=apps.trust_store
    )
    # Mid-round, each node's Context held its snapshot, its two private keys, its seed and
    # the pair secrets with its two neighbours (3 pairs, each held at both ends).
    assert len(secrets["private key"]) == 6 and len(secrets["self-mask seed"]) == 3
    assert len(secrets["pair secret"]) == 3
    assert len(secrets["snapshot"]) >= 15  # one per node and phase
    assert len(grid.replies) == 15 and not any(r.has_error() for r in grid.replies)
    sent = [field for reply in grid.replies for field in reply_fields(reply)]
    before_unmask = [
        field
        for reply in grid.replies
        if reply.content.config_records[RECORD_KEY]["stage"] != "unmask"
        for field in reply_fields(reply)
    ]
    for kind, values in secrets.items():
        # A survivor reveals its own self-mask seed at unmask (the server would rebuild it from
        # shares anyway); nothing else secret ever leaves a node.
        leaks = before_unmask if kind == "self-mask seed" else sent
        for secret in values:
            assert not any(secret in field for field in leaks), f"a {kind} left its node"
    for node, context in grid.contexts.items():
        client = restore(node, bytes(context.state.config_records[STATE_KEY]["client"]))
        assert client.state.name == "COMPLETED"
        assert not client._self_mask_seeds and client._mask_key is None  # secrets erased
        assert not client._pair_secrets


# -- the defects of Flower 1.42's SecAgg+ (REFERENCES §1) that ours does not have -----------------


def test_defect_seeds_are_256_bit_not_32_bit() -> None:
    """Flower seeds its masks with 32 bits, so distinct keys collide. Ours: 256-bit seeds, and
    two seeds that agree on their first 32 bits expand to unrelated masks."""
    ring = Ring(32)
    seed_a = bytes(4) + b"a" * 28
    seed_b = bytes(4) + b"b" * 28
    keys = [self_mask_key(s, session_id=bytes(32), owner=1) for s in (seed_a, seed_b)]
    mask_a, mask_b = (expand_mask(k, ring, 64) for k in keys)
    assert np.count_nonzero(mask_a == mask_b) < 4


def test_defect_masks_take_every_ring_value(loopback_grid: Any, vector_client_app: Any) -> None:
    """Flower draws masks with randint(0, M − 1): never M − 1. Ours are uniform on Z_M: with a
    4-bit ring, a zero input's masked vector hits all 16 values, M − 1 included, evenly."""
    dimension = 4000
    zeros = {node: np.zeros(dimension) for node in (1, 2, 3)}
    grid = loopback_grid(vector_client_app(zeros))
    encoding = SumEncoding(clip=1.0, scale=1.0, weight_key=None)
    result = run_secure_sum(
        grid,
        content(dimension),
        encoding=encoding,
        modulus_bits=4,
        timeout=5.0,
        trust_store=grid.trust_store,
    )
    masked = [
        decode_message(bytes(r.content.config_records[RECORD_KEY]["payload"]))
        for r in grid.replies
        if r.content.config_records[RECORD_KEY]["stage"] == "masked_input"
    ]
    assert len(masked) == 3 and not result.ring_total.any()
    for message in masked:
        assert isinstance(message, MaskedInput)
        counts = np.bincount(message.vector, minlength=16)
        assert counts[15] > 0
        # χ² with 15 degrees of freedom; 60 is far beyond its 1e-6 quantile (≈ 52.6).
        assert float(((counts - 250.0) ** 2 / 250.0).sum()) < 60


def test_defect_unmask_request_for_both_shares_is_refused(
    loopback_grid: Any, vector_client_app: Any
) -> None:
    """Flower's client does not check that survivors and dropped are disjoint, so a malicious
    server can ask for both shares of one client and unmask its input. Ours refuses."""

    def both_shares(message: Message) -> Message:
        record = message.content.config_records[RECORD_KEY]
        if record["stage"] == "unmask":
            request = decode_message(bytes(record["payload"]))
            assert isinstance(request, UnmaskRequest)
            victim = request.survivors[:1]
            forged = UnmaskRequest(
                request.session_id, request.recipient, request.survivors, request.dropped + victim
            )
            record["payload"] = encode_message(forged)
        return message

    grid = loopback_grid(vector_client_app(vectors_for([1, 2, 3, 4])), tamper=both_shares)
    with pytest.raises(TooFewSurvivorsError):
        run_secure_sum(
            grid,
            content(),
            encoding=SumEncoding(clip=2.0),
            timeout=5.0,
            trust_store=grid.trust_store,
        )
    unmask = [r for r in grid.replies if r.has_error()]
    assert len(unmask) == 4
    assert all("both shares" in str(r.error.reason) for r in unmask)


def test_defect_dropouts_in_setup_and_share_keys_do_not_halt_the_round(
    loopback_grid: Any, vector_client_app: Any
) -> None:
    """In Flower, a client dropping during setup or share_keys halts the whole round."""
    nodes = list(range(1, 9))
    vectors = vectors_for(nodes, seed=5)
    silent = {1: "advertise_keys", 2: "share_keys"}
    grid = loopback_grid(vector_client_app(vectors), silent=silent)
    encoding = SumEncoding(clip=2.0, weight_key=None)
    result = run_secure_sum(
        grid, content(), encoding=encoding, timeout=5.0, trust_store=grid.trust_store
    )
    assert result.dropped == silent and result.survivors == tuple(range(3, 9))
    np.testing.assert_allclose(result.total, sum(vectors[n] for n in range(3, 9)), atol=1e-6)


def test_defect_headroom_is_checked_before_any_message(loopback_grid: Any) -> None:
    """Flower never checks n·Q < M, so its sum wraps silently. Ours refuses before sending."""
    grid = loopback_grid({node: None for node in range(1, 1001)})
    encoding = SumEncoding(clip=1.0, scale=2.0**22, weight_key=None)
    with pytest.raises(HeadroomError, match="use at least 33 bits"):
        run_secure_sum(grid, content(), encoding=encoding, trust_store=grid.trust_store)
    assert grid.sent == []


def test_bad_stage_is_an_error_reply(loopback_grid: Any, vector_client_app: Any) -> None:
    app = vector_client_app({9: np.ones(DIM)})[9]
    context = Context(run_id=1, node_id=9, node_config={}, state=RecordDict(), run_config={})
    body = RecordDict({RECORD_KEY: ConfigRecord({"stage": "masked_input", "payload": b"x"})})
    message = Message(body, dst_node_id=9, message_type="train")
    message.metadata.__dict__["_message_id"] = "m1"
    reply = app(message, context)
    assert reply.has_error() and "before advertise_keys" in str(reply.error.reason)


class _PerSum:
    """A client's train reply that changes with each sum (what a Weiszfeld step does)."""

    def __init__(self, *vectors: Any) -> None:
        self.vectors, self.calls = [np.asarray(v, dtype=np.float64) for v in vectors], 0

    def __array__(self, dtype: Any = None, copy: Any = None) -> Any:
        vector = self.vectors[min(self.calls, len(self.vectors) - 1)]
        self.calls += 1
        return np.asarray(vector, dtype=dtype)


def _session(grid: Any, sums: int, threat_model: str, **options: Any) -> GridSession:
    """A session over the loopback grid's nodes: t = 3, 5 s phases, seed 4."""
    return GridSession(
        grid,
        sums=sums,
        dimension=DIM,
        threshold=3,
        timeout=5.0,
        seed=4,
        threat_model=threat_model,
        trust_store=grid.trust_store,
        **options,
    )


@pytest.mark.parametrize("threat_model", ["malicious", "semi-honest"])
def test_a_grid_session_sums_again_without_a_new_setup(
    loopback_grid: Any, vector_client_app: Any, threat_model: str
) -> None:
    nodes = [11, 22, 33, 44, 55, 66]
    first, second = vectors_for(nodes, seed=1), vectors_for(nodes, seed=2)
    apps = vector_client_app({n: _PerSum(first[n], second[n]) for n in nodes})
    grid = loopback_grid(apps, silent={44: "unmask"})  # gone after its first masked input
    session = _session(grid, 3, threat_model)
    encoding = SumEncoding(clip=2.0, scale=2.0**16, weight_key=None)
    one = session.sum(content(), encoding=encoding)
    setup_messages = len(grid.sent)
    two = session.sum(content(), encoding=encoding, group_id="1.1")
    step = 10 / 2.0**16
    np.testing.assert_allclose(one.total, sum(first[n] for n in nodes), atol=step)
    # 44 dropped after masking in sum 1 (recovered there), and is out of sum 2.
    assert 44 in one.survivors and 44 not in session.members and two.iteration == 2
    assert two.survivors == (11, 22, 33, 55, 66)
    assert one.excluded == () and two.excluded == (44,) and 44 not in two.dropped
    np.testing.assert_allclose(two.total, sum(second[n] for n in two.survivors), atol=step)
    # The further sum ran no key phase: masked input, (consistency check,) unmask only.
    later = {str(m.content.config_records[RECORD_KEY]["stage"]) for m in grid.sent[setup_messages:]}
    phases = {"masked_input", "unmask"} | (
        {"consistency_check"} if threat_model == "malicious" else set()
    )
    assert later == phases
    assert two.upload_bytes["advertise_keys"] == two.upload_bytes["share_keys"] == 0
    assert session.remaining == 1


def test_a_grid_session_refuses_a_sum_beyond_its_plan(
    loopback_grid: Any, vector_client_app: Any
) -> None:
    nodes = [1, 2, 3, 4]
    grid = loopback_grid(vector_client_app(vectors_for(nodes)))
    session = GridSession(
        grid, sums=1, dimension=DIM, threshold=2, timeout=5.0, trust_store=grid.trust_store
    )
    encoding = SumEncoding(clip=2.0, weight_key=None)
    session.sum(content(), encoding=encoding)
    with pytest.raises(LocalProtocolError):
        session.sum(content(), encoding=encoding)


def _second_masked_input_to(node: int, forge_iterate: bool) -> Any:
    """A malicious server: in the session's second sum it shows ``node`` another model (the
    model-inconsistency attack), optionally with an iterate forged to match what it shows."""
    seen = {"masked_input": 0}

    def tamper(message: Message) -> Message:
        record = message.content.config_records[RECORD_KEY]
        if record["stage"] != "masked_input" or message.metadata.dst_node_id != node:
            return message
        seen["masked_input"] += 1
        if seen["masked_input"] < 2:
            return message
        message.content["arrays"] = ArrayRecord([np.full(DIM, 1e3)])  # a crafted model
        if forge_iterate:
            request = decode_message(bytes(record["payload"]))
            forged = dataclasses.replace(request, iterate=content_digest(message.content))
            record["payload"] = encode_message(forged)
        return message

    return tamper


@pytest.mark.parametrize("forge_iterate", [False, True])
def test_a_model_shown_to_one_node_alone_isolates_nothing(
    loopback_grid: Any, vector_client_app: Any, forge_iterate: bool
) -> None:
    nodes = [1, 2, 3, 4, 5, 6]
    first, second = vectors_for(nodes, seed=5), vectors_for(nodes, seed=6)
    apps = vector_client_app({n: _PerSum(first[n], second[n]) for n in nodes})
    victim = 3
    grid = loopback_grid(apps, tamper=_second_masked_input_to(victim, forge_iterate))
    session = GridSession(
        grid, sums=2, dimension=DIM, threshold=3, timeout=5.0, seed=2, trust_store=grid.trust_store
    )
    encoding = SumEncoding(clip=2.0, scale=2.0**16, weight_key=None)
    session.sum(content(), encoding=encoding)
    others = [n for n in nodes if n != victim]
    if not forge_iterate:
        # The victim sees content other than the sum is bound to: it refuses to mask.
        two = session.sum(content(), encoding=encoding)
        assert two.dropped.get(victim) == "masked_input" and victim not in two.survivors
        np.testing.assert_allclose(two.total, sum(second[n] for n in others), atol=10 / 2.0**16)
        return
    # With a matching forged iterate the victim masks for another sum: its pairwise masks are
    # keyed to that iterate and cancel with no honest neighbour's, so whatever is unmasked is
    # uniformly random around the inputs (here ≈ 2^15 per coordinate). The victim's approval
    # tags — over its iterate — count with no one, nor do the others' with it, so it refuses
    # to unmask. (A session's approvals are MACs the server cannot check, so it blames no one.)
    two = session.sum(content(), encoding=encoding)
    honest = sum(second[n] for n in nodes)
    assert np.abs(two.total - honest).max() > 100.0  # all five within 100: P ≈ 1e-13
    assert two.dropped == {victim: "unmask"} and victim in two.survivors


@pytest.mark.parametrize("threat_model", ["malicious", "semi-honest"])
def test_polling_for_replies_gives_the_same_sums(
    loopback_grid: Any, vector_client_app: Any, threat_model: str
) -> None:
    nodes = [11, 22, 33, 44, 55]
    first, second = vectors_for(nodes, seed=5), vectors_for(nodes, seed=6)
    encoding = SumEncoding(clip=2.0, scale=2.0**16, weight_key=None)
    totals = {}
    for poll in (None, 0.001):
        grid = loopback_grid(
            vector_client_app({n: _PerSum(first[n], second[n]) for n in nodes}),
            silent={33: "masked_input"},
        )
        grid.pull_delay = 2  # every reply is there on the third ask
        session = _session(grid, 2, threat_model, poll_interval=poll)
        totals[poll] = [session.sum(content(), encoding=encoding, group_id=g) for g in "12"]
        # Polling asks for replies; the grid's send_and_receive never does.
        assert (grid.pulls > 0) == (poll is not None)
    for by_poll, by_wait in zip(totals[0.001], totals[None], strict=True):
        assert by_poll.survivors == by_wait.survivors == (11, 22, 44, 55)
        assert by_poll.dropped == by_wait.dropped
        np.testing.assert_array_equal(by_poll.ring_total, by_wait.ring_total)


def test_exchange_messages_waits_at_most_its_timeout(loopback_grid: Any) -> None:
    grid = loopback_grid({})
    grid.pull_delay = 10**9  # never answers
    grid.apps = {5: lambda message, context: Message(RecordDict(), reply_to=message)}
    grid.contexts = {5: None}
    start = time.monotonic()
    messages = [Message(RecordDict(), dst_node_id=5, message_type="query")]
    assert exchange_messages(grid, messages, 0.2, 0.05) == []
    assert 0.2 <= time.monotonic() - start < 2.0 and grid.pulls >= 3
    with pytest.raises(ValueError, match="poll_interval"):
        exchange_messages(grid, messages, 0.2, 0.0)
    with pytest.raises(ValueError, match="poll_interval"):
        GridSession(grid, sums=1, dimension=1, node_ids=[1, 2, 3], poll_interval=-1.0)
