"""ClientApp: local training, wrapped by secagg-dp's secure-sum Mod (with the client halves of
the geometric median and Δ-FL, for the ServerApp's ``aggregation`` setting).

``make_client_app(drop_plan=..., seed=...)`` builds the app for simulations and tests;
``app`` is the production one (``flwr run`` and ``flower-supernode`` load it). Messages of
Flower's own SecAgg+ workflow (the ServerApp's ``aggregation = "flower-secagg+"``, the anchor
of ``bench/flower_deployment_bench.py``) go to Flower's ``secaggplus_mod`` instead. A drop plan
makes chosen partitions refuse a phase of every round (an error reply, which the server
counts as a dropout of that phase), the way a real client vanishes mid-round.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
from flwr.app import ArrayRecord, Context, Error, Message, MetricRecord, RecordDict
from flwr.client.mod import secaggplus_mod
from flwr.clientapp import ClientApp
from flwr.common import Code, FitRes, Status, ndarrays_to_parameters, parameters_to_ndarrays
from flwr.compat.common import recorddict_compat as compat

from protocols.integrations.flower import make_protocols_mod
from secagg import PHASES, IdentityKey, TrustStore
from secagg.integrations.flower import RECORD_KEY

from .identities import node_identity, node_trust_store
from .task import local_train, loss

FLOWER_SECAGG_PLUS_KEY = "secaggplus_configs"  # the ConfigRecord of Flower's SecAgg+ messages

DATA_SEED = 0


def parse_drop_plan(text: str) -> dict[int, str]:
    """``"3:share_keys,7:unmask"`` → {3: "share_keys", 7: "unmask"}."""
    plan: dict[int, str] = {}
    for item in filter(None, (part.strip() for part in text.split(","))):
        partition, phase = item.split(":")
        if phase not in PHASES:
            raise ValueError(f"unknown phase {phase!r} in the drop plan")
        plan[int(partition)] = phase
    return plan


def make_client_app(
    *, drop_plan: Mapping[int, str] | None = None, seed: int | None = None
) -> ClientApp:
    """The ClientApp: a dropout injector (tests), then the secure-sum Mod, then training."""

    def drop_mod(message: Message, context: Context, call_next):  # type: ignore[no-untyped-def]
        plan = dict(drop_plan or parse_drop_plan(str(context.run_config.get("drop-plan", ""))))
        partition = int(context.node_config.get("partition-id", -1))
        record = message.content.config_records.get(RECORD_KEY) if message.has_content() else None
        if record is not None and partition in plan:
            stage = str(record["stage"])
            if PHASES.index(stage) >= PHASES.index(plan[partition]):
                return Message(
                    Error(1, f"partition {partition} drops at {stage}"), reply_to=message
                )
        return call_next(message, context)

    def identity(context: Context) -> IdentityKey:
        return node_identity(context)

    def trust_store(context: Context) -> TrustStore:
        return node_trust_store(context)

    def flower_secaggplus(message: Message, context: Context, call_next):  # type: ignore[no-untyped-def]
        """Flower's SecAgg+ messages to Flower's ``secaggplus_mod`` around a legacy fit."""
        if not (message.has_content() and FLOWER_SECAGG_PLUS_KEY in message.content.config_records):
            return call_next(message, context)

        def legacy_fit(inner: Message, ctx: Context) -> Message:
            fitins = compat.recorddict_to_fitins(inner.content, keep_input=True)
            model = parameters_to_ndarrays(fitins.parameters)
            partition = int(ctx.node_config["partition-id"])
            data_seed = int(ctx.run_config.get("data-seed", DATA_SEED))
            new_model, examples = local_train(model, partition, data_seed)
            fitres = FitRes(
                Status(Code.OK, ""),
                ndarrays_to_parameters([np.asarray(a) for a in new_model]),
                examples,
                {},
            )
            return Message(compat.fitres_to_recorddict(fitres, keep_input=False), reply_to=inner)

        return secaggplus_mod(message, context, legacy_fit)

    mod = make_protocols_mod(seed=seed, identity=identity, trust_store=trust_store)
    app = ClientApp(mods=[flower_secaggplus, drop_mod, mod])

    @app.train()
    def train(message: Message, context: Context) -> Message:
        model = message.content.array_records["arrays"].to_numpy_ndarrays()
        partition = int(context.node_config["partition-id"])
        data_seed = int(context.run_config.get("data-seed", DATA_SEED))
        before = loss(model, range(partition, partition + 1), data_seed)  # Δ-FL ranks by it
        new_model, examples = local_train(model, partition, data_seed)
        content = RecordDict(
            {
                "arrays": ArrayRecord([np.asarray(a) for a in new_model]),
                "metrics": MetricRecord({"num-examples": examples, "loss": before}),
            }
        )
        return Message(content, reply_to=message)

    @app.query("partition")
    def partition_id(message: Message, context: Context) -> Message:
        partition = int(context.node_config.get("partition-id", -1))
        return Message(
            RecordDict({"node": MetricRecord({"partition-id": partition})}), reply_to=message
        )

    return app


app = make_client_app()
