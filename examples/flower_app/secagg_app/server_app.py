"""ServerApp: rounds of secure weighted averaging with secagg-dp's Grid driver.

Each round sends the global model with the masked-input message, gets Σβ·model and Σβ from one
secure sum (β = examples / cap), and takes their ratio as the next global model (FedAvg whose
server never sees a single client's model). Nodes that vanish mid-round are dropouts of the
phase they missed; the round completes while enough survive.
"""

from __future__ import annotations

import json
import logging
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from flwr.app import ArrayRecord, ConfigRecord, Context, Message, MetricRecord, RecordDict
from flwr.serverapp import Grid, ServerApp
from flwr.serverapp.strategy import FedAvg

from protocols.integrations.flower import SecureStrategy
from secagg import TooFewSurvivorsError, TrustStore
from secagg.integrations.flower import GridSession, GridSumResult, SumEncoding

from .identities import server_trust_store
from .task import initial_model, loss

logger = logging.getLogger(__name__)

FLOWER_SECAGG_PLUS = "flower-secagg+"  # Flower's own SecAgg+ workflow (the benchmark's anchor)


@dataclass
class Settings:
    """What a run needs; ``flwr run`` fills it from the app's run config."""

    rounds: int = 2
    min_nodes: int = 4
    clip: float = 8.0
    weight_cap: float = 50.0
    neighbors: int | None = None
    threshold: int | None = None
    timeout: float = 30.0
    wait_for_nodes: float = 60.0
    seed: int | None = None
    data_seed: int = 0
    results_file: str = ""
    aggregation: str = (
        "mean"  # "geometric_median", "superquantile" (SecureStrategy), "flower-secagg+"
    )
    threat_model: str = "malicious"  # or "semi-honest"
    keys_dir: str = ""  # `secagg-dp keys` output; "" : nodes' own config, else demo identities
    model_size: int = 0  # > 11: a payload block makes the model this long (benchmarks)
    session_rounds: int = 0  # training rounds per key setup ("mean"); 0: all, 1: every round
    poll_interval: float = 0.1  # seconds between asks for replies; 0: Grid.send_and_receive
    max_iterations: int = 10  # "geometric_median": Weiszfeld steps per round at most
    ftol: float = 1e-6  # "geometric_median": relative objective change that stops early


@dataclass
class RunRecord:
    """What the server learnt: per round the model it sent and the secure-sum result."""

    models: list[list[np.ndarray]] = field(default_factory=list)
    results: list[GridSumResult] = field(default_factory=list)
    partitions: dict[int, int] = field(default_factory=dict)
    losses: list[float] = field(default_factory=list)
    round_seconds: list[float] = field(default_factory=list)


def settings_from(run_config: dict[str, Any]) -> Settings:
    """Settings from a Flower run config (kebab-case keys; 0 means "default")."""
    neighbors = int(run_config.get("neighbors", 0)) or None
    threshold = int(run_config.get("threshold", 0)) or None
    seed = int(run_config.get("seed", -1))
    return Settings(
        rounds=int(run_config.get("num-server-rounds", 2)),
        min_nodes=int(run_config.get("min-nodes", 4)),
        clip=float(run_config.get("clip", 8.0)),
        weight_cap=float(run_config.get("weight-cap", 50.0)),
        neighbors=neighbors,
        threshold=threshold,
        timeout=float(run_config.get("phase-timeout", 30.0)),
        wait_for_nodes=float(run_config.get("wait-for-nodes", 60.0)),
        seed=None if seed < 0 else seed,
        data_seed=int(run_config.get("data-seed", 0)),
        results_file=str(run_config.get("results-file", "")),
        aggregation=str(run_config.get("aggregation", "mean")),
        threat_model=str(run_config.get("threat-model", "malicious")),
        keys_dir=str(run_config.get("keys-dir", "")),
        model_size=int(run_config.get("model-size", 0)),
        session_rounds=int(run_config.get("session-rounds", 0)),
        poll_interval=float(run_config.get("poll-interval", 0.1)),
        max_iterations=int(run_config.get("max-iterations", 10)),
        ftol=float(run_config.get("ftol", 1e-6)),
    )


def report(settings: Settings, event: dict[str, Any]) -> None:
    """Append one JSON line to the results file (how a launcher follows a deployed run)."""
    if settings.results_file:
        with open(settings.results_file, "a", encoding="utf-8") as handle:
            handle.write(json.dumps(event) + "\n")


def wait_for_nodes(grid: Grid, count: int, deadline: float) -> list[int]:
    """The grid's node ids once at least ``count`` are connected (or raise at the deadline)."""
    stop = time.monotonic() + deadline
    while True:
        nodes = sorted(grid.get_node_ids())
        if len(nodes) >= count:
            return nodes
        if time.monotonic() > stop:
            raise TimeoutError(f"only {len(nodes)} of {count} nodes connected in {deadline} s")
        time.sleep(0.5)


def ask_partitions(grid: Grid, nodes: list[int], timeout: float) -> dict[int, int]:
    """Node id → partition id (a plain query, so runs can be checked against the data)."""
    messages = [
        Message(RecordDict(), dst_node_id=node, message_type="query.partition") for node in nodes
    ]
    out = {}
    for reply in grid.send_and_receive(messages, timeout=timeout):
        if not reply.has_error():
            out[reply.metadata.src_node_id] = int(
                reply.content.metric_records["node"]["partition-id"]
            )
    return out


def trust_store_for(settings: Settings, record: RunRecord) -> TrustStore | None:
    """The clients' verification keys (malicious mode), for client ids partition + 1."""
    if settings.threat_model != "malicious":
        return None
    return server_trust_store(settings.keys_dir, max(record.partitions.values(), default=0) + 1)


def run_strategy(grid: Grid, settings: Settings, record: RunRecord) -> RunRecord:
    """The geometric median (RFA) or Δ-FL through ``SecureStrategy`` around Flower's FedAvg."""
    nodes = wait_for_nodes(grid, settings.min_nodes, settings.wait_for_nodes)
    record.partitions = ask_partitions(grid, nodes, settings.timeout)
    partitions = range(max(record.partitions.values(), default=0) + 1)
    strategy = SecureStrategy(
        # The app evaluates centrally (evaluate_fn): no federated evaluation round.
        FedAvg(min_available_nodes=settings.min_nodes, fraction_evaluate=0.0),
        settings.aggregation,
        clip=settings.clip * 4,  # an L2 clip of each node's whole update
        weight_cap=settings.weight_cap,
        neighbors=settings.neighbors,
        threshold=settings.threshold,
        phase_timeout=settings.timeout,
        loss_range=(0.0, 200.0),
        seed=settings.seed,
        threat_model=settings.threat_model,
        trust_store=trust_store_for(settings, record),
        poll_interval=settings.poll_interval or None,
        max_iterations=settings.max_iterations,
        ftol=settings.ftol,
    )

    clock = {"last": time.perf_counter()}

    def evaluate(server_round: int, arrays: ArrayRecord) -> MetricRecord:
        model = arrays.to_numpy_ndarrays()
        value = loss(model, partitions, settings.data_seed)
        record.losses.append(value)
        report(settings, {"event": "evaluate", "round": server_round, "loss": value})
        if server_round >= 1:  # round 0 evaluates the initial model
            # A round is what passed since the previous evaluation: its secure sums (one session)
            # and the strategy's aggregation.
            now = time.perf_counter()
            record.round_seconds.append(now - clock["last"])
            size = int(sum(np.asarray(a).size for a in model))
            report(
                settings,
                {
                    "event": "round",
                    "round": server_round,
                    "seconds": record.round_seconds[-1],
                    "model_size": size,
                },
            )
        clock["last"] = time.perf_counter()
        print(f"round {server_round}: loss {value:.4f}", flush=True)
        return MetricRecord({"loss": value})

    initial = ArrayRecord([np.asarray(a) for a in initial_model(settings.model_size)])
    strategy.start(grid, initial, num_rounds=settings.rounds, evaluate_fn=evaluate)
    return record


def run_rounds(
    grid: Grid, settings: Settings, record: RunRecord, context: Context | None = None
) -> RunRecord:
    """The training loop (used by the ServerApp and by tests).

    ``"mean"``: one :class:`GridSession` (one key setup) per ``session_rounds`` training rounds;
    each further round is a masked input, (the consistency check,) unmask — a node that drops
    in one round stays out for the rest of its session; when too few members are left for a
    round, it is retried once over a new key setup with every node still connected (nothing of
    the failed sum was unmasked). ``"flower-secagg+"``: Flower's own
    SecAgg+ workflow on the same task (:func:`run_flower_secaggplus`).
    """
    if settings.aggregation == FLOWER_SECAGG_PLUS:
        if context is None:
            raise ValueError("Flower's SecAgg+ workflow needs the ServerApp's context")
        return run_flower_secaggplus(grid, settings, record, context)
    if settings.aggregation != "mean":
        return run_strategy(grid, settings, record)
    nodes = wait_for_nodes(grid, settings.min_nodes, settings.wait_for_nodes)
    record.partitions = ask_partitions(grid, nodes, settings.timeout)
    report(settings, {"event": "nodes", "partitions": sorted(record.partitions.values())})
    trust_store = trust_store_for(settings, record)
    model = initial_model(settings.model_size)
    encoding = SumEncoding(
        clip=settings.clip, weight_key="num-examples", weight_cap=settings.weight_cap
    )
    per_session = settings.session_rounds or settings.rounds
    current = {"round": 0}

    def open_session(server_round: int, members: list[int]) -> GridSession:
        return GridSession(
            grid,
            sums=min(per_session, settings.rounds - server_round + 1, 255),
            dimension=encoding.dimension(sum(a.size for a in model)),
            node_ids=members,
            threshold=settings.threshold,
            neighbors=settings.neighbors,
            timeout=settings.timeout,
            seed=None if settings.seed is None else settings.seed + server_round,
            on_phase=lambda phase, count: report(
                settings,
                {"event": "phase", "round": current["round"], "phase": phase, "messages": count},
            ),
            threat_model=settings.threat_model,
            trust_store=trust_store,
            group_id=str(server_round),
            poll_interval=settings.poll_interval or None,
        )

    session: GridSession | None = None
    for server_round in range(1, settings.rounds + 1):
        start = time.perf_counter()
        current["round"] = server_round
        fresh = session is None or session.remaining == 0
        if session is None or fresh:
            session = open_session(server_round, nodes)
        content = RecordDict(
            {
                "arrays": ArrayRecord([np.asarray(a) for a in model]),
                "config": ConfigRecord({"server-round": server_round}),
            }
        )
        try:
            result = session.sum(content, encoding=encoding, group_id=str(server_round))
        except TooFewSurvivorsError as error:
            if fresh:
                raise
            # Too many of the session's members are gone: nothing was unmasked; set keys up
            # afresh with every node connected now (dropped nodes may be back) and retry once.
            connected = set(grid.get_node_ids())
            live = [node for node in nodes if node in connected]
            report(settings, {"event": "new-session", "round": server_round, "reason": str(error)})
            logger.warning(
                "round %d: %s; a new key setup with %d nodes", server_round, error, len(live)
            )
            session = open_session(server_round, live)
            result = session.sum(content, encoding=encoding, group_id=f"{server_round}.retry")
        record.models.append(model)
        record.results.append(result)
        flat = result.average
        sizes = np.cumsum([a.size for a in model])[:-1]
        model = [
            part.reshape(a.shape) for part, a in zip(np.split(flat, sizes), model, strict=True)
        ]
        finish_round(
            settings, record, server_round=server_round, start=start, model=model, result=result
        )
    record.models.append(model)
    return record


def finish_round(
    settings: Settings,
    record: RunRecord,
    *,
    server_round: int,
    start: float,
    model: list[np.ndarray],
    result: GridSumResult | None,
) -> None:
    """Book a finished round: its time and loss, one JSON line, one log line."""
    record.round_seconds.append(time.perf_counter() - start)
    part = record.partitions
    event: dict[str, Any] = {
        "event": "round",
        "round": server_round,
        "seconds": record.round_seconds[-1],
        "model_size": int(sum(a.size for a in model)),
    }
    if result is not None:
        event.update(
            {
                "model": [a.tolist() for a in record.models[-1]] if len(model) == 2 else None,
                "average": result.average.tolist() if len(model) == 2 else None,
                "weight_total": result.weight_total,
                "scale": result.encoding.scale,
                "survivors": sorted(part.get(n, -1) for n in result.survivors),
                "dropped": {str(part.get(n, -1)): ph for n, ph in result.dropped.items()},
                "excluded": sorted(part.get(n, -1) for n in result.excluded),
                "phase_seconds": result.seconds,
            }
        )
    report(settings, event)
    record.losses.append(loss(model, range(max(part.values(), default=0) + 1), settings.data_seed))
    survivors = "" if result is None else f"{len(result.survivors)} of {len(part)} nodes summed, "
    logger.info(
        "round %d: %sloss %.4f, %.2f s",
        server_round,
        survivors,
        record.losses[-1],
        record.round_seconds[-1],
    )
    print(
        f"round {server_round}: {survivors}"
        + ("" if result is None else f"dropped {result.dropped}, ")
        + (
            f"out since an earlier round {list(result.excluded)}, "
            if result and result.excluded
            else ""
        )
        + f"loss {record.losses[-1]:.4f}, {record.round_seconds[-1]:.2f} s",
        flush=True,
    )


def run_flower_secaggplus(
    grid: Grid, settings: Settings, record: RunRecord, context: Context
) -> RunRecord:
    """The same task through Flower 1.42's own SecAgg+ (``SecAggPlusWorkflow``, semi-honest
    server), as the anchor our rounds are timed against.

    Flower's SecAgg+ runs only in its legacy workflow: a legacy ``FedAvg`` on a
    ``LegacyContext``, ``DefaultWorkflow(fit_workflow=SecAggPlusWorkflow(...))``; the clients
    answer through ``secaggplus_mod`` (see ``client_app``). Complete graph unless ``neighbors``
    is set; the same majority threshold and clipping range as ours; no evaluation round.
    """
    from flwr.common import ndarrays_to_parameters, parameters_to_ndarrays  # noqa: PLC0415
    from flwr.server import LegacyContext, ServerConfig  # noqa: PLC0415
    from flwr.server.strategy import FedAvg as LegacyFedAvg  # noqa: PLC0415
    from flwr.server.workflow import DefaultWorkflow, SecAggPlusWorkflow  # noqa: PLC0415

    nodes = wait_for_nodes(grid, settings.min_nodes, settings.wait_for_nodes)
    record.partitions = ask_partitions(grid, nodes, settings.timeout)
    report(settings, {"event": "nodes", "partitions": sorted(record.partitions.values())})
    model = initial_model(settings.model_size)
    record.models.append(model)
    clock = {"start": 0.0}

    class TimedFedAvg(LegacyFedAvg):  # type: ignore[misc]
        """FedAvg that books each round from its first fit message to its aggregate."""

        def configure_fit(self, server_round: int, *args: Any, **kwargs: Any) -> Any:
            clock["start"] = time.perf_counter()
            return super().configure_fit(server_round, *args, **kwargs)

        def aggregate_fit(self, server_round: int, *args: Any, **kwargs: Any) -> Any:
            parameters, metrics = super().aggregate_fit(server_round, *args, **kwargs)
            if parameters is not None:
                arrays = [
                    np.asarray(a, dtype=np.float64) for a in parameters_to_ndarrays(parameters)
                ]
                record.models.append(arrays)
                finish_round(
                    settings,
                    record,
                    server_round=server_round,
                    start=clock["start"],
                    model=arrays,
                    result=None,
                )
            return parameters, metrics

    n = len(nodes)
    strategy = TimedFedAvg(
        fraction_fit=1.0,
        fraction_evaluate=0.0,
        min_fit_clients=n,
        min_available_clients=n,
        initial_parameters=ndarrays_to_parameters([np.asarray(a) for a in model]),
    )
    workflow = DefaultWorkflow(
        fit_workflow=SecAggPlusWorkflow(
            num_shares=settings.neighbors + 1 if settings.neighbors else n,
            reconstruction_threshold=settings.threshold or n // 2 + 1,
            clipping_range=settings.clip,
            timeout=settings.timeout,
        )
    )
    legacy = LegacyContext(
        context=context, config=ServerConfig(num_rounds=settings.rounds), strategy=strategy
    )
    workflow(grid, legacy)
    return record


def make_server_app(settings: Settings | None = None, record: RunRecord | None = None) -> ServerApp:
    """A ServerApp running :func:`run_rounds`; ``settings=None`` reads the run config."""
    app = ServerApp()
    sink = record if record is not None else RunRecord()

    @app.main()
    def main(grid: Grid, context: Context) -> None:
        chosen = settings or settings_from(dict(context.run_config))
        try:
            run_rounds(grid, chosen, sink, context)
        except Exception as exc:
            report(chosen, {"event": "error", "message": f"{type(exc).__name__}: {exc}"})
            raise
        report(chosen, {"event": "done", "losses": sink.losses})

    return app


app = make_server_app()
