"""The data path of a release, across layers: each client's row is built exactly once per
secure sum (its quantisation and noise drawn once), and no module reaches into another's
private names or into a higher layer."""

from __future__ import annotations

import ast
import pathlib
from collections import Counter
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import pytest

import dpquantile.quantile as quantile_module
import protocols.aggregation.fedplus as fedplus_module
import protocols.aggregation.secure_average as secure_average_module
from dpquantile import dp_quantile
from protocols.aggregation import (
    SecureAverageSession,
    secure_coordinate_average,
    secure_weighted_average,
)
from secagg import LazyInputs, Session, secure_sum

ROOT = pathlib.Path(__file__).resolve().parent.parent
LAYERS = {"secagg": 0, "dpquantile": 1, "protocols": 2, "audits": 3}
# audits.mutants plants bugs into the internals it names: reaching them is its job.
PRIVATE_MODULE_USERS = {"audits.mutants._catalogue"}


class _Counted(LazyInputs):
    def __init__(self, rows: np.ndarray) -> None:
        super().__init__(rows.shape[0], rows.shape[1])
        self.rows, self.reads = rows, Counter[int]()

    def row(self, index: int) -> np.ndarray:
        self.reads[index] += 1
        return np.asarray(self.rows[index])


def _counting(monkeypatch: pytest.MonkeyPatch, owner: Any, name: str, key: int) -> Counter[int]:
    """Wrap ``owner.name`` so that each call is counted by its argument ``key`` (the client)."""
    original: Callable[..., Any] = getattr(owner, name)
    calls: Counter[int] = Counter()

    def wrapper(*args: Any, **kwargs: Any) -> Any:
        calls[int(args[key])] += 1
        return original(*args, **kwargs)

    monkeypatch.setattr(owner, name, wrapper)
    return calls


@pytest.mark.parametrize("threat_model", ["malicious", "semi-honest"])
def test_secure_sum_reads_each_sender_once(threat_model: str) -> None:
    rows = np.arange(18, dtype=np.int64).reshape(6, 3)
    inputs = _Counted(rows)
    result = secure_sum(inputs, seed=1, dropouts={"masked_input": [4]}, threat_model=threat_model)
    assert result.total.tolist() == rows[[0, 1, 2, 3, 5]].sum(axis=0).tolist()
    assert dict(inputs.reads) == {0: 1, 1: 1, 2: 1, 3: 1, 5: 1}  # the dropout is never read


def test_session_reads_each_member_once_per_sum() -> None:
    rows = np.arange(12, dtype=np.int64).reshape(6, 2)
    session = Session(6, 2, iterations=3, seed=2)
    reads = []
    for dropouts in ({}, {"unmask": [1]}, {}):
        inputs = _Counted(rows)
        session.sum(inputs, dropouts=dropouts)
        reads.append(dict(inputs.reads))
    assert reads[0] == dict.fromkeys(range(6), 1)
    assert reads[1] == dict.fromkeys(range(6), 1)  # 1 drops after masking: read once
    assert reads[2] == {0: 1, 2: 1, 3: 1, 4: 1, 5: 1}  # 1 is out of the session


def test_lazy_input_errors_name_the_client() -> None:
    rows = np.zeros((4, 2), dtype=np.int64)
    rows[2, 0] = 1 << 40
    with pytest.raises(ValueError, match="input 2"):
        secure_sum(_Counted(rows), modulus_bits=16, seed=0)
    with pytest.raises(ValueError, match="dimension 2"):
        Session(4, 3, iterations=1, seed=0).sum(_Counted(rows))


@pytest.mark.parametrize("secure", [True, False])
@pytest.mark.parametrize("noise", [None, secure_average_module.DiscreteGaussianNoise(rho=2.0)])
def test_secure_average_builds_each_row_once(
    monkeypatch: pytest.MonkeyPatch,
    secure: bool,
    noise: secure_average_module.DiscreteGaussianNoise | None,
) -> None:
    calls = _counting(monkeypatch, secure_average_module, "_client_row", 1)
    vectors = np.random.default_rng(0).normal(size=(6, 4))
    secure_weighted_average(
        vectors,
        np.ones(6),
        clip=3.0,
        weight_cap=1.0,
        noise=noise,
        quantize=True if not secure else None,
        secure=secure,
        seed=4,
        dropouts={"masked_input": [5]},
    )
    assert dict(calls) == dict.fromkeys(range(5), 1)


def test_average_session_builds_each_row_once_per_average(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    calls = _counting(monkeypatch, secure_average_module, "_client_row", 1)
    vectors = np.random.default_rng(1).normal(size=(6, 3))
    settings = secure_average_module.AverageSettings(clip=3.0)
    session = SecureAverageSession(6, sums=2, settings=settings, seed=5)
    session.average(vectors, np.ones(6))
    session.average(vectors, np.ones(6), dropouts={"masked_input": [2]})
    assert dict(calls) == {0: 2, 1: 2, 2: 1, 3: 2, 4: 2, 5: 2}
    calls.clear()
    session = SecureAverageSession(6, sums=2, settings=settings, secure=False, seed=5)
    session.average(vectors, np.ones(6))
    assert calls == Counter()  # the plain path without quantisation builds no grid row


def test_coordinate_average_builds_each_row_once(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = _counting(monkeypatch, fedplus_module._CoordinateRows, "row", 1)
    vectors = np.random.default_rng(2).normal(size=(6, 3))
    secure_coordinate_average(vectors, np.ones((6, 3)), clip=3.0, weight_cap=1.0, seed=6)
    assert dict(calls) == dict.fromkeys(range(6), 1)


@pytest.mark.parametrize("secure", [True, False])
def test_quantile_builds_each_row_once(monkeypatch: pytest.MonkeyPatch, secure: bool) -> None:
    calls = _counting(monkeypatch, quantile_module._NoisyVectors, "row", 1)
    losses = np.random.default_rng(3).uniform(size=6)
    dp_quantile(losses, 0.5, lower=0.0, upper=1.0, bins=8, rho=1.0, seed=7, secure=secure)
    assert dict(calls) == dict.fromkeys(range(6), 1)


# -- imports ---------------------------------------------------------------------------------------


def _modules() -> Iterator[tuple[str, str, ast.Module]]:
    for package in LAYERS:
        for path in sorted((ROOT / package).rglob("*.py")):
            parts = path.relative_to(ROOT).with_suffix("").parts
            name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
            yield package, name, ast.parse(path.read_text(encoding="utf-8"))


def _is_private(part: str) -> bool:
    return part.startswith("_") and not part.startswith("__")


def _import_violations(modules: Iterator[tuple[str, str, ast.Module]]) -> list[str]:
    found = []
    for package, name, tree in modules:
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom):
                if node.level:
                    found.append(f"{name}:{node.lineno} relative import")
                    continue
                source = node.module or ""
                found += [
                    f"{name}:{node.lineno} imports private {source}.{alias.name}"
                    for alias in node.names
                    if _is_private(alias.name)
                ]
                sources = [source]
            elif isinstance(node, ast.Import):
                sources = [alias.name for alias in node.names]
            else:
                continue
            for source in sources:
                top = source.split(".")[0]
                if top not in LAYERS:
                    continue
                if LAYERS[top] > LAYERS[package]:
                    found.append(f"{name}:{node.lineno} ({package}) imports higher layer {source}")
                crosses = top != package and name not in PRIVATE_MODULE_USERS
                if crosses and any(_is_private(part) for part in source.split(".")):
                    found.append(
                        f"{name}:{node.lineno} imports {package}-external private {source}"
                    )
    return found


def test_no_private_or_upward_imports() -> None:
    assert _import_violations(_modules()) == []


def test_the_import_check_can_fail() -> None:
    source = (
        "from secagg.runner import _give_input, secure_sum\n"
        "import protocols._checks\n"
        "from dpquantile._fast_sampler import FastDiscreteGaussian\n"
        "from . import ring\n"
        "def late():\n"
        "    from audits import cli\n"
    )
    found = _import_violations(iter([("secagg", "secagg.fake", ast.parse(source))]))
    assert len(found) == 7, found  # a private name, 3 upward (2 into private modules), relative
    # Inside its own package a private module is fine; a lower layer may be imported.
    allowed = "from dpquantile._fast_sampler import FastDiscreteGaussian\nimport secagg.ring\n"
    assert _import_violations(iter([("dpquantile", "dpquantile.x", ast.parse(allowed))])) == []
