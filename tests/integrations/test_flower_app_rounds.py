"""The example app's round loop over the loopback Grid (no Ray, no processes): the sessions it
opens, and what it does when a session runs short of members."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

pytest.importorskip("flwr", reason="the Flower tests need flwr (pip install 'secagg-dp[flower]')")

from secagg.integrations.flower import RECORD_KEY

APP_DIR = Path(__file__).resolve().parents[2] / "examples" / "flower_app"
NODES = 5


@pytest.fixture
def app_modules() -> Iterator[Any]:
    sys.path.insert(0, str(APP_DIR))
    try:
        from secagg_app import client_app, server_app, task  # noqa: PLC0415

        yield client_app, server_app, task
    finally:
        sys.path.remove(str(APP_DIR))
        for name in [m for m in sys.modules if m == "secagg_app" or m.startswith("secagg_app.")]:
            del sys.modules[name]


def _flaky(app: Any, node: int, failing: set[int], masked_inputs: dict[int, int]) -> Any:
    """``app`` for ``node``; a failing node errors on its second masked-input request only."""

    def call(message: Any, context: Any) -> Any:
        record = message.content.config_records.get(RECORD_KEY)
        if record is not None and str(record["stage"]) == "masked_input":
            masked_inputs[node] = masked_inputs.get(node, 0) + 1
            if node in failing and masked_inputs[node] == 2:
                raise RuntimeError(f"node {node} is gone for a while")
        return app(message, context)

    return call


def _run(
    app_modules: Any, loopback_grid: Any, failing: set[int], **settings: Any
) -> tuple[Any, Any, Any, list[dict[str, Any]]]:
    client_app, server_app, task = app_modules
    app = client_app.make_client_app(seed=3)
    counts: dict[int, int] = {}
    nodes = list(range(101, 101 + NODES))
    grid = loopback_grid(
        {n: _flaky(app, n, failing, counts) for n in nodes},
        node_config=lambda n: {"partition-id": n - 101, "num-partitions": NODES},
    )
    events: list[dict[str, Any]] = []
    record = server_app.RunRecord()
    chosen = server_app.Settings(
        rounds=3, min_nodes=NODES, seed=1, timeout=5.0, threshold=3, **settings
    )
    original = server_app.report
    server_app.report = lambda _settings, event: events.append(event)
    try:
        server_app.run_rounds(grid, chosen, record)
    finally:
        server_app.report = original
    return record, chosen, task, events


def test_rounds_share_one_session(app_modules: Any, loopback_grid: Any) -> None:
    record, settings, task, events = _run(app_modules, loopback_grid, set())
    assert [r.iteration for r in record.results] == [1, 2, 3]
    phases = [e["phase"] for e in events if e["event"] == "phase" and e["round"] == 2]
    assert phases == ["masked_input", "consistency_check", "unmask"]
    for model, result in zip(record.models[:-1], record.results, strict=True):
        replies = [task.local_train(model, p, 0) for p in range(NODES)]
        beta = np.array([min(e, settings.weight_cap) / settings.weight_cap for _, e in replies])
        flats = np.stack([np.concatenate(m) for m, _ in replies])
        step = NODES / result.encoding.scale
        np.testing.assert_allclose(result.average, beta @ flats / beta.sum(), atol=10 * step)


def test_a_session_short_of_members_is_retried_over_a_new_setup(
    app_modules: Any, loopback_grid: Any
) -> None:
    # Three of five nodes fail round 2's masked input: 2 < t = 3 members are left, so the
    # round runs again over a new key setup, where they are back.
    record, _, _, events = _run(app_modules, loopback_grid, {102, 103, 104})
    (restart,) = [e for e in events if e["event"] == "new-session"]
    assert restart["round"] == 2, restart
    assert "t=3" in restart["reason"]  # too few members left for the threshold
    assert [r.iteration for r in record.results] == [1, 1, 2]
    assert all(len(r.survivors) == NODES for r in record.results)


def test_a_fresh_session_short_of_members_fails(app_modules: Any, loopback_grid: Any) -> None:
    from secagg import TooFewSurvivorsError  # noqa: PLC0415

    # One key setup per round: the short round has nothing to fall back to.
    with pytest.raises(TooFewSurvivorsError):
        _run(app_modules, loopback_grid, {102, 103, 104}, session_rounds=1)
