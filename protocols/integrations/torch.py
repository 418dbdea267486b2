"""PyTorch models as flat float vectors, so a torch training loop can use our aggregations.

:func:`flatten_state` turns a ``state_dict`` (or any mapping of tensors) into one float64 vector
and a :class:`TensorLayout`; :func:`unflatten_state` turns an aggregated vector back into
tensors of the original shapes, dtypes and devices; :func:`state_update` is the update
``after − before`` as a vector. With them, n clients' updates become the (n, d) matrix that
:func:`protocols.aggregation.secure_weighted_average` or
:func:`protocols.aggregation.geometric_median` take (see ``examples/torch_finetune.py``).

Integer tensors (``num_batches_tracked`` and the like) are not averaged: they are left out of the
vector and copied from ``like`` on the way back. torch is imported lazily (extra ``torch``).
"""

from __future__ import annotations

import importlib
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

__all__ = ["TensorLayout", "flatten_state", "state_update", "unflatten_state"]


@dataclass(frozen=True, slots=True)
class TensorLayout:
    """Where each floating tensor of a state lives in the flat vector.

    Attributes
    ----------
    keys, shapes, dtypes
        The floating tensors' names, shapes and dtype names, in vector order.

    Examples
    --------
    >>> layout = TensorLayout(("fc.weight", "fc.bias"), ((2, 3), (2,)), ("float32", "float32"))
    >>> layout.size, layout.offsets()
    (8, {'fc.weight': (0, 6), 'fc.bias': (6, 8)})
    """

    keys: tuple[str, ...]
    shapes: tuple[tuple[int, ...], ...]
    dtypes: tuple[str, ...]

    def __post_init__(self) -> None:
        if not len(self.keys) == len(self.shapes) == len(self.dtypes):
            raise ValueError("keys, shapes and dtypes must have one entry per tensor")
        if len(set(self.keys)) != len(self.keys):
            raise ValueError("tensor names must be distinct")

    @property
    def size(self) -> int:
        """The vector's length d."""
        return sum(math.prod(shape) for shape in self.shapes)

    def offsets(self) -> dict[str, tuple[int, int]]:
        """Name → (start, stop) in the vector."""
        out, start = {}, 0
        for key, shape in zip(self.keys, self.shapes, strict=True):
            out[key] = (start, start + math.prod(shape))
            start += math.prod(shape)
        return out


def _torch() -> Any:
    try:
        torch = importlib.import_module("torch")  # lazy: extra "torch"
    except ImportError:  # pragma: no cover - exercised only without torch
        raise ImportError(
            "protocols.integrations.torch needs PyTorch: pip install 'secagg-dp[torch]'"
        ) from None
    return torch


def flatten_state(state: Mapping[str, Any]) -> tuple[NDArray[np.float64], TensorLayout]:
    """A state's floating tensors as one float64 vector (in the mapping's order) and its layout.

    Parameters
    ----------
    state
        ``model.state_dict()`` or any mapping of name → tensor.

    Returns
    -------
    (vector, layout)
        The concatenated values and where each tensor lives.

    Examples
    --------
    >>> flatten_state({})[0].size
    0
    """
    torch = _torch() if state else None
    keys, shapes, dtypes, parts = [], [], [], []
    for key, tensor in state.items():
        if torch is None or not torch.is_floating_point(tensor):
            continue
        values = tensor.detach().to("cpu", dtype=torch.float64).numpy()
        keys.append(str(key))
        shapes.append(tuple(int(s) for s in tensor.shape))
        dtypes.append(str(tensor.dtype).removeprefix("torch."))
        parts.append(values.reshape(-1))
    vector = np.concatenate(parts) if parts else np.zeros(0)
    return vector, TensorLayout(tuple(keys), tuple(shapes), tuple(dtypes))


def unflatten_state(
    vector: NDArray[np.floating[Any]],
    layout: TensorLayout,
    *,
    like: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """Tensors from a flat vector: the inverse of :func:`flatten_state`.

    Parameters
    ----------
    vector
        d = ``layout.size`` values (for example an aggregated average).
    layout
        The layout :func:`flatten_state` returned.
    like
        A state to take devices from and to copy the non-floating tensors of (so the result can
        go straight into ``model.load_state_dict``).

    Raises
    ------
    ValueError
        If the vector's length is not ``layout.size``.

    Examples
    --------
    >>> unflatten_state(np.zeros(0), TensorLayout((), (), ()))
    {}
    """
    values = np.asarray(vector, dtype=np.float64)
    if values.shape != (layout.size,):
        raise ValueError(f"vector has shape {values.shape}; the layout holds {layout.size} values")
    out: dict[str, Any] = {}
    if not layout.keys and not like:
        return out
    torch = _torch()
    offsets = layout.offsets()
    for key, shape, dtype in zip(layout.keys, layout.shapes, layout.dtypes, strict=True):
        start, stop = offsets[key]
        device = like[key].device if like is not None and key in like else "cpu"
        tensor = torch.from_numpy(values[start:stop].reshape(shape).copy())
        out[key] = tensor.to(device=device, dtype=getattr(torch, dtype))
    if like is not None:
        merged = {key: like[key].detach().clone() for key in like}
        merged.update(out)
        return merged
    return out


def state_update(before: Mapping[str, Any], after: Mapping[str, Any]) -> NDArray[np.float64]:
    """The update ``after − before`` of the floating tensors, as one vector.

    Raises
    ------
    ValueError
        If the two states do not have the same floating tensors and shapes.

    Examples
    --------
    >>> state_update({}, {}).size
    0
    """
    start, layout_before = flatten_state(before)
    end, layout_after = flatten_state(after)
    if layout_before.keys != layout_after.keys or layout_before.shapes != layout_after.shapes:
        raise ValueError("the two states have different floating tensors or shapes")
    return end - start
