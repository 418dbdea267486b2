"""The secure sum inside Flower (``flwr`` 1.42, Message API): a client Mod and a Grid driver.

Client side, :func:`secagg_mod` (or :func:`make_secagg_mod`) wraps a ``ClientApp``'s train
function. It runs a :class:`~secagg.Client` state machine, keeps the client's state between
messages in the node's ``Context`` (``context.state``, never sent), and carries our wire bytes
in one Flower ``ConfigRecord``. The user's train function runs once per round, in the
masked-input phase; its reply's arrays (the model or the update) are clipped, optionally
weighted, quantised and masked, and only the masked vector leaves the node.

Server side, :func:`run_secure_sum` drives a :class:`~secagg.Server` over Flower's ``Grid``:
one ``send_and_receive`` per phase with a timeout. A node that does not answer in time, answers
with an error, or answers with something invalid is a dropout of that phase; the round goes on
while enough clients survive, and the unmasked sum comes back decoded to floats.

Threat model: malicious by default (signed keys and the consistency round). Each node then needs
its long-term identity key and the trust store of all clients' verification keys, delivered out
of band — never through the server: by default the Mod reads the files named by the node config
keys :data:`IDENTITY_CONFIG_KEY` and :data:`TRUST_STORE_CONFIG_KEY` (write them with
``secagg-dp keys``), or takes them from ``make_secagg_mod(identity=..., trust_store=...)``. A
node finds its client id in the trust store by its own key; the server learns the node's id
from its signed advertisement, and binds every later message of that node to it.

Every Flower import is lazy: this module imports without ``flwr``.

Record layout (one ``ConfigRecord`` named :data:`RECORD_KEY` in the message content):

* server → client: ``stage`` (a name of :class:`secagg.Phase`); ``payload`` (our wire bytes,
  later phases); in phase 0 also ``config`` (``SecAggConfig.to_bytes``), ``client-id`` (0 in the
  malicious mode: the node names itself) and the encoding (``clip``, ``scale``, ``weight-key``,
  ``weight-cap``).
* client → server: ``stage`` and ``payload`` (the client's message bytes).
"""

from __future__ import annotations

import hashlib
import logging
import math
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar

import numpy as np
from numpy.typing import NDArray

from secagg.client import Client
from secagg.config import PHASES, Phase, SecAggConfig
from secagg.driver import Delivery, PeerFault, RoundDriver
from secagg.errors import (
    LocalProtocolError,
    ProtocolError,
    RemoteProtocolError,
    TooFewSurvivorsError,
)
from secagg.identity import IdentityKey, TrustStore, load_identity
from secagg.messages import decode_message, encode_message
from secagg.randomness import KeystreamRandom
from secagg.ring import Quantizer, RingArray, check_headroom
from secagg.runner import default_threshold
from secagg.server import Server, ServerState

if TYPE_CHECKING:
    from flwr.app import Context, Message, RecordDict
    from flwr.serverapp import Grid

__all__ = [
    "ERROR_CODE",
    "IDENTITY_CONFIG_KEY",
    "RECORD_KEY",
    "STATE_KEY",
    "TRUST_STORE_CONFIG_KEY",
    "GridSession",
    "GridSumResult",
    "IdentitySource",
    "SumEncoding",
    "TrustStoreSource",
    "VectorEncoder",
    "content_digest",
    "dropout_phases",
    "exchange_messages",
    "make_secagg_mod",
    "run_secure_sum",
    "secagg_mod",
]

logger = logging.getLogger(__name__)

RECORD_KEY = "secagg-dp"
"""Name of the ConfigRecord that carries our protocol in a Flower message."""
STATE_KEY = "secagg-dp.client"
"""Name of the ConfigRecord in ``context.state`` that holds the client's state between calls."""
ERROR_CODE = 4242
"""Flower ``Error.code`` of a client that refused or failed a phase."""
IDENTITY_CONFIG_KEY = "secagg-dp-identity"
"""Node config key: path of the node's identity key file (``secagg-dp keys`` writes them)."""
TRUST_STORE_CONFIG_KEY = "secagg-dp-trust-store"
"""Node config key: path of the trust store (JSON) of every client's verification key."""

IdentitySource = IdentityKey | Callable[["Context"], IdentityKey]
TrustStoreSource = TrustStore | Callable[["Context"], TrustStore]

ClientAppCallable = Callable[["Message", "Context"], "Message"]
_T = TypeVar("_T", bytes, int, float)
VectorEncoder = Callable[["Message", "Context", ClientAppCallable], NDArray[np.float64]]
"""A client half: (message, context, call_next) → the float vector this client sums."""


# -- the encoding of a train reply into a summable vector ----------------------------------------


@dataclass(frozen=True, slots=True)
class SumEncoding:
    """How a client turns its train reply into the integer vector it sums.

    The reply's arrays are flattened (in record order) to x and clipped to [-clip, clip] per
    coordinate. Unweighted, the client sums q(x); weighted, it sums q([β·x, β·clip]) with
    β = min(w, weight_cap)/weight_cap ∈ [0, 1] and w the metric ``weight_key`` of its reply, so
    the server gets Σβx and Σβ from one secure sum. q is :class:`~secagg.Quantizer` (stochastic
    rounding, step 1/scale).

    Parameters
    ----------
    clip
        Per-coordinate clipping bound of the reply's values.
    scale
        Quantisation grid points per unit; ``None``: the finest scale whose sum over the round's
        clients cannot wrap (:meth:`Quantizer.for_ring`).
    weight_key
        Metric of the train reply that weighs the client (Flower's ``"num-examples"``);
        ``None`` for an unweighted sum.
    weight_cap
        Public cap on the weight; weights above it count as the cap.

    Examples
    --------
    >>> enc = SumEncoding(clip=2.0, scale=100.0, weight_key="num-examples", weight_cap=50.0)
    >>> enc.encode(np.array([1.0, -3.0]), weight=25.0).tolist()
    [0.5, -1.0, 1.0]
    >>> SumEncoding(clip=1.0, weight_key=None).encode(np.array([0.25, 4.0])).tolist()
    [0.25, 1.0]
    """

    clip: float
    scale: float | None = None
    weight_key: str | None = "num-examples"
    weight_cap: float = 1.0

    def __post_init__(self) -> None:
        for name in ("clip", "weight_cap"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int | float):
                raise TypeError(f"{name} must be a float; got {type(value).__name__}")
            if not math.isfinite(value) or value <= 0:
                raise ValueError(f"{name} must be positive and finite; got {value}")
        if self.scale is not None:
            Quantizer(self.clip, self.scale)  # validates the scale against the clip
        if self.weight_key is not None and not isinstance(self.weight_key, str):
            raise TypeError("weight_key must be a str or None")

    @property
    def weighted(self) -> bool:
        """Whether the vector carries a weight coordinate."""
        return self.weight_key is not None

    def dimension(self, model_size: int) -> int:
        """The summed dimension for a model of ``model_size`` values."""
        return model_size + (1 if self.weighted else 0)

    def encode(
        self, values: NDArray[np.float64], weight: float | None = None
    ) -> NDArray[np.float64]:
        """The float vector a client quantises: clip(x), or [β·clip(x), β·clip] if weighted."""
        x = np.clip(np.asarray(values, dtype=np.float64), -self.clip, self.clip)
        if not self.weighted:
            return x
        if weight is None or not math.isfinite(weight) or weight < 0:
            raise ValueError(f"a weighted sum needs a finite weight ≥ 0; got {weight!r}")
        beta = min(float(weight), self.weight_cap) / self.weight_cap
        out = np.empty(x.size + 1)
        np.multiply(x, beta, out=out[:-1])
        out[-1] = beta * self.clip
        return out

    def to_record(self) -> dict[str, float | str]:
        """The fields sent to the clients in phase 0 (``scale`` must be set)."""
        if self.scale is None:
            raise ValueError("resolve the scale before sending the encoding")
        return {
            "clip": float(self.clip),
            "scale": float(self.scale),
            "weight-key": self.weight_key or "",
            "weight-cap": float(self.weight_cap),
        }

    @classmethod
    def from_record(cls, record: Mapping[str, Any]) -> SumEncoding:
        """Inverse of :meth:`to_record`.

        Examples
        --------
        >>> enc = SumEncoding(clip=1.0, scale=8.0, weight_key=None)
        >>> SumEncoding.from_record(enc.to_record()) == enc
        True
        """
        key = str(record["weight-key"])
        return cls(
            clip=float(record["clip"]),
            scale=float(record["scale"]),
            weight_key=key or None,
            weight_cap=float(record["weight-cap"]),
        )

    def resolved(self, num_clients: int, modulus_bits: int) -> SumEncoding:
        """This encoding with its scale fixed, after checking the sum cannot wrap.

        Raises
        ------
        secagg.HeadroomError
            If ``num_clients`` quantised vectors can wrap modulo 2^modulus_bits.

        Examples
        --------
        >>> SumEncoding(clip=1.0).resolved(100, 32).scale
        21474836.0
        >>> SumEncoding(clip=1.0, scale=2.0**20).resolved(5000, 32)
        Traceback (most recent call last):
        ...
        secagg.ring.HeadroomError: 5000 clients × |q| ≤ 1048576 (+ noise bound 0) can reach \
5242880000, which wraps modulo 2^32 (centred range ±2147483647); use at least 34 bits
        """
        if self.scale is None:
            scale = Quantizer.for_ring(
                clip=self.clip, bits=modulus_bits, num_clients=num_clients
            ).scale
            return SumEncoding(self.clip, scale, self.weight_key, self.weight_cap)
        check_headroom(num_clients, Quantizer(self.clip, self.scale).max_abs, modulus_bits)
        return self


# -- what a sum binds ----------------------------------------------------------------------------


def content_digest(content: RecordDict) -> bytes:
    """SHA-256 of a message's content without our record: the iterate a sum is bound to.

    The server sends every node the same content with its masked-input request (the model,
    the Weiszfeld centre, the plan) and binds the digest into the sum as its iterate; each
    node recomputes it from what it received and refuses a request whose iterate differs. A
    server that shows two nodes different content must then give them different iterates, and
    their masks no longer cancel (and, in the malicious mode, no iterate gathers the quorum of
    signatures): the model-inconsistency attack (Pasquini et al., CCS 2022) reveals nothing.

    Records are read in name order, arrays by key with dtype, shape and bytes, config and
    metric values by ``repr`` (exact for ints, floats, strings, bytes and their lists).

    Examples
    --------
    >>> from flwr.app import ConfigRecord, RecordDict  # doctest: +SKIP
    >>> len(content_digest(RecordDict({"c": ConfigRecord({"a": 1})})))  # doctest: +SKIP
    32
    """
    from flwr.app import Array  # noqa: PLC0415

    digest = hashlib.sha256(b"secagg-dp/flower/content/v1")
    for name in sorted(content.keys()):
        if name == RECORD_KEY:
            continue
        record = content[name]
        digest.update(b"\x00record\x00" + name.encode() + b"\x00" + type(record).__name__.encode())
        for key in sorted(record.keys()):
            value = record[key]
            digest.update(b"\x00key\x00" + str(key).encode())
            if isinstance(value, Array):
                digest.update(f"{value.dtype}|{tuple(value.shape)}|{value.stype}|".encode())
                digest.update(len(value.data).to_bytes(8, "big") + value.data)
            else:
                digest.update(repr(value).encode())
    return digest.digest()


# -- client side ---------------------------------------------------------------------------------


def _field(record: Mapping[str, object], key: str, kind: type[_T]) -> _T:
    """A record field of the expected type (ints count as floats), else a peer's fault."""
    value = record.get(key)
    if kind is float and isinstance(value, int | float) and not isinstance(value, bool):
        return kind(value)
    if not isinstance(value, kind) or isinstance(value, bool):
        raise RemoteProtocolError(f"record field {key!r} is not {kind.__name__}", peer_id=None)
    return value


def _reply_vector(content: RecordDict, encoding: SumEncoding) -> NDArray[np.float64]:
    """Flatten the train reply's arrays and weight into the vector to quantise."""
    records = dict(content.array_records)
    if not records:
        raise ValueError("the train reply has no ArrayRecord to aggregate")
    record = records["arrays"] if len(records) > 1 and "arrays" in records else None
    if record is None:
        if len(records) > 1:
            raise ValueError(f"the train reply has several ArrayRecords {sorted(records)}")
        record = next(iter(records.values()))
    arrays = record.to_numpy_ndarrays()
    flat = np.concatenate([np.asarray(a, dtype=np.float64).ravel() for a in arrays])
    weight: float | None = None
    if encoding.weight_key is not None:
        for metrics in content.metric_records.values():
            if encoding.weight_key in metrics:
                weight = _field(metrics, encoding.weight_key, float)
                break
        else:
            raise ValueError(f"the train reply has no metric {encoding.weight_key!r}")
    return encoding.encode(flat, weight)


def _client_random(seed: int | None, config: SecAggConfig, client_id: int) -> KeystreamRandom:
    if seed is None:
        return KeystreamRandom()
    return KeystreamRandom(seed, label=b"secagg-dp/flower/client/" + config.digest).spawn(
        b"%d" % client_id
    )


def _node_file(context: Context, key: str) -> str:
    value = context.node_config.get(key)
    if not isinstance(value, str) or not value:
        raise ValueError(
            f"the malicious mode needs the node config key {key!r} (a file path; "
            "`secagg-dp keys` writes the files) or make_secagg_mod(identity=..., trust_store=...)"
        )
    return value


_LOADED: dict[tuple[str, str], IdentityKey | TrustStore] = {}


def _identity_of(context: Context, source: IdentitySource | None) -> IdentityKey:
    if isinstance(source, IdentityKey):
        return source
    if source is not None:
        return source(context)
    path = _node_file(context, IDENTITY_CONFIG_KEY)
    cached = _LOADED.get(("identity", path))
    if not isinstance(cached, IdentityKey):
        cached = _LOADED[("identity", path)] = load_identity(path)
    return cached


def _trust_store_of(context: Context, source: TrustStoreSource | None) -> TrustStore:
    if isinstance(source, TrustStore):
        return source
    if source is not None:
        return source(context)
    path = _node_file(context, TRUST_STORE_CONFIG_KEY)
    cached = _LOADED.get(("trust", path))
    if not isinstance(cached, TrustStore):
        cached = _LOADED[("trust", path)] = TrustStore.from_file(path)
    return cached


def make_secagg_mod(
    *,
    seed: int | None = None,
    keep_metrics: bool = False,
    encoders: Mapping[str, VectorEncoder] | None = None,
    identity: IdentitySource | None = None,
    trust_store: TrustStoreSource | None = None,
) -> Callable[[Message, Context, ClientAppCallable], Message]:
    """A Flower Mod that runs our secure-sum client around a ClientApp's train function.

    Messages without our record pass straight to the next handler, so the mod can wrap a
    whole ``ClientApp``. With it, one round is four messages; only the masked-input one calls
    the train function, and only the masked vector of its reply leaves the node.

    Parameters
    ----------
    seed
        Reproducible client randomness (keys, self-mask seeds, stochastic rounding) for tests
        and simulations; ``None`` (production) draws from the operating system.
    keep_metrics
        Forward the train reply's MetricRecords and ConfigRecords in plaintext with the masked
        vector. Off by default: the weight and any metric would leave the node unmasked.
    encoders
        Named client halves of other aggregations: when the server's masked-input record names
        ``encoder``, ``encoders[name](message, context, call_next)`` computes the float vector
        to sum instead of the train reply (the aggregations of :mod:`protocols.integrations`
        register theirs). The vector is clipped to the round's ``clip`` and quantised.
    identity, trust_store
        For malicious-mode rounds: the node's identity key and the trust store, or callables
        ``(context) -> ...``; default: the files the node config names under
        :data:`IDENTITY_CONFIG_KEY` and :data:`TRUST_STORE_CONFIG_KEY`.

    Returns
    -------
    callable
        ``(Message, Context, call_next) -> Message``, Flower's ``Mod`` type.

    Examples
    --------
    >>> mod = make_secagg_mod(seed=3)
    >>> callable(mod)
    True
    """

    known = dict(encoders or {})

    def mod(message: Message, context: Context, call_next: ClientAppCallable) -> Message:
        from flwr.app import ConfigRecord, ConfigRecordValues, Error, RecordDict  # noqa: PLC0415
        from flwr.app import Message as FlowerMessage  # noqa: PLC0415

        record = message.content.config_records.get(RECORD_KEY) if message.has_content() else None
        if record is None:
            return call_next(message, context)
        stage = str(record.get("stage", ""))
        client: Client | None = None
        try:
            if stage not in PHASES:
                raise RemoteProtocolError(f"unknown stage {stage!r}", peer_id=0)
            if stage == PHASES[0]:
                config = SecAggConfig.from_bytes(_field(record, "config", bytes))
                client_id = _field(record, "client-id", int)
                encoding = SumEncoding.from_record(record)
                key = store = None
                if config.malicious:
                    key = _identity_of(context, identity)
                    store = _trust_store_of(context, trust_store)
                    own = store.id_of(key.public)
                    if own is None:
                        raise ValueError("the trust store does not list this node's identity")
                    if client_id not in (0, own):
                        raise RemoteProtocolError(
                            f"the server calls this node client {client_id}; its identity is "
                            f"client {own}",
                            peer_id=0,
                        )
                    client_id = own
                client = Client(
                    config,
                    client_id,
                    random_source=_client_random(seed, config, client_id),
                    identity=key,
                    trust_store=store,
                )
                replies = [encode_message(m) for m in client.start()]
                saved: dict[str, ConfigRecordValues] = dict(encoding.to_record())
            else:
                state = context.state.config_records.get(STATE_KEY)
                if state is None:
                    raise RemoteProtocolError(f"stage {stage} before advertise_keys", peer_id=0)
                saved = {k: v for k, v in state.items() if k != "client"}
                snapshot = _field(state, "client", bytes)
                config = Client.snapshot_config(snapshot)
                key = store = None
                if config.malicious:
                    key = _identity_of(context, identity)
                    store = _trust_store_of(context, trust_store)
                client = Client.restore(
                    snapshot,
                    random_factory=lambda cfg, u: _client_random(seed, cfg, u).spawn(
                        stage.encode()
                    ),
                    identity=key,
                    trust_store=store,
                )
                payload = _field(record, "payload", bytes)
                extra = RecordDict()
                if stage == Phase.MASKED_INPUT.value:
                    request = decode_message(payload, peer_id=None)
                    if getattr(request, "iterate", None) != content_digest(message.content):
                        raise RemoteProtocolError(
                            "the sum is bound to other content than this node received "
                            "(a different model or plan than the other nodes'?)",
                            peer_id=0,
                        )
                    # A further sum of a session may bring its own encoding.
                    encoding = SumEncoding.from_record(record if "clip" in record else saved)
                    name = str(record.get("encoder", ""))
                    if name and name not in known:
                        raise RemoteProtocolError(f"no encoder {name!r} on this node", peer_id=0)
                    extra = _train_and_set_input(
                        message,
                        context,
                        call_next,
                        client=client,
                        encoding=encoding,
                        encoder=known.get(name),
                        seed=seed,
                        keep_metrics=keep_metrics,
                    )
                replies = client.receive_bytes(payload)
            if len(replies) != 1:
                raise RemoteProtocolError(
                    f"stage {stage} produced {len(replies)} replies", peer_id=0
                )
        except (ProtocolError, ValueError, KeyError, TypeError) as exc:
            logger.warning("secagg client refused stage %s: %s", stage, exc)
            if client is not None:
                context.state.config_records[STATE_KEY] = ConfigRecord(
                    {"client": client.snapshot(), "aborted": True}
                )
            return FlowerMessage(Error(ERROR_CODE, f"secagg-dp {stage}: {exc}"), reply_to=message)
        saved["client"] = client.snapshot()
        context.state.config_records[STATE_KEY] = ConfigRecord(saved)
        content = RecordDict() if stage != Phase.MASKED_INPUT.value else extra
        content[RECORD_KEY] = ConfigRecord({"stage": stage, "payload": replies[0]})
        return FlowerMessage(content, reply_to=message)

    return mod


def _train_and_set_input(
    message: Message,
    context: Context,
    call_next: ClientAppCallable,
    *,
    client: Client,
    encoding: SumEncoding,
    encoder: VectorEncoder | None,
    seed: int | None,
    keep_metrics: bool,
) -> RecordDict:
    """Compute the vector to sum (the train reply, or a named encoder); set the client's input.

    The next handler and the encoder see the message without our record.
    """
    from flwr.app import RecordDict  # noqa: PLC0415

    kept = RecordDict()
    record = message.content.config_records[RECORD_KEY]
    del message.content[RECORD_KEY]
    try:
        if encoder is not None:
            vector = np.asarray(encoder(message, context, call_next), dtype=np.float64)
        else:
            reply = call_next(message, context)
            if reply.has_error():
                raise ValueError(f"the train function failed: {reply.error.reason}")
            vector = _reply_vector(reply.content, encoding)
            if keep_metrics:
                for name, metrics in reply.content.metric_records.items():
                    kept[name] = metrics
                for name, config in reply.content.config_records.items():
                    kept[name] = config
    finally:
        message.content[RECORD_KEY] = record
    if vector.ndim != 1 or vector.size != client.config.dimension:
        raise ValueError(
            f"the client's vector has shape {vector.shape}; the round sums "
            f"{client.config.dimension} values"
        )
    assert encoding.scale is not None
    rng = None
    if seed is not None:
        # The first sum's label is the one-sum label; each further sum of a session has its own.
        label = b"quantize" if client.iteration == 0 else b"quantize/%d" % (client.iteration + 1)
        rng = _client_random(seed, client.config, client.client_id).spawn(label)
    quantizer = Quantizer(encoding.clip, encoding.scale)
    client.set_input(quantizer.to_ring(vector, client.config.ring, rng=rng))
    return kept


secagg_mod = make_secagg_mod()
"""The Mod with production randomness: ``ClientApp(mods=[secagg_mod])``."""


# -- server side ---------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class GridSumResult:
    """The outcome of :func:`run_secure_sum`.

    Attributes
    ----------
    total
        Σ over ``survivors`` of the decoded vectors: Σβx (weighted) or Σx, without the weight.
    weight_total
        Σβ over the survivors (weighted encodings), else their number.
    survivors
        Node ids whose inputs are in the total, ascending.
    dropped
        Node id → the phase it dropped at (did not answer, answered an error or invalid bytes).
        A node dropping at ``unmask`` had already sent its masked input: it is also a survivor.
    ring_total
        The raw sum modulo M (weight coordinate included), as :func:`secagg.secure_sum` gives it.
    encoding, config
        The resolved encoding and the round's public parameters.
    client_ids
        Node id → the client id (Shamir point) it had in this round.
    seconds, upload_bytes, download_bytes
        Per phase: wall time of the phase (send, wait, server work), our payload bytes.
    faults
        Descriptions of invalid replies, blaming their nodes.
    iteration
        Which sum of its :class:`GridSession` this is (1 for :func:`run_secure_sum`).
    excluded
        Node ids of the session that were not asked for this sum: they dropped in an earlier
        sum of the :class:`GridSession` and stay out (never in ``dropped`` again), ascending.
    """

    total: NDArray[np.float64]
    weight_total: float
    survivors: tuple[int, ...]
    dropped: dict[int, str]
    ring_total: RingArray
    encoding: SumEncoding
    config: SecAggConfig
    client_ids: dict[int, int]
    seconds: dict[str, float] = field(default_factory=dict)
    upload_bytes: dict[str, int] = field(default_factory=dict)
    download_bytes: dict[str, int] = field(default_factory=dict)
    faults: tuple[str, ...] = ()
    iteration: int = 1
    excluded: tuple[int, ...] = ()

    @property
    def average(self) -> NDArray[np.float64]:
        """total / weight_total: the (weighted) average of the survivors' clipped arrays.

        Raises
        ------
        ZeroDivisionError
            If the survivors' weights sum to zero.
        """
        if self.weight_total == 0:
            raise ZeroDivisionError("the survivors' weights sum to zero")
        return self.total / self.weight_total


def _model_size(content: RecordDict) -> int:
    records = list(content.array_records.values())
    if len(records) != 1:
        raise ValueError(
            f"cannot infer the dimension from {len(records)} ArrayRecords; pass dimension="
        )
    return sum(int(np.prod(a.shape)) for a in records[0].values())


def exchange_messages(
    grid: Grid, messages: Sequence[Message], timeout: float | None, poll_interval: float | None
) -> list[Message]:
    """Send ``messages`` and collect their replies until all arrived or ``timeout`` passed.

    ``poll_interval=None`` is the grid's own ``send_and_receive``; a number pushes the messages
    with ``grid.push_messages`` and asks for replies with ``grid.pull_messages`` every
    ``poll_interval`` seconds. On Flower 1.42's deployment engine ``send_and_receive`` asks
    every 3 s, so a phase whose replies are all in after 3.1 s ends at 6 s; polling at 0.1 s
    ends it at ≈ 3.2 s.

    Examples
    --------
    >>> exchange_messages(None, [], 1.0, 0.1)  # nothing to send: no call on the grid
    []
    """
    if not messages:
        return []
    if poll_interval is None:
        return list(grid.send_and_receive(messages, timeout=timeout))
    if poll_interval <= 0:
        raise ValueError(f"poll_interval must be positive; got {poll_interval}")
    pending = set(grid.push_messages(messages))
    stop = None if timeout is None else time.monotonic() + timeout
    replies: list[Message] = []
    while pending:
        arrived = list(grid.pull_messages(list(pending)))
        replies.extend(arrived)
        pending.difference_update(reply.metadata.reply_to_message_id for reply in arrived)
        if not pending or (stop is not None and time.monotonic() >= stop):
            break
        time.sleep(
            poll_interval if stop is None else max(0.0, min(poll_interval, stop - time.monotonic()))
        )
    return replies


class _GridTransport:
    """A Flower Grid as a :class:`secagg.Transport`: one message round per phase
    (:func:`exchange_messages`), our payload in a ConfigRecord; the train ``content`` rides with
    the masked-input request."""

    def __init__(
        self,
        grid: Grid,
        nodes: Sequence[int],
        *,
        start: Callable[[int], dict[str, Any]],
        content: RecordDict,
        encoder: str,
        message_type: str,
        group_id: str,
        poll_interval: float | None = None,
    ) -> None:
        self.grid, self.nodes, self.start = grid, set(nodes), start
        self.content, self.encoder = content, encoder
        self.message_type, self.group_id = message_type, group_id
        self.poll_interval = poll_interval
        self.encoding_fields: dict[str, Any] = {}  # a further sum's encoding, if it has its own
        self.seconds = dict.fromkeys(PHASES, 0.0)
        self.errored: dict[int, str] = {}  # node → the phase it answered with an error

    def next_sum(
        self, content: RecordDict, encoder: str, group_id: str, encoding: SumEncoding
    ) -> None:
        """Carry a further sum of the session: its content, encoder, group and encoding."""
        self.content, self.encoder, self.group_id = content, encoder, group_id
        self.encoding_fields = dict(encoding.to_record())
        self.seconds = dict.fromkeys(PHASES, 0.0)
        self.errored = {}

    def _envelope(self, stage: str, node: int, data: bytes) -> Message:
        from flwr.app import ConfigRecord, RecordDict  # noqa: PLC0415
        from flwr.app import Message as FlowerMessage  # noqa: PLC0415

        fields = self.start(node) if stage == PHASES[0] else {"payload": data}
        record = ConfigRecord({"stage": stage, **fields})
        body = RecordDict({RECORD_KEY: record})
        if stage == Phase.MASKED_INPUT.value:
            record["encoder"] = self.encoder
            for name, value in self.encoding_fields.items():
                record[name] = value
            for name, value in self.content.items():
                body[name] = value
        return FlowerMessage(
            body, dst_node_id=node, message_type=self.message_type, group_id=self.group_id
        )

    def exchange(
        self, phase: Phase, outgoing: Sequence[tuple[int, bytes]], timeout: float | None
    ) -> Iterable[Delivery | PeerFault]:
        stage = phase.value
        start = time.perf_counter()
        messages = [self._envelope(stage, node, data) for node, data in outgoing]
        replies = exchange_messages(self.grid, messages, timeout, self.poll_interval)
        self.seconds[stage] += time.perf_counter() - start
        for reply in replies:
            node = reply.metadata.src_node_id
            if node not in self.nodes:
                yield PeerFault(node, stage, "a reply from a node that is not in the round")
                continue
            if reply.has_error():
                self.errored.setdefault(node, stage)
                logger.info("node %d answered %s with an error: %s", node, stage, reply.error)
                continue
            record = reply.content.config_records.get(RECORD_KEY)
            if record is None or record.get("stage") != stage:
                yield PeerFault(node, stage, f"no {stage} record in the reply")
                continue
            try:
                data = _field(record, "payload", bytes)
            except RemoteProtocolError as exc:
                yield PeerFault(node, stage, str(exc))
                continue
            yield Delivery(node, data)


def run_secure_sum(
    grid: Grid,
    content: RecordDict,
    *,
    encoding: SumEncoding,
    node_ids: Sequence[int] | None = None,
    dimension: int | None = None,
    threshold: int | None = None,
    neighbors: int | None = None,
    modulus_bits: int = 32,
    timeout: float = 60.0,
    message_type: str = "train",
    group_id: str = "",
    seed: int | None = None,
    on_phase: Callable[[str, int], None] | None = None,
    encoder: str = "",
    min_inputs: int = 1,
    threat_model: str = "malicious",
    trust_store: TrustStore | None = None,
    max_colluding: int | None = None,
    poll_interval: float | None = None,
) -> GridSumResult:
    """Securely sum the train replies of Flower nodes running :func:`secagg_mod`.

    One ``grid.send_and_receive`` per phase (advertise_keys, share_keys, masked_input, in the
    malicious mode consistency_check, unmask), each bounded by ``timeout``. The train
    ``content`` (model arrays, config) goes to the nodes with the masked-input message only.

    Parameters
    ----------
    grid
        The ServerApp's Grid.
    content
        What the train function receives (for example ``{"arrays": ..., "config": ...}``).
    encoding
        How replies become summed vectors; its scale is resolved for the round (headroom).
    node_ids
        The nodes invited to the round (default: every node of the grid).
    dimension
        The number of model values summed; default: the size of ``content``'s one ArrayRecord.
    threshold, neighbors, modulus_bits
        As for :func:`secagg.secure_sum` (default threshold: a majority of neighbours).
    timeout
        Seconds to wait for each phase's replies; silent nodes are that phase's dropouts.
    message_type, group_id
        Flower message type (routes to the ClientApp's train function) and group (the round).
    seed
        Reproducible round nonce (tests); ``None`` draws it from the operating system.
    on_phase
        Called as ``on_phase(phase, number_of_messages)`` when a phase's messages go out.
    encoder
        Name of the client encoder (see :func:`make_secagg_mod`) that computes each node's
        vector; ``""``: the train reply, encoded by ``encoding``.
    min_inputs
        Unmask only if at least this many masked inputs arrived (``Server(min_inputs=...)``,
        e.g. the count distributed noise was calibrated for); otherwise no unmask request is
        sent and :class:`secagg.TooFewSurvivorsError` (with ``arrived``) is raised.
    threat_model
        ``"malicious"`` (default; needs ``trust_store``, and every node its identity) or
        ``"semi-honest"``.
    trust_store
        The clients' verification keys (the same store every node holds). Nodes name their
        own client id (the one the store lists with their identity key).
    max_colluding
        c, clients that may collude with a malicious server (default t − 1).
    poll_interval
        Seconds between asks for replies (:func:`exchange_messages`); ``None``: the grid's
        own ``send_and_receive`` (every 3 s on Flower 1.42's deployment engine).

    Returns
    -------
    GridSumResult
        The decoded sum over the survivors, the dropouts by phase, timings and bytes.

    Raises
    ------
    secagg.TooFewSurvivorsError
        If too few nodes remain for the threshold; nothing about any input is revealed.
    secagg.HeadroomError
        If the number of nodes times the largest quantised value could wrap modulo 2^b.

    Examples
    --------
    >>> run_secure_sum.__name__  # needs a Flower Grid; see examples/flower_app
    'run_secure_sum'
    """

    model_size = _model_size(content) if dimension is None else int(dimension)
    invited = grid.get_node_ids() if node_ids is None else node_ids
    encoding = encoding.resolved(max(len(list(invited)), 1), modulus_bits)  # before any message
    session = GridSession(
        grid,
        sums=1,
        dimension=encoding.dimension(model_size),
        node_ids=list(invited),
        threshold=threshold,
        neighbors=neighbors,
        modulus_bits=modulus_bits,
        timeout=timeout,
        message_type=message_type,
        seed=seed,
        on_phase=on_phase,
        min_inputs=min_inputs,
        threat_model=threat_model,
        trust_store=trust_store,
        max_colluding=max_colluding,
        group_id=group_id,
        poll_interval=poll_interval,
    )
    return session.sum(content, encoding=encoding, encoder=encoder, group_id=group_id)


class GridSession:
    """Several secure sums of the same Flower nodes over one key setup.

    The first :meth:`sum` runs every phase (one ``grid.send_and_receive`` each); each further
    sum is the masked-input phase — its request carries the iterate — then (malicious mode)
    the consistency check and unmask: two or three ``send_and_receive`` calls and no key
    agreement, Shamir sharing or share encryption (:class:`secagg.Session`'s protocol, the
    nodes' :func:`make_secagg_mod` keeping each client's state between messages). A node that
    drops in one sum is out of the later ones. Every sum has the session's ``dimension``.

    Parameters
    ----------
    grid
        The ServerApp's Grid.
    sums
        R, the most sums of the session (1 to 255).
    dimension
        The length of every summed vector (``encoding.dimension(model_size)``).
    node_ids, threshold, neighbors, modulus_bits, timeout, message_type, seed, on_phase,
    min_inputs, threat_model, trust_store, max_colluding, group_id, poll_interval
        As for :func:`run_secure_sum` (``group_id`` names the session's round nonce).

    Examples
    --------
    >>> GridSession.__name__  # needs a Flower Grid; see tests/integrations/test_flower_mod.py
    'GridSession'
    """

    def __init__(
        self,
        grid: Grid,
        *,
        sums: int,
        dimension: int,
        node_ids: Sequence[int] | None = None,
        threshold: int | None = None,
        neighbors: int | None = None,
        modulus_bits: int = 32,
        timeout: float = 60.0,
        message_type: str = "train",
        seed: int | None = None,
        on_phase: Callable[[str, int], None] | None = None,
        min_inputs: int = 1,
        threat_model: str = "malicious",
        trust_store: TrustStore | None = None,
        max_colluding: int | None = None,
        group_id: str = "",
        poll_interval: float | None = None,
    ) -> None:
        if poll_interval is not None and not poll_interval > 0:
            raise ValueError(f"poll_interval must be positive; got {poll_interval}")
        nodes = sorted(int(u) for u in (grid.get_node_ids() if node_ids is None else node_ids))
        if len(set(nodes)) != len(nodes):
            raise ValueError("node ids must be distinct")
        if len(nodes) < 2:
            raise ValueError(f"a secure sum needs at least 2 nodes; got {len(nodes)}")
        if timeout <= 0:
            raise ValueError(f"timeout must be positive; got {timeout}")
        if threshold is None:
            threshold = default_threshold(len(nodes), neighbors)
        self._nonce_source = KeystreamRandom(
            seed, label=b"secagg-dp/flower/round/" + group_id.encode()
        )
        self.config = SecAggConfig(
            dimension=dimension,
            threshold=threshold,
            modulus_bits=modulus_bits,
            neighbors=neighbors,
            round_nonce=self._nonce_source.random_bytes(16),
            vector_name=b"flower",
            threat_model=threat_model,
            max_colluding=max_colluding,
            iterations=sums,
        )
        if self.config.malicious and not isinstance(trust_store, TrustStore):
            raise TypeError(
                "the malicious mode needs trust_store= (every client's verification key; "
                "`secagg-dp keys` writes one), or threat_model='semi-honest'"
            )
        self.grid, self.nodes, self.timeout = grid, nodes, timeout
        self.message_type, self.on_phase = message_type, on_phase
        self.min_inputs, self.trust_store = min_inputs, trust_store
        self.poll_interval = poll_interval
        self._server: Server | None = None
        self._client_of: dict[int, int] = {}
        self._done = 0

    @property
    def remaining(self) -> int:
        """How many more sums the session can run."""
        if self._server is not None and self._server.state is ServerState.ABORTED:
            return 0
        return self.config.iterations - self._done

    @property
    def members(self) -> tuple[int, ...]:
        """The nodes still in the session (every invited node before the first sum)."""
        if self._server is None:
            return tuple(self.nodes)
        node_of = {u: node for node, u in self._client_of.items()}
        return tuple(sorted(node_of[u] for u in self._server.members))

    def sum(
        self,
        content: RecordDict,
        *,
        encoding: SumEncoding,
        encoder: str = "",
        group_id: str = "",
    ) -> GridSumResult:
        """The session's next secure sum of the nodes' vectors (``encoding`` may differ per sum).

        The sum is bound to ``content`` (:func:`content_digest` is its iterate): every node
        checks that it received the content the others did before it masks.

        Raises
        ------
        secagg.TooFewSurvivorsError
            If too few nodes remain; the session ends.
        secagg.LocalProtocolError
            If the session has no sum left.
        """
        if self._done >= self.config.iterations:
            raise LocalProtocolError("the session has no sum left")
        iterate = content_digest(content)
        config = self.config
        members = self.members
        encoding = encoding.resolved(len(self.nodes), config.modulus_bits)
        assigned: dict[int, int] | None = (
            None if config.malicious else {node: u for u, node in enumerate(self.nodes, 1)}
        )
        start_fields = {"config": config.to_bytes(), **encoding.to_record()}
        transport = _GridTransport(
            self.grid,
            self.nodes,
            start=lambda node: {**start_fields, "client-id": (assigned or {}).get(node, 0)},
            content=content,
            encoder=encoder,
            message_type=self.message_type,
            group_id=group_id,
            poll_interval=self.poll_interval,
        )
        driver = RoundDriver(transport, timeout=self.timeout, on_phase=self.on_phase)
        if self._server is None:

            def make_server(ids: list[int]) -> Server:
                threshold = config.threshold
                if len(ids) < max(threshold + 1, self.min_inputs):
                    raise TooFewSurvivorsError(
                        f"only {len(ids)} nodes advertised keys; threshold t={threshold} needs "
                        f"at least {threshold + 1} (and min_inputs={self.min_inputs})",
                        arrived=len(ids),
                        min_inputs=self.min_inputs,
                    )
                return Server(
                    config,
                    ids,
                    min_inputs=self.min_inputs,
                    trust_store=self.trust_store,
                    random_source=self._nonce_source.spawn(b"server"),
                    iterate=iterate,
                )

            self._done += 1
            server = driver.setup(
                [(node, b"") for node in self.nodes],
                make_server,
                config.phases,
                expected=assigned,
                trust_store=self.trust_store if config.malicious else None,
            )
            self._server, self._client_of = server, dict(driver.client_of)
            phases = list(config.phases)
        else:
            server = self._server
            self._done += 1
            transport.next_sum(content, encoder, group_id, encoding)
            driver.client_of = dict(self._client_of)
            phases = list(config.phases)
            phases = phases[phases.index(Phase.MASKED_INPUT) :]
            driver.run(server, server.begin_iteration(iterate), phases)
        return self._outcome(server, driver, transport, encoding, members=members, phases=phases)

    def _outcome(
        self,
        server: Server,
        driver: RoundDriver,
        transport: _GridTransport,
        encoding: SumEncoding,
        *,
        members: Sequence[int],
        phases: Sequence[Phase],
    ) -> GridSumResult:
        config, client_of = self.config, driver.client_of
        faults = [f"node {f.peer} in {f.phase}: {f.reason}" for f in driver.faults]
        seconds = {
            p: transport.seconds[p] + driver.server_seconds[p] + driver.wire_seconds[p]
            for p in PHASES
        }
        result = server.result
        centered = config.ring.centered(result.total)
        decoded_total = Quantizer(encoding.clip, encoding.scale or 1.0).dequantize(centered)
        node_of = {u: node for node, u in client_of.items()}
        survivors = tuple(sorted(node_of[u] for u in result.survivors))
        if encoding.weighted:
            total, weight_total = decoded_total[:-1], float(decoded_total[-1]) / encoding.clip
        else:
            total, weight_total = decoded_total, float(len(survivors))
        participants = result.phase_participants
        dropped: dict[int, str] = {}
        for node in members:
            u = client_of.get(node)
            for phase in phases:
                if u is None or u not in participants[phase.value]:
                    dropped[node] = transport.errored.get(node, phase.value)
                    break
        for fault in result.faults:
            blamed = node_of.get(fault.peer_id) if fault.peer_id is not None else None
            faults.append(f"node {blamed}: {fault}" if blamed is not None else str(fault))
        return GridSumResult(
            total=total,
            weight_total=weight_total,
            survivors=survivors,
            dropped=dropped,
            ring_total=result.total,
            encoding=encoding,
            config=config,
            client_ids=dict(client_of),
            seconds=seconds,
            upload_bytes=driver.upload,
            download_bytes=driver.download,
            faults=tuple(faults),
            iteration=result.iteration,
            excluded=tuple(sorted(set(self.nodes) - set(members))),
        )


def dropout_phases(
    result: GridSumResult, client_ids: Mapping[int, int] | None = None
) -> Mapping[str, Iterable[int]]:
    """The result's dropouts as ``secure_sum``'s ``dropouts`` argument (client indices).

    Index i is the node with client id i + 1, so :func:`secagg.secure_sum` on the same inputs
    in that order reproduces the round (when the ids are 1..n). A node that never advertised
    keys has no client id in the result; ``client_ids`` (node → id) supplies it, else the node
    is left out.

    Examples
    --------
    >>> result = GridSumResult(
    ...     total=np.zeros(1), weight_total=1.0, survivors=(5,), dropped={7: "share_keys"},
    ...     ring_total=np.zeros(2, dtype=np.uint32), encoding=SumEncoding(clip=1.0),
    ...     config=SecAggConfig(dimension=2, threshold=1, round_nonce=bytes(16)),
    ...     client_ids={5: 1, 7: 2})
    >>> dropout_phases(result)
    {'share_keys': [1]}
    """
    by_phase: dict[str, list[int]] = {}
    known = {**(client_ids or {}), **result.client_ids}
    for node, phase in result.dropped.items():
        if node in known:
            by_phase.setdefault(phase, []).append(known[node] - 1)
    return by_phase
