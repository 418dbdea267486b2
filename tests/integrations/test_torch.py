"""The PyTorch adapter: state_dict ⇄ flat vector, updates, and our secure average on them."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip(
    "torch", reason="the PyTorch adapter needs torch (pip install 'secagg-dp[torch]', CPU build)"
)
nn = torch.nn

from protocols.aggregation import secure_weighted_average  # noqa: E402
from protocols.integrations.torch import (  # noqa: E402
    flatten_state,
    state_update,
    unflatten_state,
)

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def model(seed: int) -> nn.Module:
    torch.manual_seed(seed)
    return nn.Sequential(nn.Linear(3, 4), nn.BatchNorm1d(4), nn.ReLU(), nn.Linear(4, 2))


def test_state_round_trip_keeps_shapes_dtypes_and_integer_buffers() -> None:
    net = model(0)
    net(torch.randn(5, 3))  # moves the BatchNorm statistics and its integer counter
    state = net.state_dict()
    vector, layout = flatten_state(state)
    assert "1.num_batches_tracked" not in layout.keys  # integers are not averaged
    assert (
        vector.size
        == layout.size
        == sum(t.numel() for t in state.values() if torch.is_floating_point(t))
    )
    back = unflatten_state(vector, layout, like=state)
    assert list(back) == list(state)
    for key, tensor in state.items():
        assert back[key].dtype == tensor.dtype and back[key].shape == tensor.shape
        assert torch.equal(back[key], tensor)
    with pytest.raises(ValueError, match="holds"):
        unflatten_state(vector[:-1], layout)


def test_state_update_is_after_minus_before() -> None:
    before, after = model(0).state_dict(), model(1).state_dict()
    update = state_update(before, after)
    offsets = flatten_state(before)[1].offsets()
    start, stop = offsets["0.weight"]
    expected = (after["0.weight"] - before["0.weight"]).double().reshape(-1).numpy()
    np.testing.assert_allclose(update[start:stop], expected)
    with pytest.raises(ValueError, match="different"):
        state_update(before, {"x": torch.zeros(2)})


def test_secure_average_of_torch_updates_matches_the_plain_average() -> None:
    base = model(0).state_dict()
    updates = np.stack([state_update(base, model(s).state_dict()) for s in range(1, 6)])
    weights = [10.0, 20.0, 30.0, 40.0, 50.0]
    secure = secure_weighted_average(updates, weights, clip=100.0, weight_cap=50.0, seed=1)
    plain = secure_weighted_average(updates, weights, clip=100.0, weight_cap=50.0, secure=False)
    np.testing.assert_allclose(secure.average, plain.average, atol=20 * secure.quantization_step)
    _, layout = flatten_state(base)
    merged = unflatten_state(flatten_state(base)[0] + secure.average, layout, like=base)
    net = model(0)
    net.load_state_dict(merged)  # loads cleanly: every key, shape and dtype is right


def test_finetune_example_improves_held_out_accuracy() -> None:
    sys.path.insert(0, str(EXAMPLES))
    try:
        import torch_finetune  # noqa: PLC0415

        history = torch_finetune.finetune(clients=4, rounds=2, steps=5, seed=0)
    finally:
        sys.path.remove(str(EXAMPLES))
        sys.modules.pop("torch_finetune", None)
    assert len(history) == 3 and history[-1] > history[0]
