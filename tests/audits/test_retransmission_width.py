"""Audit 7: retransmitted masked inputs of a long vector are no fault — and a server that
compares lengths by identity (true only inside CPython's small-integer cache) is caught."""

from __future__ import annotations

import inspect
import logging
import textwrap

import pytest

from audits.ours import OurTarget
from audits.protocol_audits import _retransmission_checks


@pytest.fixture(autouse=True)
def _quiet() -> None:
    logging.getLogger("secagg").setLevel(logging.ERROR)


def test_ours_takes_retransmissions_of_every_width() -> None:
    assert _retransmission_checks(OurTarget().sans_io(), 0)[1] == []  # type: ignore[arg-type]


def test_a_length_compared_by_identity_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    # Held-out 13's survivor `message.vector.size is self._dimension`: an identical copy of a
    # masked input of more than 256 entries was taken for a second, different one (a fault).
    from secagg import server as server_module  # noqa: PLC0415

    source = textwrap.dedent(inspect.getsource(server_module.Server._on_masked_input))
    equal = "if message.vector.size == self._dimension and ("
    assert source.count(equal) == 1
    source = source.replace(equal, equal.replace("==", "is"))
    namespace = dict(vars(server_module))
    exec(compile(source, "<planted>", "exec"), namespace)
    real = server_module.Server._on_masked_input
    for key, handler in list(server_module._TRANSITIONS.items()):
        if handler is real:
            monkeypatch.setitem(server_module._TRANSITIONS, key, namespace["_on_masked_input"])
    _, findings = _retransmission_checks(OurTarget().sans_io(), 0)  # type: ignore[arg-type]
    assert findings and all("k=4" in f and "second, different" in f for f in findings), findings
