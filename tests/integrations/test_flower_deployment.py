"""The example app on Flower's deployment engine: real processes on 127.0.0.1.

One ``flower-superlink`` and four ``flower-supernode`` processes (insecure mode, loopback only)
are started by ``examples/flower_app/deploy.py``; one SuperNode is killed (SIGKILL) as round 1's
share_keys phase starts, and the round must still complete with the weighted average of the
three survivors. Round 2 is a further sum of the same session: no key phase, the killed node
out. Every process is stopped in ``finally``; the run has a deadline. Flower starts a fresh
``flwr-clientapp`` process per message, so a phase costs seconds here: the test is in the slow
tier (``pytest -m slow``), which CI runs.
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

pytest.importorskip("flwr", reason="the Flower tests need flwr (pip install 'secagg-dp[flower]')")
if shutil.which("flower-superlink") is None or shutil.which("flower-supernode") is None:
    pytest.skip("flower-superlink / flower-supernode are not on PATH", allow_module_level=True)

pytestmark = pytest.mark.slow

APP_DIR = Path(__file__).resolve().parents[2] / "examples" / "flower_app"
NODES = 4
KILLED = 2


@pytest.fixture(scope="module")
def deployed_run() -> Any:
    sys.path.insert(0, str(APP_DIR))
    try:
        import deploy  # noqa: PLC0415
        from secagg_app.task import local_train  # noqa: PLC0415

        with deploy.deployment(NODES) as current:
            events = deploy.run_app(
                current,
                rounds=2,
                nodes=NODES,
                phase_timeout=90.0,
                kill_partition=KILLED,
                kill_at="share_keys",
                deadline=420.0,
                extra_config="threshold=2",
            )
            processes = [current.superlink, *current.supernodes.values()]
        yield events, processes, local_train
    finally:
        sys.path.remove(str(APP_DIR))
        for name in [m for m in sys.modules if m == "deploy" or m.startswith("secagg_app")]:
            del sys.modules[name]


def test_round_completes_after_a_supernode_is_killed(deployed_run: Any) -> None:
    events, _, _ = deployed_run
    assert events[-1]["event"] == "done", events[-1]
    round_event = next(e for e in events if e["event"] == "round")
    assert round_event["survivors"] == [p for p in range(NODES) if p != KILLED]
    assert set(round_event["dropped"]) == {str(KILLED)}
    assert round_event["dropped"][str(KILLED)] in ("share_keys", "masked_input")


def test_result_is_the_survivors_weighted_average(deployed_run: Any) -> None:
    events, _, local_train = deployed_run
    rounds = [e for e in events if e["event"] == "round"]
    assert len(rounds) == 2
    for round_event in rounds:
        model = [np.asarray(a) for a in round_event["model"]]
        replies = [local_train(model, p, 0) for p in round_event["survivors"]]
        beta = np.array([min(examples, 50.0) / 50.0 for _, examples in replies])
        flats = np.stack([np.clip(np.concatenate(m), -8.0, 8.0) for m, _ in replies])
        expected = beta @ flats / beta.sum()
        step = len(replies) / round_event["scale"] / beta.sum()
        np.testing.assert_allclose(round_event["average"], expected, atol=10 * step)
        assert round_event["weight_total"] == pytest.approx(beta.sum(), abs=10 * step)


def test_round_two_is_a_further_sum_of_the_session(deployed_run: Any) -> None:
    events, _, _ = deployed_run
    phases = [e["phase"] for e in events if e["event"] == "phase" and e["round"] == 2]
    assert phases == ["masked_input", "consistency_check", "unmask"]
    second = [e for e in events if e["event"] == "round"][1]
    assert second["survivors"] == [p for p in range(NODES) if p != KILLED]
    assert second["dropped"] == {}  # out of the session since round 1, not a new dropout
    assert second["excluded"] == [KILLED]


def test_every_process_is_stopped(deployed_run: Any) -> None:
    _, processes, _ = deployed_run
    assert all(p is not None and p.poll() is not None for p in processes)
