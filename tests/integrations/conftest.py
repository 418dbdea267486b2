# ruff: noqa: PLC0415  (Flower is imported inside the fixtures, so collection never needs it)
"""Shared pieces of the integration tests: a loopback Flower Grid (no Ray, no network).

Flower is imported inside the fixtures, so collecting this directory never needs ``flwr``;
the tests that use these fixtures skip themselves when it is missing.
"""

from __future__ import annotations

import copy
import uuid
from collections.abc import Callable, Iterable
from typing import Any

import pytest

Tamper = Callable[[Any], Any]


@pytest.fixture
def loopback_grid(monkeypatch: pytest.MonkeyPatch) -> type:
    """A Grid that calls each node's ClientApp in process, one message after another.

    ``LoopbackGrid(apps, silent=..., tamper=...)``: ``apps`` maps node id → ClientApp (each
    node keeps its own Context across messages, as a SuperNode does); ``silent[node]`` is the
    first stage at which the node stops answering (a vanished process); ``tamper(message)``
    may rewrite a server message before delivery (a malicious server). Every message crosses
    a deep copy, so no object is shared between server and client. ``push_messages`` delivers
    at once; ``pull_messages`` hands a reply out from its ``pull_delay``-th ask on (replies that
    take a while), and counts the asks in ``pulls``.
    """
    pytest.importorskip("flwr", reason="the Flower integration needs flwr (extra 'flower')")
    from flwr.app import Context, Error, Message, RecordDict
    from flwr.serverapp import Grid
    from flwr.supercore.task_identity import TaskIdentity

    from secagg.integrations.flower import RECORD_KEY

    # A ServerApp process knows its run; Flower's Message reads it from here.
    for attr, value in (("_run_id", 1), ("_node_id", 1), ("_task_id", 1)):
        monkeypatch.setattr(TaskIdentity, attr, value)

    class LoopbackGrid(Grid):  # type: ignore[misc]
        def __init__(
            self,
            apps: dict[int, Any],
            *,
            silent: dict[int, str] | None = None,
            tamper: Tamper | None = None,
            node_config: Callable[[int], dict[str, Any]] | None = None,
        ) -> None:
            self.apps = apps
            self.trust_store = getattr(apps, "trust_store", None)
            self.silent = silent or {}
            self.tamper = tamper
            self.contexts = {
                node: Context(
                    run_id=1,
                    node_id=node,
                    node_config=(node_config or (lambda _: {}))(node),
                    state=RecordDict(),
                    run_config={},
                )
                for node in apps
            }
            self.sent: list[Any] = []
            self.replies: list[Any] = []
            self.pull_delay = 0
            self.pulls = 0
            self._pending: dict[str, list[Any]] = {}  # message id → [asks so far, reply]

        def set_run(self, run_id: int) -> None:  # pragma: no cover - not used
            pass

        @property
        def run(self) -> Any:  # pragma: no cover - not used
            return None

        def create_message(self, *args: Any, **kwargs: Any) -> Any:  # pragma: no cover
            raise NotImplementedError

        def get_node_ids(self) -> Iterable[int]:
            return list(self.apps)

        def push_messages(self, messages: Iterable[Any]) -> Iterable[str]:
            ids = []
            for message in messages:
                (reply,) = self.send_and_receive([message]) or [None]
                ids.append(message.metadata.message_id)
                if reply is not None:
                    self._pending[ids[-1]] = [0, reply]
            return ids

        def pull_messages(self, message_ids: Iterable[str]) -> Iterable[Any]:
            self.pulls += 1
            out = []
            for message_id in message_ids:
                entry = self._pending.get(message_id)
                if entry is None:
                    continue
                entry[0] += 1
                if entry[0] > self.pull_delay:
                    out.append(self._pending.pop(message_id)[1])
            return out

        def send_and_receive(
            self, messages: Iterable[Any], *, timeout: float | None = None
        ) -> Iterable[Any]:
            from secagg import PHASES

            replies = []
            for message in messages:
                message.metadata.__dict__["_message_id"] = str(uuid.uuid4())
                self.sent.append(message)
                node = message.metadata.dst_node_id
                record = message.content.config_records.get(RECORD_KEY)
                stage = str(record["stage"]) if record is not None else ""
                gone = self.silent.get(node)
                if gone is not None and stage and PHASES.index(stage) >= PHASES.index(gone):
                    continue
                delivered = copy.deepcopy(message)
                if self.tamper is not None:
                    delivered = self.tamper(delivered)
                try:
                    reply = self.apps[node](delivered, self.contexts[node])
                except Exception as error:  # a SuperNode replies with an error message
                    reply = Message(error=Error(code=0, reason=str(error)), reply_to=delivered)
                assert isinstance(reply, Message)
                self.replies.append(reply)
                replies.append(copy.deepcopy(reply))
            return replies

    return LoopbackGrid


@pytest.fixture
def vector_client_app() -> Callable[..., Any]:
    """``vector_client_app(vectors, weights, seed=...)``: a ClientApp whose train function
    returns ``vectors[node]`` (one array) and the metric ``num-examples = weights[node]``,
    wrapped by the secure-sum Mod."""
    pytest.importorskip("flwr", reason="the Flower integration needs flwr (extra 'flower')")
    import numpy as np
    from flwr.app import ArrayRecord, Context, Message, MetricRecord, RecordDict
    from flwr.clientapp import ClientApp

    from secagg import generate_identities
    from secagg.integrations.flower import make_secagg_mod

    class Apps(dict[int, Any]):
        """Node id → ClientApp, and the trust store of the nodes' identities (client ids 1..n
        in node order)."""

        trust_store: Any = None
        identities: dict[int, Any]

    def build(
        vectors: dict[int, Any], weights: dict[int, float] | None = None, *, seed: int | None = 7
    ) -> Apps:
        apps = Apps()
        order = sorted(vectors)
        keys, apps.trust_store = generate_identities(range(1, len(order) + 1), seed=seed or 0)
        apps.identities = {node: keys[order.index(node) + 1] for node in order}
        for node, vector in vectors.items():
            mod = make_secagg_mod(
                seed=seed, identity=keys[order.index(node) + 1], trust_store=apps.trust_store
            )
            app = ClientApp(mods=[mod])

            def train(
                message: Message, context: Context, vector: Any = vector, node: int = node
            ) -> Message:
                metrics = MetricRecord({"num-examples": (weights or {}).get(node, 1.0)})
                content = RecordDict(
                    {"arrays": ArrayRecord([np.asarray(vector, dtype=np.float64)]), "m": metrics}
                )
                return Message(content, reply_to=message)

            app.train()(train)
            apps[node] = app
        return apps

    return build
