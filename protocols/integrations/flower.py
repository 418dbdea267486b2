"""Our aggregations for Flower users: a strategy wrapper that aggregates through secure sums.

:class:`SecureStrategy` wraps a Flower strategy of the Message API (``FedAvg`` and kin: it
keeps their node sampling and train configuration) and replaces the plaintext aggregate with

* ``"mean"`` — the secure weighted average (weights: the replies' ``num-examples``, capped);
* ``"geometric_median"`` — RFA's smoothed Weiszfeld (:class:`~protocols.WeiszfeldRule`), each
  iteration one secure average driven by :class:`~protocols.IterativeSecureAggregate`;
* ``"superquantile"`` — Δ-FL: a secure sum of the clients' hierarchical loss histograms
  (:class:`dpquantile.HistogramTree`, optionally with distributed discrete Gaussian noise for a
  ρ-zCDP quantile) gives the (1 − θ) loss quantile τ; a second secure sum averages the updates
  of the clients whose pre-training loss is ≥ τ (the train reply's metric ``loss_key``).

The server only ever sees secure sums (over :func:`secagg.integrations.flower.run_secure_sum`).
Every noisy sum records its :class:`dpquantile.DistributedDiscreteGaussian` event (with the
clients' sampler total-variation bound). Its noise is planned for the nodes invited to the sum:
if fewer send masked inputs, the recorded ρ exceeds the target and a warning is logged — unless
``refuse_shortfall``, with which the server withholds the unmask phase and nothing is decoded.
Client side, :func:`make_protocols_mod` is the secure-sum Mod with the aggregations' client
halves registered as encoders: for the geometric median a client trains once per round, keeps
its L2-clipped update in its ``Context`` and answers each Weiszfeld call with
[βᵢwᵢ/(B·c), βᵢ/B, eᵢ/E] (the rule's own :meth:`~protocols.WeiszfeldRule.contributions`).

Flower is imported lazily: importing this module never needs ``flwr``.
"""

from __future__ import annotations

import functools
import logging
import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
from numpy.typing import NDArray

from dpquantile import (
    BudgetExceededError,
    DistributedDiscreteGaussian,
    DistributedDiscreteGaussianMechanism,
    FastDiscreteGaussian,
    HistogramTree,
    PrivacyBudget,
    quantile_mechanism,
    quantile_scale,
)
from protocols.aggregation import (
    CallPlan,
    ContributionLayout,
    IterativeSecureAggregate,
    ServerView,
    WeiszfeldRule,
)
from secagg import KeystreamRandom, Phase, TooFewSurvivorsError, TrustStore
from secagg.integrations.flower import (
    ClientAppCallable,
    GridSession,
    GridSumResult,
    IdentitySource,
    SumEncoding,
    TrustStoreSource,
    exchange_messages,
    make_secagg_mod,
    run_secure_sum,
)
from secagg.validation import (
    check_fraction,
    check_int,
    check_nonnegative,
    check_positive,
    check_real,
    check_seed,
)

if TYPE_CHECKING:
    from flwr.app import ArrayRecord, ConfigRecord, Context, Message, MetricRecord, RecordDict
    from flwr.serverapp import Grid
    from flwr.serverapp.strategy import Strategy

__all__ = ["AGGREGATIONS", "RoundSummary", "SecureStrategy", "make_protocols_mod"]

logger = logging.getLogger(__name__)

AGGREGATIONS = ("mean", "geometric_median", "superquantile")
PLAN_KEY = "secagg-dp.plan"
CENTRE_KEY = "secagg-dp.centre"
_STORED_VECTOR = "secagg-dp.rfa.vector"
_STORED_META = "secagg-dp.rfa.meta"


# -- shared: flattening ArrayRecords -------------------------------------------------------------


def flatten_arrays(arrays: ArrayRecord) -> tuple[NDArray[np.float64], list[tuple[int, ...]]]:
    """An ArrayRecord's arrays as one float vector, and their shapes (record order).

    Examples
    --------
    >>> import pytest
    >>> _ = pytest.importorskip("flwr")  # the flower extra
    >>> from flwr.app import ArrayRecord
    >>> vector, shapes = flatten_arrays(ArrayRecord([np.ones((2, 2)), np.zeros(3)]))
    >>> vector.tolist(), shapes
    ([1.0, 1.0, 1.0, 1.0, 0.0, 0.0, 0.0], [(2, 2), (3,)])
    """
    values = arrays.to_numpy_ndarrays()
    shapes = [tuple(int(s) for s in a.shape) for a in values]
    if not values:
        return np.zeros(0), shapes
    return np.concatenate([np.asarray(a, dtype=np.float64).ravel() for a in values]), shapes


def unflatten_arrays(
    vector: NDArray[np.float64], shapes: list[tuple[int, ...]], like: ArrayRecord
) -> ArrayRecord:
    """Inverse of :func:`flatten_arrays`, keeping ``like``'s keys and dtypes.

    Examples
    --------
    >>> import pytest
    >>> _ = pytest.importorskip("flwr")  # the flower extra
    >>> from flwr.app import ArrayRecord
    >>> like = ArrayRecord([np.ones((2, 2)), np.zeros(3)])
    >>> vector, shapes = flatten_arrays(like)
    >>> [a.tolist() for a in unflatten_arrays(2 * vector, shapes, like).to_numpy_ndarrays()]
    [[[2.0, 2.0], [2.0, 2.0]], [0.0, 0.0, 0.0]]
    """
    from flwr.app import ArrayRecord  # noqa: PLC0415

    originals = like.to_numpy_ndarrays()
    out, start = [], 0
    for shape, original in zip(shapes, originals, strict=True):
        size = math.prod(shape)
        out.append(vector[start : start + size].reshape(shape).astype(original.dtype))
        start += size
    return ArrayRecord(dict(zip(like.keys(), [_as_array(a) for a in out], strict=True)))


def _as_array(values: NDArray[Any]) -> Any:
    from flwr.app import Array  # noqa: PLC0415

    return Array(values)


# -- client side ---------------------------------------------------------------------------------


def _l2_clip(vector: NDArray[np.float64], clip: float) -> NDArray[np.float64]:
    norm = float(np.linalg.norm(vector))
    return vector if norm <= clip else vector * (clip / norm)


def _layout(
    d: int, clip: float, cap: float, extra_bounds: tuple[float, ...] = ()
) -> ContributionLayout:
    """The secure average's row layout in units of B·c (every entry in [−1, 1]): the strategy's
    rows are the protocols' rows, with the same sensitivity."""
    return ContributionLayout(d, clip, cap, extra_bounds, unit=cap * clip)


def _weighted_release(
    total: NDArray[np.float64], layout: ContributionLayout
) -> tuple[NDArray[np.float64], float, NDArray[np.float64]]:
    """(Σβw/Σβ, Σβ, Σe) from a sum of ``layout`` rows (Σβ may be ≤ 0: no average, zeros)."""
    decoded = layout.decode(total)
    weight_sum = decoded.weight_sum
    average = decoded.weighted_sum / weight_sum if weight_sum > 0 else np.zeros(layout.dimension)
    return average, weight_sum, decoded.extras


def _update_of(message: Message, reply_arrays: ArrayRecord) -> NDArray[np.float64]:
    """The client's update: its reply (a full model, Flower's convention) minus the global
    model the server sent in the train message (no sent model: the reply is the update)."""
    reply = flatten_arrays(reply_arrays)[0]
    sent = list(message.content.array_records.values())
    if not sent:
        return reply
    broadcast = flatten_arrays(sent[0])[0]
    if broadcast.shape != reply.shape:
        raise ValueError(
            f"the train reply has {reply.size} parameters, the global model {broadcast.size}"
        )
    return reply - broadcast


def _weiszfeld_encoder(
    message: Message, context: Context, call_next: ClientAppCallable
) -> NDArray[np.float64]:
    """Client half of one Weiszfeld call: train at call 0, then reuse the stored update."""
    from flwr.app import ArrayRecord, ConfigRecord  # noqa: PLC0415

    plan_record = message.content.config_records[PLAN_KEY]
    index = int(str(plan_record["index"]))
    clip = float(str(plan_record["clip"]))
    alpha_cap = float(str(plan_record["alpha-cap"]))
    weight_key = str(plan_record["weight-key"])
    group = message.metadata.group_id.split(".")[0]
    if index == 0:
        reply = call_next(message, context)
        if reply.has_error():
            raise ValueError(f"the train function failed: {reply.error.reason}")
        records = list(reply.content.array_records.values())
        if len(records) != 1:
            raise ValueError("the train reply must hold exactly one ArrayRecord")
        vector = _l2_clip(_update_of(message, records[0]), clip)
        alpha = 1.0
        if weight_key:
            found = [
                m[weight_key] for m in reply.content.metric_records.values() if weight_key in m
            ]
            if not found:
                raise ValueError(f"the train reply has no metric {weight_key!r}")
            alpha = float(str(found[0]))
        context.state[_STORED_VECTOR] = ArrayRecord([vector])
        context.state[_STORED_META] = ConfigRecord({"alpha": alpha, "group": group})
    else:
        meta = context.state.config_records.get(_STORED_META)
        if meta is None or str(meta["group"]) != group:
            raise ValueError(f"Weiszfeld call {index} of round {group} without call 0")
        vector = context.state.array_records[_STORED_VECTOR].to_numpy_ndarrays()[0]
        alpha = float(str(meta["alpha"]))
    weight_cap = float(str(plan_record["weight-cap"]))
    raw_bounds = plan_record.get("extra-bounds", [])
    bounds = tuple(float(b) for b in (raw_bounds if isinstance(raw_bounds, list) else []))
    previous = None
    parameters = {}
    if index > 0:
        centre = message.content.array_records[CENTRE_KEY].to_numpy_ndarrays()[0]
        previous = ServerView(
            np.asarray(centre, dtype=np.float64), 1.0, np.zeros(0), (), (), 1.0, None
        )
        parameters = {"smoothing": float(str(plan_record["smoothing"]))}
    plan = CallPlan(index, weight_cap, bounds, previous, parameters)
    rule = WeiszfeldRule(np.array([alpha]), clip=clip, weight_cap=alpha_cap)
    contribution = rule.contributions(plan, vector[None, :])
    beta = min(float(contribution.weights[0]), weight_cap)
    extras = np.zeros(0) if contribution.extras is None else contribution.extras[0]
    # A call with fewer extras than bounds (call 0 in a session of d + 2) sends zeros there.
    extras = np.concatenate([extras, np.zeros(max(0, len(bounds) - extras.size))])
    extras = np.clip(extras, -np.asarray(bounds), np.asarray(bounds))
    return _layout(vector.size, clip, weight_cap, bounds).encode(vector, beta, extras)


def _one_client_clip(mechanism: DistributedDiscreteGaussianMechanism) -> int:
    """The largest |noise| of one client's vector except with probability 2^-40: its encoding
    clips there (:meth:`~dpquantile.DistributedDiscreteGaussianMechanism.tail_bound`)."""
    return mechanism.tail_bound(1)


def _noise_random(seed: int | None, message: Message, context: Context) -> KeystreamRandom | None:
    """The client's DP-noise stream: ``None`` (fresh OS randomness) without a seed; with one,
    a keystream separated by the call (round.index) and the node, so seeded runs repeat."""
    if seed is None:
        return None
    label = b"secagg-dp/flower/noise/" + message.metadata.group_id.encode()
    return KeystreamRandom(seed, label=label).spawn(b"%d" % context.node_id)


def _trained_update(
    message: Message, context: Context, call_next: ClientAppCallable, plan_record: Any
) -> tuple[NDArray[np.float64], float, float]:
    """Call 0 of a round: train, keep (clipped update, weight, loss) in the Context; later
    calls: read them back. Returns (update, α, loss)."""
    from flwr.app import ArrayRecord, ConfigRecord  # noqa: PLC0415

    clip = float(str(plan_record["clip"]))
    weight_key = str(plan_record["weight-key"])
    loss_key = str(plan_record.get("loss-key", ""))
    group = message.metadata.group_id.split(".")[0]
    if int(str(plan_record["index"])) == 0:
        reply = call_next(message, context)
        if reply.has_error():
            raise ValueError(f"the train function failed: {reply.error.reason}")
        records = list(reply.content.array_records.values())
        if len(records) != 1:
            raise ValueError("the train reply must hold exactly one ArrayRecord")
        vector = _l2_clip(_update_of(message, records[0]), clip)
        metrics: dict[str, float] = {}
        for record in reply.content.metric_records.values():
            metrics.update({k: float(str(v)) for k, v in record.items()})
        if weight_key and weight_key not in metrics:
            raise ValueError(f"the train reply has no metric {weight_key!r}")
        if loss_key and loss_key not in metrics:
            raise ValueError(f"the train reply has no metric {loss_key!r}")
        alpha = metrics[weight_key] if weight_key else 1.0
        loss = metrics[loss_key] if loss_key else 0.0
        context.state[_STORED_VECTOR] = ArrayRecord([vector])
        context.state[_STORED_META] = ConfigRecord({"alpha": alpha, "loss": loss, "group": group})
        return vector, alpha, loss
    meta = context.state.config_records.get(_STORED_META)
    if meta is None or str(meta["group"]) != group:
        raise ValueError(f"call {plan_record['index']} of round {group} without call 0")
    vector = context.state.array_records[_STORED_VECTOR].to_numpy_ndarrays()[0]
    return vector, float(str(meta["alpha"])), float(str(meta["loss"]))


def _superquantile_encoder(
    message: Message, context: Context, call_next: ClientAppCallable, *, seed: int | None = None
) -> NDArray[np.float64]:
    """Δ-FL's client half: the histogram call sends the loss's histogram-tree vector (plus its
    share of the discrete Gaussian noise); the averaging call sends the secure average's row
    (:class:`~protocols.aggregation.ContributionLayout`, units of B·c) with β = α·1[loss ≥ τ]
    (τ = −∞ for a plain mean), plus its share of the noise if asked. The noise comes from
    :func:`_noise_random` (``seed``: the Mod's)."""
    plan_record = message.content.config_records[PLAN_KEY]
    vector, alpha, loss = _trained_update(message, context, call_next, plan_record)
    if "bins" in plan_record:
        tree = HistogramTree(
            int(str(plan_record["bins"])),
            float(str(plan_record["lower"])),
            float(str(plan_record["upper"])),
            int(str(plan_record["branching"])),
        )
        scale = int(str(plan_record.get("scale", 1)))
        counts: NDArray[np.float64] = scale * tree.encode([loss])[0].astype(np.float64)
        sigma = float(str(plan_record["sigma"]))
        if sigma > 0:
            noise = FastDiscreteGaussian(sigma).sample(
                counts.size, rng=_noise_random(seed, message, context)
            )
            counts += noise
        return counts
    cap, clip = float(str(plan_record["weight-cap"])), float(str(plan_record["clip"]))
    threshold = float(str(plan_record.get("threshold", -math.inf)))
    beta = min(alpha, cap) if loss >= threshold else 0.0
    row = _layout(vector.size, clip, cap).encode(vector, beta)
    noise_sigma = float(str(plan_record.get("noise-sigma", 0.0)))
    if noise_sigma > 0:
        # N_ℤ(0, σ²) in grid units (KLS21): the Mod's rounding floor(x·s + u) keeps it exact.
        noise = FastDiscreteGaussian(noise_sigma).sample(
            row.size, rng=_noise_random(seed, message, context)
        )
        row += noise / float(str(plan_record["scale"]))
    return row


def make_protocols_mod(
    *,
    seed: int | None = None,
    identity: IdentitySource | None = None,
    trust_store: TrustStoreSource | None = None,
) -> Callable[[Message, Context, ClientAppCallable], Message]:
    """The secure-sum Mod with the client halves of :data:`AGGREGATIONS` registered.

    ``seed`` makes all the client's randomness reproducible (tests, simulations): the secure
    sum's keys, masks and rounding, and the DP noise; ``None`` (production) draws it from the
    operating system. ``identity`` and ``trust_store`` are the node's for malicious-mode rounds
    (see :func:`secagg.integrations.flower.make_secagg_mod`; default: the files its node config
    names).

    Examples
    --------
    >>> callable(make_protocols_mod(seed=1))
    True
    """
    return make_secagg_mod(
        seed=seed,
        identity=identity,
        trust_store=trust_store,
        encoders={
            "weiszfeld": _weiszfeld_encoder,
            "superquantile": functools.partial(_superquantile_encoder, seed=seed),
        },
    )


# -- server side ---------------------------------------------------------------------------------


def _call_body(content: RecordDict, index: int, fields: dict[str, Any]) -> RecordDict:
    """A call's message content: the train content on call 0 only (later calls reuse the
    update the client stored), plus the public plan."""
    from flwr.app import ConfigRecord, RecordDict  # noqa: PLC0415

    body = RecordDict(dict(content.items()) if index == 0 else {})
    body[PLAN_KEY] = ConfigRecord(fields)
    return body


def _noise_event(
    outcome: GridSumResult,
    mechanism: DistributedDiscreteGaussianMechanism,
    *,
    target: float,
    what: str,
) -> DistributedDiscreteGaussian:
    """The release's event for the clients whose noise is in it (as every release charges:
    :meth:`~dpquantile.DistributedDiscreteGaussianMechanism.event`). Fewer survivors than
    planned give less noise: warn when ρ exceeds the target."""
    survivors = len(outcome.survivors)
    event = mechanism.event(survivors)
    if event.rho > target:  # σ was planned so that the planned clients give ρ <= target
        logger.warning(
            "%s: only %d of the %d planned clients sent masked inputs: the release is "
            "%.4g-zCDP, not %.4g (refuse_shortfall=True withholds such a release)",
            what,
            survivors,
            mechanism.planned_survivors,
            event.rho,
            target,
        )
    return event


@dataclass(frozen=True, slots=True)
class RoundSummary:
    """What one round of :class:`SecureStrategy` released.

    Attributes
    ----------
    server_round
        1, 2, ...
    sums
        The secure sums of the round (one for the mean, one per Weiszfeld call).
    objectives
        Weiszfeld's released objective values F(z₀), F(z₁), ... (empty for the mean).
    threshold
        Δ-FL's released loss quantile τ (``"superquantile"`` only).
    events
        The privacy events of the round's noisy releases (the DP quantile's histogram, the
        noisy averages), each with the clients' sampler total-variation bound.
    refused
        Whether the server withheld a noisy release with fewer clients than planned
        (``refuse_shortfall``); the round then leaves the model unchanged.
    skipped
        Why the round ran no secure sum at all (fewer sampled nodes than ``min_nodes``), or
        ``None``.

    Examples
    --------
    >>> RoundSummary(1, ()).threshold is None
    True
    """

    server_round: int
    sums: tuple[GridSumResult, ...]
    objectives: tuple[float, ...] = ()
    threshold: float | None = None
    events: tuple[DistributedDiscreteGaussian, ...] = ()
    refused: bool = False
    skipped: str | None = None


def _register_as_flower_strategy() -> None:
    """Make ``isinstance(SecureStrategy(...), flwr.serverapp.strategy.Strategy)`` true without
    importing Flower when this module is (a virtual subclass of its ABC; no-op without flwr)."""
    try:
        from flwr.serverapp.strategy import Strategy  # noqa: PLC0415
    except ImportError:
        return
    if not issubclass(SecureStrategy, Strategy):
        Strategy.register(SecureStrategy)


def _is_flower_dp_strategy(strategy: object) -> bool:
    """Whether ``strategy`` is one of Flower's DP wrappers (noise in ``aggregate_train``)."""
    return any(
        cls.__module__.startswith("flwr.") and cls.__name__.startswith("DifferentialPrivacy")
        for cls in type(strategy).__mro__
    )


@dataclass
class SecureStrategy:
    """A Flower strategy whose aggregate is one of our secure aggregations.

    Parameters
    ----------
    strategy
        A Flower Message-API strategy (``flwr.serverapp.strategy.FedAvg`` …): it samples the
        nodes and builds the train messages (one content for all: the secure sum sends every
        node the same; differing contents raise ``ValueError``); its plaintext
        ``aggregate_train`` is never used — so Flower's DP wrappers
        (``DifferentialPrivacyServerSideFixedClipping`` …), whose noise lives there, are
        refused with a ``TypeError``: use ``noise_rho`` instead.
    aggregation
        ``"mean"``, ``"geometric_median"`` or ``"superquantile"``.
    clip
        The public L2 clip c of each update (the reply minus the model sent; > 0), for every
        aggregation.
    weight_cap
        Public cap on a client's weight (its ``num-examples``; > 0).
    weight_key
        The reply metric that weighs a client (``""``: all weights 1).
    neighbors, threshold, modulus_bits, phase_timeout, poll_interval
        Secure-sum parameters (see :func:`secagg.integrations.flower.run_secure_sum`);
        ``poll_interval`` (seconds between asks for replies, ``None``: the grid's own
        ``send_and_receive``) also paces the federated evaluation.
    smoothing, ftol, max_iterations
        Weiszfeld's ν, relative objective tolerance and most steps (geometric median).
    theta, loss_key, loss_range, bins, branching, quantile_rho
        Δ-FL: the fraction θ ∈ (0, 1] of clients kept (those with the largest losses), the
        train reply's metric holding the pre-training loss, the histogram's range (finite,
        lower < upper) and leaves (a power of ``branching``), and the zCDP ρ > 0 of the
        quantile release (``None``: exact histogram, no noise). The noise is planned for all
        sampled nodes.
    noise_rho
        zCDP ρ > 0 of each (weighted) secure average under distributed discrete Gaussian noise
        (KLS21; ``"mean"`` and ``"superquantile"``), planned for all nodes invited to the sum;
        ``None``: no noise. Needs head room: use ``modulus_bits=64``.
    refuse_shortfall
        A noisy sum is calibrated for the nodes invited to it; if fewer send masked inputs,
        each adds too little noise and the release's ρ (recorded in the round's ``events``)
        exceeds ``quantile_rho`` / ``noise_rho`` — a warning is logged. With
        ``refuse_shortfall`` the server instead withholds the unmask phase, decodes nothing,
        and leaves the model unchanged for the round (``RoundSummary.refused``).
    budget
        A :class:`~dpquantile.PrivacyBudget` for the whole run: every noisy release (histogram,
        noisy average) spends its worst-case event before its noise is drawn, and is withheld
        below the nodes it was planned for (``refuse_shortfall`` is then on). The first release
        it cannot pay ends the run before that round's noise (``RoundSummary.skipped`` says
        so). With both a DP quantile and noisy averages it must be stated for replace-one
        neighbours (``PrivacyBudget(..., neighbouring="replace_one")``).
    min_nodes
        The fewest sampled nodes a round runs its secure sum with (≥ 3): a 2-party sum tells
        each party the other's input, so a round that sampled fewer (a node that vanished, a
        sampling race) is skipped with a warning and the model kept.
    seed
        Reproducible round nonces (tests). The clients' noise is theirs: seed it through
        :func:`make_protocols_mod`.
    threat_model, trust_store
        ``"malicious"`` (default: signed keys and the consistency check; needs the clients'
        ``trust_store``) or ``"semi-honest"``.

    Examples
    --------
    >>> SecureStrategy(strategy=None, aggregation="median")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    ValueError: aggregation must be one of ('mean', ...); got 'median'
    """

    strategy: Strategy | None
    aggregation: str = "mean"
    clip: float = 10.0
    weight_cap: float = 100.0
    weight_key: str = "num-examples"
    neighbors: int | None = None
    threshold: int | None = None
    modulus_bits: int = 32
    phase_timeout: float = 60.0
    poll_interval: float | None = None
    smoothing: float = 1e-6
    ftol: float = 1e-6
    max_iterations: int = 10
    theta: float = 0.5
    loss_key: str = "loss"
    loss_range: tuple[float, float] = (0.0, 10.0)
    bins: int = 64
    branching: int = 2
    quantile_rho: float | None = None
    noise_rho: float | None = None
    refuse_shortfall: bool = False
    budget: PrivacyBudget | None = None
    min_nodes: int = 3
    seed: int | None = None
    threat_model: str = "malicious"
    trust_store: TrustStore | None = None
    history: list[RoundSummary] = field(default_factory=list)
    _unresponsive: set[int] = field(default_factory=set, init=False, repr=False)

    def __post_init__(self) -> None:
        if self.aggregation not in AGGREGATIONS:
            raise ValueError(f"aggregation must be one of {AGGREGATIONS}; got {self.aggregation!r}")
        self.clip = check_positive("clip", self.clip)
        self.weight_cap = check_positive("weight_cap", self.weight_cap)
        self.phase_timeout = check_positive("phase_timeout", self.phase_timeout)
        if self.poll_interval is not None:
            self.poll_interval = check_positive("poll_interval", self.poll_interval)
        self.smoothing = check_positive("smoothing", self.smoothing)
        self.ftol = check_nonnegative("ftol", self.ftol)
        self.max_iterations = check_int("max_iterations", self.max_iterations, minimum=1)
        self.theta = check_fraction("theta", self.theta, zero=False, one=True)
        if not (isinstance(self.loss_range, tuple | list) and len(self.loss_range) == 2):
            raise ValueError(f"loss_range must be a pair (lower, upper); got {self.loss_range!r}")
        lower = check_real("loss_range[0]", self.loss_range[0])
        upper = check_real("loss_range[1]", self.loss_range[1])
        if not lower < upper:
            raise ValueError(f"loss_range must have lower < upper; got {self.loss_range!r}")
        self.loss_range = (lower, upper)
        self.bins = check_int("bins", self.bins, minimum=2)
        self.branching = check_int("branching", self.branching, minimum=2)
        HistogramTree(self.bins, lower, upper, self.branching)  # bins: a power of branching
        if self.quantile_rho is not None:
            self.quantile_rho = check_positive("quantile_rho", self.quantile_rho)
        if self.noise_rho is not None:
            self.noise_rho = check_positive("noise_rho", self.noise_rho)
        self.min_nodes = check_int("min_nodes", self.min_nodes, minimum=3)
        _register_as_flower_strategy()
        if self.budget is not None:
            if not isinstance(self.budget, PrivacyBudget):
                raise TypeError(f"budget must be a PrivacyBudget; got {type(self.budget).__name__}")
            quantile = self.aggregation == "superquantile" and self.quantile_rho is not None
            noisy_mean = self.aggregation != "geometric_median" and self.noise_rho is not None
            if not (quantile or noisy_mean):
                raise ValueError("a budget pays for noise: this strategy releases none (no DP)")
            if quantile and noisy_mean and self.budget.neighbouring != "replace_one":
                raise ValueError(
                    "the DP quantile is replace-one and the noisy averages add/remove: one budget "
                    'for both must be PrivacyBudget(..., neighbouring="replace_one")'
                )
            self.refuse_shortfall = True  # a paid release is never delivered below its plan
        self.seed = check_seed(self.seed)
        if self.threat_model not in ("malicious", "semi-honest"):
            raise ValueError(
                f"threat_model must be 'malicious' or 'semi-honest'; got {self.threat_model!r}"
            )
        if self.strategy is not None and _is_flower_dp_strategy(self.strategy):
            raise TypeError(
                f"{type(self.strategy).__name__} adds its noise in aggregate_train, which "
                "SecureStrategy never calls: its noise would be silently dropped. Wrap its inner "
                "strategy instead and set noise_rho= (the clients' distributed discrete "
                "Gaussian through the secure sum, KLS21) with the public clip="
            )
        if (
            self.threat_model == "malicious"
            and not isinstance(self.trust_store, TrustStore)
            and self.strategy is not None
        ):
            raise TypeError(
                "the malicious mode needs trust_store= (the clients' verification keys; "
                "`secagg-dp keys` writes them), or threat_model='semi-honest'"
            )

    # -- Flower's Strategy interface (SecureStrategy is registered as a virtual subclass) -------

    def configure_train(
        self, server_round: int, arrays: ArrayRecord, config: ConfigRecord, grid: Grid
    ) -> Iterable[Message]:
        """The wrapped strategy's train messages (the nodes it samples, the content).

        Examples
        --------
        >>> import pytest
        >>> _ = pytest.importorskip("flwr")  # the flower extra
        >>> from flwr.serverapp.strategy import FedAvg
        >>> strategy = SecureStrategy(strategy=FedAvg(), threat_model="semi-honest")
        >>> type(strategy.strategy).__name__   # configure_train asks it which nodes to train
        'FedAvg'
        """
        assert self.strategy is not None
        return self.strategy.configure_train(server_round, arrays, config, grid)

    def aggregate_train(
        self, server_round: int, replies: Iterable[Message]
    ) -> tuple[ArrayRecord | None, MetricRecord | None]:
        """Never a plaintext aggregate: the secure aggregation runs inside :meth:`start`.

        Raises
        ------
        NotImplementedError
            Always: a SecureStrategy never sees the nodes' updates in the clear.

        Examples
        --------
        >>> import pytest
        >>> _ = pytest.importorskip("flwr")  # the flower extra
        >>> from flwr.serverapp.strategy import FedAvg
        >>> strategy = SecureStrategy(strategy=FedAvg(), threat_model="semi-honest")
        >>> strategy.aggregate_train(1, [])
        Traceback (most recent call last):
        ...
        NotImplementedError: SecureStrategy aggregates through the secure sum inside start(); \
the server never holds the replies a plaintext aggregate_train would need
        """
        raise NotImplementedError(
            "SecureStrategy aggregates through the secure sum inside start(); the server never "
            "holds the replies a plaintext aggregate_train would need"
        )

    def configure_evaluate(
        self, server_round: int, arrays: ArrayRecord, config: ConfigRecord, grid: Grid
    ) -> Iterable[Message]:
        """The wrapped strategy's federated evaluation messages (nodes and content).

        Examples
        --------
        >>> import pytest
        >>> _ = pytest.importorskip("flwr")  # the flower extra
        >>> from flwr.serverapp.strategy import FedAvg
        >>> wrapped = FedAvg(fraction_evaluate=0.0)   # no federated evaluation asked for
        >>> SecureStrategy(strategy=wrapped, threat_model="semi-honest").strategy is wrapped
        True
        """
        assert self.strategy is not None
        return self.strategy.configure_evaluate(server_round, arrays, config, grid)

    def aggregate_evaluate(
        self, server_round: int, replies: Iterable[Message]
    ) -> MetricRecord | None:
        """The wrapped strategy's aggregate of the nodes' evaluation metrics.

        Examples
        --------
        >>> import pytest
        >>> _ = pytest.importorskip("flwr")  # the flower extra
        >>> from flwr.serverapp.strategy import FedAvg
        >>> strategy = SecureStrategy(strategy=FedAvg(), threat_model="semi-honest")
        >>> strategy.aggregate_evaluate(1, []) is None   # no replies: nothing to aggregate
        True
        """
        assert self.strategy is not None
        return self.strategy.aggregate_evaluate(server_round, replies)

    def summary(self) -> None:
        """Log what the strategy runs (Flower calls this when a run starts).

        Examples
        --------
        >>> import pytest
        >>> _ = pytest.importorskip("flwr")  # the flower extra
        >>> from flwr.serverapp.strategy import FedAvg
        >>> strategy = SecureStrategy(strategy=FedAvg(), threat_model="semi-honest")
        >>> strategy.summary()   # one INFO line on the protocols.integrations.flower logger
        """
        logger.info(
            "SecureStrategy: %s over the secure sum (%s, min_nodes=%d), sampling by %s",
            self.aggregation,
            self.threat_model,
            self.min_nodes,
            type(self.strategy).__name__,
        )

    def _silent_in(self, server_round: int) -> set[int]:
        """Nodes that never answered the first phase of a sum of ``server_round``."""
        silent: set[int] = set()
        for summary in self.history:
            if summary.server_round == server_round:
                for outcome in summary.sums:
                    silent.update(
                        node
                        for node, phase in outcome.dropped.items()
                        if phase == Phase.ADVERTISE_KEYS.value
                    )
        return silent

    def _seed(self, *labels: int) -> int | None:
        return None if self.seed is None else hash((self.seed, *labels)) & (2**63 - 1)

    def start(  # noqa: PLR0917 (Flower's Strategy.start signature, positional as there)
        self,
        grid: Grid,
        initial_arrays: ArrayRecord,
        num_rounds: int = 3,
        timeout: float = 3600,
        train_config: ConfigRecord | None = None,
        evaluate_config: ConfigRecord | None = None,
        evaluate_fn: Callable[[int, ArrayRecord], MetricRecord | None] | None = None,
    ) -> Any:
        """Run ``num_rounds`` rounds; return Flower's ``Result`` (final arrays, metrics).

        The signature is Flower's ``Strategy.start``. Each round the wrapped strategy's
        ``configure_train`` picks the nodes and the train content; the secure aggregation
        replaces ``aggregate_train``. Federated evaluation is the wrapped strategy's own
        (``configure_evaluate`` and ``aggregate_evaluate``, replies awaited for ``timeout``
        seconds; the metrics land in ``Result.evaluate_metrics_clientapp``); the secure sums'
        phases use ``phase_timeout``.
        """
        from flwr.app import ConfigRecord  # noqa: PLC0415
        from flwr.serverapp.strategy import Result  # noqa: PLC0415

        if self.strategy is None:
            raise ValueError("SecureStrategy needs a Flower strategy to sample nodes")
        self.summary()
        arrays = initial_arrays
        result = Result(arrays=arrays)
        if evaluate_fn is not None and (metrics := evaluate_fn(0, arrays)) is not None:
            result.evaluate_metrics_serverapp[0] = metrics
        for server_round in range(1, num_rounds + 1):
            config = ConfigRecord(dict(train_config or {}))
            messages = list(self.strategy.configure_train(server_round, arrays, config, grid))
            if not messages:
                logger.warning("round %d: the strategy sampled no node", server_round)
                continue
            # A node that did not answer the previous round's first phase is left out once
            # (a dead node would make every phase of this round wait for its timeout).
            skipped_nodes = self._unresponsive
            messages = [m for m in messages if m.metadata.dst_node_id not in skipped_nodes]
            if skipped_nodes:
                logger.info(
                    "round %d: leaving out %d node(s) silent in the last round: %s",
                    server_round,
                    len(skipped_nodes),
                    sorted(skipped_nodes),
                )
            nodes = sorted(m.metadata.dst_node_id for m in messages)
            if len(nodes) < self.min_nodes:
                reason = (
                    f"{len(nodes)} node(s) sampled, fewer than min_nodes={self.min_nodes}: no "
                    "secure sum (with 2 parties each learns the other's input); model kept"
                )
                logger.warning("round %d skipped: %s", server_round, reason)
                self.history.append(RoundSummary(server_round, (), skipped=reason))
                continue
            content = messages[0].content
            if any(m.content is not content and m.content != content for m in messages[1:]):
                # run_secure_sum sends one content to every node: per-node contents would be lost.
                raise ValueError(
                    f"round {server_round}: the strategy's configure_train built different "
                    "contents for different nodes; SecureStrategy sends every node the same"
                )
            try:
                if self.aggregation == "mean":
                    arrays = self._mean_round(grid, server_round, content, nodes, arrays)
                elif self.aggregation == "geometric_median":
                    arrays = self._median_round(grid, server_round, content, nodes, arrays)
                else:
                    arrays = self._superquantile_round(grid, server_round, content, nodes, arrays)
            except BudgetExceededError as error:
                reason = f"privacy budget exhausted before this round's noise: {error}"
                logger.warning("round %d: %s; the run ends", server_round, reason)
                self.history.append(RoundSummary(server_round, (), skipped=reason))
                break
            result.arrays = arrays
            self._unresponsive = self._silent_in(server_round)
            self._evaluate(
                grid,
                server_round,
                arrays,
                evaluate_config=evaluate_config,
                timeout=timeout,
                result=result,
            )
            if (
                evaluate_fn is not None
                and (metrics := evaluate_fn(server_round, arrays)) is not None
            ):
                result.evaluate_metrics_serverapp[server_round] = metrics
        return result

    def _evaluate(
        self,
        grid: Grid,
        server_round: int,
        arrays: ArrayRecord,
        *,
        evaluate_config: ConfigRecord | None,
        timeout: float,
        result: Any,
    ) -> None:
        """The wrapped strategy's federated evaluation of the new global model (plain
        messages: the nodes' own metrics, nothing secret to sum)."""
        from flwr.app import ConfigRecord  # noqa: PLC0415

        assert self.strategy is not None
        config = ConfigRecord(dict(evaluate_config or {}))
        messages = list(self.strategy.configure_evaluate(server_round, arrays, config, grid))
        if not messages:
            return
        replies = exchange_messages(grid, messages, timeout, self.poll_interval)
        metrics = self.strategy.aggregate_evaluate(server_round, replies)
        logger.info(
            "round %d: federated evaluation on %d of %d nodes: %s",
            server_round,
            sum(not r.has_error() for r in replies),
            len(messages),
            metrics,
        )
        if metrics is not None:
            result.evaluate_metrics_clientapp[server_round] = metrics

    def _pay(self, mechanism: DistributedDiscreteGaussianMechanism, nodes: int) -> None:
        """Spend a release's worst case from the run's budget before any node draws noise."""
        if self.budget is not None:
            self.budget.spend(mechanism.worst_case_event(nodes))

    def _sum(
        self, grid: Grid, content: RecordDict, nodes: list[int], **kwargs: Any
    ) -> GridSumResult:
        return run_secure_sum(
            grid,
            content,
            node_ids=nodes,
            threshold=self.threshold,
            neighbors=self.neighbors,
            modulus_bits=self.modulus_bits,
            timeout=self.phase_timeout,
            threat_model=self.threat_model,
            trust_store=self.trust_store,
            poll_interval=self.poll_interval,
            **kwargs,
        )

    def _noisy_sum(
        self,
        grid: Grid,
        content: RecordDict,
        nodes: list[int],
        *,
        noisy: bool,
        what: str,
        **kwargs: Any,
    ) -> GridSumResult | None:
        """A secure sum; if ``noisy``, its noise is calibrated for all ``nodes``, and ``None``
        means ``refuse_shortfall`` withheld it (fewer masked inputs: nothing decoded)."""
        if not (noisy and self.refuse_shortfall):
            return self._sum(grid, content, nodes, **kwargs)
        try:
            return self._sum(grid, content, nodes, min_inputs=len(nodes), **kwargs)
        except TooFewSurvivorsError as error:
            if error.arrived is None:
                raise
            logger.warning(
                "%s: only %d of the %d planned clients sent masked inputs: release refused",
                what,
                error.arrived,
                len(nodes),
            )
            return None

    def _mean_round(
        self,
        grid: Grid,
        server_round: int,
        content: RecordDict,
        nodes: list[int],
        arrays: ArrayRecord,
    ) -> ArrayRecord:
        # Every mean (noisy or not) averages the L2-clipped updates (reply − the model sent) and
        # applies the average to the global model, as the median and the superquantile do.
        flat, shapes = flatten_arrays(arrays)
        called = self._weighted_call(
            grid, server_round, content, nodes, flat.size, index=0, threshold=-math.inf
        )
        if called is None:
            self.history.append(RoundSummary(server_round, (), refused=True))
            return arrays
        outcome, events = called
        self.history.append(RoundSummary(server_round, (outcome,), events=events))
        layout = _layout(flat.size, self.clip, self.weight_cap)
        average, weight_sum, _ = _weighted_release(outcome.total, layout)
        if not weight_sum > 0:
            raise ValueError(f"round {server_round}: the released weight sum is {weight_sum}")
        return unflatten_arrays(flat + average, shapes, arrays)  # global + mean update

    def _median_round(
        self,
        grid: Grid,
        server_round: int,
        content: RecordDict,
        nodes: list[int],
        arrays: ArrayRecord,
    ) -> ArrayRecord:
        from flwr.app import ArrayRecord  # noqa: PLC0415

        flat, shapes = flatten_arrays(arrays)
        d = flat.size
        rule = WeiszfeldRule(
            np.ones(1),
            clip=self.clip,
            weight_cap=self.weight_cap,
            smoothing=self.smoothing,
            ftol=self.ftol,
            max_iterations=self.max_iterations,
        )
        driver = IterativeSecureAggregate(rule, max_calls=self.max_iterations + 1)
        # Every call in one session (one key setup; each further call is masked input, (the
        # consistency check,) unmask): [βw ; β ; F-term], call 0's F-term a zero pad.
        session = GridSession(
            grid,
            sums=self.max_iterations + 1,
            dimension=d + 2,
            node_ids=nodes,
            threshold=self.threshold,
            neighbors=self.neighbors,
            modulus_bits=self.modulus_bits,
            timeout=self.phase_timeout,
            threat_model=self.threat_model,
            trust_store=self.trust_store,
            poll_interval=self.poll_interval,
            seed=self._seed(server_round),
            group_id=str(server_round),
        )
        plan = driver.start()
        sums: list[GridSumResult] = []
        while plan is not None:
            assert plan.weight_cap is not None
            bounds = list(plan.extra_bounds) or [1.0]
            fields: dict[str, Any] = {
                "index": plan.index,
                "clip": self.clip,
                "alpha-cap": self.weight_cap,
                "weight-key": self.weight_key,
                "weight-cap": plan.weight_cap,
                "extra-bounds": bounds,
                "smoothing": plan.parameters.get("smoothing", self.smoothing),
            }
            body = _call_body(content, plan.index, fields)
            if plan.previous is not None:
                body[CENTRE_KEY] = ArrayRecord([plan.previous.average])
            outcome = session.sum(
                body,
                encoding=SumEncoding(clip=1.0, weight_key=None),
                encoder="weiszfeld",
                group_id=f"{server_round}.{plan.index}",  # the sum is bound to body (the plan)
            )
            sums.append(outcome)
            total = outcome.total
            cap = plan.weight_cap
            layout = _layout(d, self.clip, cap, tuple(bounds))
            average, weight_sum, extras = _weighted_release(total, layout)
            if not weight_sum > 0:
                raise ValueError(f"round {server_round}: the released weight sum is {weight_sum}")
            view = ServerView(
                average=average,
                weight_sum=weight_sum,
                extras=extras[: len(plan.extra_bounds)],
                survivors=tuple(outcome.client_ids[n] - 1 for n in outcome.survivors),
                dropped=tuple(outcome.client_ids[n] - 1 for n in outcome.dropped),
                certified_max_effective_weight=min(1.0, cap / weight_sum),
                event=None,
            )
            plan = driver.receive(view)
        self.history.append(
            RoundSummary(server_round, tuple(sums), WeiszfeldRule.objectives(driver.transcript))
        )
        # The geometric median of the clipped updates, applied to the global model.
        return unflatten_arrays(flat + driver.transcript[-1].average, shapes, arrays)

    def _superquantile_round(
        self,
        grid: Grid,
        server_round: int,
        content: RecordDict,
        nodes: list[int],
        arrays: ArrayRecord,
    ) -> ArrayRecord:
        flat, shapes = flatten_arrays(arrays)
        d = flat.size
        lower, upper = self.loss_range
        tree = HistogramTree(self.bins, lower, upper, self.branching)
        sigma, scale, clip = 0.0, 1, 1.0
        histogram_noise: DistributedDiscreteGaussianMechanism | None = None
        if self.quantile_rho is not None:
            # The DP quantile's own calibration (dpquantile.dp_quantile plans the same σ).
            shape: dict[str, Any] = {"bins": self.bins, "branching": self.branching}
            scale = quantile_scale(self.quantile_rho, num_clients=len(nodes), **shape)
            histogram_noise = quantile_mechanism(
                self.quantile_rho, num_clients=len(nodes), scale=scale, **shape
            )
            sigma = histogram_noise.sigma
            clip = scale + _one_client_clip(histogram_noise)
        common: dict[str, Any] = {
            "clip": self.clip,
            "weight-key": self.weight_key,
            "loss-key": self.loss_key,
            "weight-cap": self.weight_cap,
        }
        histogram_plan = {
            **common,
            "index": 0,
            "bins": self.bins,
            "lower": lower,
            "upper": upper,
            "branching": self.branching,
            "sigma": sigma,
            "scale": scale,
        }
        if histogram_noise is not None:
            self._pay(histogram_noise, len(nodes))
        histogram = self._noisy_sum(
            grid,
            _call_body(content, 0, histogram_plan),
            nodes,
            noisy=sigma > 0,
            what=f"round {server_round}: the loss histogram",
            encoding=SumEncoding(clip=clip, scale=1.0, weight_key=None),
            dimension=tree.dimension,
            encoder="superquantile",
            group_id=f"{server_round}.0",
            seed=self._seed(server_round, 0),
        )
        if histogram is None:  # refused: no τ, no Δ-FL step this round
            self.history.append(RoundSummary(server_round, (), refused=True))
            return arrays
        survivors = len(histogram.survivors)
        # Δ-FL keeps the clients whose loss is at least the (1 − θ) quantile.
        threshold, _ = tree.estimate(histogram.total / scale, float(survivors), 1.0 - self.theta)
        events: tuple[DistributedDiscreteGaussian, ...] = ()
        if histogram_noise is not None:
            assert self.quantile_rho is not None
            events = (
                _noise_event(
                    histogram,
                    histogram_noise,
                    target=self.quantile_rho,
                    what=f"round {server_round}: the loss histogram",
                ),
            )
        called = self._weighted_call(
            grid,
            server_round,
            content,
            list(histogram.survivors),
            d,
            index=1,
            threshold=threshold,
        )
        if called is None:
            self.history.append(
                RoundSummary(
                    server_round, (histogram,), threshold=threshold, events=events, refused=True
                )
            )
            return arrays
        mean, noise_events = called
        # The histogram's guarantee is replace-one (the number of clients is public); the
        # average's add/remove event is stated for replace-one neighbours so the two compose.
        events += tuple(e.under_replace_one() for e in noise_events) if events else noise_events
        self.history.append(
            RoundSummary(server_round, (histogram, mean), threshold=threshold, events=events)
        )
        layout = _layout(d, self.clip, self.weight_cap)
        average, weight_sum, _ = _weighted_release(mean.total, layout)
        if not weight_sum > 0:
            logger.warning("round %d: no client at or above τ = %.4g", server_round, threshold)
            return arrays
        return unflatten_arrays(flat + average, shapes, arrays)  # global + the tail's update

    def _weighted_call(
        self,
        grid: Grid,
        server_round: int,
        content: RecordDict,
        nodes: list[int],
        d: int,
        *,
        index: int,
        threshold: float,
    ) -> tuple[GridSumResult, tuple[DistributedDiscreteGaussian, ...]] | None:
        """One secure sum of the secure average's rows (β = α·1[loss ≥ threshold]); with
        ``noise_rho`` every client adds N_ℤ(0, σ²) on the grid, σ planned for all ``nodes`` as
        the protocols' secure average plans it, for the same row (:func:`_layout`).
        ``None``: the release was refused (``refuse_shortfall``)."""
        fields: dict[str, Any] = {
            "index": index,
            "clip": self.clip,
            "weight-key": self.weight_key,
            "loss-key": self.loss_key if self.aggregation == "superquantile" else "",
            "weight-cap": self.weight_cap,
            "threshold": threshold,
        }
        encoding = SumEncoding(clip=1.0, weight_key=None)
        plan = None
        if self.noise_rho is not None:
            # Plan with 8 bits to spare: each client's noise sits inside its own clipped vector.
            bits = min(self.modulus_bits, 52) - 8
            layout = _layout(d, self.clip, self.weight_cap)
            plan = layout.plan(len(nodes), bits, noise_rho=self.noise_rho)
            assert plan.mechanism is not None
            scale, sigma = plan.quantizer.scale, plan.mechanism.sigma
            fields.update({"noise-sigma": sigma, "scale": scale})
            clip = 1.0 + _one_client_clip(plan.mechanism) / scale
            encoding = SumEncoding(clip=clip, scale=scale, weight_key=None)
            self._pay(plan.mechanism, len(nodes))
        what = f"round {server_round}: secure average {index}"
        outcome = self._noisy_sum(
            grid,
            _call_body(content, index, fields),
            nodes,
            noisy=plan is not None,
            what=what,
            encoding=encoding,
            dimension=d + 1,
            encoder="superquantile",
            group_id=f"{server_round}.{index}",
            seed=self._seed(server_round, index),
        )
        if outcome is None:
            return None
        if plan is None or plan.mechanism is None:
            return outcome, ()
        assert self.noise_rho is not None
        event = _noise_event(outcome, plan.mechanism, target=self.noise_rho, what=what)
        return outcome, (event,)
